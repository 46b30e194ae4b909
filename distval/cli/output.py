"""What the small commands print: a progress line stamped with the seconds since the command started, and one
JSON object on stdout."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable

Progress = Callable[[str], None]


def stamped_progress(quiet: bool) -> Progress:
    """Each line on stderr behind the seconds since this was made; nothing with ``quiet``."""
    started = time.monotonic()

    def emit(line: str) -> None:
        if not quiet:
            print(f"[{time.monotonic() - started:6.1f}s] {line}", file=sys.stderr, flush=True)

    return emit


def no_line(_line: str) -> None:
    """Says nothing: where a command has nothing to say on stderr (a plan runs nothing; JSON owns stdout)."""


def print_json(data: object) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True) + "\n")
