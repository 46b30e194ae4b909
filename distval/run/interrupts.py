"""Ctrl-C and SIGTERM during a run: both raise ``Interrupt`` in the main thread, whatever distval inherited, and
a cleanup can hold them off until it is done.

Why distval installs its own SIGINT handler: Python turns SIGINT into KeyboardInterrupt only where it started
with SIGINT at its default. A process started in the background by a non-interactive shell (``cmd &`` in a CI
script, and everything that process starts: pytest, then distval) inherits SIGINT *ignored*; Python leaves it
so, and a Ctrl-C (``kill -INT``) then did nothing at all: a hung scenario ran to its deadline (issue 20).

Why deferral is a flag the handler reads, not a blocked signal mask: ``pthread_sigmask`` blocks a signal in the
calling thread only. With any other thread alive (the reaper's, the scenario workers'), the kernel delivers the
signal to that thread and CPython still runs the Python handler in the main thread at once, so a blocked mask
deferred nothing and a second Ctrl-C cut the cleanup short.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType

from distval.errors import Interrupted

HANDLED = (signal.SIGINT, signal.SIGTERM)


class Interrupt(Interrupted):
    """Ctrl-C (SIGINT) or SIGTERM, as the run reports it: exit code 128+N."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}; the run's containers and networks were removed")
        self.signum = signum
        self.exit_code = 128 + signum


@dataclass
class Deferred:
    """What a ``signals_deferred`` block held off: the first signal that arrived in it (None: none)."""

    signum: int | None = None


# The main thread's deferral: only the main thread runs Python signal handlers, so only its blocks matter.
_held: list[Deferred] = []


def on_signal(signum: int, _frame: FrameType | None) -> None:
    """The handler: raise now, or note the signal for the innermost deferral block (the first one counts)."""
    if _held:
        if _held[-1].signum is None:
            _held[-1].signum = signum
        return
    raise Interrupt(signum)


def install() -> Callable[[], None]:
    """Install ``on_signal`` for SIGINT and SIGTERM (main thread only); returns what restores the previous ones."""
    previous = {signum: signal.signal(signum, on_signal) for signum in HANDLED}

    def restore() -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

    return restore


@contextmanager
def signals_deferred(raise_after: bool = True) -> Iterator[Deferred]:
    """Hold SIGINT/SIGTERM off while cleaning up, so that a Ctrl-C cannot cut the cleanup short. A signal that
    arrived meanwhile is raised as ``Interrupt`` when the block ends (``raise_after``; not when it ends with an
    interrupt already), else left in the yielded ``Deferred`` for the caller. In a worker thread this defers
    nothing and need not: handlers run in the main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield Deferred()
        return
    deferred = Deferred()
    _held.append(deferred)
    interrupted = False
    try:
        yield deferred
    except (Interrupted, KeyboardInterrupt):
        interrupted = True
        raise
    finally:
        _held.remove(deferred)
        if deferred.signum is not None and _held and _held[-1].signum is None:
            _held[-1].signum = deferred.signum  # an enclosing block holds it on
        elif deferred.signum is not None and raise_after and not interrupted:
            raise Interrupt(deferred.signum)
