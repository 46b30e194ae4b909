"""distval's errors: one tree, each class with the exit code the CLI returns for it (README.md, "Exit codes";
EXIT_MEANINGS below).

DistvalError                 1
├── BadInput                 2  the config, the command line
│   ├── ConfigError
│   ├── FilterMismatch
│   └── UsageError              a bad command line (argparse's errors)
├── EnvironmentUnusable      3  what distval needs and does not have
│   └── EngineError             a Docker Engine call failed
│       ├── EngineUnreachable       no Engine answered (what to do is part of the line)
│       └── ImageMissing
├── NotVerified              6  distval verify: an attestation that is not verified (signature, key, digest, age)
├── Interrupted         128+N  Ctrl-C, SIGTERM
│   └── RunStopped              a worker told to stop creates nothing more
└── PlanError                4  a plan that cannot be executed as written (a bug, never the user's input)
    (InternalError            4  any exception distval did not expect: a bug in distval, never the image's failure)

Two codes are verdicts, not errors: 1 (a check failed, RunSummary.exit_code) and 5, nothing was validated (every
scenario skipped, or no scenario ran: RunSummary.exit_code too). 5 is not 0 (a run that validated nothing never
passes) and not 1 (the image failed no check: a pipeline can tell "no GPU here" from "the image is broken").
"""

from __future__ import annotations

import traceback
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from distval.escape import terminal_text

EXIT_PASSED = 0
EXIT_CHECKS_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_ENVIRONMENT = 3
# distval itself failed (a bug): distinct from 1 so that a pipeline never reads distval's own failure as the
# image's.
EXIT_INTERNAL = 4
# Nothing was validated: every scenario was skipped (e.g. NCCL without GPUs), or no scenario ran. Fails closed
# (never 0) without blaming the image (not 1).
EXIT_NOTHING_VALIDATED = 5
# distval verify: the attestation is not verified (no or a bad signature, another key, another image's digest, too
# old). Not 1, which verify keeps for a genuine attestation whose verdict the policy refuses: a pipeline can tell a
# forged or stale attestation from an image that did not pass.
EXIT_NOT_VERIFIED = 6
EXIT_INTERRUPTED = 130

# What each code means: README.md's "Exit codes" table starts each row with these words (tests/project/test_readme.py
# keeps the two equal). EXIT_INTERRUPTED is Ctrl-C's 128+N; the table's row is 128+N.
EXIT_MEANINGS = {
    EXIT_PASSED: "every check of every scenario passed or was skipped with its reason",
    EXIT_CHECKS_FAILED: "a check failed or errored",
    EXIT_BAD_INPUT: "bad input",
    EXIT_ENVIRONMENT: "the environment is unusable",
    EXIT_INTERNAL: "distval itself failed",
    EXIT_NOTHING_VALIDATED: "nothing was validated",
    EXIT_NOT_VERIFIED: "not verified",
    EXIT_INTERRUPTED: "interrupted by signal N",
}


def exit_codes_line(codes: Iterable[int] | None = None, own: Mapping[int, str] | None = None) -> str:
    """The codes for a command's help, from EXIT_MEANINGS: '0 every check ...; 1 ...; 128+N interrupted ...'.
    ``codes``: the command's own (in EXIT_MEANINGS' order; a code it does not declare is a KeyError), else all;
    ``own``: what some of them mean for this command, where EXIT_MEANINGS' words are those of ``distval run``."""
    wanted = set(EXIT_MEANINGS if codes is None else codes)
    if not wanted <= set(EXIT_MEANINGS):  # a command may only name a declared code
        raise KeyError(f"exit code(s) {sorted(wanted - set(EXIT_MEANINGS))} are not in EXIT_MEANINGS")
    meanings = {**EXIT_MEANINGS, **(own or {})}
    return "; ".join(
        f"{'128+N' if code == EXIT_INTERRUPTED else code} {meanings[code]}"
        + (" (130 Ctrl-C, 143 SIGTERM)" if code == EXIT_INTERRUPTED else "")
        for code in EXIT_MEANINGS
        if code in wanted
    )


@dataclass(frozen=True)
class ExitCodes:
    """The exit codes one command can return (its help's epilog), with what a code means for it where that is
    not EXIT_MEANINGS' words (0 of a command that gives no verdict on an image: "success")."""

    codes: tuple[int, ...]
    own: Mapping[int, str] = field(default_factory=dict)

    def line(self) -> str:
        return "Exit codes: " + exit_codes_line(self.codes, self.own)


# A message from elsewhere (argparse echoes the arguments as given), at most this long.
MESSAGE_MAX = 500


def one_line(text: str) -> str:
    """``text`` on one line of readable length: characters that are not printable written as escapes."""
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[: MESSAGE_MAX + 1])
    return text if len(text) <= MESSAGE_MAX else f"{text[:MESSAGE_MAX]}..."


class DistvalError(Exception):
    exit_code = EXIT_CHECKS_FAILED
    kind = "error"

    def __str__(self) -> str:
        # Every "distval: ..." line on stderr is made of this; messages quote an Engine's reply or an image's
        # output, whose escape sequences and bidi overrides must not reach the terminal.
        return terminal_text(super().__str__())


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


class SelectionError(BadInput):
    """A --check, --skip-check or -k that names no check, or a --check that no scenario lists."""

    kind = "selection"


class SampleImageRefused(BadInput):
    """A CI run would validate distval's sample image because no image was named."""

    kind = "image"


class UsageError(BadInput):
    """A bad command line: argparse's message, said by the (sub)command that saw it."""

    kind = "usage"

    def __init__(self, prog: str, message: str) -> None:
        super().__init__(f"{prog}: error: {one_line(message)} (see {prog} --help)")


class EnvironmentUnusable(DistvalError):
    """Docker unreachable, image missing, fixture build impossible."""

    exit_code = EXIT_ENVIRONMENT
    kind = "environment"


class EngineError(EnvironmentUnusable):
    """A Docker Engine call failed. Inside a scenario it becomes that scenario's error result."""


class EngineUnreachable(EngineError):
    """No Engine answered at an address: ``found`` is what happened, ``todo`` what to do (engine_advice.py; empty
    where nothing is known). The line is both, so every command says what to do; ``distval doctor`` shows them
    apart."""

    def __init__(self, found: str, todo: str) -> None:
        super().__init__(f"{found}; {todo}" if todo else found)
        self.found, self.todo = found, todo


class ImageMissing(EngineError):
    pass


class NotVerified(DistvalError):
    """``distval verify``: the attestation is not verified: unsigned, a signature the key does not verify, another
    image's digest, expired, or a signed payload that is not distval's statement. The message is the one-line reason."""

    exit_code = EXIT_NOT_VERIFIED
    kind = "not-verified"


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

    exit_code = EXIT_INTERNAL
    kind = "plan"


class InternalError(DistvalError):
    """An exception distval did not expect (a bug): one line naming it and where it was raised."""

    exit_code = EXIT_INTERNAL
    kind = "internal"

    def __init__(self, exc: BaseException) -> None:
        frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ is not None else None
        where = f" at {Path(frame.filename).name}:{frame.lineno}" if frame is not None else ""
        text = one_line(" ".join(str(exc).split()))
        super().__init__(f"internal error (a bug in distval; please report it): {type(exc).__name__}: {text}{where}")
