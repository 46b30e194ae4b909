"""The collective checks: ``all_reduce`` (one SUM, the quick signal) and ``collectives`` (every
collective against a known answer, one result per operation).

In ``collectives`` each tensor operation runs the variants distval_suite/coverage.py declares (a coverage model,
not a Cartesian product: each defect class with the smallest input that shows it): every dtype training reduces
(float32, float64, int64, bfloat16, float16, int32, int8, uint8, and bool in the reductions) at 7 elements from
every root with every reduce op; asynchronously (``async_op=True``, checked after ``wait()``), on a view at
storage offset 1 inside a guarded buffer (the elements around it must stay untouched), on non-contiguous
tensors (transposed, strided) and on zero elements once per operation; and at the large size, the element count of
``large_mib`` MiB of float32 (16 by default: 2**22 elements, past 2**20 and gloo's segment sizes; three elements
more, so that the count is odd) once per operation, and in every dtype in all_reduce(SUM) (the same element count:
distval_suite/coverage.py says why). A non-contiguous tensor must be reduced correctly, or refused
with an exception on every rank before anything was written (coverage.py says why); silently unchanged or
wrong is a failure. The inputs and answers come from distval_suite/answers.py, which a host test proves tell
every reduce op, root and rank's buffer apart; every value is a small integer, exact in every dtype, so
answers are compared exactly (AVG under NCCL within a tolerance).

A skip comes only from distval_suite/support.py: an operation or dtype the table says this backend and torch
version may lack gets a capability probe (a call on a few elements, before the real ones) and is
skipped when the probe raises on every rank; any other exception is an error, whatever its words.
Variants skipped beside variants that ran make the part skipped (partially), never passed. With
``device: cuda`` every tensor, input and answer, lives on the rank's CUDA device. ``repeat: N`` runs
everything N times and reports k of N failures.
"""

from __future__ import annotations

import functools
import itertools
import re
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

import torch
import torch.distributed as dist

from distval_suite import answers, coverage, subgroups
from distval_suite.core import CheckFailed, CheckOutcome, Context, check, require_world
from distval_suite.coverage import ASYNC, IN_PLACE, LARGE, NON_CONTIGUOUS, SMALL_NUMEL, STRIDED, TRANSPOSED, VIEW, ZERO
from distval_suite.devices import backend_family
from distval_suite.records import ERROR, FAILED, PASSED, SKIPPED
from distval_suite.support import ABSENT, MUST, UNDEFINED, probe_verdict, support
from distval_suite.tally import summarize_runs

DTYPES = tuple(getattr(torch, name) for name in coverage.DTYPES)
DEFAULT_LARGE_MIB = 16
# What no formula in distval_suite/answers.py produces (they are all positive, at most 127): output buffers start as
# it, and the elements around a view must still hold it after the call. uint8 cannot hold -7; a bool guard is True,
# which a bool answer can be: there the view's own elements show an ignored offset.
GUARD = -7
GUARDS = {torch.uint8: 250, torch.bool: True}
TILE_BLOCK = 2**16  # elements: a block of whole periods, tiled into the large tensors (_fill)
NUMPY_MISSING = re.compile(r"(?i)numpy is not available|no module named .?numpy")


class Variant(NamedTuple):
    rank: int
    world: int
    numel: int
    dtype: torch.dtype
    device: torch.device
    form: str
    root: int
    op: str  # the reduce op of rooted reductions ("SUM" elsewhere)

    def describe(self, rooted: bool, reducing: bool) -> str:
        parts = [_dtype_name(self.dtype), "%d elements" % self.numel, self.form]
        if reducing:
            parts.append(self.op)
        if rooted:
            parts.append("root %d" % self.root)
        return ", ".join(parts)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


class Refused(Exception):
    """The collective raised on a non-contiguous tensor before writing anything: a refusal, acceptable when every
    rank refused (distval_suite/coverage.py)."""


@check("all_reduce")
def check_all_reduce(ctx: Context, args: Dict[str, Any]) -> CheckOutcome:
    ctx.process_group()
    # Several elements by default: one element cannot show an implementation that reduces only the first.
    numel = int(args.get("numel", SMALL_NUMEL))
    rank, world = dist.get_rank(), dist.get_world_size()
    require_world(2, world, "all_reduce (one rank proves nothing for a collective)")
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


def _fill(
    formula: Callable[..., Any], params: Tuple[Any, ...], numel: int, dtype: torch.dtype, device: torch.device, world: int
) -> torch.Tensor:
    """``formula(*params, index)`` over the element index, in ``dtype``, as a new tensor. Every formula repeats every
    answers.period(world) elements (tests/suite/test_suite_answers.py), so one period is computed and tiled: at 16 MiB
    computing the formula over every element cost 10-30x the collective itself (2 ranks, gloo; int8's 16M elements
    70 s at a load of 30). The period is tiled to a block of about TILE_BLOCK elements, and the block copied into a
    (blocks, block) view of the result in one broadcast copy: every element written once, in one parallel region
    (``repeat`` and a cut copy wrote each twice, and each input was copied a third time from a cache; doubling the
    written part took ~20 copies, each a parallel region that waits on every intra-op thread)."""
    length = min(numel, answers.period(world))
    value = formula(*params, torch.arange(length, dtype=torch.int64, device=device))
    if not isinstance(value, torch.Tensor):
        value = torch.full((length,), int(value), dtype=torch.int64, device=device)
    one_period = value.to(dtype)
    if numel <= length:
        return one_period
    block = one_period.repeat(max(1, min(numel, TILE_BLOCK) // length))
    tiled = torch.empty((numel,), dtype=dtype, device=device)
    whole = numel - numel % block.numel()
    tiled[:whole].view(-1, block.numel()).copy_(block)
    tiled[whole:].copy_(block[: numel - whole])
    return tiled


def _tensor(v: Variant, formula: Callable[..., Any], *params: Any) -> torch.Tensor:
    """A formula of distval_suite/answers.py, the element index appended to ``params``, as a new tensor of the
    variant's size, dtype and device (its own: collectives write into their inputs)."""
    return _fill(formula, params, v.numel, v.dtype, v.device, v.world)


@functools.lru_cache(maxsize=24)
def _cached(
    formula: Callable[..., Any], params: Tuple[Any, ...], numel: int, dtype: torch.dtype, device: torch.device, world: int
) -> torch.Tensor:
    return _fill(formula, params, numel, dtype, device, world)


def _answer(v: Variant, formula: Callable[..., Any], *params: Any) -> torch.Tensor:
    """The same values as ``_tensor``, for a known answer: cached (every root, form and repeat compares against the same
    values) and only read, never handed to a collective, so never copied."""
    return _cached(formula, params, v.numel, v.dtype, v.device, v.world)


def _reduce_expected_formula(op: str, world: int, index: Any) -> Any:
    return answers.reduce_expected(op, world, index, maximum=torch.maximum, minimum=torch.minimum)


def _untouched(label: str, elements: torch.Tensor, guard: Any) -> Optional[str]:
    if torch.equal(elements, torch.full_like(elements, guard)):
        return None
    return "%s changed: expected %s, got %s" % (label, [guard] * elements.numel(), elements.tolist()[:20])


def _guarded(v: Variant, count: int = 1) -> Tuple[List[torch.Tensor], Callable[[], Optional[str]]]:
    """``count`` output tensors of ``v.numel`` elements holding GUARD, in the variant's form: separate
    tensors; consecutive views of one buffer that starts one element in and ends three early (an
    implementation that ignores the storage offset, or writes whole buffers, changes those elements);
    transposed 2-D views (dense, not contiguous); or every other element of a buffer twice as long (the
    elements between must stay GUARD)."""
    guard = GUARDS.get(v.dtype, GUARD)
    if v.form == TRANSPOSED:
        rows, cols = coverage.TRANSPOSED_SHAPE
        return [torch.full((cols, rows), guard, dtype=v.dtype, device=v.device).t() for _ in range(count)], lambda: None
    if v.form == STRIDED:
        strided = torch.full((2 * v.numel * count,), guard, dtype=v.dtype, device=v.device)
        views = [strided[2 * v.numel * i : 2 * v.numel * (i + 1) : 2] for i in range(count)]
        return views, lambda: _untouched("the elements between the [::2] slice's", strided[1::2], guard)
    if v.form != VIEW:
        return [torch.full((v.numel,), guard, dtype=v.dtype, device=v.device) for _ in range(count)], lambda: None
    total = v.numel * count
    buffer = torch.full((total + 4,), guard, dtype=v.dtype, device=v.device)
    views = [buffer[1 + i * v.numel : 1 + (i + 1) * v.numel] for i in range(count)]
    return views, lambda: _untouched(
        "the elements around the view (storage offset 1)", torch.cat([buffer[:1], buffer[1 + total :]]), guard
    )


def _placed(data: torch.Tensor, v: Variant) -> Tuple[torch.Tensor, Callable[[], Optional[str]]]:
    """``data`` in the variant's form (a view at offset 1, transposed or strided inside a guarded buffer, or itself:
    a fresh copy already, so the large size is not copied twice)."""
    if v.form in (IN_PLACE, ASYNC):
        return data, lambda: None
    (tensor,), outside = _guarded(v)
    tensor.copy_(data.reshape(tensor.shape))
    return tensor, outside


def _tensors(args: Any) -> List[torch.Tensor]:
    found: List[torch.Tensor] = []
    for arg in args:
        if isinstance(arg, torch.Tensor):
            found.append(arg)
        elif isinstance(arg, (list, tuple)):
            found += _tensors(arg)
    return found


def _refusable(v: Variant, tensors: List[torch.Tensor], call: Callable[[], Any]) -> None:
    """``call()``; on a non-contiguous variant an exception raised before any of ``tensors`` changed is a Refused
    (acceptable when every rank refused), one raised after writing stays what it was (an error)."""
    if v.form not in NON_CONTIGUOUS:
        call()
        return
    before = [t.clone() for t in tensors]
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - judged by what it left behind, never by its words
        if all(torch.equal(before[i], tensors[i]) for i in range(len(tensors))):
            raise Refused(_exception_text(exc)) from exc
        raise


def _call(v: Variant, function: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """Call a collective in the variant's form; the asynchronous one waits on its work handle, and every
    answer is checked only after that wait (where training code may use the data)."""
    _refusable(v, _tensors(args) + _tensors(kwargs.values()), lambda: _plain_call(v, function, *args, **kwargs))


def _plain_call(v: Variant, function: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    if v.form == ASYNC:
        work = function(*args, async_op=True, **kwargs)
        if work is None:
            raise RuntimeError("%s(async_op=True) returned no work handle" % getattr(function, "__name__", "collective"))
        work.wait()
    else:
        function(*args, **kwargs)


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
    """None when ``tensor`` is ``expected`` (exactly; within ``rtol`` for floating dtypes when given). A 2-D
    (transposed) tensor is compared in its logical order against the 1-D answer."""
    if tensor.dim() == 2 and expected.dim() == 1 and tensor.numel() == expected.numel():
        tensor = tensor.reshape(-1)
    if tensor.shape != expected.shape:
        return "%s: expected shape %s, got %s" % (label, tuple(expected.shape), tuple(tensor.shape))
    if torch.equal(tensor, expected) or (rtol and _wrong(tensor, expected, rtol).numel() == 0):
        return None
    return "%s: %s" % (label, _describe(tensor, expected, rtol))


def _first(*problems: Optional[str]) -> Optional[str]:
    return next((p for p in problems if p), None)


# Each operation: a variant -> None when correct, else "what was expected, what was seen".
Operation = Callable[[Variant], Optional[str]]

# AVG may be computed as a sum of inputs pre-multiplied by 1/world (NCCL's ncclAvg on floating types),
# which rounds when the world size is not a power of two: exact only up to the dtype's precision.
AVG_RTOL = {torch.float16: 1e-2, torch.bfloat16: 2e-2, torch.float32: 1e-5, torch.float64: 1e-12}
ROOTED_REDUCE_OPS = ("SUM", "PRODUCT", "MIN", "MAX")


def _bool_reduce_expected_formula(op: str, world: int, index: Any) -> Any:
    return answers.bool_reduce_expected(op, world, index, maximum=torch.maximum, minimum=torch.minimum)


def _reduce_expected(op: str, v: Variant) -> torch.Tensor:
    if v.dtype == torch.bool:
        return _answer(v, _bool_reduce_expected_formula, op, v.world)
    return _answer(v, _reduce_expected_formula, op, v.world)


def _reduce_input(op: str, v: Variant) -> torch.Tensor:
    """A rank's reduce input: answers.reduce_input, or for bool (logical reductions) answers.bool_reduce_input."""
    if v.dtype == torch.bool:
        return _tensor(v, answers.bool_reduce_input, v.rank, v.world)
    return _tensor(v, answers.reduce_input, op, v.rank, v.world)


def _all_reduce(op_name: str) -> Operation:
    def run(v: Variant) -> Optional[str]:
        tensor, outside = _placed(_reduce_input(op_name, v), v)
        _call(v, dist.all_reduce, tensor, op=getattr(dist.ReduceOp, op_name))
        rtol = AVG_RTOL.get(v.dtype, 0.0) if op_name == "AVG" else 0.0
        return _first(_compare("all_reduce(%s)" % op_name, tensor, _reduce_expected(op_name, v), rtol), outside())

    return run


def _broadcast(v: Variant) -> Optional[str]:
    tensor, outside = _placed(_tensor(v, answers.plain_input, v.rank, v.world), v)
    _call(v, dist.broadcast, tensor, src=v.root)
    expected = _answer(v, answers.plain_input, v.root, v.world)
    return _first(_compare("broadcast from rank %d" % v.root, tensor, expected), outside())


def _reduce(v: Variant) -> Optional[str]:
    tensor, outside = _placed(_reduce_input(v.op, v), v)
    _call(v, dist.reduce, tensor, dst=v.root, op=getattr(dist.ReduceOp, v.op))
    if v.rank != v.root:
        return outside()  # the other ranks' buffers are scratch space (documented), but not what lies around them
    return _first(_compare("reduce(%s) to rank %d" % (v.op, v.root), tensor, _reduce_expected(v.op, v)), outside())


def _slots(label: str, outputs: List[torch.Tensor], expected: Callable[[int], torch.Tensor]) -> Optional[str]:
    return _first(*(_compare("%s, slot of rank %d" % (label, source), t, expected(source)) for source, t in enumerate(outputs)))


def _all_gather(v: Variant) -> Optional[str]:
    outputs, outside = _guarded(v, v.world)
    data, data_outside = _placed(_tensor(v, answers.plain_input, v.rank, v.world), v)
    _call(v, dist.all_gather, outputs, data)
    return _first(
        _slots("all_gather", outputs, lambda s: _answer(v, answers.plain_input, s, v.world)),
        outside(),
        data_outside(),
    )


def _all_gather_into_tensor(v: Variant) -> Optional[str]:
    function = dist.all_gather_into_tensor
    (output,), outside = _guarded(v._replace(numel=v.numel * v.world))
    data, data_outside = _placed(_tensor(v, answers.plain_input, v.rank, v.world), v)
    _call(v, function, output, data)
    expected = torch.cat([_answer(v, answers.plain_input, s, v.world) for s in range(v.world)])
    return _first(_compare("all_gather_into_tensor", output, expected), outside(), data_outside())


def _gather(v: Variant) -> Optional[str]:
    outputs, outside = _guarded(v, v.world)
    data, data_outside = _placed(_tensor(v, answers.plain_input, v.rank, v.world), v)
    _call(v, dist.gather, data, gather_list=outputs if v.rank == v.root else None, dst=v.root)
    if v.rank != v.root:
        return data_outside()
    label = "gather to rank %d" % v.root
    return _first(_slots(label, outputs, lambda s: _answer(v, answers.plain_input, s, v.world)), outside())


def _scatter(v: Variant) -> Optional[str]:
    inputs = [_tensor(v, answers.scatter_chunk, d, v.world) for d in range(v.world)]
    (output,), outside = _guarded(v)
    _call(v, dist.scatter, output, scatter_list=inputs if v.rank == v.root else None, src=v.root)
    expected = _answer(v, answers.scatter_chunk, v.rank, v.world)
    return _first(_compare("scatter from rank %d" % v.root, output, expected), outside())


def _reduce_scatter(v: Variant) -> Optional[str]:
    inputs = [_tensor(v, answers.reduce_scatter_chunk, v.rank, v.world, j) for j in range(v.world)]
    (output,), outside = _guarded(v)
    _call(v, dist.reduce_scatter, output, inputs, op=dist.ReduceOp.SUM)
    expected = _answer(v, answers.reduce_scatter_expected, v.rank, v.world)
    return _first(_compare("reduce_scatter(SUM)", output, expected), outside())


def _all_to_all(v: Variant) -> Optional[str]:
    inputs = [_tensor(v, answers.all_to_all_chunk, v.rank, v.world, j) for j in range(v.world)]
    outputs, outside = _guarded(v, v.world)
    _call(v, dist.all_to_all, outputs, inputs)
    label = "all_to_all to rank %d" % v.rank
    sent_by = lambda s: _answer(v, answers.all_to_all_chunk, s, v.world, v.rank)  # noqa: E731
    return _first(_slots(label, outputs, sent_by), outside())


def _send_recv_ring(v: Variant) -> Optional[str]:
    """isend to the right, irecv from the left, both waited on (a blocking ring could deadlock)."""
    right, left = (v.rank + 1) % v.world, (v.rank - 1) % v.world
    (received,), outside = _guarded(v)
    sent, sent_outside = _placed(_tensor(v, answers.plain_input, v.rank, v.world), v)

    def ring() -> None:
        requests = [dist.isend(sent, dst=right), dist.irecv(received, src=left)]
        for request in requests:
            request.wait()

    _refusable(v, [sent, received], ring)
    expected = _answer(v, answers.plain_input, left, v.world)
    return _first(_compare("recv from rank %d" % left, received, expected), outside(), sent_outside())


class Spec(NamedTuple):
    operation: Operation
    rooted: bool = False  # run from every root
    reduce_ops: Tuple[str, ...] = ("SUM",)  # rooted reductions run each of these
    min_world: int = 1


TENSOR_OPERATIONS: List[Tuple[str, Spec]] = [
    ("all_reduce.sum", Spec(_all_reduce("SUM"))),
    ("all_reduce.max", Spec(_all_reduce("MAX"))),
    ("all_reduce.min", Spec(_all_reduce("MIN"))),
    ("all_reduce.product", Spec(_all_reduce("PRODUCT"))),
    ("all_reduce.avg", Spec(_all_reduce("AVG"))),
    ("broadcast", Spec(_broadcast, rooted=True)),
    ("reduce", Spec(_reduce, rooted=True, reduce_ops=ROOTED_REDUCE_OPS)),
    ("all_gather", Spec(_all_gather)),
    ("all_gather_into_tensor", Spec(_all_gather_into_tensor)),
    ("gather", Spec(_gather, rooted=True)),
    ("scatter", Spec(_scatter, rooted=True)),
    ("reduce_scatter", Spec(_reduce_scatter)),
    ("all_to_all", Spec(_all_to_all)),
    ("send_recv_ring", Spec(_send_recv_ring, min_world=2)),
]


def operations_for(backend: str) -> Tuple[Tuple[torch.dtype, ...], List[Tuple[str, Spec]]]:
    """The dtypes and the operations checked with ``backend`` (every backend: distval_suite/support.py says what a
    backend and torch version may lack)."""
    return DTYPES, TENSOR_OPERATIONS


def numel_of(planned: coverage.Planned, large_mib: int) -> int:
    if planned.size == ZERO:
        return 0
    if planned.size == LARGE:
        return large_numel(large_mib)
    if planned.form == TRANSPOSED:
        return coverage.TRANSPOSED_SHAPE[0] * coverage.TRANSPOSED_SHAPE[1]
    return SMALL_NUMEL


def variants(
    part: str, spec: Spec, rank: int, world: int, dtypes: Tuple[torch.dtype, ...], device: torch.device, large_mib: int
) -> List[Variant]:
    """The variants distval_suite/coverage.py plans for ``part`` (one declaration: docs/collectives-coverage.md is
    written from the same rules)."""
    by_name = {_dtype_name(d): d for d in dtypes}
    planned = coverage.plan(part, tuple(by_name), world, spec.rooted, spec.reduce_ops)
    return [Variant(rank, world, numel_of(p, large_mib), by_name[p.dtype], device, p.form, p.root, p.op) for p in planned]


def large_numel(large_mib: int) -> int:
    """The large size's element count, the same in every dtype (distval_suite/coverage.py, LARGE): ``large_mib`` MiB of
    float32, plus answers.MIN_NUMEL (3) elements: an odd count past every power of two below it, whose tail past that
    power holds every residue of the inputs' rotation, so a reduction that stops at the power of two leaves an element
    that is no MIN or MAX (one element more could be one where a rank's input is the answer)."""
    return int(large_mib * 2**20 // coverage.LARGE_ELEMENT_BYTES + answers.MIN_NUMEL)


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


def _exception_text(exc: BaseException) -> str:
    return "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0][:300] if str(exc) else "")


def _classify(exc: BaseException) -> Tuple[str, str]:
    """An exception is an error; numpy missing (the object collectives' documented need) is the image's
    defect, a failure. Never a skip: skips come from distval_suite/support.py's probes only."""
    text = _exception_text(exc)
    if NUMPY_MISSING.search(str(exc)):
        return FAILED, ("numpy is missing from the image: torch's object collectives need it on the receiving ranks (%s)" % text)
    return ERROR, text


def _absent(part: str) -> Optional[str]:
    """An API this torch does not have at all (looked up, not called)."""
    if part == "all_gather_into_tensor" and not hasattr(dist, "all_gather_into_tensor"):
        return "torch.distributed.all_gather_into_tensor does not exist in torch %s" % torch.__version__
    if part == "all_reduce.avg" and not hasattr(dist.ReduceOp, "AVG"):
        return "torch.distributed.ReduceOp.AVG does not exist in torch %s" % torch.__version__
    return None


def _probes(
    ctx: Context, part: str, spec: Spec, dtypes: List[torch.dtype], rank: int, world: int
) -> Dict[torch.dtype, Tuple[str, str]]:
    """Per dtype of ``part``: ("run", "") when this (operation, dtype) must work here or its capability probe passed on
    every rank; ("skip", why) when distval_suite/support.py's version gate says it is absent (no call), or lists it as
    possibly missing and the probe, one call on MIN_NUMEL elements before the real ones, raised on every rank;
    ("error", why) when the ranks disagree.
    The probe's words are reported, never read: any exception in it counts the same. The operation's probes run one
    after the other and the ranks share their outcomes in one exchange through the store, not one per dtype: the same
    calls in the same order, and a store round (publish, then wait for every rank) per operation instead of per probe
    (53 rounds per scenario on torch 1.13 and 2.6, where gloo's table probes 3 to 9 dtypes per operation)."""
    verdicts: Dict[torch.dtype, Tuple[str, str]] = {}
    probed: List[Tuple[torch.dtype, str, str]] = []
    for dtype in dtypes:
        dtype_name = _dtype_name(dtype)
        kind, reason = support(backend_family(ctx.backend), part, dtype_name, torch.__version__, ctx.device.type)
        if kind == MUST:
            verdicts[dtype] = ("run", "")
        elif kind == UNDEFINED:
            verdicts[dtype] = ("undefined", reason)
        elif kind == ABSENT:
            verdicts[dtype] = ("skip", reason)
        else:
            probed.append((dtype, dtype_name, reason))
    if not probed:
        return verdicts
    outcomes: List[Optional[str]] = []
    for dtype, dtype_name, _ in probed:
        ctx.step(part, "capability probe, %s" % dtype_name)
        probe = Variant(rank, world, answers.MIN_NUMEL, dtype, ctx.device, IN_PLACE, world - 1, spec.reduce_ops[0])
        outcome: Optional[str] = None
        try:
            spec.operation(probe)
        except Exception as exc:  # noqa: BLE001 - the probe's result, whatever it raised
            outcome = _exception_text(exc)
        outcomes.append(outcome)
    names = "/".join(dtype_name for _, dtype_name, _ in probed)
    everyone = ctx.exchange("collectives/probe/%s/%s" % (part, names), outcomes)
    for index, (dtype, _, reason) in enumerate(probed):
        verdict, text = probe_verdict({r: list(values)[index] for r, values in enumerate(everyone)})
        verdicts[dtype] = (verdict, "%s; %s" % (reason, text))
    return verdicts


@check("collectives")
def check_collectives(ctx: Context, args: Dict[str, Any]) -> CheckOutcome:
    """Every collective against its known answers, with one intra-op thread: building and comparing the answers is the
    suite's own work, and the ranks share the host's cores (a 2-core host runs 2 to 4 ranks in the default config;
    torchrun sets OMP_NUM_THREADS=1 only for several ranks in one container), so a second thread per rank made every
    parallel copy and comparison wait on a core another rank held: measured on the 2.6 fixture, 2 ranks with 2 threads
    each, the check's CPU time fell from 1.21 s to 0.79 s with one. The collectives themselves run in the backend's
    own threads; the rank's setting is restored after the check."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _check_collectives(ctx, args)
    finally:
        torch.set_num_threads(threads)


def _check_collectives(ctx: Context, args: Dict[str, Any]) -> CheckOutcome:
    ctx.process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    # One rank exchanges nothing: every collective is its identity there, so it would prove nothing.
    require_world(2, world, "collectives (one rank proves nothing for a collective)")
    repeat = int(args.get("repeat", 1))
    large_mib = int(args.get("large_mib", DEFAULT_LARGE_MIB))
    device = ctx.device
    dtypes, operations = operations_for(ctx.backend)

    def run_part(part: str, attempt: Callable[[], Optional[str]], variant: str) -> Tuple[str, str]:
        ctx.step(part, variant)
        try:
            problem = attempt()
        except Exception as exc:  # noqa: BLE001 - an error (or numpy missing): never a skip
            return _classify(exc)
        return (FAILED, problem) if problem else (PASSED, "")

    for part, spec in operations:
        started = time.monotonic()
        failures: List[str] = []
        skipped: List[str] = []
        errors: List[str] = []
        runs = 0
        absent = _absent(part)
        if absent is not None:
            skipped.append("every dtype (%s)" % absent)
            _report(ctx, part, runs, failures, errors, skipped, repeat, time.monotonic() - started)
            continue
        planned = variants(part, spec, rank, world, dtypes, device, large_mib)
        # Every dtype the plan uses is probed (where the table says so) before the real calls.
        verdicts = _probes(ctx, part, spec, [d for d in dtypes if any(v.dtype == d for v in planned)], rank, world)
        for dtype, (verdict, why) in verdicts.items():
            if verdict == "skip":
                skipped.append("%s (%s)" % (_dtype_name(dtype), why))
            elif verdict == "error":
                runs += 1
                errors.append("%s: %s" % (_dtype_name(dtype), why))
        runnable = [v for v in planned if verdicts[v.dtype][0] == "run"]
        for iteration in range(repeat):
            for v in runnable:
                label = v.describe(spec.rooted, len(spec.reduce_ops) > 1)
                status, text = run_part(part, functools.partial(_judged, ctx, spec.operation, v), label)
                runs += 1
                if status == FAILED:
                    failures.append("run %d, %s: %s" % (iteration + 1, label, text))
                elif status == ERROR:
                    errors.append("run %d, %s: %s" % (iteration + 1, label, text))
        _report(ctx, part, runs, failures, errors, skipped, repeat, time.monotonic() - started)

    # Each object collective completes its communication before it unpickles, so a rank that fails
    # (numpy missing on a receiving rank) stays in step with the others for the next call.
    others: List[Tuple[str, Callable[[], Optional[str]]]] = [
        ("barrier", lambda: _barrier(rank, world)),
        ("subgroup", lambda: subgroups.subgroup_problem(rank, world, device, ctx.exchange)),
        ("broadcast_object_list", lambda: _broadcast_object_list(rank, world)),
        ("all_gather_object", lambda: _all_gather_object(rank, world)),
        ("gather_object", lambda: _gather_object(rank, world)),
    ]
    for part, attempt in others:
        started = time.monotonic()
        outcomes = [run_part(part, attempt, "run %d" % (i + 1)) for i in range(repeat)]
        _report_runs(ctx, part, outcomes, repeat, time.monotonic() - started)
    return None


_REFUSALS = itertools.count()


def _judged(ctx: Context, operation: Operation, v: Variant) -> Optional[str]:
    """Run one variant. On a non-contiguous one the ranks compare outcomes: a refusal (distval_suite/coverage.py) on
    every rank is a correct outcome; a refusal on some ranks only is an error."""
    if v.form not in NON_CONTIGUOUS:
        return operation(v)
    refused: Optional[str] = None
    problem: Optional[str] = None
    failure: Optional[BaseException] = None
    try:
        problem = operation(v)
    except Refused as exc:
        refused = str(exc)
    except Exception as exc:  # noqa: BLE001 - reported below, after the ranks agreed on the refusals
        failure = exc
    everyone = ctx.exchange("collectives/refusal/%d" % next(_REFUSALS), refused)
    if failure is not None:
        raise failure
    if refused is None and all(r is None for r in everyone):
        return problem
    verdict, why = probe_verdict(dict(enumerate(everyone)))
    if verdict == "skip":  # every rank refused before writing: the acceptable outcome
        return None
    raise RuntimeError("%s refusal: %s" % (v.form, why))


def _report(
    ctx: Context, part: str, runs: int, failures: List[str], errors: List[str], skipped: List[str], repeat: int, duration_s: float
) -> None:
    details = {
        "runs": runs,
        "failures": failures[:20],
        "errors": errors[:20],
        "skipped": skipped,
        "partial": bool(runs and skipped),
    }
    status, message = summarize_runs(runs, failures, errors, skipped, repeat)
    ctx.report(part, status, message, duration_s, details)


def _report_runs(ctx: Context, part: str, outcomes: List[Tuple[str, str]], repeat: int, duration_s: float) -> None:
    failures = ["run %d: %s" % (i + 1, text) for i, (status, text) in enumerate(outcomes) if status == FAILED]
    errors = ["run %d: %s" % (i + 1, text) for i, (status, text) in enumerate(outcomes) if status == ERROR]
    skipped = [text for status, text in outcomes[:1] if status == SKIPPED]
    runs = len([o for o in outcomes if o[0] != SKIPPED])
    _report(ctx, part, runs, failures, errors, skipped, repeat, duration_s)
