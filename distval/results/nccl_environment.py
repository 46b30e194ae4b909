"""Which variables NCCL itself says it took from the environment, read from its ``NCCL_DEBUG=INFO`` output.

NCCL logs a variable it read (its ``ENV`` subsystem, on by default with ``NCCL_DEBUG=INFO``) as

    host:7:7 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0

which proves the variable took effect, where the environment check (distval_suite/environment.py) can only say
that a library names it. Recorded from torch 2.15's libnccl on this machine: tests/data/nccl/set-by-environment.log.
Pure functions over text: no Docker, no NCCL.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_SET = re.compile(r"NCCL INFO (?P<name>NCCL_[A-Z0-9_]+) set by environment to (?P<value>.*?)\s*$")
VALUE_MAX = 200  # characters of a value kept


def set_by_environment(logs: Iterable[str]) -> dict[str, str]:
    """Each variable NCCL reported taking from the environment, with its value (the last one reported)."""
    found: dict[str, str] = {}
    for text in logs:
        for line in text.splitlines():
            match = _SET.search(line)
            if match is not None:
                found[match["name"]] = match["value"][:VALUE_MAX]
    return found


def describe(found: dict[str, str]) -> str:
    """``NCCL_SOCKET_IFNAME=eth0, ...`` sorted by name; ``none reported`` when NCCL reported none."""
    return ", ".join(f"{name}={value}" for name, value in sorted(found.items())) or "none reported"
