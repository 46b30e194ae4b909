"""The output of ``distval doctor``, whichever kind it checked for: text for people (one line per check, aligned,
escaped for the terminal, then the counts and the verdict) and JSON for tools."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from distval.doctor.checks import STATUSES, Line
from distval.escape import terminal_line


def render_text(heading: str, lines: Sequence[Line], code: int) -> str:
    """``heading``: what the first line asks about (the kind's: "in containers, image IMAGE")."""
    out = [f"distval doctor: can distval run here, {heading}?"]
    width = max((len(line.check) for line in lines), default=0)
    for line in lines:
        finding = line.finding
        # Each part escaped on its own (terminal_line folds runs of spaces, the columns' padding among them).
        engine = f"[{terminal_line(line.engine)}] " if line.engine else ""
        todo = f" -> {terminal_line(finding.todo)}" if finding.todo else ""
        out.append(f"{finding.status:<4}  {line.check:<{width}}  {engine}{terminal_line(finding.found)}{todo}")
    counts = ", ".join(f"{sum(1 for line in lines if line.finding.status == s)} {s}" for s in STATUSES)
    verdict = "a check failed" if code else "nothing stops a run"
    out.append(f"{counts}: {verdict} (exit {code})")
    return "\n".join(out) + "\n"


def as_data(mode: str, image: str | None, lines: Sequence[Line], code: int) -> dict[str, Any]:
    """``mode``: the kind's name; ``image``: the image it looked at, None for none."""
    return {
        "mode": mode,
        "image": image,
        "checks": [
            {
                "check": line.check,
                "engine": line.engine or None,
                "status": line.finding.status,
                "found": terminal_line(line.finding.found),
                "todo": terminal_line(line.finding.todo) or None,
            }
            for line in lines
        ],
        "exit_code": code,
    }
