"""``store``: the rendezvous TCPStore gives known answers across ranks."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Dict

import torch.distributed as dist

from distval_suite.core import CheckFailed, CheckOutcome, Context, check


@check("store")
def check_store(ctx: Context, args: Dict[str, Any]) -> CheckOutcome:
    ctx.process_group()
    from torch.distributed import distributed_c10d

    store = distributed_c10d._get_default_store()
    rank, world = dist.get_rank(), dist.get_world_size()
    prefix = "distval/store/%s/" % ctx.spec["scenario"]
    store.set(prefix + "value/%d" % rank, "rank-%d-says-%d" % (rank, rank * rank))
    total = store.add(prefix + "counter", rank + 1)
    keys = [prefix + "value/%d" % r for r in range(world)]
    store.wait(keys, timedelta(seconds=ctx.collective_timeout_s))
    dist.barrier()
    problems = []
    for r in range(world):
        got = store.get(prefix + "value/%d" % r).decode("utf-8", "replace")
        want = "rank-%d-says-%d" % (r, r * r)
        if got != want:
            problems.append("get(value/%d): expected %r, got %r" % (r, want, got))
    final = store.add(prefix + "counter", 0)
    expected_total = world * (world + 1) // 2
    if final != expected_total:
        problems.append("add(counter): expected %d after every rank added rank+1, got %d" % (expected_total, final))
    if not 1 <= total <= expected_total:
        problems.append(
            "add(counter, %d) returned %d; expected a running total between 1 and %d" % (rank + 1, total, expected_total)
        )
    if problems:
        raise CheckFailed("; ".join(problems))
    return "set/get/add/wait across %d ranks gave the known answers (counter %d)" % (world, final), {}
