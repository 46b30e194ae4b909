"""Property tests of the collectives' known answers (distval_suite/answers.py, torch-free): for every world size
2..8, every reduce op, every root and every "one rank's buffer" shortcut, the answer a correct
implementation gives differs from what the broken one gives, and every value is exact in every dtype.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from fractions import Fraction

import pytest

from distval_suite import answers
from distval_suite.answers import (
    BOOL_MEANING,
    MIN_NUMEL,
    REDUCE_OPS,
    all_to_all_chunk,
    bool_reduce_expected,
    bool_reduce_input,
    fold,
    plain_input,
    position,
    reduce_expected,
    reduce_input,
    reduce_scatter_chunk,
    reduce_scatter_expected,
    scatter_chunk,
)

WORLDS = range(2, 9)
NUMELS = (MIN_NUMEL, 5, 8, 1001)
Vector = list[int]


def vector(function: Callable[[int], int], numel: int) -> Vector:
    return [int(function(i)) for i in range(numel)]


def elementwise(op: str, buffers: list[Vector]) -> list[Fraction]:
    """What an implementation that runs ``op`` (maybe the wrong one) on these inputs returns; AVG exactly, as a
    floating dtype computes it (an average that is no integer is no other op's answer)."""
    if op == "AVG":
        return [Fraction(fold("SUM", [b[i] for b in buffers]), len(buffers)) for i in range(len(buffers[0]))]
    return [Fraction(fold(op, [b[i] for b in buffers])) for i in range(len(buffers[0]))]


def inputs(op: str, world: int, numel: int) -> list[Vector]:
    return [vector(lambda i, r=r: reduce_input(op, r, world, i), numel) for r in range(world)]


# Where each dtype holds every integer exactly (its range; a float's significant bits: float16 11, bfloat16 8).
EXACT_RANGE = {
    "int8": (-128, 127),
    "uint8": (0, 255),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "float16": (-(2**11), 2**11),
    "bfloat16": (-(2**8), 2**8),
    "float32": (-(2**24), 2**24),
    "float64": (-(2**53), 2**53),
}


def exact_everywhere(value: Fraction | int) -> bool:
    """Exact in every dtype training reduces, int8 (the narrowest range) and bfloat16 (the fewest significant bits)
    included; non-negative, so no sign question either."""
    integral = not isinstance(value, Fraction) or value.denominator == 1
    return integral and value >= 0 and all(low <= value <= high for low, high in EXACT_RANGE.values())


def wrong_answers(op: str, buffers: list[Vector]) -> dict[str, Vector]:
    """Each plausible broken result: another op on the same inputs, or one rank's buffer."""
    shortcuts = {f"op {other}": elementwise(other, buffers) for other in REDUCE_OPS if other != op}
    shortcuts.update({f"rank {r}'s buffer": b for r, b in enumerate(buffers)})
    return shortcuts


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("numel", NUMELS)
@pytest.mark.parametrize("op", REDUCE_OPS)
def test_every_reduce_op_differs_from_every_other_op_and_every_rank_buffer(op: str, world: int, numel: int) -> None:
    buffers = inputs(op, world, numel)
    expected = vector(lambda i: reduce_expected(op, world, i), numel)
    assert expected == elementwise(op, buffers)
    for name, wrong in wrong_answers(op, buffers).items():
        assert wrong != expected, (op, world, numel, name)
    # Each op's answer also differs from every other op's answer on that op's own inputs.
    for other in REDUCE_OPS:
        if other != op:
            assert vector(lambda i, o=other: reduce_expected(o, world, i), numel) != expected, (op, other, world)


@pytest.mark.parametrize("world", WORLDS)
def test_reduce_to_every_root_differs_from_the_roots_own_buffer(world: int) -> None:
    """dist.reduce that leaves the root's buffer alone (a no-op) is caught at every root."""
    for op, root in itertools.product(REDUCE_OPS, range(world)):
        buffers = inputs(op, world, MIN_NUMEL)
        assert vector(lambda i, o=op: reduce_expected(o, world, i), MIN_NUMEL) != buffers[root], (op, root)


@pytest.mark.parametrize("world", WORLDS)
def test_every_rank_buffer_is_distinct_so_every_root_and_slot_shows(world: int) -> None:
    """broadcast from any root, gather/all_gather slots, send/recv neighbours: a wrong rank's data shows
    at every element (not only somewhere)."""
    buffers = [vector(lambda i, r=r: plain_input(r, world, i), MIN_NUMEL) for r in range(world)]
    for a, b in itertools.combinations(range(world), 2):
        assert all(x != y for x, y in zip(buffers[a], buffers[b], strict=True)), (a, b)
    for r in range(world):
        chunk = vector(lambda i, r=r: scatter_chunk(r, world, i), MIN_NUMEL)
        assert all(chunk != b for b in buffers), ("scatter chunk equals a rank's own buffer", r)
        for other in range(world):
            if other != r:
                assert chunk != vector(lambda i, o=other: scatter_chunk(o, world, i), MIN_NUMEL)


@pytest.mark.parametrize("world", WORLDS)
def test_reduce_scatter_and_all_to_all_chunks_are_distinct(world: int) -> None:
    numel = 5
    chunks = {
        (r, j): vector(lambda i, r=r, j=j: reduce_scatter_chunk(r, world, j, i), numel)
        for r in range(world)
        for j in range(world)
    }
    outputs = [vector(lambda i, r=r: reduce_scatter_expected(r, world, i), numel) for r in range(world)]
    for r in range(world):
        summed = [sum(chunks[(s, r)][i] for s in range(world)) for i in range(numel)]
        assert outputs[r] == summed
        assert all(outputs[r] != chunks[(s, j)] for s in range(world) for j in range(world)), r
        assert all(outputs[r] != outputs[o] for o in range(world) if o != r)
    sent = [vector(lambda i, r=r, j=j: all_to_all_chunk(r, world, j, i), numel) for r in range(world) for j in range(world)]
    assert len({tuple(s) for s in sent}) == world * world


@pytest.mark.parametrize("world", WORLDS)
def test_every_value_and_answer_is_exact_in_every_dtype(world: int) -> None:
    numel = 15  # every residue of index % 3 and % 5
    values: list[Fraction] = []
    floating: list[Fraction] = []  # AVG's: gloo defines AVG on floating dtypes only (distval_suite/support.py)
    for op in REDUCE_OPS:
        into = floating if op == "AVG" else values
        into += [Fraction(v) for b in inputs(op, world, numel) for v in b]
        into += [Fraction(v) for v in vector(lambda i, o=op: reduce_expected(o, world, i), numel)]
        # Every partial result along any order of the ranks (a ring or a tree adds in any order).
        for count in range(2, world + 1):
            into += elementwise(op if op != "AVG" else "SUM", inputs(op, world, numel)[:count])
    for op in BOOL_MEANING:
        values += vector(lambda i, o=op: bool_reduce_expected(o, world, i), numel)
    for r in range(world):
        values += vector(lambda i, r=r: bool_reduce_input(r, world, i), numel)
        values += vector(lambda i, r=r: plain_input(r, world, i), numel)
        values += vector(lambda i, r=r: scatter_chunk(r, world, i), numel)
        values += vector(lambda i, r=r: reduce_scatter_expected(r, world, i), numel)
        for j in range(world):
            values += vector(lambda i, r=r, j=j: all_to_all_chunk(r, world, j, i), numel)
    assert [v for v in values if not exact_everywhere(v)] == []
    low, high = EXACT_RANGE["bfloat16"]  # the floating dtype with the fewest significant bits
    assert [v for v in floating if not (v.denominator == 1 and 0 <= v <= high)] == []
    assert world <= answers.MAX_WORLD_FOR_EXACT


@pytest.mark.parametrize("world", range(3, 9))
def test_the_rank_order_is_a_permutation_that_is_not_monotonic(world: int) -> None:
    order = [position(r, world) for r in range(world)]
    assert sorted(order) == list(range(world))
    assert order != sorted(order) and order != sorted(order, reverse=True)


def test_the_property_check_fails_on_the_old_inputs() -> None:
    """The inputs before this change: PRODUCT used 2 on exactly one rank per element (its answer is
    MAX's), MIN/MAX used rank + 1 + index % 7 (rank 0's buffer is MIN's answer, the last rank's MAX's)."""
    world, numel = 2, 5
    product_inputs = [[2 if i % world == r else 1 for i in range(numel)] for r in range(world)]
    assert elementwise("PRODUCT", product_inputs) == elementwise("MAX", product_inputs)
    rising = [[r + 1 + i % 7 for i in range(numel)] for r in range(world)]
    assert "rank 0's buffer" in [n for n, w in wrong_answers("MIN", rising).items() if w == elementwise("MIN", rising)]
    assert "rank 1's buffer" in [n for n, w in wrong_answers("MAX", rising).items() if w == elementwise("MAX", rising)]


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("numel", NUMELS)
@pytest.mark.parametrize("op", tuple(BOOL_MEANING))
def test_every_bool_reduction_differs_from_the_other_meaning_and_every_rank_buffer(op: str, world: int, numel: int) -> None:
    """torch's bool reductions: SUM and MAX are OR, PRODUCT and MIN are AND. OR is no AND (a noop, or AND where OR
    was asked, shows), and no rank's buffer is either answer; every value is 0 or 1."""
    buffers = [vector(lambda i, r=r: bool_reduce_input(r, world, i), numel) for r in range(world)]
    assert {v for b in buffers for v in b} == {0, 1}
    expected = vector(lambda i: bool_reduce_expected(op, world, i), numel)
    logical_or = [int(any(b[i] for b in buffers)) for i in range(numel)]
    logical_and = [int(all(b[i] for b in buffers)) for i in range(numel)]
    assert expected == (logical_or if op in ("SUM", "MAX") else logical_and)
    other = logical_and if expected == logical_or else logical_or
    assert other != expected, (op, world, numel)
    for r, buffer in enumerate(buffers):
        assert buffer != expected, (op, world, numel, r)


def test_the_old_reduce_inputs_overflow_int8() -> None:
    """The inputs before this change (2 ** ((position + index) % 3)) gave PRODUCT answers past int8's 127 at 8 ranks
    (and all_to_all chunks up to 192): exactness must hold for the narrowest dtype."""
    world = 8
    old = [[2 ** ((position(r, world) + i) % 3) for i in range(15)] for r in range(world)]
    assert max(elementwise("PRODUCT", old)) > EXACT_RANGE["int8"][1]
    assert max(elementwise("PRODUCT", inputs("PRODUCT", world, 15))) <= EXACT_RANGE["int8"][1]


@pytest.mark.parametrize("world", WORLDS)
def test_every_formula_repeats_every_period(world: int) -> None:
    """distval_suite/collectives.py computes one period of each formula and tiles it to the tensor's size."""
    formulas: list[Callable[[int], int]] = []
    for r in range(world):
        formulas += [lambda i, r=r, o=op: reduce_input(o, r, world, i) for op in REDUCE_OPS]
        formulas += [lambda i, r=r: bool_reduce_input(r, world, i), lambda i, r=r: plain_input(r, world, i)]
        formulas += [lambda i, r=r: scatter_chunk(r, world, i), lambda i, r=r: reduce_scatter_expected(r, world, i)]
        for j in range(world):
            formulas += [
                lambda i, r=r, j=j: reduce_scatter_chunk(r, world, j, i),
                lambda i, r=r, j=j: all_to_all_chunk(r, world, j, i),
            ]
    formulas += [lambda i, o=op: reduce_expected(o, world, i) for op in REDUCE_OPS]
    formulas += [lambda i, o=op: bool_reduce_expected(o, world, i) for op in BOOL_MEANING]
    length = answers.period(world)
    for formula in formulas:
        assert vector(formula, length) == [formula(i + length) for i in range(length)]
