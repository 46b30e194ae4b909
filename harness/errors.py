"""distval's errors, each with the exit code the CLI returns for it (documented in README.md)."""

from __future__ import annotations

EXIT_PASSED = 0
EXIT_CHECKS_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_ENVIRONMENT = 3
EXIT_INTERRUPTED = 130


class DistvalError(Exception):
    exit_code = EXIT_CHECKS_FAILED
    kind = "error"


class ConfigError(DistvalError):
    """Bad input: every problem found, each one line naming file, line, key path and what was expected."""

    exit_code = EXIT_BAD_INPUT
    kind = "config"

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


class EnvironmentUnusable(DistvalError):
    """Docker unreachable, image missing, fixture build impossible."""

    exit_code = EXIT_ENVIRONMENT
    kind = "environment"


class Interrupted(DistvalError):
    """Ctrl-C or SIGTERM; raised from the signal handler so that every cleanup path runs."""

    exit_code = EXIT_INTERRUPTED
    kind = "interrupted"
