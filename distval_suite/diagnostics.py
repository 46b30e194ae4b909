"""What a rank leaves behind for the harness to diagnose a hang or a crash (distval/results/diagnosis.py reads it).

- Python stacks on SIGUSR1: ``faulthandler`` prints every thread's stack into ``stacks-rank-N.txt`` in
  the results directory. faulthandler writes from its C signal handler, so it prints a rank whose main
  thread is blocked inside a gloo collective; a Python signal handler would not run until the C++ call
  returned. The harness signals the workers through an exec (``container.kill`` reaches only PID 1).
- The flight recorder (torch >= 2.8 has ``_dump_fr_trace_json``; gloo records into it in 2.15, PR
  #152614): a daemon thread polls for the request file the harness creates through an exec and dumps
  the recorder's entries into ``flight-recorder-rank-N.json``. A thread, not a signal handler, for the
  same reason as above. Where the torch has no such function, the file says so (measured, not assumed).
- ``launch-rank-N.json``: the launcher's facts this attempt ran under (TORCHELASTIC_RESTART_COUNT, whether
  the workers use the agent's store), so that the report says how often torchrun restarted the workers
  and which store path ran (pytorch#135712).

Standard library and torch only; Python 3.9.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import threading
import time
from typing import IO, Any, Callable, Dict, List, Optional, TypeVar

Result = TypeVar("Result")

STACKS_FILE = "stacks-rank-%d.txt"
FLIGHT_RECORDER_FILE = "flight-recorder-rank-%d.json"
LAUNCH_FILE = "launch-rank-%d.json"
# Created by the harness (through an exec) when it wants the flight recorder dumped; its content is the
# request's wall-clock time, so that a second request is told from the first.
REQUEST_FILE = "diagnose.request"
POLL_INTERVAL_S = 0.1
KEPT_ENTRIES = 64

# faulthandler writes to the file descriptor it was given: the file must stay open for the process's life.
_open_files: List[IO[str]] = []


def restart_count() -> int:
    """How often torchrun restarted this job's workers before this attempt (0 without a launcher)."""
    try:
        return int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    except ValueError:
        return 0


def install(results_dir: str, rank: int) -> None:
    """Register the stack dump on SIGUSR1, write the launch facts, start the flight-recorder thread."""
    os.makedirs(results_dir, exist_ok=True)
    stacks = open(os.path.join(results_dir, STACKS_FILE % rank), "w", encoding="utf-8")
    _open_files.append(stacks)
    # chain=False: the default action of SIGUSR1 would end the process.
    faulthandler.register(signal.SIGUSR1, file=stacks, all_threads=True, chain=False)
    launch = {
        "rank": rank,
        "restart_count": restart_count(),
        "use_agent_store": os.environ.get("TORCHELASTIC_USE_AGENT_STORE"),
        "share_store_disabled": os.environ.get("TORCH_DISABLE_SHARE_RDZV_TCP_STORE"),
        "pid": os.getpid(),
        "started_at": round(time.time(), 3),
    }
    _write_json(os.path.join(results_dir, LAUNCH_FILE % rank), launch)
    thread = threading.Thread(target=_serve_dumps, args=(results_dir, rank), name="distval-flight-recorder", daemon=True)
    thread.start()


def _serve_dumps(results_dir: str, rank: int) -> None:
    request = os.path.join(results_dir, REQUEST_FILE)
    served: Optional[float] = None
    while True:
        time.sleep(POLL_INTERVAL_S)
        try:
            stamp = os.stat(request).st_mtime
        except OSError:
            continue
        if stamp == served:
            continue
        served = stamp
        _write_json(os.path.join(results_dir, FLIGHT_RECORDER_FILE % rank), flight_recorder_dump())


def flight_recorder_dump() -> Dict[str, Any]:
    """The flight recorder's entries, or why there are none."""
    try:
        import torch
        import torch._C._distributed_c10d as c10d
    except Exception as exc:  # noqa: BLE001 - an image without torch.distributed still answers
        return {"available": False, "reason": "torch.distributed cannot be imported: %s" % exc}
    dump = getattr(c10d, "_dump_fr_trace_json", None)
    if dump is None:
        return {
            "available": False,
            "reason": "torch %s has no flight recorder for gloo (torch._C._distributed_c10d._dump_fr_trace_json "
            "is missing; it came with torch 2.8, gloo records into it since 2.15)" % torch.__version__,
        }
    try:
        raw = dump()
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        trace = json.loads(text)
    except Exception as exc:  # noqa: BLE001 - a failing dump is reported, never raised into the rank
        return {"available": False, "reason": "_dump_fr_trace_json() failed: %s: %s" % (type(exc).__name__, exc)}
    entries = trace.get("entries") if isinstance(trace, dict) else None
    entries = entries if isinstance(entries, list) else []
    return {
        "available": True,
        "torch_version": torch.__version__,
        "buffer_size": os.environ.get("TORCH_FR_BUFFER_SIZE"),
        "entries_total": len(entries),
        # The newest entries, without their stack frames: what a mismatch shows, at a size a report holds.
        "entries": [
            {k: v for k, v in entry.items() if k != "frames"} if isinstance(entry, dict) else entry
            for entry in entries[-KEPT_ENTRIES:]
        ],
        "dumped_at": round(time.time(), 3),
    }


def _write_json(path: str, value: Dict[str, Any]) -> None:
    # Written whole and renamed, so that the harness never reads half a dump.
    partial = path + ".partial"
    with open(partial, "w", encoding="utf-8") as handle:
        json.dump(value, handle, default=str)
    os.replace(partial, path)


def recorded(function: Callable[..., Result]) -> Callable[..., Result]:
    """``function`` wrapped with torchelastic's ``record``: an exception leaving it is written, traceback
    and all, to TORCHELASTIC_ERROR_FILE before it propagates. Unwrapped where the torch has no ``record``
    (or no torch at all: then the exception reaches stderr as usual)."""
    try:
        from torch.distributed.elastic.multiprocessing.errors import record
    except Exception:  # noqa: BLE001 - any import failure means: no error file, the traceback stays on stderr
        return function
    wrapped: Callable[..., Result] = record(function)
    return wrapped
