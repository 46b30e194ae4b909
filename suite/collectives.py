"""The collective checks: ``all_reduce`` (one SUM, the quick signal) and ``collectives`` (every
collective against a known answer, one result per operation).

In ``collectives`` each tensor operation runs on float32, float64, int64 and bfloat16 at a few
elements, and on float32 at ``large_mib`` MiB (16 by default, past gloo's chunking). The inputs depend
on the rank and on the element index (stale, shuffled or wrong-rank data shows), and every expected
value is a small integer, exact in every dtype. A dtype or operation this image's backend does not
support is skipped with torch's own reason. With NCCL (``backend: nccl`` or ``nccl-legacy``) float16
and all_reduce AVG are checked too; with ``device: cuda`` every tensor, input and answer, lives on the
rank's CUDA device. ``repeat: N`` runs everything N times and reports k of N failures.
"""

from __future__ import annotations

import functools
import itertools
import re
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
import torch.distributed as dist

from suite.core import CheckFailed, CheckOutcome, Context, check
from suite.devices import is_nccl
from suite.records import ERROR, FAILED, PASSED, SKIPPED
from suite.tally import summarize_runs

DTYPES = (torch.float32, torch.float64, torch.int64, torch.bfloat16)
SMALL_NUMEL = 5
UNSUPPORTED = re.compile(r"(?i)not supported|unsupported|no support|invalid scalar type|not implemented|does not support")
NUMPY_MISSING = re.compile(r"(?i)numpy is not available|no module named .?numpy")


class Unsupported(Exception):
    pass


@check("all_reduce")
def check_all_reduce(ctx: Context, args: Dict[str, Any]) -> CheckOutcome:
    ctx.process_group()
    numel = int(args.get("numel", 1))
    rank, world = dist.get_rank(), dist.get_world_size()
    tensor = torch.full((numel,), float(rank + 1), dtype=torch.float32, device=ctx.device)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    expected = world * (world + 1) / 2.0
    wrong = (tensor != expected).nonzero().flatten()
    details = {"numel": numel, "world_size": world, "expected": expected, "device": str(tensor.device)}
    if wrong.numel() > 0:
        first = int(wrong[0])
        details.update({"wrong_elements": int(wrong.numel())})
        raise CheckFailed(
            "all_reduce(SUM) of rank+1 over %d ranks: expected %s in every element, got %s at element %d "
            "(%d of %d elements wrong)" % (world, expected, float(tensor[first]), first, int(wrong.numel()), numel),
            details,
        )
    return "all_reduce(SUM) over %d ranks gave %s in all %d elements" % (world, expected, numel), details


@functools.lru_cache(maxsize=8)
def _index(numel: int, device: torch.device) -> torch.Tensor:
    """The element index mod 7 (cached: building 16 MiB of it costs more than reducing it)."""
    return torch.arange(numel, dtype=torch.int64, device=device) % 7


@functools.lru_cache(maxsize=64)
def _base_cached(rank: int, numel: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    return (_index(numel, device) + (rank + 1)).to(dtype)


def _base(rank: int, numel: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """rank+1 plus the element index mod 7: values 1..(world+6), exact in bfloat16 and float16. A fresh
    copy: collectives write into their inputs."""
    return _base_cached(rank, numel, dtype, device).clone()


def _sentinel(numel: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    return torch.full((numel,), -1, dtype=dtype, device=device)


def _wrong(tensor: torch.Tensor, expected: torch.Tensor, rtol: float) -> torch.Tensor:
    if rtol and tensor.is_floating_point():
        return ((tensor.double() - expected.double()).abs() > rtol * expected.double().abs()).nonzero().flatten()
    return (tensor != expected).nonzero().flatten()


def _describe(tensor: torch.Tensor, expected: torch.Tensor, rtol: float = 0.0) -> str:
    wrong = _wrong(tensor, expected, rtol)
    first = int(wrong[0])
    return "element %d: expected %s%s, got %s (%d of %d elements wrong)" % (
        first,
        expected[first].item(),
        " (relative tolerance %g)" % rtol if rtol and tensor.is_floating_point() else "",
        tensor[first].item(),
        int(wrong.numel()),
        tensor.numel(),
    )


def _compare(label: str, tensor: torch.Tensor, expected: torch.Tensor, rtol: float = 0.0) -> Optional[str]:
    """None when ``tensor`` is ``expected`` (exactly; within ``rtol`` for floating dtypes when given)."""
    if tensor.shape != expected.shape:
        return "%s: expected shape %s, got %s" % (label, tuple(expected.shape), tuple(tensor.shape))
    if torch.equal(tensor, expected) or (rtol and _wrong(tensor, expected, rtol).numel() == 0):
        return None
    return "%s: %s" % (label, _describe(tensor, expected, rtol))


# Each operation: (rank, world, numel, dtype, device) -> None when correct, else "what was expected, what was seen".
Operation = Callable[[int, int, int, torch.dtype, torch.device], Optional[str]]

# AVG may be computed as a sum of inputs pre-multiplied by 1/world (NCCL's ncclAvg on floating types),
# which rounds when the world size is not a power of two: exact only up to the dtype's precision.
AVG_RTOL = {torch.float16: 1e-2, torch.bfloat16: 2e-2, torch.float32: 1e-5, torch.float64: 1e-12}


def _all_reduce(op_name: str) -> Operation:
    def run(rank: int, world: int, numel: int, dtype: torch.dtype, device: torch.device) -> Optional[str]:
        op = getattr(dist.ReduceOp, op_name)
        if op_name == "PRODUCT":
            # 2 at the elements this rank owns (index % world == rank), else 1: the product is 2 everywhere.
            tensor = torch.ones(numel, dtype=dtype, device=device)
            tensor[rank::world] = 2
            expected = torch.full((numel,), 2, dtype=dtype, device=device)
        elif op_name == "AVG":
            # 2*rank+1 averages to world over ranks 0..world-1: an integer answer, index + world.
            tensor = (_index(numel, device) + (2 * rank + 1)).to(dtype)
            expected = (_index(numel, device) + world).to(dtype)
        else:
            tensor = _base(rank, numel, dtype, device)
            index = _index(numel, device)
            expected = {
                "SUM": index * world + world * (world + 1) // 2,
                "MAX": index + world,
                "MIN": index + 1,
            }[op_name].to(dtype)
        dist.all_reduce(tensor, op=op)
        return _compare("all_reduce(%s)" % op_name, tensor, expected, AVG_RTOL.get(dtype, 0.0) if op_name == "AVG" else 0.0)

    return run


def _broadcast(rank: int, world: int, numel: int, dtype: torch.dtype, device: torch.device) -> Optional[str]:
    root = world - 1
    tensor = _base(rank, numel, dtype, device)
    dist.broadcast(tensor, src=root)
    return _compare("broadcast from rank %d" % root, tensor, _base(root, numel, dtype, device))


def _reduce(rank: int, world: int, numel: int, dtype: torch.dtype, device: torch.device) -> Optional[str]:
    root = world - 1
    tensor = _base(rank, numel, dtype, device)
    dist.reduce(tensor, dst=root, op=dist.ReduceOp.SUM)
    if rank != root:
        return None
    expected = (_index(numel, device) * world + world * (world + 1) // 2).to(dtype)
    return _compare("reduce(SUM) to rank %d" % root, tensor, expected)


def _all_gather(rank: int, world: int, numel: int, dtype: torch.dtype, device: torch.device) -> Optional[str]:
    outputs = [_sentinel(numel, dtype, device) for _ in range(world)]
    dist.all_gather(outputs, _base(rank, numel, dtype, device))
    for source, tensor in enumerate(outputs):
        problem = _compare("all_gather slot of rank %d" % source, tensor, _base(source, numel, dtype, device))
        if problem:
            return problem
    return None


def _all_gather_into_tensor(rank: int, world: int, numel: int, dtype: torch.dtype, device: torch.device) -> Optional[str]:
    function = getattr(dist, "all_gather_into_tensor", None)
    if function is None:
        raise Unsupported("torch.distributed.all_gather_into_tensor does not exist in torch %s" % torch.__version__)
    output = _sentinel(numel * world, dtype, device)
    function(output, _base(rank, numel, dtype, device))
    return _compare("all_gather_into_tensor", output, torch.cat([_base(r, numel, dtype, device) for r in range(world)]))


def _gather(rank: int, world: int, numel: int, dtype: torch.dtype, device: torch.device) -> Optional[str]:
    root = world - 1
    outputs = [_sentinel(numel, dtype, device) for _ in range(world)] if rank == root else None
    dist.gather(_base(rank, numel, dtype, device), gather_list=outputs, dst=root)
    for source, tensor in enumerate(outputs or []):
        problem = _compare("gather to rank %d, slot of rank %d" % (root, source), tensor, _base(source, numel, dtype, device))
        if problem:
            return problem
    return None


def _scatter(rank: int, world: int, numel: int, dtype: torch.dtype, device: torch.device) -> Optional[str]:
    root = world - 1
    inputs = [_base(r, numel, dtype, device) * 2 for r in range(world)] if rank == root else None
    output = _sentinel(numel, dtype, device)
    dist.scatter(output, scatter_list=inputs, src=root)
    return _compare("scatter from rank %d" % root, output, _base(rank, numel, dtype, device) * 2)


def _reduce_scatter(rank: int, world: int, numel: int, dtype: torch.dtype, device: torch.device) -> Optional[str]:
    inputs = [_base(rank, numel, dtype, device) + j for j in range(world)]
    output = _sentinel(numel, dtype, device)
    dist.reduce_scatter(output, inputs, op=dist.ReduceOp.SUM)
    expected = (_index(numel, device) * world + world * (world + 1) // 2 + world * rank).to(dtype)
    return _compare("reduce_scatter(SUM)", output, expected)


def _all_to_all(rank: int, world: int, numel: int, dtype: torch.dtype, device: torch.device) -> Optional[str]:
    inputs = [torch.full((numel,), rank * world + j + 1, dtype=dtype, device=device) for j in range(world)]
    outputs = [_sentinel(numel, dtype, device) for _ in range(world)]
    dist.all_to_all(outputs, inputs)
    for source, tensor in enumerate(outputs):
        problem = _compare(
            "all_to_all slot from rank %d" % source,
            tensor,
            torch.full((numel,), source * world + rank + 1, dtype=dtype, device=device),
        )
        if problem:
            return problem
    return None


def _send_recv_ring(rank: int, world: int, numel: int, dtype: torch.dtype, device: torch.device) -> Optional[str]:
    if world < 2:
        raise Unsupported("a ring needs at least 2 ranks")
    right, left = (rank + 1) % world, (rank - 1) % world
    received = _sentinel(numel, dtype, device)
    requests = [dist.isend(_base(rank, numel, dtype, device), dst=right), dist.irecv(received, src=left)]
    for request in requests:
        request.wait()
    return _compare("recv from rank %d" % left, received, _base(left, numel, dtype, device))


TENSOR_OPERATIONS: List[Tuple[str, Operation]] = [
    ("all_reduce.sum", _all_reduce("SUM")),
    ("all_reduce.max", _all_reduce("MAX")),
    ("all_reduce.min", _all_reduce("MIN")),
    ("all_reduce.product", _all_reduce("PRODUCT")),
    ("broadcast", _broadcast),
    ("reduce", _reduce),
    ("all_gather", _all_gather),
    ("all_gather_into_tensor", _all_gather_into_tensor),
    ("gather", _gather),
    ("scatter", _scatter),
    ("reduce_scatter", _reduce_scatter),
    ("all_to_all", _all_to_all),
    ("send_recv_ring", _send_recv_ring),
]
# What NCCL reduces beyond gloo's set: float16 in every operation, and AVG (ncclAvg, NCCL >= 2.10).
NCCL_EXTRA_DTYPES = (torch.float16,)
NCCL_EXTRA_OPERATIONS: List[Tuple[str, Operation]] = [("all_reduce.avg", _all_reduce("AVG"))]


def operations_for(backend: str) -> Tuple[Tuple[torch.dtype, ...], List[Tuple[str, Operation]]]:
    """The small-tensor dtypes and the operations checked with ``backend``."""
    if not is_nccl(backend):
        return DTYPES, TENSOR_OPERATIONS
    position = [name for name, _ in TENSOR_OPERATIONS].index("all_reduce.product") + 1
    return DTYPES + NCCL_EXTRA_DTYPES, TENSOR_OPERATIONS[:position] + NCCL_EXTRA_OPERATIONS + TENSOR_OPERATIONS[position:]


BARRIER_LATE_S = 0.2


def _barrier(rank: int, world: int) -> Optional[str]:
    """The last rank arrives late and counts itself in the store just before entering the barrier;
    a rank that leaves the barrier must find that count (a barrier that does not wait would not)."""
    from torch.distributed import distributed_c10d

    store = distributed_c10d._get_default_store()
    key = "distval/barrier/%d" % next(_BARRIER_GENERATIONS)
    if rank == world - 1:
        time.sleep(BARRIER_LATE_S)
        store.add(key, 1)
    dist.barrier()
    if store.add(key, 0) < 1:
        return "barrier returned on rank %d before rank %d (%.1f s late) had entered it" % (rank, world - 1, BARRIER_LATE_S)
    return None


_BARRIER_GENERATIONS = itertools.count()


def _broadcast_object_list(rank: int, world: int) -> Optional[str]:
    root = world - 1
    want: List[Any] = [{"rank": root, "payload": list(range(5))}, "distval"]
    objects: List[Any] = list(want) if rank == root else [{"rank": rank}, None]
    dist.broadcast_object_list(objects, src=root)
    return None if objects == want else "broadcast_object_list from rank %d: expected %r, got %r" % (root, want, objects)


def _all_gather_object(rank: int, world: int) -> Optional[str]:
    gathered: List[Any] = [None] * world
    dist.all_gather_object(gathered, {"rank": rank, "square": rank * rank})
    want = [{"rank": r, "square": r * r} for r in range(world)]
    return None if gathered == want else "all_gather_object: expected %r, got %r" % (want, gathered)


def _gather_object(rank: int, world: int) -> Optional[str]:
    root = world - 1
    collected: Optional[List[Any]] = [None] * world if rank == root else None
    dist.gather_object({"rank": rank}, collected, dst=root)
    want = [{"rank": r} for r in range(world)]
    return (
        None if rank != root or collected == want else "gather_object to rank %d: expected %r, got %r" % (root, want, collected)
    )


def _subgroup(rank: int, world: int, device: torch.device) -> Optional[str]:
    """A collective inside new_group(ranks 1..world-1) must leave rank 0 alone, and the world group working."""
    members = list(range(1, world))
    group = dist.new_group(ranks=members)
    tensor = _base(rank, SMALL_NUMEL, torch.float32, device)
    if rank in members:
        dist.all_reduce(tensor, group=group)
        expected = sum(_base(r, SMALL_NUMEL, torch.float32, device) for r in members)
        problem = _compare("all_reduce inside new_group(%s)" % members, tensor, expected)
    else:
        problem = _compare(
            "rank %d outside new_group(%s) after the group's all_reduce" % (rank, members),
            tensor,
            _base(rank, SMALL_NUMEL, torch.float32, device),
        )
    world_tensor = torch.ones(SMALL_NUMEL, device=device)
    dist.all_reduce(world_tensor)
    return problem or _compare(
        "world all_reduce after the subgroup's", world_tensor, torch.full((SMALL_NUMEL,), float(world), device=device)
    )


def _classify(exc: BaseException) -> Tuple[str, str]:
    text = "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0][:300] if str(exc) else "")
    if isinstance(exc, Unsupported) or UNSUPPORTED.search(str(exc)):
        return SKIPPED, text
    if NUMPY_MISSING.search(str(exc)):
        return FAILED, ("numpy is missing from the image: torch's object collectives need it on the receiving ranks (%s)" % text)
    return ERROR, text


@check("collectives")
def check_collectives(ctx: Context, args: Dict[str, Any]) -> CheckOutcome:
    ctx.process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    repeat = int(args.get("repeat", 1))
    large_numel_bytes = int(args.get("large_mib", 16)) * 2**20
    device = ctx.device
    small_dtypes, operations = operations_for(ctx.backend)
    sizes = [("small", SMALL_NUMEL, small_dtypes), ("large", large_numel_bytes // 4, (torch.float32,))]

    def run_part(part: str, attempt: Callable[[], Optional[str]], variant: str) -> Tuple[str, str]:
        ctx.step(part, variant)
        try:
            problem = attempt()
        except Exception as exc:  # noqa: BLE001 - classified: unsupported, numpy missing, or error
            return _classify(exc)
        return (FAILED, problem) if problem else (PASSED, "")

    for part, operation in operations:
        started = time.monotonic()
        failures: List[str] = []
        skipped: List[str] = []
        errors: List[str] = []
        runs = 0
        for iteration in range(repeat):
            for size_name, numel, dtypes in sizes:
                for dtype in dtypes:
                    variant = "%s, %s, %d elements" % (str(dtype).replace("torch.", ""), size_name, numel)
                    status, text = run_part(part, functools.partial(operation, rank, world, numel, dtype, device), variant)
                    if status == SKIPPED:
                        if iteration == 0:
                            skipped.append("%s (%s)" % (variant, text))
                        continue
                    runs += 1
                    if status == FAILED:
                        failures.append("run %d, %s: %s" % (iteration + 1, variant, text))
                    elif status == ERROR:
                        errors.append("run %d, %s: %s" % (iteration + 1, variant, text))
        _report(ctx, part, runs, failures, errors, skipped, repeat, time.monotonic() - started)

    # Each object collective completes its communication before it unpickles, so a rank that fails
    # (numpy missing on a receiving rank) stays in step with the others for the next call.
    others: List[Tuple[str, Callable[[], Optional[str]]]] = [
        ("barrier", lambda: _barrier(rank, world)),
        ("subgroup", lambda: _subgroup(rank, world, device) if world >= 2 else None),
        ("broadcast_object_list", lambda: _broadcast_object_list(rank, world)),
        ("all_gather_object", lambda: _all_gather_object(rank, world)),
        ("gather_object", lambda: _gather_object(rank, world)),
    ]
    for part, attempt in others:
        started = time.monotonic()
        outcomes = [run_part(part, attempt, "run %d" % (i + 1)) for i in range(repeat)]
        _report_runs(ctx, part, outcomes, repeat, time.monotonic() - started)
    return None


def _report(
    ctx: Context, part: str, runs: int, failures: List[str], errors: List[str], skipped: List[str], repeat: int, duration_s: float
) -> None:
    details = {"runs": runs, "failures": failures[:20], "errors": errors[:20], "skipped": skipped}
    status, message = summarize_runs(runs, failures, errors, skipped, repeat)
    ctx.report(part, status, message, duration_s, details)


def _report_runs(ctx: Context, part: str, outcomes: List[Tuple[str, str]], repeat: int, duration_s: float) -> None:
    failures = ["run %d: %s" % (i + 1, text) for i, (status, text) in enumerate(outcomes) if status == FAILED]
    errors = ["run %d: %s" % (i + 1, text) for i, (status, text) in enumerate(outcomes) if status == ERROR]
    skipped = [text for status, text in outcomes[:1] if status == SKIPPED]
    runs = len([o for o in outcomes if o[0] != SKIPPED])
    _report(ctx, part, runs, failures, errors, skipped, repeat, duration_s)
