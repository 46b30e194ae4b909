"""Entry point of one rank: ``python -m suite.main SPEC_JSON``.

Runs every check of the scenario in order, in this one process (torch is imported once per rank),
each isolated: an exception in one check is that check's error and the next check runs.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from typing import Any, Dict, List

from suite.records import ERROR, FAILED, PASSED, RecordWriter


def run(spec: Dict[str, Any]) -> int:
    import torch.distributed as dist

    from suite.checks import CHECKS, CheckFailed, Context, ProcessGroupUnavailable

    ctx = Context(spec)
    writer = RecordWriter(spec["results_dir"], ctx.rank)
    entries: List[Dict[str, Any]] = spec["checks"]
    for entry in entries:
        name = entry["name"]
        started = time.monotonic()
        function = CHECKS.get(name)
        if function is None:
            writer.write(name, ERROR, "this suite has no check named %r" % name, 0.0)
            continue
        try:
            message, details = function(ctx, entry.get("args", {}))
        except CheckFailed as failed:
            writer.write(name, FAILED, str(failed), time.monotonic() - started, failed.details)
        except ProcessGroupUnavailable as unavailable:
            writer.write(name, ERROR, str(unavailable), time.monotonic() - started)
        except Exception as exc:  # noqa: BLE001 - a check's crash is its result, not the run's
            writer.write(
                name,
                ERROR,
                "%s: %s" % (type(exc).__name__, exc),
                time.monotonic() - started,
                {"traceback": traceback.format_exc()},
            )
        else:
            writer.write(name, PASSED, message, time.monotonic() - started, details)
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
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
