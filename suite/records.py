"""One JSON line per result and rank, written as soon as it is known.

The harness reads ``rank-<RANK>.jsonl`` from the results directory with the Engine's archive API
after the container exits, so a crash keeps every record written before it. A record names the check
it belongs to (``check``, as listed in the scenario) and its testcase (``case``: the check's name, or
``<check>.<part>`` for checks that report several results, like ``collectives.broadcast``).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from typing import Any, Dict, Optional

PASSED = "passed"
FAILED = "failed"
ERROR = "error"
SKIPPED = "skipped"


class RecordWriter:
    def __init__(self, results_dir: str, rank: int) -> None:
        os.makedirs(results_dir, exist_ok=True)
        self.rank = rank
        self.path = os.path.join(results_dir, "rank-%d.jsonl" % rank)
        self.hostname = socket.gethostname()
        self._lock = threading.Lock()  # the watchdog thread writes too
        self.worst = PASSED

    def write(
        self,
        check: str,
        case: str,
        status: str,
        message: str,
        duration_s: float,
        details: Optional[Dict[str, Any]] = None,
    ) -> None:
        record = {
            "check": check,
            "case": case,
            "rank": self.rank,
            "status": status,
            "message": message,
            "duration_s": round(duration_s, 6),
            # Wall clock when the record was written: containers on one host share the kernel's clock, so
            # the harness compares it with the time it injected a fault (fault-to-failure time).
            "ended_at": round(time.time(), 3),
            "hostname": self.hostname,
            "details": details or {},
        }
        if status in (FAILED, ERROR) and self.worst != ERROR:
            self.worst = status
        line = json.dumps(record, sort_keys=True, default=str)
        with self._lock:
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(line + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            # A readable line for the rank's log; the harness reads the JSON file, not this line.
            print("distval: rank %d %s %s %s" % (self.rank, case, status, message), flush=True)
