"""Checks of the image and the launch: env, identity, launch, store, timeout, reconfigure.

The collective and DDP checks are in collectives.py and ddp.py; all register in core.CHECKS.
"""

from __future__ import annotations

import os
import platform
import re
import socket
import time
import uuid
from datetime import timedelta
from typing import Any, Dict, List, Tuple

import torch
import torch.distributed as dist

from suite.core import CheckFailed, CheckOutcome, Context, Skip, check, require_torch, require_world, torch_version
from suite.records import FAILED, PASSED


def _backend_availability() -> Dict[str, bool]:
    if not dist.is_available():
        return {"gloo": False, "nccl": False, "mpi": False}
    return {
        "gloo": bool(dist.is_gloo_available()),
        "nccl": bool(dist.is_nccl_available()),
        "mpi": bool(dist.is_mpi_available()),
    }


def _image_facts() -> Dict[str, Any]:
    backends = _backend_availability()
    return {
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "distributed_available": bool(dist.is_available()),
        "gloo_available": backends["gloo"],
        "nccl_available": backends["nccl"],
        "mpi_available": backends["mpi"],
        "cuda_version": torch.version.cuda,
        "cuda_device_count": int(torch.cuda.device_count()),
        "hostname": socket.gethostname(),
    }


@check("env")
def check_env(ctx: Context, args: Dict[str, Any]) -> CheckOutcome:
    details = _image_facts()
    if not details["distributed_available"]:
        raise CheckFailed("expected torch.distributed to be available; torch.distributed.is_available() is False", details)
    available = [name for name in ("gloo", "nccl", "mpi") if details["%s_available" % name]]
    if ctx.backend in ("gloo", "nccl", "mpi") and not details["%s_available" % ctx.backend]:
        raise CheckFailed(
            "expected backend %r to be available; torch.distributed.is_%s_available() is False (available backends: %s)"
            % (ctx.backend, ctx.backend, ", ".join(available) or "none"),
            details,
        )
    summary = "torch %s, Python %s, backends %s, %d CUDA device(s)" % (
        details["torch_version"],
        details["python_version"],
        ", ".join(available) or "none",
        details["cuda_device_count"],
    )
    return summary, details


@check("all_reduce")
def check_all_reduce(ctx: Context, args: Dict[str, Any]) -> CheckOutcome:
    ctx.process_group()
    numel = int(args.get("numel", 1))
    rank, world = dist.get_rank(), dist.get_world_size()
    tensor = torch.full((numel,), float(rank + 1), dtype=torch.float32)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    expected = world * (world + 1) / 2.0
    wrong = (tensor != expected).nonzero().flatten()
    details = {"numel": numel, "world_size": world, "expected": expected}
    if wrong.numel() > 0:
        first = int(wrong[0])
        details.update({"wrong_elements": int(wrong.numel())})
        raise CheckFailed(
            "all_reduce(SUM) of rank+1 over %d ranks: expected %s in every element, got %s at element %d "
            "(%d of %d elements wrong)" % (world, expected, float(tensor[first]), first, int(wrong.numel()), numel),
            details,
        )
    return "all_reduce(SUM) over %d ranks gave %s in all %d elements" % (world, expected, numel), details


# -- identity ----------------------------------------------------------------------------------------
def _version_tuple(text: str) -> Tuple[int, ...]:
    numbers = []
    for part in text.split("+")[0].split("."):
        digits = re.match(r"\d+", part)
        if digits is None:
            break
        numbers.append(int(digits.group()))
    return tuple(numbers)


def version_matches(version: str, specifier: str) -> bool:
    """``specifier`` is a comma-separated list of comparisons: ``>=2.6,<2.7``, ``==2.15.0``, ``2.6``."""
    have = _version_tuple(version)
    for clause in specifier.split(","):
        clause = clause.strip()
        match = re.match(r"^(==|!=|>=|<=|>|<)?\s*([0-9][0-9.]*)$", clause)
        if match is None:
            raise ValueError("cannot read the version requirement %r" % clause)
        operator, want = match.group(1) or "==", _version_tuple(match.group(2))
        if operator in ("==", "!="):
            equal = have[: len(want)] == want  # "==2.6" accepts 2.6.0 and 2.6.1
            if equal != (operator == "=="):
                return False
            continue
        padded = have + (0,) * max(0, len(want) - len(have))
        compare = {">=": padded >= want, "<=": padded <= want, ">": padded > want, "<": padded < want}
        if not compare[operator]:
            return False
    return True


@check("identity")
def check_identity(ctx: Context, args: Dict[str, Any]) -> CheckOutcome:
    facts = _image_facts()
    problems: List[str] = []
    stated: List[str] = []
    if "torch" in args:
        stated.append("torch %s" % args["torch"])
        if not version_matches(facts["torch_version"], args["torch"]):
            problems.append("expected torch %s; image has %s" % (args["torch"], facts["torch_version"]))
    if "python" in args:
        stated.append("Python %s" % args["python"])
        if not version_matches(facts["python_version"], args["python"]):
            problems.append("expected Python %s; image has %s" % (args["python"], facts["python_version"]))
    if "build" in args:
        have = "cuda" if facts["cuda_version"] else "cpu"
        stated.append("a %s build" % args["build"])
        if have != args["build"]:
            problems.append(
                "expected a %s build of torch; image has a %s build (torch.version.cuda=%s)"
                % (args["build"], have, facts["cuda_version"])
            )
    for backend in args.get("backends", []):
        stated.append("backend %s" % backend)
        if not facts.get("%s_available" % backend):
            problems.append(
                "expected backend %s to be available; torch.distributed.is_%s_available() is False" % (backend, backend)
            )
    if not stated:
        raise Skip("the scenario states nothing about the image (args: torch, python, build, backends)")
    if problems:
        raise CheckFailed("; ".join(problems), facts)
    return "image is as stated: %s" % ", ".join(stated), facts


# -- launch ------------------------------------------------------------------------------------------
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
    mine = {"rank": values["RANK"], "local_rank": values.get("LOCAL_RANK", 0), "group_rank": values.get("GROUP_RANK", -1)}
    mine.update({"hostname": socket.gethostname(), "pid": os.getpid(), "node": os.environ.get("DISTVAL_NODE_RANK")})
    mine["gloo_interface"] = ctx.gloo_interface
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


# -- store -------------------------------------------------------------------------------------------
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


# -- timeout -----------------------------------------------------------------------------------------
TIMEOUT_WORDS = re.compile(r"(?i)timed? ?out|timeout|deadline")


@check("timeout")
def check_timeout(ctx: Context, args: Dict[str, Any]) -> CheckOutcome:
    """One rank arrives late on purpose; the others must fail at the deadline, not hang."""
    deadline_s = float(args.get("deadline_s", 2.0))
    margin_s = float(args.get("margin_s", 2.0))
    ctx.process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    require_world(2, world, "timeout")
    late_rank = world - 1
    if hasattr(dist, "set_timeout") and torch_version() >= (2, 14):
        path = "set_timeout() on a live group"
        group = dist.new_group(ranks=list(range(world)))
    else:
        path = "the timeout given when the group was created (new_group(timeout=...))"
        group = dist.new_group(ranks=list(range(world)), timeout=timedelta(seconds=deadline_s))
    baseline = torch.ones(4)
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
    ctx.watchdog.arm(
        ctx.current_check,
        ctx.current_check,
        deadline_s + margin_s + 5.0,
        FAILED,
        "expected all_reduce to fail with a timeout error %.1f s after rank %d stayed away (at most %.1f s); "
        "it was still blocked after %.1f s (timeout via %s)"
        % (deadline_s, late_rank, deadline_s + margin_s, deadline_s + margin_s + 5.0, path),
    )
    started = time.monotonic()
    try:
        dist.all_reduce(torch.ones(4), group=group)
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


# -- reconfigure -------------------------------------------------------------------------------------
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
        tensor = torch.full((8,), float(rank + 1))
        dist.all_reduce(tensor)
        if not bool((tensor == expected).all()):
            raise CheckFailed(
                "all_reduce after reconfiguration %d: expected %s in every element, got %s"
                % (generation, expected, tensor.tolist()[:4])
            )
    ctx.release_process_group()
    return "all_reduce correct after the first reconfigure and after 2 more of the same group", {"generations": 3}


__all__ = ["PASSED"]
