"""The watchdog: ends a rank whose check runs past ``check_timeout_s``, after recording where it was.

A collective that never returns ignores every timeout inside torch; only a separate thread can still
write a result. The rank then exits, so the launcher stops and the harness reports the rest.

The limit runs from the check's start to its end, whatever its steps: ``step`` only renames where the
check is (so the record says which step it was in when the limit hit), it never restarts the clock. A
check may add a tighter deadline of its own (``expect_within``); the earlier of the two applies.

Standard library only, so that the timing logic is tested on the host without torch.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable, Dict, NamedTuple, Optional, Tuple

ERROR = "error"


class Firing(NamedTuple):
    """What the watchdog records when a deadline passes."""

    check: str
    case: str
    status: str
    message: str
    elapsed_s: float


class _Armed(NamedTuple):
    check: str
    case: str
    variant: str
    started: float  # the check's start: check_timeout_s counts from here
    limit_s: float
    # A tighter deadline set by the check itself: (absolute time, status, message).
    inner: Optional[Tuple[float, str, str]]


class Watchdog:
    EXIT_CODE = 70

    def __init__(
        self,
        write: Callable[[str, str, str, str, float, Optional[Dict[str, Any]]], None],
        clock: Callable[[], float] = time.monotonic,
        exit_process: Callable[[int], Any] = os._exit,
        poll_s: float = 0.2,
        thread: bool = True,
    ) -> None:
        self._write = write
        self._clock = clock
        self._exit = exit_process
        self._poll_s = poll_s
        self._lock = threading.Lock()
        self._armed: Optional[_Armed] = None
        if thread:
            threading.Thread(target=self._watch, name="distval-watchdog", daemon=True).start()

    def start(self, check: str, limit_s: float) -> None:
        """A check begins: it has ``limit_s`` seconds from now until it ends, all steps included."""
        with self._lock:
            self._armed = _Armed(check, check, "", self._clock(), limit_s, None)

    def step(self, case: str, variant: str = "") -> None:
        """Where the running check is now (its testcase and what it does there); the clock keeps running."""
        with self._lock:
            if self._armed is not None:
                self._armed = self._armed._replace(case=case, variant=variant)

    def expect_within(self, seconds: float, status: str, message: str) -> None:
        """A deadline of the check's own, ``seconds`` from now, recorded with ``status`` and ``message``.
        check_timeout_s still applies when it comes first."""
        with self._lock:
            if self._armed is not None:
                self._armed = self._armed._replace(inner=(self._clock() + seconds, status, message))

    def disarm(self) -> None:
        with self._lock:
            self._armed = None

    def remaining_s(self) -> Optional[float]:
        """Seconds left before check_timeout_s ends the running check (None when nothing runs)."""
        with self._lock:
            armed = self._armed
        if armed is None:
            return None
        return armed.started + armed.limit_s - self._clock()

    def due(self) -> Optional[Firing]:
        """What to record if a deadline has passed now, else None."""
        with self._lock:
            armed = self._armed
        if armed is None:
            return None
        now = self._clock()
        elapsed = now - armed.started
        if armed.inner is not None and now >= armed.inner[0] and armed.inner[0] <= armed.started + armed.limit_s:
            return Firing(armed.check, armed.case, armed.inner[1], armed.inner[2], elapsed)
        if elapsed < armed.limit_s:
            return None
        where = " in %s" % armed.case if armed.case != armed.check else ""
        if armed.variant:
            where += " (%s)" % armed.variant
        message = (
            "did not finish within %g s (check_timeout_s, for the whole check); it was still running%s "
            "when the limit hit: a collective or the process group hung" % (armed.limit_s, where or " its first step")
        )
        return Firing(armed.check, armed.case, ERROR, message, elapsed)

    def _watch(self) -> None:
        while True:
            time.sleep(self._poll_s)
            fired = self.due()
            if fired is not None:
                self._write(fired.check, fired.case, fired.status, fired.message, fired.elapsed_s, {"watchdog": True})
                self._exit(self.EXIT_CODE)
                return
