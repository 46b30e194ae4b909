"""distval's errors: one tree, each class with the exit code the CLI returns for it (README.md, "Exit codes").

DistvalError                 1
├── BadInput                 2  the config, the command line
│   ├── ConfigError
│   └── FilterMismatch
├── EnvironmentUnusable      3  what distval needs and does not have
│   └── EngineError             a Docker Engine call failed
│       └── ImageMissing
├── Interrupted         128+N  Ctrl-C, SIGTERM
│   └── RunStopped              a worker told to stop creates nothing more
└── PlanError                1  a plan that cannot be executed as written (a bug, never the user's input)
"""

from __future__ import annotations

EXIT_PASSED = 0
EXIT_CHECKS_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_ENVIRONMENT = 3
EXIT_INTERRUPTED = 130


class DistvalError(Exception):
    exit_code = EXIT_CHECKS_FAILED
    kind = "error"


class BadInput(DistvalError):
    exit_code = EXIT_BAD_INPUT
    kind = "input"


class ConfigError(BadInput):
    """Bad input: every problem found, each one line naming file, line, key path and what was expected."""

    kind = "config"

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


class FilterMismatch(BadInput):
    """A --filter pattern that matches no scenario of the config."""

    kind = "filter"


class EnvironmentUnusable(DistvalError):
    """Docker unreachable, image missing, fixture build impossible."""

    exit_code = EXIT_ENVIRONMENT
    kind = "environment"


class EngineError(EnvironmentUnusable):
    """A Docker Engine call failed. Inside a scenario it becomes that scenario's error result."""


class ImageMissing(EngineError):
    pass


class Interrupted(DistvalError):
    """Ctrl-C or SIGTERM; raised from the signal handler so that every cleanup path runs."""

    exit_code = EXIT_INTERRUPTED
    kind = "interrupted"


class RunStopped(Interrupted):
    """The run is stopping (Ctrl-C or SIGTERM seen by another thread): create nothing more."""

    def __init__(self) -> None:
        super().__init__("the run was interrupted")


class PlanError(DistvalError):
    """A plan that cannot be executed as written, e.g. a placeholder used before it is known."""

    kind = "plan"
