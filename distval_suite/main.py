"""Entry point of one rank: ``python -m distval_suite.main SPEC_JSON``.

Runs every check of the scenario in this one process (torch is imported once per rank), each
isolated: an exception in one check is that check's error and the next check runs. Checks that
change or break the default process group (core.RUN_LAST) run after the others.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, Tuple

from distval_suite import diagnostics
from distval_suite.libraries import mapped_now
from distval_suite.records import ERROR, FAILED, PASSED, SKIPPED, RecordWriter
from distval_suite.survey import Survey

# The modules holding the checks, one concern each.
CHECK_MODULES = (
    "distval_suite.image",
    "distval_suite.launch",
    "distval_suite.collectives",
    "distval_suite.ddp",
    "distval_suite.ddp_training",
    "distval_suite.store",
    "distval_suite.group",
    "distval_suite.bandwidth",
    "distval_suite.steady",
    "distval_suite.parallelism",
)
# The checks that read what distval_suite/survey.py surveys beside the earlier checks.
SURVEYED_FOR = ("libraries", "environment")


def _ordered(entries: List[Dict[str, Any]], run_last: Tuple[str, ...]) -> List[Dict[str, Any]]:
    return sorted(entries, key=lambda e: run_last.index(e["name"]) + 1 if e["name"] in run_last else 0)


def run(spec: Dict[str, Any]) -> int:
    # First, before torch: stacks on SIGUSR1 and the flight-recorder thread (distval/results/diagnosis.py).
    diagnostics.install(spec["results_dir"], int(os.environ["RANK"]))
    writer = RecordWriter(spec["results_dir"], int(os.environ["RANK"]), spec.get("stdout_records"))
    import torch
    import torch.distributed as dist

    from distval_suite.core import CHECKS, RUN_LAST, TIMED, Context
    from distval_suite.watchdog import Watchdog

    for module in CHECK_MODULES:
        importlib.import_module(module)  # each registers its checks in core.CHECKS on import
    ctx = Context(spec, writer, Watchdog(writer.write))
    if any(entry["name"] in SURVEYED_FOR for entry in spec["checks"]):
        # torch is imported, so its libraries are mapped: read the files the last checks need while the ranks
        # wait in the first ones' collectives (distval_suite/survey.py).
        ctx.survey = Survey(os.path.dirname(os.path.abspath(torch.__file__)), sys.path, mapped_now()).start()
    for sequence, entry in enumerate(_ordered(spec["checks"], RUN_LAST)):
        name = entry["name"]
        ctx.begin_check(sequence, name)
        if name in TIMED and ctx.survey is not None:
            # Nothing of the suite's own beside a timed check. Within its time limit, named, should it never end.
            ctx.step("", "waiting for the survey of the image's files to end")
            ctx.survey.wait()
        started = time.monotonic()
        function = CHECKS.get(name)
        if function is None:
            writer.write(name, name, ERROR, "this suite has no check named %r" % name, 0.0)
            continue
        status, message, details = _run_in_thread(ctx, function, entry)
        if status is not None:
            if status in (FAILED, ERROR):
                message += _after_peers(ctx.peer_outcomes())
            if ctx.reset_cause:
                details = dict(details, process_group="a fresh group, formed after %s did not pass" % ctx.reset_cause)
            writer.write(name, name, status, message, time.monotonic() - started, details)
        _agree(ctx, name, status or ctx.worst_reported, message)
    ctx.begin_check(-1, "shutdown")
    # Not while a check thread this rank gave up on is still blocked inside a collective: seen twice in CI (2.6, two
    # ranks in one container, the defect image that raises in ddp_sampler on rank 1), rank 0's teardown of the group
    # waited beside that thread (its stacks: the main thread in destroy_process_group, the abandoned one in DDP's
    # backward) until the scenario's deadline killed it, every record already written. The process ends with
    # os._exit next, which closes the group's connections anyway.
    if dist.is_available() and dist.is_initialized() and not any(t.is_alive() for t in ctx.abandoned_threads):
        dist.destroy_process_group()
    ctx.watchdog.disarm()
    # Under the harness the records are the verdict; standalone (docker compose) the exit code is.
    return 1 if spec.get("exit_code_from_results") and writer.worst in (FAILED, ERROR) else 0


# How long a rank still inside a check waits for it to end on its own after another rank has left
# that check failed or errored. A rank blocked in a collective that the other will never join is cut
# off then, instead of after collective_timeout_s; a rank merely slower than the other finishes in time.
CUT_OFF_GRACE_S = 5.0


def _run_in_thread(ctx: Any, function: Callable[..., Any], entry: Dict[str, Any]) -> Tuple[Optional[str], str, Dict[str, Any]]:
    """Run the check in a thread of its own while this (main) thread watches the store: when another
    rank has left the check with a failure or an error and this rank's check does not end within
    CUT_OFF_GRACE_S, it is blocked in a collective that rank will never join. Nothing can interrupt
    that collective, so the rank gives up on the thread (it stays blocked until the group's timeout,
    then ends without reporting) and goes on to the next check, which gets a fresh process group."""
    result: List[Tuple[Optional[str], str, Dict[str, Any]]] = []

    def target() -> None:
        from distval_suite.core import Abandoned

        try:
            ctx.adopt_thread()
            result.append(_run_one(ctx, function, entry))
        except Abandoned:
            pass

    thread = threading.Thread(target=target, name="distval-check-%s" % entry["name"], daemon=True)
    thread.start()
    left_at: Optional[float] = None
    while True:
        thread.join(0.1)
        if not thread.is_alive():
            if result:
                return result[0]
            return ERROR, "the check's thread ended without a result", {}
        if left_at is None:
            if ctx.someone_left():
                left_at = time.monotonic()
        elif time.monotonic() - left_at > CUT_OFF_GRACE_S:
            ctx.abandoned_threads.append(thread)
            return (
                ERROR,
                "cut off in %s: this rank was still inside the check %.0f s after another rank had left it, "
                "blocked (a collective that rank will never join)" % (ctx.current_case, CUT_OFF_GRACE_S),
                {},
            )


def _run_one(ctx: Any, function: Callable[..., Any], entry: Dict[str, Any]) -> Tuple[Optional[str], str, Dict[str, Any]]:
    """The check's own result (status, message, details), or status None when it reported its parts."""
    from distval_suite.core import CheckFailed, ProcessGroupUnavailable, Skip

    try:
        outcome = function(ctx, entry.get("args", {}))
    except CheckFailed as failed:
        return FAILED, str(failed), dict(failed.details)
    except Skip as skip:
        return SKIPPED, str(skip), {}
    except ProcessGroupUnavailable as unavailable:
        return ERROR, str(unavailable), {}
    except Exception as exc:  # noqa: BLE001 - a check's crash is its result, not the run's
        return ERROR, "%s: %s" % (type(exc).__name__, exc), {"traceback": traceback.format_exc()}
    if outcome is not None:
        message, details = outcome
        return PASSED, message, details
    if not ctx.reported:
        return ERROR, "the check reported no result", {}
    return None, "", {}


def _after_peers(peers: Dict[int, Dict[str, str]]) -> str:
    """A note for a rank whose check ended badly after another rank had already left it: the first
    cause is there, this rank's error (often a closed connection) is its consequence."""
    left = sorted((rank, outcome) for rank, outcome in peers.items() if outcome["status"] in (FAILED, ERROR))
    if not left:
        return ""
    return " (after rank %s had left the check: %s)" % (
        ", ".join(str(rank) for rank, _ in left),
        "; ".join("rank %d %s: %s" % (rank, outcome["status"], outcome["message"][:200]) for rank, outcome in left),
    )


def _agree(ctx: Any, name: str, status: str, message: str) -> None:
    """Ranks agree on how the check ended, through the rendezvous store (not a collective, which a rank
    still inside the check would mistake for one of its own) before any rank enters the next check's
    collectives. When it did not pass on every rank, its collectives may have left the ranks out of
    step: the next check gets a fresh process group instead of inheriting the mess."""
    ctx.step("", "waiting for the other ranks to finish %s" % name)
    ctx.publish_outcome(status, message)
    remaining = ctx.watchdog.remaining_s()
    outcomes = ctx.await_outcomes((remaining if remaining is not None else ctx.check_timeout_s) - 1.0)
    if outcomes is None:
        if ctx.store_lost is not None:
            return  # nothing left to agree through; each rank's next checks end on their own errors
        if ctx.store_known():
            print("distval: rank %d: not every rank finished %s; the next check gets a fresh process group" % (ctx.rank, name))
            ctx.reset_group(name)
        return
    bad = sorted(rank for rank, outcome in outcomes.items() if outcome["status"] in (FAILED, ERROR))
    if bad:
        print(
            "distval: rank %d: %s did not pass on rank(s) %s; the next check gets a fresh process group" % (ctx.rank, name, bad)
        )
        ctx.reset_group(name)


def main(argv: List[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m distval_suite.main SPEC_JSON", file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as handle:
        spec = json.load(handle)
    return run(spec)


def _exit_now(code: int) -> None:
    """End the process without the interpreter's teardown: every record is written and fsynced, the
    process group destroyed. Tearing torch down ends no check and costs time on every rank: measured on
    the 2.15 fixture, 0.8 s per process after ``import torch.distributed`` and 1.5 s once DDP has pulled in
    torch._dynamo (issue 13: time to verdict). It also spares a check thread this rank abandoned, still
    blocked inside an old group's collective, which would make the teardown wait for it or crash under it."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    # A worker that dies with an exception leaves its traceback in TORCHELASTIC_ERROR_FILE (the plan sets it):
    # torchrun copies the first failure's into its own, and the report shows it instead of "exit code 1".
    _exit_now(diagnostics.recorded(main)(sys.argv))
