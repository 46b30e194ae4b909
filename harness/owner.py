"""Which process owns a run's containers and networks, and whether that process still lives.

Every resource carries its owner as three labels (harness.labels): the host name, the pid and the
process's start time. The start time tells a reused pid from the owner: on Linux it is the boot id and
the start time in clock ticks since that boot (``/proc/<pid>/stat`` field 22), which no clock
adjustment changes and no reboot repeats. Where that cannot be read (not Linux), it is ``unknown``
and only the pid is checked, so that a live owner is never taken for a dead one.
"""

from __future__ import annotations

import functools
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass

from harness.labels import LABEL_OWNER_HOST, LABEL_OWNER_PID, LABEL_OWNER_STARTED

UNKNOWN = "unknown"
_BOOT_ID = "/proc/sys/kernel/random/boot_id"


@dataclass(frozen=True)
class Owner:
    host: str
    pid: int
    started: str  # "<boot id>:<ticks since boot>", or UNKNOWN

    def labels(self) -> dict[str, str]:
        return {LABEL_OWNER_HOST: self.host, LABEL_OWNER_PID: str(self.pid), LABEL_OWNER_STARTED: self.started}

    @staticmethod
    def from_labels(labels: Mapping[str, str]) -> Owner | None:
        """The owner a resource's labels name; None when they name none (made by an older distval) or are garbled."""
        host, pid, started = labels.get(LABEL_OWNER_HOST), labels.get(LABEL_OWNER_PID, ""), labels.get(LABEL_OWNER_STARTED)
        if not host or not pid.isdigit() or not started:
            return None
        return Owner(host, int(pid), started)

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}"


def start_time(pid: int) -> str | None:
    """The process's start time token ("<boot id>:<ticks>"); None when no such process; UNKNOWN when unreadable."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            stat = handle.read()
        with open(_BOOT_ID, encoding="ascii") as handle:
            boot_id = handle.read().strip()
    except FileNotFoundError:
        if os.path.isdir("/proc/self"):
            return None  # /proc works: the process is gone
        return UNKNOWN if _pid_exists(pid) else None
    except OSError:
        return UNKNOWN if _pid_exists(pid) else None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after its last ')'.
    fields = stat[stat.rfind(")") + 2 :].split()
    if len(fields) < 20 or not fields[19].isdigit():
        return UNKNOWN
    return f"{boot_id}:{fields[19]}"  # field 22 of the whole line


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else (EPERM)
    return True


@functools.cache
def current_owner() -> Owner:
    """This process, as the owner of what it creates."""
    pid = os.getpid()
    return Owner(socket.gethostname(), pid, start_time(pid) or UNKNOWN)


def owner_alive(owner: Owner, host: str | None = None) -> bool | None:
    """Whether ``owner`` still runs: None when it is on another host (this one cannot tell).

    Dead means: no process with that pid, or one that started at another time (a reused pid, or a
    reboot since). A start time that cannot be compared counts as alive.
    """
    if owner.host != (host if host is not None else socket.gethostname()):
        return None
    now = start_time(owner.pid)
    if now is None:
        return False
    if UNKNOWN in (now, owner.started):
        return True
    return now == owner.started
