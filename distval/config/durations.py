"""Durations as people type them (``30m``, ``2h``, ``1h30m``, ``90s``, ``1d``) and as distval says them."""

from __future__ import annotations

import re

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")


def parse_duration(text: str) -> float:
    """``30m``, ``2h``, ``1h30m``, ``90s``, ``1d`` -> seconds; ValueError for anything else."""
    value = text.strip()
    if not value or _DURATION.sub("", value) != "":
        raise ValueError(f"expected a duration such as 30m, 2h, 1h30m, 90s or 1d; got {text!r}")
    return sum(float(number) * _UNITS[unit] for number, unit in _DURATION.findall(value))


def format_duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}{_rest(seconds % size)}"
    return f"{seconds}s"


def _rest(seconds: int) -> str:
    return "" if seconds == 0 else format_duration(seconds)
