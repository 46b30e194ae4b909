"""The collectives' inputs and known answers, as formulas of (rank, world size, element index).

Standard library only: tests/suite/test_suite_answers.py evaluates them over Python ints and proves, for every
world size 2..8, that each operation's answer differs from every other operation's and from every single
rank's buffer. distval_suite/collectives.py evaluates the same formulas with ``index`` an int64 tensor (every
formula uses only ``+ - * // % ==`` so that both work), so what runs is what was proved.

Why these values:
- a rank's values depend on its *position*, a permutation of the ranks that is not monotonic in the rank
  (and starts at 1 for rank 0), so "return rank 0's / the last rank's buffer" is no MIN or MAX;
- reduce inputs are 1 or 2, rotating with the element index (2 where (position + index) % 3 is not 0): at
  every world size some element has two values above 1, so PRODUCT is no MAX and SUM no PRODUCT, and which
  rank holds the largest value changes from element to element; at most two thirds of the ranks (6 of 8)
  hold a 2 at any element, so PRODUCT stays at most 64;
- every value and every answer is an integer exact in every dtype training reduces: int8 (at most 127),
  uint8, int32, int64, float16 (11 significant bits), bfloat16 (8: integers up to 256) and the wider
  floats, so answers are compared exactly, with no overflow or wrap-around;
- bool reductions are logical (torch's definition: SUM and MAX are OR, PRODUCT and MIN are AND): their
  inputs are the reduce inputs minus 1 (False where (position + index) % 3 is 0), so at every world size
  OR is no AND and no single rank's buffer is either.
"""

from __future__ import annotations

import math
from typing import Any, Callable, List

REDUCE_OPS = ("SUM", "PRODUCT", "MIN", "MAX", "AVG")
# Fewer elements cannot tell every operation apart at every world size (the property test finds 3).
MIN_NUMEL = 3


def period(world: int) -> int:
    """Every formula depends on the element index only through index % 2, % 3, % 5 and % world: it repeats every
    lcm(30, world) elements (a host test proves it), so the suite computes one period and tiles it."""
    return 30 * world // math.gcd(30, world)


MAX_WORLD_FOR_EXACT = 8  # the values stay exact in int8 and bfloat16 up to this world size (see tests)
# What a bool reduction computes (torch's definition): OR for SUM and MAX, AND for PRODUCT and MIN, which over
# 0/1 values are MAX and MIN.
BOOL_MEANING = {"SUM": "MAX", "MAX": "MAX", "PRODUCT": "MIN", "MIN": "MIN"}


def position(rank: int, world: int) -> int:
    """Where ``rank`` stands in the inputs' order: (rank * step + 1) % world, with step the smallest
    integer above 1 coprime to the world size, a permutation that is not monotonic from 3 ranks on."""
    step = next(k for k in range(2, 2 * world + 3) if math.gcd(k, world) == 1)
    return (rank * step + 1) % world


def reduce_input(op: str, rank: int, world: int, index: Any) -> Any:
    """1 + ((position + index) % 3 + 1) // 2: 1 where (position + index) % 3 is 0, else 2; for AVG world
    times that plus 3, so that the average is an integer (SUM's answer plus 3: AVG's answer is no other
    op's either)."""
    value = 1 + ((position(rank, world) + index) % 3 + 1) // 2
    return value * world + 3 if op == "AVG" else value


def fold(op: str, values: List[Any], maximum: Callable[[Any, Any], Any] = max, minimum: Callable[[Any, Any], Any] = min) -> Any:
    """``op`` over the ranks' values (ints, or tensors with torch.maximum/torch.minimum passed in)."""
    result = values[0]
    for value in values[1:]:
        if op in ("SUM", "AVG"):
            result = result + value
        elif op == "PRODUCT":
            result = result * value
        elif op == "MAX":
            result = maximum(result, value)
        elif op == "MIN":
            result = minimum(result, value)
        else:
            raise ValueError("unknown reduce op %r" % op)
    return result // len(values) if op == "AVG" else result


def reduce_expected(op: str, world: int, index: Any, **functions: Callable[[Any, Any], Any]) -> Any:
    return fold(op, [reduce_input(op, r, world, index) for r in range(world)], **functions)


def bool_reduce_input(rank: int, world: int, index: Any) -> Any:
    """A rank's bool reduce input as 0/1: the reduce input minus 1 (0 where (position + index) % 3 is 0)."""
    return reduce_input("SUM", rank, world, index) - 1


def bool_reduce_expected(op: str, world: int, index: Any, **functions: Callable[[Any, Any], Any]) -> Any:
    """The answer of a bool reduction as 0/1: OR (MAX) for SUM and MAX, AND (MIN) for PRODUCT and MIN."""
    return fold(BOOL_MEANING[op], [bool_reduce_input(r, world, index) for r in range(world)], **functions)


def plain_input(rank: int, world: int, index: Any) -> Any:
    """A rank's buffer for broadcast, gather, all_gather and send/recv: distinct from every other rank's
    at every element (1 + position), changing with the element (world * (index % 5)); at most 40."""
    return 1 + position(rank, world) + world * (index % 5)


def scatter_chunk(destination: int, world: int, index: Any) -> Any:
    """What the root scatters to ``destination``: that rank's plain buffer plus 5 * world, so it differs
    from what the destination held before and from every other rank's chunk."""
    return plain_input(destination, world, index) + 5 * world


def reduce_scatter_chunk(rank: int, world: int, chunk: int, index: Any) -> Any:
    """Chunk ``chunk`` of ``rank``'s reduce_scatter input: 1 + index % 3, plus chunk + 1 on the one rank
    whose (position + chunk + index) % world is 0; the SUM of chunk j is world * (1 + index % 3) + j + 1."""
    return 1 + index % 3 + (chunk + 1) * ((position(rank, world) + chunk + index) % world == 0)


def reduce_scatter_expected(rank: int, world: int, index: Any) -> Any:
    """Rank ``rank``'s output of reduce_scatter(SUM): the sum of every rank's chunk ``rank``."""
    return world * (1 + index % 3) + rank + 1


def all_to_all_chunk(rank: int, world: int, chunk: int, index: Any) -> Any:
    """What ``rank`` sends to rank ``chunk``: unique per (sender, receiver) at every element, changing with the
    element (every other element world * world - 1 more); at most 127 (int8) up to 8 ranks."""
    return 1 + position(rank, world) * world + chunk + (index % 2) * (world * world - 1)
