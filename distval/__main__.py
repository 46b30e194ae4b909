"""``python -m distval``: the same command as the ``distval`` script."""

from distval.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
