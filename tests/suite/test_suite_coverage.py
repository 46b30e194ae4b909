"""distval_suite/coverage.py: the variants the collectives check runs (torch-free, on the host). Every defect class is
covered by a rule that runs, each rule by a class, and the large size is no longer every operation x form x dtype."""

from __future__ import annotations

import pytest

from distval_suite import coverage
from distval_suite.coverage import DTYPES, LARGE, ONE_DTYPE, SMALL, plan

# The operations of distval_suite/collectives.py's TENSOR_OPERATIONS: (name, rooted, reduce ops).
OPERATIONS = [
    ("all_reduce.sum", False, ("SUM",)),
    ("all_reduce.max", False, ("SUM",)),
    ("all_reduce.min", False, ("SUM",)),
    ("all_reduce.product", False, ("SUM",)),
    ("all_reduce.avg", False, ("SUM",)),
    ("broadcast", True, ("SUM",)),
    ("reduce", True, ("SUM", "PRODUCT", "MIN", "MAX")),
    ("all_gather", False, ("SUM",)),
    ("all_gather_into_tensor", False, ("SUM",)),
    ("gather", True, ("SUM",)),
    ("scatter", True, ("SUM",)),
    ("reduce_scatter", False, ("SUM",)),
    ("all_to_all", False, ("SUM",)),
    ("send_recv_ring", False, ("SUM",)),
]


def test_every_defect_class_names_rules_that_exist_and_every_rule_covers_a_class() -> None:
    names = {rule.name for rule in coverage.RULES}
    named = {name for defect in coverage.DEFECT_CLASSES for name in defect.rules}
    assert named <= names
    assert names <= named


@pytest.mark.parametrize("world", [2, 3, 4])
def test_every_operation_runs_every_dtype_root_and_reduce_op_small_and_the_large_size_once(world: int) -> None:
    for name, rooted, ops in OPERATIONS:
        variants = plan(name, DTYPES, world, rooted, ops)
        small = {(v.dtype, v.root, v.op) for v in variants if v.size == SMALL and v.form == coverage.IN_PLACE}
        dtypes = [d for d in DTYPES if coverage.dtype_applies(name, d)]
        roots = range(world) if rooted else [world - 1]
        assert small == {(d, r, o) for d in dtypes for r in roots for o in ops}, name
        large = [v for v in variants if v.size == LARGE]
        expected = dtypes if name == coverage.EVERY_DTYPE_OPERATION else [ONE_DTYPE]
        assert [v.dtype for v in large] == expected, name
        forms = {v.form for v in variants}
        assert {coverage.VIEW} <= forms, name
        assert coverage.ASYNC in forms or name == "send_recv_ring", name


def test_the_large_size_runs_far_fewer_times_than_the_cartesian_product() -> None:
    """The old check ran every operation at the large size in every dtype (14 x 4 at 16 MiB); now each operation once
    and every dtype once in all_reduce(SUM)."""
    large = [v for name, rooted, ops in OPERATIONS for v in plan(name, DTYPES, 2, rooted, ops) if v.size == LARGE]
    assert len(large) == len(OPERATIONS) - 1 + len(DTYPES)


def test_bool_runs_only_where_its_reduction_means_something() -> None:
    assert [v for v in plan("broadcast", DTYPES, 2, True, ("SUM",)) if v.dtype == "bool"] == []
    assert {v.dtype for v in plan("all_reduce.product", DTYPES, 2, False, ("SUM",))} >= {"bool", "int8", "float16"}
