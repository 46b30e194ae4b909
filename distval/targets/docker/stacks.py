"""Before the runtime kills what still runs at the deadline (or a fault ended the scenario): every worker's
Python stacks and flight-recorder dump, taken inside its container.

``before_kill`` signals every worker with SIGUSR1 (distval_suite/diagnostics.py registered faulthandler on it, so
each rank prints every thread's Python stack into ``stacks-rank-N.txt``; the signal goes through an exec, because
``container.kill`` reaches only PID 1) and asks the flight-recorder thread for a dump (a request file created
through the same kind of exec), waiting a bounded time for both. The files are copied out with the results
afterwards and read by distval/results/diagnosis.py.

A rank's stacks are complete when its main thread has left faulthandler's handler, not when the file is
non-empty: the handler writes a frame in several write() calls, and on a loaded machine the kill that follows
the wait cut a dump after its first line (CI, stop 29: "1 thread(s)", the text ending in ``File ``). While the
handler runs, SIGUSR1 is in the thread's blocked mask (faulthandler installs it without SA_NODEFER when
``chain=False``, Modules/faulthandler.c), so the wait reads the worker's /proc status: the signal neither
pending nor blocked, and the file non-empty, means the dump returned.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Mapping
from typing import Any, Protocol

from distval.engine_protocol import EngineAPI
from distval.errors import EngineError
from distval.plan.model import ScenarioPlan
from distval.plan.specs import ContainerPlan
from distval.results.diagnosis import json_object
from distval.targets.docker.processes import signal_workers, signal_workers_beside

NODE_FILE = "diagnosis-node-%d.json"  # what before_kill measured in that container
# How long before_kill waits, inside each container, for the stacks and the flight-recorder dumps. The
# stacks are written in the signal handler (milliseconds); the dump thread polls every 0.1 s.
WAIT_S = 3.0
# The exec runs this bound plus its own start; a container that does not answer by then is killed anyway.
EXEC_MARGIN_S = 20.0
# How often the wait for the stacks looks at a stop request (issue 20: the run's Ctrl-C from a worker thread).
STOP_CHECK_S = 0.2

# argv[1]: the results directory; argv[2]: the signalled workers, "rank:pid" comma-separated (the pid in the
# container's PID namespace, which the exec shares); argv[3]: the bound in seconds; argv[4]: the node rank;
# argv[5]: the signal number. Python 3.9-compatible, standard library only: it runs in the image.
WAIT_SCRIPT = r"""
import json, os, sys, time
results, limit, node, signum = sys.argv[1], float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
workers = dict((int(r), int(p)) for r, p in (w.split(":") for w in sys.argv[2].split(",") if w))
ranks = sorted(workers)
start = time.time()
request = os.path.join(results, "diagnose.request")
with open(request + ".partial", "w") as f:
    f.write(repr(start))
os.replace(request + ".partial", request)
def size(name):
    try:
        return os.path.getsize(os.path.join(results, name))
    except OSError:
        return 0
def fresh(name):
    try:
        return os.stat(os.path.join(results, name)).st_mtime >= start - 0.05
    except OSError:
        return False
def in_handler(pid):
    # The signal still pending (not delivered yet) or blocked (its handler is running) in the worker's main
    # thread; a worker that has exited is not writing any more.
    try:
        with open("/proc/%d/status" % pid) as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
    except OSError:
        return False
    bit = 1 << (signum - 1)
    return any(int(fields.get(k, "0").strip() or "0", 16) & bit for k in ("SigPnd", "ShdPnd", "SigBlk"))
while True:
    stacks = [r for r in ranks if size("stacks-rank-%d.txt" % r) > 0 and not in_handler(workers[r])]
    dumps = [r for r in ranks if fresh("flight-recorder-rank-%d.json" % r)]
    if (len(stacks) == len(ranks) and len(dumps) == len(ranks)) or time.time() - start >= limit:
        break
    time.sleep(0.05)
report = {"node": node, "signalled": ranks, "stacks": stacks, "flight_recorder": dumps,
          "waited_s": round(time.time() - start, 3)}
with open(os.path.join(results, "diagnosis-node-%d.json" % node), "w") as f:
    json.dump(report, f)
print(json.dumps(report))
"""


# -- before the kill ----------------------------------------------------------------------------------
class Notes(Protocol):
    """Where before_kill says what it found: the run's events (distval/run/events.py ``RunEvents.note``), which
    report results too and so sit above this module."""

    def note(self, plan: ScenarioPlan | None, line: str) -> None: ...


def before_kill(
    engine: EngineAPI, running: Mapping[str, Any], plan: ScenarioPlan, events: Notes, stop: threading.Event | None = None
) -> float:
    """Collect every still-running worker's stacks and flight-recorder dump inside its container, all
    containers at once; returns the seconds it took (the kill waits that long, at most WAIT_S plus the
    execs). Failures (a paused container, an image without the python) become notes, never errors:
    the kill must happen whatever this finds. ``stop`` (Ctrl-C or SIGTERM seen by the run, this in a worker
    thread): the wait for the stacks ends within STOP_CHECK_S, so the kill and the cleanup come at once."""
    started = time.monotonic()
    notes: dict[str, str] = {}

    def one(name: str, container: Any) -> None:
        try:
            notes[name] = _diagnose_container(engine, container, plan.container(name), plan.scenario.python, started)
        except Exception as exc:  # noqa: BLE001 -- a thread's crash would lose the note; the kill happens anyway
            notes[name] = f"no stacks: the diagnosis failed ({type(exc).__name__}: {exc})"

    threads = [threading.Thread(target=one, args=item, daemon=True) for item in running.items()]
    for thread in threads:
        thread.start()
    until = started + WAIT_S + EXEC_MARGIN_S
    for thread in threads:
        while thread.is_alive() and time.monotonic() < until and not (stop is not None and stop.is_set()):
            thread.join(min(STOP_CHECK_S, max(0.0, until - time.monotonic())))
    took_s = time.monotonic() - started
    for name in sorted(running):
        events.note(plan, f"{name}: {notes.get(name, 'no answer before the kill')}")
    return took_s


def _diagnose_container(engine: EngineAPI, container: Any, cp: ContainerPlan, python: str, started: float) -> str:
    thawed = ""
    try:
        if engine.state(container).status == "paused":
            # A frozen node (a freeze fault) runs no exec: its workers are signalled from a container beside it
            # in its PID namespace, then thawed. The signal, sent to each worker's main thread, is delivered there
            # as it thaws, before it runs on, so the stacks show where the freeze held it. The node is killed
            # right after.
            workers = signal_workers_beside(engine, container, signal.SIGUSR1)
            engine.unpause(container)
            thawed = "frozen: signalled from beside it, then unpaused; "
        else:
            workers = signal_workers(engine, container, python, signal.SIGUSR1)
    except EngineError as exc:
        return f"{thawed}no stacks: the workers could not be signalled ({exc})"
    signalled = [w for w in workers if w.error is None]
    ranks = [w.rank for w in signalled]
    if not ranks:
        return f"{thawed}no stacks: no worker process was running"
    pairs = ",".join(f"{w.rank}:{w.pid}" for w in signalled)
    argv = [python, "-S", "-c", WAIT_SCRIPT, cp.results_dir, pairs, f"{WAIT_S:g}", str(cp.node_rank), str(int(signal.SIGUSR1))]
    try:
        result = engine.exec_run(container, argv)
    except EngineError as exc:
        return f"signalled rank(s) {ranks} for their stacks; the wait for them failed ({exc})"
    report = json_object(result.output.strip().splitlines()[-1] if result.output.strip() else "")
    if report is None:
        return f"signalled rank(s) {ranks} for their stacks; the wait printed {result.output[-200:]!r}"
    took_s = time.monotonic() - started
    return thawed + (
        f"stacks of rank(s) {report.get('stacks')} and flight-recorder dumps of rank(s) {report.get('flight_recorder')} "
        f"of signalled rank(s) {ranks} collected in {took_s:.1f} s before the kill"
    )
