"""A monotonic clock that moves only when a test's stand-in says time passed (a backend's blocking wait, a reaper
that takes its time), for the product's ``clock`` seams (distval/run/steps.py, distval/targets/docker/runtime.py):
what a test asserts about deadlines and slices then holds whatever the machine's load."""

from __future__ import annotations


class FakeClock:
    """``clock()`` is the time now; ``advance(s)`` is ``s`` seconds passing (what a real ``sleep(s)`` would take)."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        assert seconds >= 0, f"time runs forward only ({seconds})"
        self.now += seconds
