"""``launch``: the launcher's environment matches the scenario's layout, every rank exactly once."""

from __future__ import annotations

import os
import socket
from typing import Any, Dict, List

import torch.distributed as dist

from distval_suite.core import CheckFailed, CheckOutcome, Context, check, torch_version

LAUNCH_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK")


@check("launch")
def check_launch(ctx: Context, args: Dict[str, Any]) -> CheckOutcome:
    # Without a launcher (rendezvous env or tcp) only RANK and WORLD_SIZE are promised.
    variables = LAUNCH_VARIABLES if ctx.launcher == "torchrun" else ("RANK", "WORLD_SIZE")
    seen: Dict[str, Any] = {name: os.environ.get(name) for name in variables}
    values: Dict[str, int] = {}
    problems: List[str] = []
    for name in variables:
        text = seen[name]
        if text is None:
            if name == "GROUP_RANK" and torch_version() < (1, 9):
                continue
            problems.append("expected %s in the environment; it is not set" % name)
        elif not text.lstrip("-").isdigit():
            problems.append("expected %s to be an integer; got %r" % (name, text))
        else:
            values[name] = int(text)
    expected = {"WORLD_SIZE": ctx.expected_world_size}
    if ctx.launcher == "torchrun":
        expected["LOCAL_WORLD_SIZE"] = ctx.expected_nproc_per_node
    # The harness names each container's node rank; with dynamic rendezvous (compose) there is none.
    # With dynamic rendezvous (c10d, compose) the launcher assigns node ranks; the harness does not.
    if "DISTVAL_NODE_RANK" in os.environ and ctx.launcher == "torchrun" and not ctx.spec.get("dynamic_node_ranks"):
        expected["GROUP_RANK"] = int(os.environ["DISTVAL_NODE_RANK"])
    for name, want in expected.items():
        if name in values and values[name] != want:
            problems.append("expected %s=%d (the scenario's layout); got %d" % (name, want, values[name]))
    if {"RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK"} <= set(values):
        derived = values["GROUP_RANK"] * values["LOCAL_WORLD_SIZE"] + values["LOCAL_RANK"]
        if values["RANK"] != derived:
            problems.append(
                "expected RANK = GROUP_RANK*LOCAL_WORLD_SIZE + LOCAL_RANK = %d; got RANK=%d" % (derived, values["RANK"])
            )
    if "LOCAL_RANK" in values and "LOCAL_WORLD_SIZE" in values and not 0 <= values["LOCAL_RANK"] < values["LOCAL_WORLD_SIZE"]:
        problems.append("expected 0 <= LOCAL_RANK < LOCAL_WORLD_SIZE; got LOCAL_RANK=%d" % values["LOCAL_RANK"])
    if problems:
        # Do not join the process group: with a wrong environment it cannot form, and the other
        # ranks' gather below fails with a timeout that names this rank as missing.
        raise CheckFailed("; ".join(problems), {"environment": seen})

    ctx.process_group()
    world = dist.get_world_size()
    mine: Dict[str, Any] = {
        "rank": values["RANK"],
        "local_rank": values.get("LOCAL_RANK", 0),
        "group_rank": values.get("GROUP_RANK", -1),
    }
    mine.update({"hostname": socket.gethostname(), "pid": os.getpid(), "node": os.environ.get("DISTVAL_NODE_RANK")})
    mine["gloo_interface"] = ctx.gloo_interface
    mine["nccl_interface"] = ctx.socket_interfaces.get("NCCL_SOCKET_IFNAME")
    mine["master_addr"] = os.environ.get("MASTER_ADDR") or ctx.spec.get("init_method")
    gathered = ctx.exchange("launch", mine)
    ranks = [int(entry["rank"]) for entry in gathered]
    duplicates = sorted({r for r in ranks if ranks.count(r) > 1})
    missing = sorted(set(range(ctx.expected_world_size)) - set(ranks))
    layout = {"rank %d" % entry["rank"]: entry for entry in gathered}
    if duplicates or missing or world != ctx.expected_world_size:
        raise CheckFailed(
            "expected every rank 0..%d exactly once among %d workers; got ranks %s (duplicates: %s; missing: %s)"
            % (ctx.expected_world_size - 1, ctx.expected_world_size, ranks, duplicates or "none", missing or "none"),
            {"layout": layout},
        )
    hosts = ", ".join(
        "%d@%s%s" % (e["rank"], e["hostname"], "[%s]" % e["gloo_interface"] if e.get("gloo_interface") else "")
        for e in sorted(gathered, key=lambda e: e["rank"])
    )
    return (
        "%d workers, ranks 0..%d each once, environment consistent; rank@host[gloo interface]: %s; rendezvous at %s"
        % (world, world - 1, hosts, gathered[-1].get("master_addr")),
        {"layout": layout, "environment": seen},
    )
