"""What the ``collectives`` check covers, and with which variants: a coverage model instead of a Cartesian product.

Standard library only (the host reads it too: distval/checks/coverage_reference.py writes docs/collectives-coverage.md
from it, and tests/checks/test_catalog.py keeps the catalog's ``probed_dtypes`` equal to DTYPES). distval_suite/collectives.py
runs exactly the variants ``plan`` returns, so what the page says is what runs.

Each defect class names the smallest input that shows it. A dimension is crossed only with the dimensions a defect can
tie it to: a dtype-specific path needs every dtype in every operation, reduce op and root, but only at the small size;
an ignored async handle, storage offset or stride does not depend on the size, the dtype or the root, so one small
float32 call per operation shows it (the storage offset also in every dtype in one operation: an offset counted in
bytes of the wrong element size is dtype-specific); a size defect (gloo's segments, 2**20 elements, a chunking switch)
needs the large size once per operation and every dtype once in one operation, not every operation x form x dtype at
16 MiB (that product cost about 8 s of the check's 8.5, for nothing the model does not show). The large size is an
element count, the same in every dtype (LARGE below says why).
"""

from __future__ import annotations

from typing import List, NamedTuple, Tuple

# Every dtype training reduces, in the order the check runs them (float32 first: its failure is the one a part reports
# first). bool only where its reduction has a meaning of its own (BOOL_OPERATIONS).
DTYPES = ("float32", "float64", "int64", "bfloat16", "float16", "int32", "int8", "uint8", "bool")
ONE_DTYPE = "float32"  # the dtype of the variants whose defect class does not depend on it
EVERY_DTYPE_OPERATION = "all_reduce.sum"  # the operation that runs the view and the large size in every dtype
# torch defines a bool reduction as logical: SUM and MAX are OR, PRODUCT and MIN are AND (gloo's sum/product on bool
# operands, NCCL maps SUM to MAX and PRODUCT to MIN); AVG is not defined. The data movers (broadcast, gather, ...) move a
# bool as the byte they move for uint8 and int8, which every movement operation runs.
BOOL_OPERATIONS = ("all_reduce.sum", "all_reduce.max", "all_reduce.min", "all_reduce.product", "reduce")

SMALL_NUMEL = 7  # odd, and at least answers.MIN_NUMEL
TRANSPOSED_SHAPE = (3, 5)  # a 5x3 buffer seen through .t(): 15 elements, odd, dense but not contiguous
# Sizes: SMALL elements, the large size, or none at all. The large size is an element count, the same in every dtype:
# large_mib MiB of float32 (LARGE_ELEMENT_BYTES) plus three elements, odd; at the default 16 MiB 2**22 + 3 elements.
# The boundaries a large tensor must cross are counted in elements: 2**20 (where implementations switch algorithms)
# and 2**22 (broken:allreduce-large-truncated reduces only the first 2**22 elements, which 4 MiB of float32 missed).
# The same count crosses them in every dtype; sized in bytes instead (large_mib MiB of each dtype), float64 and int64
# stopped at 2**21 elements and never crossed 2**22, while int8, uint8 and bool ran 2**24 elements, four times the
# count any boundary needs, and float16 and bfloat16 twice it (the time of elements, for no boundary more). In bytes
# the count is still at least 4 MiB in every dtype (8 MiB in half precision, 32 MiB in 8-byte dtypes): past gloo's
# 1 MiB segments in every dtype at every world size of the default config (a 1 MiB chunk per rank at 4 ranks).
SMALL, LARGE, ZERO = "small", "large", "zero"
LARGE_ELEMENT_BYTES = 4  # the large size counts large_mib MiB in elements of this size (float32's)
# Forms (how the tensor is laid out and the call made).
IN_PLACE, ASYNC, VIEW = "in place", "async", "view at offset 1"
TRANSPOSED, STRIDED = "transposed", "strided [::2]"
NON_CONTIGUOUS = (TRANSPOSED, STRIDED)
EVERY, ONE = "every", "one"  # every root / reduce op / dtype, or one (the last rank, the first op, ONE_DTYPE)
ALL_OPERATIONS: Tuple[str, ...] = ()  # a rule for every operation

# The refusal-or-correct judgement for non-contiguous tensors. torch's gloo takes a dense non-contiguous tensor (a
# transposed 2-D one) and reduces its memory in place, so every rank's element i meets the other ranks' element i:
# the result must be right. A strided slice ([::2], not dense) is refused by gloo's send/recv ("input tensor has to be
# contiguous") and gathered correctly by all_gather (measured: torch 1.13, 2.6). Either is acceptable: a correct
# result, or an exception on every rank before anything was written (the tensor and the elements around it untouched).
# Silently unchanged or wrong is a failure.
# Not covered, on purpose:
# - strided slices in all_reduce, broadcast, reduce and scatter: gloo in every torch measured (1.13, 2.6) reduces or
#   writes the first N elements of the storage from the data pointer, ignoring the stride (pytorch#192920, open;
#   pytorch#24836 since 2019): no image could pass, and training's buckets are contiguous.
# - expanded (stride 0) tensors where an operation writes: gloo writes numel elements past the one-element storage.
# - zero-element all_gather: torch 1.13's gloo kills the rank with SIGFPE (measured); all_reduce and broadcast, which
#   take empty tensors on every torch measured, cover the class.
UNCOVERED = (
    (
        "strided slices written by all_reduce, broadcast, reduce, scatter",
        "every gloo measured (torch 1.13, 2.6) ignores the stride and writes the first elements of the storage "
        "(pytorch#192920): no image could pass",
    ),
    (
        "expanded (stride 0) tensors an operation writes",
        "gloo writes numel elements from the data pointer, past the tensor's one-element storage: memory corruption "
        "in the rank, not a verdict",
    ),
    (
        "zero-element all_gather",
        "torch 1.13's gloo kills the rank with SIGFPE (measured); all_reduce and broadcast cover empty tensors",
    ),
)


class Rule(NamedTuple):
    """A set of variants: ``form`` at ``size`` for ``operations`` (ALL_OPERATIONS: every one), in every dtype or ONE_DTYPE,
    from every root or the last rank, with every reduce op or the first."""

    name: str
    form: str
    size: str
    dtypes: str
    roots: str
    reduce_ops: str
    operations: Tuple[str, ...]
    excluded: Tuple[str, ...] = ()


RULES: Tuple[Rule, ...] = (
    Rule("every dtype", IN_PLACE, SMALL, EVERY, EVERY, EVERY, ALL_OPERATIONS),
    # send/recv is isend/irecv waited on in every form: its async form is the in-place one.
    Rule("async", ASYNC, SMALL, ONE, ONE, ONE, ALL_OPERATIONS, excluded=("send_recv_ring",)),
    Rule("view", VIEW, SMALL, ONE, ONE, ONE, ALL_OPERATIONS, excluded=(EVERY_DTYPE_OPERATION,)),
    Rule("view, every dtype", VIEW, SMALL, EVERY, ONE, ONE, (EVERY_DTYPE_OPERATION,)),
    Rule(
        "transposed",
        TRANSPOSED,
        SMALL,
        ONE,
        ONE,
        ONE,
        (
            "all_reduce.sum",
            "all_reduce.max",
            "all_reduce.min",
            "all_reduce.product",
            "all_reduce.avg",
            "broadcast",
            "reduce",
            "all_gather",
        ),
    ),
    Rule("strided", STRIDED, SMALL, ONE, ONE, ONE, ("all_gather", "send_recv_ring")),
    Rule("zero elements", IN_PLACE, ZERO, ONE, ONE, ONE, ("all_reduce.sum", "broadcast")),
    Rule("large, every dtype", IN_PLACE, LARGE, EVERY, ONE, ONE, (EVERY_DTYPE_OPERATION,)),
    Rule("large", IN_PLACE, LARGE, ONE, ONE, ONE, ALL_OPERATIONS, excluded=(EVERY_DTYPE_OPERATION,)),
)


class DefectClass(NamedTuple):
    name: str
    smallest: str  # the smallest input that shows it
    rules: Tuple[str, ...]  # the RULES that cover it ("" : covered elsewhere, said in ``smallest``)


DEFECT_CLASSES: Tuple[DefectClass, ...] = (
    DefectClass(
        "wrong op mapping (PRODUCT as MAX, MIN/MAX as one rank's buffer, ...)",
        "7 elements whose answer no other op and no single rank's buffer gives (distval_suite/answers.py), each reduce op",
        ("every dtype",),
    ),
    DefectClass("root ignored", "7 elements from every root, every rank's buffer distinct at every element", ("every dtype",)),
    DefectClass(
        "dtype-specific paths (a dtype mapped to another, half or narrow integers reduced wrong, bool semantics)",
        "7 elements in every dtype, every operation, reduce op and root; values exact in the dtype",
        ("every dtype",),
    ),
    DefectClass(
        "async completion (wait() before the data)", "7 float32 elements, async_op=True, checked after wait()", ("async",)
    ),
    DefectClass(
        "storage offset ignored",
        "7 elements at storage offset 1 in a guarded buffer, float32 in every operation and every dtype in all_reduce(SUM)",
        ("view", "view, every dtype"),
    ),
    DefectClass(
        "stride ignored (a non-contiguous tensor reduced from the wrong elements, or a copy reduced and the tensor left "
        "unchanged)",
        "a transposed 3x5 float32 tensor; a [::2] slice where gloo handles strides; correct or refused on every rank",
        ("transposed", "strided"),
    ),
    DefectClass("zero-element tensors", "0 float32 elements: no error, nothing written", ("zero elements",)),
    DefectClass(
        "odd sizes (a remainder dropped by chunking)", "7 elements (small), 15 (transposed), 2**k + 3 (large)", ("every dtype",)
    ),
    DefectClass(
        "large tensors (past gloo's 1 MiB segments and 2**20 elements, a chunking switch)",
        "large_mib MiB of float32 + 3 elements (2**22 + 3 at 16 MiB), the same element count in every dtype (at least "
        "4 MiB): every dtype in all_reduce(SUM), float32 in every other operation",
        ("large, every dtype", "large"),
    ),
    DefectClass(
        "world-size-dependent algorithms",
        "not a variant: the scenarios' world sizes (configs/default.yaml) run the whole check at each",
        (),
    ),
)


class Planned(NamedTuple):
    dtype: str
    form: str
    size: str
    root: int
    op: str


def dtype_applies(operation: str, dtype: str) -> bool:
    """bool runs only in the reductions with a bool meaning (BOOL_OPERATIONS); every other dtype everywhere."""
    return dtype != "bool" or operation in BOOL_OPERATIONS


def rule_applies(rule: Rule, operation: str) -> bool:
    return (not rule.operations or operation in rule.operations) and operation not in rule.excluded


def plan(operation: str, dtypes: Tuple[str, ...], world: int, rooted: bool, reduce_ops: Tuple[str, ...]) -> List[Planned]:
    """Every variant of ``operation`` the RULES declare, in rule order, for the ``dtypes`` this backend runs."""
    variants: List[Planned] = []
    for rule in RULES:
        if not rule_applies(rule, operation):
            continue
        chosen = [d for d in dtypes if dtype_applies(operation, d)] if rule.dtypes == EVERY else [ONE_DTYPE]
        roots = list(range(world)) if rooted and rule.roots == EVERY else [world - 1]
        ops = list(reduce_ops) if rule.reduce_ops == EVERY else [reduce_ops[0]]
        variants += [Planned(d, rule.form, rule.size, r, o) for d in chosen for r in roots for o in ops]
    return variants
