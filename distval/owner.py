"""Which process owns a run's containers and networks, and whether that process still lives.

Every resource carries its owner as four labels (distval.labels): the machine id, the host name, the pid and
the process's start time. The machine id (``/etc/machine-id``, else a random id distval keeps in its cache
directory) tells two machines with one host name apart (CI runners sharing an Engine): a process of another
machine cannot be checked from here, whatever its host name. Labels of a distval before the machine id are
judged only when the host name and the boot id both match this machine's; otherwise their owner is unknown.

The start time tells a reused pid from the owner: on Linux it is
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
import re
import secrets
import socket
from collections.abc import Mapping
from dataclasses import dataclass

from distval.labels import LABEL_OWNER_HOST, LABEL_OWNER_MACHINE, LABEL_OWNER_PID, LABEL_OWNER_STARTED

UNKNOWN = "unknown"
_BOOT_ID = "/proc/sys/kernel/random/boot_id"
_MACHINE_ID = "/etc/machine-id"
_MACHINE_ID_FORM = re.compile(r"[0-9a-f]{16,64}")


@dataclass(frozen=True)
class Owner:
    host: str
    pid: int
    started: str  # "<boot id>:<pid namespace>:<ticks since boot>", or UNKNOWN
    machine: str = ""  # machine_id() of the machine it runs on; "": labels of a distval before it

    def labels(self) -> dict[str, str]:
        labels = {LABEL_OWNER_HOST: self.host, LABEL_OWNER_PID: str(self.pid), LABEL_OWNER_STARTED: self.started}
        if self.machine:
            labels[LABEL_OWNER_MACHINE] = self.machine
        return labels

    @staticmethod
    def from_labels(labels: Mapping[str, str]) -> Owner | None:
        """The owner a resource's labels name; None when they name none (made by an older distval) or are garbled.
        A garbled machine id counts as none (judged as an older distval's labels: unknown unless all else matches)."""
        host, pid, started = labels.get(LABEL_OWNER_HOST), labels.get(LABEL_OWNER_PID, ""), labels.get(LABEL_OWNER_STARTED)
        if not host or not pid.isdigit() or not started:
            return None
        machine = labels.get(LABEL_OWNER_MACHINE, "")
        return Owner(host, int(pid), started, machine if _MACHINE_ID_FORM.fullmatch(machine) else "")

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


def boot_id() -> str | None:
    """This boot's id, or None where /proc cannot say."""
    here = _here()
    return here[0] if here is not None else None


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


def machine_id_file() -> str:
    """Where this machine's id is kept when it has no /etc/machine-id (distval's cache directory)."""
    base = os.environ.get("DISTVAL_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "distval"
    )
    return os.path.join(base, "machine-id")


def _kept_id(path: str) -> str | None:
    """The machine id in ``path``, if it holds one in the expected form."""
    try:
        with open(path, encoding="ascii") as handle:
            text = handle.read().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if _MACHINE_ID_FORM.fullmatch(text) else None


@functools.cache
def machine_id(system_file: str = _MACHINE_ID, kept_file: str | None = None) -> str:
    """This machine's id: /etc/machine-id, else a random one kept in ``kept_file`` (made once, 0600 from its
    creation, in a directory only its owner can read)."""
    path = kept_file or machine_id_file()
    found = _kept_id(system_file) or _kept_id(path)
    if found is not None:
        return found
    text = secrets.token_hex(16)
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        # O_EXCL: a racing distval that made it first wins, and its id is read back below.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(text + "\n")
    except FileExistsError:
        return _kept_id(path) or text
    except OSError:
        pass  # nowhere to keep it: this process's own id (its resources look like another machine's to later runs)
    return text


@functools.cache
def current_owner() -> Owner:
    """This process, as the owner of what it creates."""
    pid = os.getpid()
    return Owner(socket.gethostname(), pid, start_time(pid) or UNKNOWN, machine_id())


def owner_alive(owner: Owner, host: str | None = None, machine: str | None = None) -> bool | None:
    """Whether ``owner`` still runs: None when this process cannot tell (another machine, another PID namespace,
    or labels without a machine id that do not match this host name and boot).

    Dead means: it ran on this machine before the last reboot, or there is no process with that pid, or one that
    started at another time (a reused pid). A start time that cannot be compared counts as alive.
    """
    if owner.host != (host if host is not None else socket.gethostname()):
        return None
    here, theirs = _here(), owner.started.split(":")
    if not owner.machine:
        # An older distval's labels: a host name is not a machine; only this boot's processes can be judged.
        if here is None or len(theirs) != 3 or theirs[0] != here[0]:
            return None
    elif owner.machine != (machine if machine is not None else machine_id()):
        return None  # another machine with the same host name
    if here is not None and len(theirs) == 3:
        if theirs[0] != here[0]:
            return False  # started on this machine before this boot
        if theirs[1] != here[1]:
            return None  # its pid counts in another PID namespace
    now = start_time(owner.pid)
    if now is None:
        return False
    if UNKNOWN in (now, owner.started):
        return True
    return now == owner.started
