"""Checks that break or replace the process group, so they run last: timeout and reconfigure."""

from __future__ import annotations

import os
import re
import time
import uuid
from datetime import timedelta
from typing import Any, Dict, List

import torch
import torch.distributed as dist

from distval_suite.core import CheckFailed, CheckOutcome, Context, Skip, check, require_torch, require_world, torch_version
from distval_suite.devices import is_nccl
from distval_suite.records import FAILED

TIMEOUT_WORDS = re.compile(r"(?i)timed? ?out|timing out|timeout|deadline")
# Read by ProcessGroupNCCL when a group is created (the old spelling before torch 2.2): with it, a
# timed-out collective raises in Work.wait() on the calling thread instead of being left to the NCCL
# watchdog, which with TORCH_NCCL_ASYNC_ERROR_HANDLING=1 (set by the harness) aborts the process.
NCCL_BLOCKING_WAIT = ("TORCH_NCCL_BLOCKING_WAIT", "NCCL_BLOCKING_WAIT")


def _new_group_blocking(ranks: List[int], timeout: timedelta) -> Any:
    """new_group(timeout=...) with blocking wait for this group only (the variables are restored)."""
    saved = {name: os.environ.get(name) for name in NCCL_BLOCKING_WAIT}
    os.environ.update({name: "1" for name in NCCL_BLOCKING_WAIT})
    try:
        return dist.new_group(ranks=ranks, timeout=timeout)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@check("timeout")
def check_timeout(ctx: Context, args: Dict[str, Any]) -> CheckOutcome:
    """One rank arrives late on purpose; the others must fail at the deadline, not hang.

    With NCCL a collective returns before it completes: the timeout surfaces in Work.wait() (blocking
    wait, set for the check's group) or, if the NCCL watchdog wins, as the process being aborted (then
    this rank writes no record and the harness reports the exit). The suite's watchdog stays the
    backstop either way.
    """
    deadline_s = float(args.get("deadline_s", 2.0))
    margin_s = float(args.get("margin_s", 2.0))
    ctx.process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    require_world(2, world, "timeout")
    late_rank = world - 1
    device = ctx.device
    nccl = is_nccl(ctx.backend)
    if nccl:
        path = "the timeout given when the group was created (new_group(timeout=...), NCCL blocking wait)"
        group = _new_group_blocking(list(range(world)), timedelta(seconds=deadline_s))
    elif hasattr(dist, "set_timeout") and torch_version() >= (2, 14):
        path = "set_timeout() on a live group"
        group = dist.new_group(ranks=list(range(world)))
    else:
        path = "the timeout given when the group was created (new_group(timeout=...))"
        group = dist.new_group(ranks=list(range(world)), timeout=timedelta(seconds=deadline_s))
    baseline = torch.ones(4, device=device)
    dist.all_reduce(baseline, group=group)
    if float(baseline[0]) != world:
        raise CheckFailed("baseline all_reduce before the late arrival: expected %d, got %s" % (world, float(baseline[0])))
    if path.startswith("set_timeout"):
        dist.set_timeout(timedelta(seconds=deadline_s), group=group)
    details = {"path": path, "deadline_s": deadline_s, "margin_s": margin_s, "late_rank": late_rank}
    from torch.distributed import distributed_c10d

    store = distributed_c10d._get_default_store()
    done_key = "distval/timeout/%s/done/" % ctx.spec["scenario"]
    if rank == late_rank:
        # Stay away from the collective until every other rank has seen its timeout (or the guard
        # below gave up on it), then go on without ever joining: the group is broken by design.
        started = time.monotonic()
        try:
            store.wait(
                [done_key + str(r) for r in range(world) if r != late_rank], timedelta(seconds=deadline_s + margin_s + 10.0)
            )
        except RuntimeError:
            pass
        details["stayed_away_s"] = round(time.monotonic() - started, 3)
        return "stayed away on purpose for %.1f s (timeout via %s)" % (details["stayed_away_s"], path), details
    # The watchdog turns "still blocked well past the deadline" into this check's failure.
    ctx.watchdog.expect_within(
        deadline_s + margin_s + 5.0,
        FAILED,
        "expected all_reduce to fail with a timeout error %.1f s after rank %d stayed away (at most %.1f s); "
        "it was still blocked after %.1f s (timeout via %s)"
        % (deadline_s, late_rank, deadline_s + margin_s, deadline_s + margin_s + 5.0, path),
    )
    started = time.monotonic()
    try:
        if nccl:
            work = dist.all_reduce(torch.ones(4, device=device), group=group, async_op=True)
            work.wait()
            torch.cuda.synchronize(device)
        else:
            dist.all_reduce(torch.ones(4, device=device), group=group)
    except RuntimeError as exc:
        elapsed = time.monotonic() - started
        store.set(done_key + str(rank), "%.3f" % elapsed)
        details.update({"elapsed_s": round(elapsed, 3), "error": str(exc).splitlines()[0][:300]})
        if not TIMEOUT_WORDS.search(str(exc)):
            raise CheckFailed(  # noqa: B904 - the exception is the evidence, quoted in the message
                "expected a timeout error; got %s: %s" % (type(exc).__name__, str(exc).splitlines()[0][:300]), details
            )
        if not deadline_s <= elapsed <= deadline_s + margin_s:
            raise CheckFailed(  # noqa: B904 - the exception is the evidence, quoted in the message
                "expected the timeout between %.1f s and %.1f s; it came after %.2f s (timeout via %s)"
                % (deadline_s, deadline_s + margin_s, elapsed, path),
                details,
            )
        return "timed out after %.2f s for a %.1f s deadline (timeout via %s)" % (elapsed, deadline_s, path), details
    raise CheckFailed("expected all_reduce to time out while rank %d stayed away; it completed" % late_rank, details)


@check("reconfigure")
def check_reconfigure(ctx: Context, args: Dict[str, Any]) -> CheckOutcome:
    """A group created with enable_reconfigure=True forms its communicator only when reconfigured.

    Three generations: the first reconfigure brings the communicator up, two more replace it; every
    generation's all_reduce must be right. Handles and the fresh uuid travel through the store.
    """
    require_torch(2, 14, "reconfigure")
    if ctx.backend != "gloo":
        raise Skip("reconfigure is checked with gloo only; the scenario uses %s" % ctx.backend)
    from torch.distributed import distributed_c10d as c10d

    if not hasattr(c10d, "_reconfigure"):
        raise Skip("torch %s has no torch.distributed._reconfigure" % torch.__version__)
    ctx.process_group(enable_reconfigure=True)
    if not c10d._supports_reconfigure():
        raise CheckFailed(
            "expected a gloo group created with enable_reconfigure=True to support reconfigure; _supports_reconfigure() is False"
        )
    store = c10d._get_default_store()
    rank, world = dist.get_rank(), dist.get_world_size()
    expected = world * (world + 1) / 2.0
    uuids: List[int] = []
    for generation in range(1, 4):
        key = "distval/reconfigure/%s/%d/" % (ctx.spec["scenario"], generation)
        store.set(key + "handle/%d" % rank, c10d._get_reconfigure_handle())
        if rank == 0:
            store.set(key + "uuid", str(uuid.uuid4().int & (2**63 - 1)))
        handles = [store.get(key + "handle/%d" % r).decode() for r in range(world)]
        group_uuid = int(store.get(key + "uuid").decode())
        uuids.append(group_uuid)
        c10d._reconfigure(uuid=group_uuid, handles=handles, timeout=timedelta(seconds=ctx.collective_timeout_s)).wait()
        tensor = torch.full((8,), float(rank + 1), device=ctx.device)
        dist.all_reduce(tensor)
        if not bool((tensor == expected).all()):
            raise CheckFailed(
                "all_reduce after reconfiguration %d: expected %s in every element, got %s"
                % (generation, expected, tensor.tolist()[:4])
            )
    ctx.release_process_group()
    return "all_reduce correct after the first reconfigure and after 2 more of the same group", {"generations": 3}
