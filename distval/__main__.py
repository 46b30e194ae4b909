"""``python -m distval``: the same command line as the ``distval`` script (tests and docs run it this way)."""

import sys

from distval.cli.main import main

sys.exit(main())
