"""One JSON line per result and rank, written as soon as it is known.

The harness reads ``rank-<RANK>.jsonl`` from the results directory with the Engine's archive API
after the container exits, so a crash keeps every record written before it. A record names the check
it belongs to (``check``, as listed in the scenario) and its testcase (``case``: the check's name, or
``<check>.<part>`` for checks that report several results, like ``collectives.broadcast``).

Where no harness copies files out (a Kubernetes pod), the spec's ``stdout_records`` turns on a copy of
every record on stdout, as ``@distval-record`` lines that distval/targets/kubernetes/collect.py reads back from pod logs.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from typing import Any, Dict, List, Optional

# A record on stdout: "@distval-record v1 r=<rank> n=<line number> p=<part>/<parts> <JSON text piece>".
STDOUT_MARKER = "@distval-record"
# Each piece is written with one write() of at most PIPE_BUF (4096) bytes, which POSIX makes atomic on a
# pipe: the ranks of a pod share torchrun's stdout, and a longer record (a traceback) would otherwise
# interleave with another rank's line. JSON is written as ASCII, so characters are bytes.
STDOUT_PIECE_CHARS = 3500

PASSED = "passed"
FAILED = "failed"
ERROR = "error"
SKIPPED = "skipped"


def stat_fields(pid: int) -> List[str]:
    """/proc/<pid>/stat's fields after the command name (field 3 on): index 1 is the ppid, 19 the start tick."""
    with open("/proc/%d/stat" % pid, encoding="ascii", errors="replace") as handle:
        text = handle.read()
    # The command name (field 2) is in parentheses and may itself hold spaces or parentheses.
    return text[text.rindex(")") + 2 :].split()


def started_at_epoch(pid: int) -> float:
    """When the kernel started process ``pid``, in seconds since the epoch (10 ms resolution); OSError,
    ValueError or IndexError where /proc cannot say."""
    ticks = int(stat_fields(pid)[19])  # field 22: starttime, clock ticks after boot
    with open("/proc/uptime", encoding="ascii") as handle:
        uptime_s = float(handle.read().split()[0])
    return time.time() - (uptime_s - ticks / os.sysconf("SC_CLK_TCK"))


def process_started_at() -> float:
    """When the kernel started this process, in seconds since the epoch (10 ms resolution).

    The harness orders a container's attempts by it (distval/results/diagnosis.py: a process that started after
    another one's last record is of a later round). It must be the spawn, not the moment this code runs:
    torchrun spawns a round's workers within milliseconds, but one of them may import torch, run checks
    that need no peer (env, a version-gated skip) and write its last record before a slower sibling got
    here, which made the sibling look like a later round and dropped the first one's records. Where
    /proc cannot say, the time now (a later start, so an older round is never mistaken for a newer one
    by more than this process's start-up)."""
    try:
        return round(started_at_epoch(os.getpid()), 3)
    except (OSError, ValueError, IndexError):
        return round(time.time(), 3)


class RecordWriter:
    def __init__(self, results_dir: str, rank: int, stdout_records: Optional[Dict[str, Any]] = None) -> None:
        os.makedirs(results_dir, exist_ok=True)
        self.rank = rank
        self.path = os.path.join(results_dir, "rank-%d.jsonl" % rank)
        self.hostname = socket.gethostname()
        self._lock = threading.Lock()  # the watchdog thread writes too
        self.worst = PASSED
        # torchrun's restart count: a restarted job appends its records to the same file, and the harness
        # keeps the last attempt's only (distval/results/diagnosis.py).
        self.attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT") or 0)
        # The count is per agent, not per job: an agent whose own workers did not fail restarts them for the
        # new rendezvous without counting (measured on torch 2.6 and 2.15). This process's start tells
        # the attempts apart where the count does not.
        self.started_at = process_started_at()
        self.stdout_records = stdout_records is not None
        self._stdout_lines = 0
        if stdout_records is not None:
            # The first line says which rank started where; the node's first rank adds what ran (the spec's
            # stdout_records object), so that a pod's log alone names its scenario.
            start: Dict[str, Any] = {"rank": rank, "hostname": self.hostname, "node_rank": os.environ.get("DISTVAL_NODE_RANK")}
            if os.environ.get("LOCAL_RANK", "0") == "0":
                start["origin"] = stdout_records
            self._echo({"start": start})

    def _echo(self, record: Dict[str, Any]) -> None:
        text = json.dumps(record, sort_keys=True, default=str)
        pieces = [text[i : i + STDOUT_PIECE_CHARS] for i in range(0, len(text), STDOUT_PIECE_CHARS)]
        sys.stdout.flush()
        for index, piece in enumerate(pieces, start=1):
            line = "%s v1 r=%d n=%d p=%d/%d %s\n" % (STDOUT_MARKER, self.rank, self._stdout_lines, index, len(pieces), piece)
            os.write(1, line.encode("ascii"))
        self._stdout_lines += 1

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
            "attempt": self.attempt,
            "started_at": self.started_at,
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
            if self.stdout_records:
                self._echo(record)
            # A readable line for the rank's log; the harness reads the JSON file, not this line.
            print("distval: rank %d %s %s %s" % (self.rank, case, status, message), flush=True)
