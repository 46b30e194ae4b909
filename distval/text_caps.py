"""Caps on the image's text kept in reports: a rank's message and details, and the log tails shown with a failure.

The image under test writes these; a 5 MB failure message became 20 MB of JUnit (the message is in the
failure's attribute, its text and the output). What is cut says so, with the size it had.
"""

from __future__ import annotations

from typing import Any

# A rank's message for one check: a sentence or a short list; the traceback goes in details.
MESSAGE_MAX_CHARS = 4096
# Any one text in a record's details (a traceback, a stack dump).
DETAIL_MAX_CHARS = 64 * 1024
# A container's stdout and stderr, each, kept in the reports (its end: where a failure shows).
RANK_LOG_MAX_CHARS = 1024 * 1024
# A rank's stack file (faulthandler's dumps, appended at each SIGUSR1), kept in the JSON report: its end, where the
# last dump is. The image writes it: a 250 MiB file must not become a 290 MB report.
STACKS_MAX_CHARS = 256 * 1024
# The last lines of a container's log shown with a failure.
LOG_TAIL_MAX_CHARS = 64 * 1024


def capped(text: str, limit: int) -> str:
    """``text``, or its first ``limit`` characters and a marker with its length."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [... cut: {len(text)} characters in all, the first {limit} shown]"


def capped_end(text: str, limit: int) -> str:
    """``text``, or a marker with its length and its last ``limit`` characters (a log's end tells the most)."""
    if len(text) <= limit:
        return text
    return f"[... cut: {len(text)} characters in all, the last {limit} shown] {text[-limit:]}"


def capped_end_bytes(data: bytes, limit: int) -> str:
    """The end of ``data`` (UTF-8, undecodable bytes replaced) as ``capped_end`` keeps it, without decoding more
    than the end of it (a character is at most 4 bytes)."""
    text = data[-4 * limit :].decode("utf-8", "replace")
    if len(data) <= 4 * limit:
        return capped_end(text, limit)
    return f"[... cut: {len(data)} bytes in all, the last {limit} characters shown] {text[-limit:]}"


# Nesting kept in a record; deeper is replaced by a marker (a report writer recursing into 900 levels could
# hit Python's recursion limit).
DEPTH_MAX = 32


def capped_strings(value: Any, limit: int = DETAIL_MAX_CHARS, depth: int = 0) -> Any:
    """``value`` (decoded JSON) with every string in it capped, keys included; numbers and the shape unchanged
    down to DEPTH_MAX levels."""
    if isinstance(value, str):
        return capped(value, limit)
    if isinstance(value, (list, dict)) and depth >= DEPTH_MAX:
        return f"[... cut: nested deeper than {DEPTH_MAX} levels]"
    if isinstance(value, list):
        return [capped_strings(item, limit, depth + 1) for item in value]
    if isinstance(value, dict):
        return {capped(str(key), limit): capped_strings(item, limit, depth + 1) for key, item in value.items()}
    return value
