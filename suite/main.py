"""Entry point of one rank: ``python -m suite.main SPEC_JSON``.

Runs every check of the scenario in this one process (torch is imported once per rank), each
isolated: an exception in one check is that check's error and the next check runs. Checks that
change or break the default process group (core.RUN_LAST) run after the others.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
import traceback
from typing import Any, Dict, List, Tuple

from suite.records import ERROR, FAILED, PASSED, SKIPPED, RecordWriter

# The modules holding the checks, one concern each.
CHECK_MODULES = ("suite.image", "suite.launch", "suite.collectives", "suite.ddp", "suite.store", "suite.group", "suite.bandwidth")


def _ordered(entries: List[Dict[str, Any]], run_last: Tuple[str, ...]) -> List[Dict[str, Any]]:
    return sorted(entries, key=lambda e: run_last.index(e["name"]) + 1 if e["name"] in run_last else 0)


def run(spec: Dict[str, Any]) -> int:
    import os

    writer = RecordWriter(spec["results_dir"], int(os.environ["RANK"]))
    import torch.distributed as dist

    from suite.core import CHECKS, RUN_LAST, CheckFailed, Context, ProcessGroupUnavailable, Skip, Watchdog

    for module in CHECK_MODULES:
        importlib.import_module(module)  # each registers its checks in core.CHECKS on import
    ctx = Context(spec, writer, Watchdog(writer))
    for entry in _ordered(spec["checks"], RUN_LAST):
        name = entry["name"]
        ctx.current_check = name
        ctx.reported = []
        ctx.step("")
        started = time.monotonic()
        function = CHECKS.get(name)
        if function is None:
            writer.write(name, name, ERROR, "this suite has no check named %r" % name, 0.0)
            continue
        try:
            outcome = function(ctx, entry.get("args", {}))
        except CheckFailed as failed:
            writer.write(name, name, FAILED, str(failed), time.monotonic() - started, failed.details)
        except Skip as skip:
            writer.write(name, name, SKIPPED, str(skip), time.monotonic() - started)
        except ProcessGroupUnavailable as unavailable:
            writer.write(name, name, ERROR, str(unavailable), time.monotonic() - started)
        except Exception as exc:  # noqa: BLE001 - a check's crash is its result, not the run's
            details = {"traceback": traceback.format_exc()}
            writer.write(name, name, ERROR, "%s: %s" % (type(exc).__name__, exc), time.monotonic() - started, details)
        else:
            if outcome is not None:
                message, details = outcome
                writer.write(name, name, PASSED, message, time.monotonic() - started, details)
            elif not ctx.reported:
                writer.write(name, name, ERROR, "the check reported no result", time.monotonic() - started)
    ctx.current_check = "shutdown"
    ctx.step("")
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    ctx.watchdog.disarm()
    # Under the harness the records are the verdict; standalone (docker compose) the exit code is.
    if spec.get("exit_code_from_results"):
        return 1 if writer.worst in (FAILED, ERROR) else 0
    return 0


def main(argv: List[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m suite.main SPEC_JSON", file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as handle:
        spec = json.load(handle)
    return run(spec)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
