"""Which process owns a run's containers and networks, and whether that process still lives.

Every resource carries its owner as three labels (harness.labels): the host name, the pid and the
process's start time. The start time tells a reused pid from the owner: on Linux it is
``<boot id>:<pid namespace>:<ticks>``, the start time in clock ticks since boot (``/proc/<pid>/stat``
field 22), which no clock adjustment changes, with the boot it belongs to and the PID namespace the pid
is counted in. A process of another boot is gone; one of another PID namespace (distval in a container
that shares the host's name, e.g. with host networking) cannot be checked from here, like one of another
host. Where the start time cannot be read (not Linux), it is ``unknown`` and only the pid is checked, so
that a live owner is never taken for a dead one.
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
    started: str  # "<boot id>:<pid namespace>:<ticks since boot>", or UNKNOWN

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


def _here() -> tuple[str, str] | None:
    """(boot id, PID namespace) of this process, or None where /proc cannot say."""
    try:
        with open(_BOOT_ID, encoding="ascii") as handle:
            boot_id = handle.read().strip()
        namespace = os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"
    except OSError:
        return None
    return boot_id, namespace.removeprefix("pid:[").removesuffix("]")


def start_time(pid: int) -> str | None:
    """The start time token of process ``pid`` of this PID namespace ("<boot id>:<pid namespace>:<ticks>");
    None when there is no such process; UNKNOWN when it cannot be read."""
    here = _here()
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            stat = handle.read()
    except FileNotFoundError:
        if os.path.isdir("/proc/self"):
            return None  # /proc works: the process is gone
        return UNKNOWN if _pid_exists(pid) else None
    except OSError:
        return UNKNOWN if _pid_exists(pid) else None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after its last ')'.
    fields = stat[stat.rfind(")") + 2 :].split()
    if here is None or len(fields) < 20 or not fields[19].isdigit():
        return UNKNOWN
    return f"{here[0]}:{here[1]}:{fields[19]}"  # field 22 of the whole line


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
    """Whether ``owner`` still runs: None when this process cannot tell (another host, another PID namespace).

    Dead means: it ran before the last reboot, or there is no process with that pid, or one that started
    at another time (a reused pid). A start time that cannot be compared counts as alive.
    """
    if owner.host != (host if host is not None else socket.gethostname()):
        return None
    here, theirs = _here(), owner.started.split(":")
    if here is not None and len(theirs) == 3:
        if theirs[0] != here[0]:
            return False  # started before this boot
        if theirs[1] != here[1]:
            return None  # its pid counts in another PID namespace
    now = start_time(owner.pid)
    if now is None:
        return False
    if UNKNOWN in (now, owner.started):
        return True
    return now == owner.started
