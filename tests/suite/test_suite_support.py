"""distval_suite/support.py: a skip comes only from the version table and a capability probe's result, never
from an error's words (torch-free, on the host)."""

from __future__ import annotations

import ast

from distval_suite.support import ABSENT, MUST, PROBE, UNDEFINED, probe_verdict, support
from tests.paths import ROOT


def test_operations_every_torch_has_are_never_probed() -> None:
    """No probe: an exception in them is an error, whatever it says."""
    for version in ("1.13.1", "2.6.0", "2.15.0+cu130"):
        for operation in ("all_reduce.sum", "broadcast", "reduce", "gather", "scatter", "all_gather"):
            for dtype in ("float32", "float64", "int64"):
                assert support("gloo", operation, dtype, version) == (MUST, ""), (version, operation, dtype)


def test_what_older_torch_may_lack_is_probed_or_gated_and_newer_torch_must_have() -> None:
    kind, reason = support("gloo", "reduce_scatter", "float32", "2.6.0")
    assert kind == PROBE and "gloo's reduce_scatter may be missing in torch 2.6.0" in reason
    assert support("gloo", "reduce_scatter", "float32", "2.15.0+cu130") == (MUST, "")
    kind, reason = support("gloo", "all_reduce.avg", "float32", "2.6.0")
    assert kind == ABSENT and "missing before torch 2.8" in reason and "version gate" in reason
    assert support("gloo", "all_reduce.avg", "float32", "2.8.0") == (MUST, "")
    assert support("gloo", "all_reduce.avg", "int64", "2.15.0")[0] == UNDEFINED
    assert support("gloo", "all_reduce.sum", "bfloat16", "1.13.1")[0] == PROBE
    assert support("gloo", "all_reduce.sum", "bfloat16", "2.15.0")[0] == MUST
    assert support("nccl", "reduce_scatter", "float16", "2.6.0")[0] == MUST


def test_the_probe_verdict_skips_only_when_every_rank_raised() -> None:
    assert probe_verdict({0: None, 1: None}) == ("run", "")
    verdict, why = probe_verdict({0: "RuntimeError: anything at all", 1: "ValueError: other words"})
    assert verdict == "skip" and "rank 0: RuntimeError: anything at all" in why
    verdict, why = probe_verdict({0: None, 1: "RuntimeError: not supported"})
    assert verdict == "error" and "raised on rank(s) [1] but not on [0]" in why


def test_no_suite_module_turns_an_error_into_a_skip_by_its_words() -> None:
    """The old UNSUPPORTED regexes (distval_suite/collectives.py, distval_suite/bandwidth.py) are gone: no module matches
    "not supported"-like words, and the only skip sources are Skip, the support table and probes."""
    for path in sorted((ROOT / "distval_suite").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        assert "UNSUPPORTED" not in names, path
        words = [
            n.value
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and "not supported|" in n.value
        ]
        assert words == [], path


def test_gloo_send_and_recv_on_cuda_tensors_are_declared_absent_on_every_torch() -> None:
    """Measured on an H200 (torch 2.11): gloo's send on a CUDA tensor failed with EFAULT and broke the pair for every
    later collective, so it is skipped without a call; on the CPU it must work."""
    kind, why = support("gloo", "send_recv_ring", "float32", "2.15.0", "cuda")
    assert kind == ABSENT and "CPU tensors only" in why
    assert support("gloo", "send_recv_ring", "float32", "2.15.0", "cpu") == (MUST, "")
    assert support("nccl", "send_recv_ring", "float32", "2.15.0", "cuda") == (MUST, "")


def test_the_dtypes_training_reduces_are_gated_where_an_old_gloo_lacks_them() -> None:
    """bool: Debian's 1.13 gloo raises "Invalid scalar type" (probed, skipped there; 2.6 and 2.15 reduce it); int8,
    uint8 and int32 work on every torch measured, so a wrong value or an exception there is never a skip."""
    kind, why = support("gloo", "all_reduce.sum", "bool", "1.13.1")
    assert kind == PROBE and "gloo's bool support" in why
    assert support("gloo", "all_reduce.sum", "bool", "2.15.0") == (MUST, "")
    for dtype in ("int8", "uint8", "int32"):
        assert support("gloo", "all_reduce.product", dtype, "1.13.1") == (MUST, ""), dtype
        assert support("gloo", "all_reduce.avg", dtype, "2.15.0")[0] == UNDEFINED, dtype
    assert support("gloo", "all_reduce.avg", "bool", "2.15.0")[0] == UNDEFINED
    assert support("gloo", "all_reduce.avg", "float16", "2.15.0") == (MUST, "")
