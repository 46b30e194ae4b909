"""Test helpers for progress on a terminal: a fake clock, a fake terminal stream, and a screen model."""

from __future__ import annotations

import io
import re

ESCAPE = re.compile(r"\x1b\[(\d*)([AKJ])")


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    """A stream that says it is a terminal and keeps every character written to it."""

    def isatty(self) -> bool:
        return True


def screen(output: str) -> list[str]:
    """What a terminal shows after ``output``, row by row (trailing spaces cut), down to the cursor's row or
    the last row that is not blank, whichever is lower.

    Understands what the progress display writes: characters overwrite, carriage return, newline (to
    the next row's column 0, as a terminal's output processing makes it), cursor up (``ESC [ n A``) and
    the erases ``ESC [ K`` (rest of the row) and ``ESC [ J`` (rest of the screen). Anything else fails.
    """
    rows: list[list[str]] = [[]]
    row = column = 0
    position = 0
    while position < len(output):
        char = output[position]
        if char == "\x1b":
            match = ESCAPE.match(output, position)
            assert match is not None, f"unexpected escape sequence at {position}: {output[position : position + 8]!r}"
            count, command = int(match.group(1) or 1), match.group(2)
            if command == "A":
                row = max(row - count, 0)
            else:
                del rows[row][column:]
                if command == "J":
                    del rows[row + 1 :]
            position = match.end()
            continue
        if char == "\r":
            column = 0
        elif char == "\n":
            row, column = row + 1, 0
        else:
            assert char.isprintable(), f"unexpected control character {char!r}"
            line = rows[row]
            line.extend(" " * (column - len(line)))
            if column < len(line):
                line[column] = char
            else:
                line.append(char)
            column += 1
        while len(rows) <= row:
            rows.append([])
        position += 1
    shown = ["".join(line).rstrip() for line in rows]
    while len(shown) > row + 1 and not shown[-1]:
        shown.pop()
    return shown
