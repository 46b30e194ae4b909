"""The suite's checks against a real torch, without Docker: each known answer, call form and tolerance of
distval_suite/ can fail, so a change to the suite that weakens one fails a quick test.

distval_suite/ imports torch, so before this module only the Docker tests ran its checks, and a mutation pass
found most changes to them surviving every quick test. Here the checks run as in any run: ``distval run --local``
(the suite's real entry point, one process per rank, 2 ranks, gloo on 127.0.0.1) on Debian's ``python3-torch``
1.13.1 (the oldest torch the suite supports: ``apt-get install python3-torch``, about 200 MB, no GPU
libraries; PyPI's Linux torch is the CUDA build, 3 GB, which tests/host_venv.py builds for the slower ``host``
tests). The scenarios use the ``env`` rendezvous (no launcher): torch 1.13's torchrun fails on Python 3.11
(CONTRIBUTING, "What the stock Debian images taught us").

The image's implementation is injected as the broken fixture images inject theirs, a sitecustomize.py on
PYTHONPATH (tests/data/suite_implementations/sitecustomize.py runs the files a scenario names): the fixtures'
own files (distval/images/files/), so a defect has one definition here and in Docker, and, as test data,
implementations a guard needs that are no fixture: a correct one that a weakened suite fails (async results that
land only at wait()) and ones just outside the float tolerances (20 % off: a tolerance widened to 50 % passes
them). Every assertion is on a testcase's status and a fragment of its message, never on the suite's internals.

The interpreter: $DISTVAL_SUITE_TORCH_PYTHON, else /usr/bin/python3 when it has torch. Without one the tests are
skipped with the reason, and fail on CI (.ci/run installs python3-torch): a missing torch must not silently turn
these guards off. All scenarios run in one ``distval run`` (two at a time on 2 cores): 24 s at a load of 8
(docs/measurements.md); the time limits only bound a hang.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.paths import DATA, ROOT
from tests.runner_environment import IN_CI

TORCH_PYTHON_ENV = "DISTVAL_SUITE_TORCH_PYTHON"
DEBIAN_PYTHON = "/usr/bin/python3"
IMPLEMENTATIONS = DATA / "suite_implementations"
FIXTURE_FILES = ROOT / "distval" / "images" / "files"
# The variable the loader reads (not DISTVAL_*: the config refuses those as the harness's own).
IMPLEMENTATION_ENV = "SUITE_IMPLEMENTATION"
# Small tensors only: the large size is covered by the Docker tests (allreduce-large-truncated); here it costs time.
COLLECTIVES = "{name: collectives, args: {large_mib: 1}}"
# Deadlines that only bound a hang (a scenario takes about 13 s at a load of 8). The run's own limit outlasts every
# scenario's deadline one after another, so that distval's deadline, which says where a rank hung, comes first.
SCENARIO_DEADLINE_S, CHECK_TIMEOUT_S = 240, 180
RED = ("failed", "error")


@dataclass(frozen=True)
class Scenario:
    name: str
    files: tuple[Path, ...]  # the image's implementation, run in this order at interpreter start
    checks: str  # the YAML list of checks


SCENARIOS = (
    Scenario("plain", (), f"[{COLLECTIVES}, ddp_sync]"),
    # Two defects of separate operations (PRODUCT; MIN and MAX): each part fails for its own defect only.
    Scenario(
        "product-minmax",
        (FIXTURE_FILES / "product_is_max.py", FIXTURE_FILES / "minmax_one_rank.py"),
        f"[{COLLECTIVES}]",
    ),
    Scenario("view-offset", (FIXTURE_FILES / "view_offset_ignored.py",), f"[{COLLECTIVES}]"),
    Scenario("async-ignored", (FIXTURE_FILES / "async_work_ignored.py",), f"[{COLLECTIVES}]"),
    Scenario("async-lazy", (IMPLEMENTATIONS / "lazy_async_work.py",), f"[{COLLECTIVES}]"),
    # AVG (collectives) and DDP's averaging (ddp_sync) touch different calls: one scenario for both tolerances.
    Scenario(
        "a-fifth-off",
        (IMPLEMENTATIONS / "avg_off_by_a_fifth.py", IMPLEMENTATIONS / "ddp_gradient_off_by_a_fifth.py"),
        f"[{COLLECTIVES}, ddp_sync]",
    ),
)


def torch_python() -> str | None:
    """The interpreter whose torch the ranks use, or None. Asked without importing torch (seconds): a torch
    that is there but broken fails the run itself, loudly."""
    chosen = os.environ.get(TORCH_PYTHON_ENV)
    if chosen:
        return chosen  # named on purpose: no torch there is the run's failure, not a skip
    if not Path(DEBIAN_PYTHON).exists():
        return None
    found = subprocess.run(
        [DEBIAN_PYTHON, "-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    return DEBIAN_PYTHON if found.returncode == 0 else None


def config_text() -> str:
    lines = [f"timeout_s: {SCENARIO_DEADLINE_S}", f"check_timeout_s: {CHECK_TIMEOUT_S}", "scenarios:"]
    for s in SCENARIOS:
        env = f", env: {{{IMPLEMENTATION_ENV}: {json.dumps(os.pathsep.join(map(str, s.files)))}}}" if s.files else ""
        lines.append(
            f"  - {{name: {s.name}, topology: cross-container, rendezvous: env, nodes: 2, nproc_per_node: 1,"
            f" world_size: 2{env}, checks: {s.checks}}}"
        )
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Verdicts:
    cases: dict[str, dict[str, tuple[str, str]]]  # scenario -> testcase -> (status, message)
    logs: dict[str, str]


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory: pytest.TempPathFactory) -> Verdicts:
    python = torch_python()
    if python is None:
        reason = f"no torch for the suite's checks: apt-get install python3-torch, or set ${TORCH_PYTHON_ENV}"
        if IN_CI:
            pytest.fail(f"{reason} (.ci/run installs it; on CI these guards must run)", pytrace=False)
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp("suite-on-torch")
    (tmp / "config.yaml").write_text(config_text())
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(IMPLEMENTATIONS), os.environ.get("PYTHONPATH"))))
    done = subprocess.run(
        [sys.executable, "-m", "distval", "run", "--local", "--python", python, str(tmp / "config.yaml")]
        + ["--json", str(tmp / "report.json"), "--quiet"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=SCENARIO_DEADLINE_S * len(SCENARIOS) + 300,
        check=False,
    )
    # 0 or 1 (some check failed, as the defects must make them); anything else is the run's own trouble.
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp / "report.json").read_text())
    cases = {s["name"]: {c["name"]: (c["status"], c["message"]) for c in s["cases"]} for s in report["scenarios"]}
    assert set(cases) == {s.name for s in SCENARIOS}, done.stdout[-3000:]
    logs = {s["name"]: s.get("logs") or "" for s in report["scenarios"]}
    for s in SCENARIOS:  # what each scenario meant to run did run, on both ranks
        for file in s.files:
            assert logs[s.name].count(f"suite implementation loaded: {file.name}") == 2, (s.name, logs[s.name][-3000:])
    return Verdicts(cases, logs)


def assert_correct(found: dict[str, tuple[str, str]], name: str) -> None:
    """The part ran and every run was right (skipped beside right runs: a dtype this gloo lacks)."""
    status, message = found[name]
    assert status in ("passed", "skipped") and "correct" in message, (name, status, message)


def assert_caught(found: dict[str, tuple[str, str]], name: str, *fragments: str) -> None:
    status, message = found[name]
    assert status == "failed", (name, status, message)
    for fragment in fragments:
        assert fragment in message, (name, fragment, message)


ALL_REDUCE_PARTS = ("all_reduce.sum", "all_reduce.max", "all_reduce.min", "all_reduce.product")
# The parts gloo runs on torch 1.13 (all_gather_into_tensor, reduce_scatter and all_to_all it lacks).
RUNNING_PARTS = (*ALL_REDUCE_PARTS, "broadcast", "reduce", "all_gather", "gather", "scatter", "send_recv_ring")


def test_a_correct_torch_passes_every_known_answer(verdicts: Verdicts) -> None:
    """The answers themselves: a suite expecting another operation's answer, or one rank's buffer, fails here."""
    found = verdicts.cases["plain"]
    assert not {name for name, (status, _) in found.items() if status in RED}, found
    for part in RUNNING_PARTS:
        assert_correct(found, f"collectives.{part}")
    assert found["ddp_sync"][0] == "passed", found["ddp_sync"]


def test_product_computed_as_max_is_caught(verdicts: Verdicts) -> None:
    found = verdicts.cases["product-minmax"]
    assert_caught(found, "collectives.all_reduce.product", "all_reduce(PRODUCT): element")
    assert_caught(found, "collectives.reduce", "reduce(PRODUCT) to rank")
    assert_correct(found, "collectives.all_reduce.sum")


def test_min_and_max_from_one_ranks_buffer_are_caught(verdicts: Verdicts) -> None:
    found = verdicts.cases["product-minmax"]
    assert_caught(found, "collectives.all_reduce.min", "all_reduce(MIN): element")
    assert_caught(found, "collectives.all_reduce.max", "all_reduce(MAX): element")


def test_a_view_reduced_from_its_base_is_caught(verdicts: Verdicts) -> None:
    """Only the view form can see it: a suite that stopped calling on a view at an offset passes this image."""
    found = verdicts.cases["view-offset"]
    assert_caught(found, "collectives.all_reduce.sum", "view at offset 1", "all_reduce(SUM): element")
    assert_caught(found, "collectives.broadcast", "view at offset 1, root ")
    for part in ("all_gather", "gather", "scatter"):
        assert_correct(found, f"collectives.{part}")


def test_async_work_that_never_ran_is_caught(verdicts: Verdicts) -> None:
    """Only the async form can see it: a suite that stopped calling with async_op=True passes this image."""
    found = verdicts.cases["async-ignored"]
    assert_caught(found, "collectives.all_reduce.sum", "async: all_reduce(SUM): element")
    assert_caught(found, "collectives.broadcast", "async, root ")
    assert_caught(found, "collectives.all_gather", "async: all_gather, slot of rank")
    for part in ("gather", "scatter", "reduce"):
        assert_correct(found, f"collectives.{part}")


def test_async_results_are_read_after_wait(verdicts: Verdicts) -> None:
    """A correct torch whose async results land at wait(): a suite that reads them before waiting fails it."""
    found = verdicts.cases["async-lazy"]
    assert not {name for name, (status, _) in found.items() if status in RED}, found
    for part in RUNNING_PARTS:
        assert_correct(found, f"collectives.{part}")


def test_results_a_fifth_off_are_outside_the_float_tolerances(verdicts: Verdicts) -> None:
    """AVG and DDP's averaged gradients are compared within a tolerance (rounding): 20 % off must fail both."""
    found = verdicts.cases["a-fifth-off"]
    assert_caught(found, "collectives.all_reduce.avg", "all_reduce(AVG): element", "relative tolerance")
    assert_caught(found, "ddp_sync", "expected the parameters of one SGD step on the gradient averaged over all 2 ranks' batches")
    assert_correct(found, "collectives.all_reduce.sum")
