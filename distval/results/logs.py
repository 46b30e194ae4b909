"""A rank's log text, read for the reports: its last lines, and the line that names the root cause."""

from __future__ import annotations

import re

from distval.text_caps import LOG_TAIL_MAX_CHARS, capped_end

LOG_TAIL_LINES = 40

_EXCEPTION_LINE = re.compile(r"^(\[rank\d+\]:\s*)?[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b:?")
_ERROR_LINE = re.compile(r"(Error|Exception|error:|Killed|Timed out|timed out)")


def tail(text: str, lines: int = LOG_TAIL_LINES) -> str:
    return capped_end("\n".join(text.rstrip("\n").splitlines()[-lines:]), LOG_TAIL_MAX_CHARS)


def first_error_line(text: str) -> str | None:
    """The root cause in a log: the first exception line (Python prints the cause before what it caused),
    else the last line that looks like an error."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if _EXCEPTION_LINE.match(line):
            return line[:300]
    for line in reversed(lines):
        if _ERROR_LINE.search(line) and not line.startswith("File "):
            return line[:300]
    return None
