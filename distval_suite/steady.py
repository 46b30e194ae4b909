"""Steady work for fault scenarios: ``collective_loop`` (all_reduce with a known answer, over and over,
for ``duration_s``: the workload a fault lands in) and ``allocate`` (one rank takes more memory than its
container may have: the oom fault's check).

A fault makes a collective raise on the surviving ranks; the harness judges that error's text and time
(distval/results/expectations.py), so collective_loop writes its record the moment the collective raised (the
record's ``ended_at`` is the failure time) and then stays in the check for the group timeout: a rank
that leaves a check failed makes the others give up on it 5 s later (distval_suite/main.py's cut-off), which
would hide the error the image's torch itself raises.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any, Dict, List

import torch
import torch.distributed as dist

from distval_suite.core import CheckOutcome, Context, check
from distval_suite.records import ERROR, FAILED, PASSED

DEFAULT_DURATION_S = 30.0
DEFAULT_NUMEL = 1024
# How long a rank whose collective raised stays in the check beyond the group timeout, so that the other
# ranks meet their own error (a timeout at collective_timeout_s) before the cut-off could end them.
LINGER_MARGIN_S = 3.0
ALLOCATE_CHUNK_MIB = 64


def _expected(world: int, iteration: int) -> float:
    # Every rank contributes rank + 1 + (iteration % 7): a stale result of the previous iteration is wrong.
    return world * (world + 1) / 2.0 + world * (iteration % 7)


@check("collective_loop")
def check_collective_loop(ctx: Context, args: Dict[str, Any]) -> CheckOutcome:
    ctx.process_group()
    duration_s = float(args.get("duration_s", DEFAULT_DURATION_S))
    numel = int(args.get("numel", DEFAULT_NUMEL))
    rank, world = dist.get_rank(), dist.get_world_size()
    # The loop's own group with its own timeout: what a frozen or cut-off peer costs is timeout_s, while
    # the default group keeps collective_timeout_s, which must also cover ranks that start slowly.
    timeout_s = float(args.get("timeout_s", ctx.collective_timeout_s))
    ctx.step("all_reduce", "new_group(timeout=%g s)" % timeout_s)
    group = dist.new_group(ranks=list(range(world)), timeout=timedelta(seconds=timeout_s))
    ctx.step("all_reduce", "a loop of %g s" % duration_s)
    started = time.monotonic()
    iteration = 0
    stop = False
    while not stop:
        # The last element says "my duration is over" (0 or 1): the sum tells every rank to stop after the
        # same iteration, so no rank waits in a collective that another, done with its loop, never joins.
        tensor = torch.full((numel + 1,), float(rank + 1 + iteration % 7), dtype=torch.float32, device=ctx.device)
        tensor[numel] = 1.0 if time.monotonic() - started >= duration_s else 0.0
        try:
            dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
        except Exception as exc:  # noqa: BLE001 - the error a fault causes is this check's finding
            elapsed = time.monotonic() - started
            text = " ".join(str(exc).split())[:600]
            ctx.report(
                "all_reduce",
                ERROR,
                "all_reduce iteration %d raised after %.2f s in the loop: %s: %s"
                % (iteration, elapsed, type(exc).__name__, text),
                elapsed,
                {"iterations": iteration, "error_type": type(exc).__name__, "error": text, "timeout_s": timeout_s},
            )
            _linger(ctx, timeout_s)
            return None
        stop = float(tensor[numel]) > 0
        want = _expected(world, iteration)
        wrong = (tensor[:numel] != want).nonzero().flatten()
        if wrong.numel() > 0:
            first = int(wrong[0])
            ctx.report(
                "all_reduce",
                FAILED,
                "all_reduce iteration %d: expected %s in every element, got %s at element %d (%d of %d elements wrong)"
                % (iteration, want, float(tensor[first]), first, int(wrong.numel()), numel),
                time.monotonic() - started,
                {"iterations": iteration},
            )
            return None
        iteration += 1
    elapsed = time.monotonic() - started
    ctx.report(
        "all_reduce",
        PASSED,
        "%d all_reduce iterations over %d ranks in %.1f s, every one correct" % (iteration, world, elapsed),
        elapsed,
        {"iterations": iteration},
    )
    return None


def _linger(ctx: Context, timeout_s: float) -> None:
    """Stay in the check (without communicating) until the other ranks met their own error."""
    deadline = time.monotonic() + timeout_s + LINGER_MARGIN_S
    remaining = ctx.watchdog.remaining_s()
    if remaining is not None:
        deadline = min(deadline, time.monotonic() + max(remaining - 2.0, 0.0))
    while time.monotonic() < deadline:
        ctx.still_running()
        time.sleep(0.2)


@check("allocate")
def check_allocate(ctx: Context, args: Dict[str, Any]) -> CheckOutcome:
    """``rank`` (default: every rank) fills ``mib`` MiB; under a smaller memory limit the kernel's OOM
    killer ends it, which the harness reports from the Engine's OOMKilled."""
    mib = int(args.get("mib", 1024))
    only = args.get("rank")
    if only is not None and int(only) != ctx.rank:
        # Every rank reports the same parts (a part missing on one rank is that rank's error).
        ctx.report("started", PASSED, "rank %d allocates nothing (rank %d fills %d MiB)" % (ctx.rank, int(only), mib))
        ctx.report("filled", PASSED, "rank %d allocates nothing" % ctx.rank)
        return None
    # A record the moment the filling starts: a fault scenario's oom trigger (after: {check: allocate}).
    ctx.report("started", PASSED, "rank %d fills %d MiB" % (ctx.rank, mib))
    ctx.step("fill", "%d MiB" % mib)
    started = time.monotonic()
    chunks: List[torch.Tensor] = []
    for _ in range(max(1, mib // ALLOCATE_CHUNK_MIB)):
        # torch.full writes every page, so the memory is really taken (an untouched buffer is not).
        chunks.append(torch.full((ALLOCATE_CHUNK_MIB * 2**20 // 4,), 1.0, dtype=torch.float32))
    total = sum(c.numel() * 4 for c in chunks) // 2**20
    ctx.report("filled", PASSED, "filled %d MiB in %.2f s" % (total, time.monotonic() - started), details={"mib": total})
    return None
