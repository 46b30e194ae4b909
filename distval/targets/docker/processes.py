"""The suite's worker processes inside a running container: find them and signal them.

``container.kill`` reaches only PID 1 (torchrun's agent, or the single rank), so anything meant for a
worker -- SIGUSR1 for its Python stacks (distval_suite/main.py registers faulthandler), SIGKILL for a fault that
kills one rank -- goes through an exec of a short script run with the scenario's python, which reads
/proc. The image under test needs no tool (no ps, no pkill); the script stays Python 3.9-compatible.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from distval import strict_json
from distval.engine_protocol import EngineAPI
from distval.errors import EngineError

# argv[1]: the signal number (0: only list); argv[2]: comma-separated global ranks, or "all".
# A worker is a process whose command line runs distval_suite.main and whose environment has LOCAL_RANK (set
# by torchrun for workers, never for its agent, whose command line also names distval_suite.main) or, for a
# rank started without a launcher, RANK.
WORKER_SCRIPT = r"""
import json, os, sys
try:
    import ctypes
    tgkill = ctypes.CDLL(None, use_errno=True).tgkill
except Exception:
    tgkill = None
def send(pid, signum):
    # To the worker's main thread (tid == pid) where the C library has tgkill: a paused worker then dumps its
    # stacks in that thread before it runs on when it thaws; a process-wide signal may be taken by another
    # thread, which at a load of 13 ran only after the main thread had met its timeout and moved on.
    if tgkill is not None and tgkill(pid, pid, signum) == 0:
        return
    os.kill(pid, signum)
signum = int(sys.argv[1])
wanted = None if sys.argv[2] == "all" else set(int(r) for r in sys.argv[2].split(",") if r)
found = []
for entry in os.listdir("/proc"):
    if not entry.isdigit() or int(entry) == os.getpid():
        continue
    try:
        with open("/proc/%s/cmdline" % entry, "rb") as f:
            argv = f.read().split(b"\0")
        with open("/proc/%s/environ" % entry, "rb") as f:
            env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
    except OSError:
        continue
    if b"distval_suite.main" not in argv or b"torch.distributed.run" in argv or b"RANK" not in env:
        continue
    if any(arg.endswith(b"torchrun") for arg in argv[:2]):
        continue
    rank = int(env[b"RANK"])
    if wanted is not None and rank not in wanted:
        continue
    error = None
    if signum:
        try:
            send(int(entry), signum)
        except OSError as exc:
            error = str(exc)
    found.append({"pid": int(entry), "rank": rank, "local_rank": int(env.get(b"LOCAL_RANK", b"0")), "error": error})
print(json.dumps(found))
"""


@dataclass(frozen=True)
class Worker:
    pid: int  # in the container's PID namespace
    rank: int  # the global rank
    local_rank: int
    error: str | None = None  # why it could not be signalled (None: signalled, or only listed)


def find_workers(engine: EngineAPI, container: Any, python: str) -> tuple[Worker, ...]:
    """The suite's worker processes now running in ``container``, by rank."""
    return signal_workers(engine, container, python, 0)


def signal_workers(
    engine: EngineAPI, container: Any, python: str, signum: int, ranks: Collection[int] | None = None
) -> tuple[Worker, ...]:
    """Send ``signum`` (0: none) to the worker processes of ``ranks`` (None: all) in ``container``; returns
    the workers found, each with the error of its kill where it failed. Raises EngineError when the
    script cannot run (the container exited; the image has no such python)."""
    selected = "all" if ranks is None else ",".join(str(rank) for rank in sorted(ranks))
    # -S: no site module, so no sitecustomize: an image's (a broken fixture's imports torch) would cost
    # seconds per exec, tens of seconds on a loaded machine; the script needs the standard library only.
    result = engine.exec_run(container, [python, "-S", "-c", WORKER_SCRIPT, str(signum), selected])
    return parse_workers(result.exit_code, result.output)


def signal_workers_beside(engine: EngineAPI, container: Any, signum: int, timeout_s: float = 60.0) -> tuple[Worker, ...]:
    """``signal_workers`` for a paused container, which runs no exec: the same script in the beside-helper
    (distval/targets/docker/beside.py: distval's own image, never the image under test) in its PID namespace,
    the signal and "all" its only arguments. The signal goes to each worker's main thread, so it is delivered
    there when the workers thaw, before that thread runs anything else."""
    result = engine.run_beside(container, [str(signum), "all"], timeout_s)
    return parse_workers(result.exit_code, result.output)


def parse_workers(exit_code: int | None, output: str) -> tuple[Worker, ...]:
    last_line = output.strip().splitlines()[-1] if output.strip() else ""
    if exit_code != 0:
        raise EngineError(f"listing the worker processes failed (exit {exit_code}): {last_line[:300] or 'no output'}")
    try:
        entries = strict_json.loads(last_line)
        return tuple(
            sorted(
                (Worker(int(e["pid"]), int(e["rank"]), int(e["local_rank"]), e.get("error")) for e in entries),
                key=lambda worker: worker.rank,
            )
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise EngineError(f"listing the worker processes printed {last_line[:300]!r}, not a worker list ({exc})") from None
