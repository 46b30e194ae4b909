"""Host mode's watchdog: a run's local processes die with its distval process, however distval dies.

A node's processes carry markers in their environment (distval/targets/local/runtime.py): ``DISTVAL_HOST_PROCESS``
(per node) and ``DISTVAL_HOST_SESSION`` (per run). torchrun starts its workers in sessions of their own, so
neither a process group nor PR_SET_PDEATHSIG (which reaches only the direct child, and fires when the
*thread* that forked it ends, not the process) finds them all; the inherited environment does.

``LocalSession`` starts this module as a process of its own (its own session: a Ctrl-C at the terminal does
not reach it), with the run's session marker and distval's KILL_SETTLE_S (distval/run/steps.py) as its arguments,
and with a stdin that is a pipe only distval writes to. When distval exits or is killed with
SIGKILL, the kernel closes that pipe; the watchdog reads EOF, SIGKILLs every process carrying the run's
session marker until none is left, and exits. After a normal end there is nothing left for it to kill.

The standard library only: it must start fast and import nothing of distval's that could fail.
"""

from __future__ import annotations

import os
import signal
import sys
import time

SESSION_MARKER = "DISTVAL_HOST_SESSION"


def processes_with(variable: str, value: str) -> list[int]:
    """Live (non-zombie) processes whose environment carries ``variable=value``."""
    needle = f"{variable}={value}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if needle not in handle.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if state not in (b"Z", b"X"):
            found.append(int(entry))
    return found


def kill_all(variable: str, value: str, settle_s: float) -> int:
    """SIGKILL every process carrying ``variable=value`` until none is left (each kill may race a fork), for at
    most ``settle_s``; returns how many kills were sent."""
    sent = 0
    settle_until = time.monotonic() + settle_s
    while True:
        alive = processes_with(variable, value)
        if not alive or time.monotonic() > settle_until:
            return sent
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
                sent += 1
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.05)


def main(argv: list[str]) -> int:
    token, settle_s = argv
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)  # only the end of the pipe ends the watch
    while sys.stdin.buffer.read(4096):
        pass
    killed = kill_all(SESSION_MARKER, token, float(settle_s))
    if killed:
        print(f"distval host watchdog: distval is gone; killed {killed} process(es) of its run", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
