"""The whole gloo suite against real images: three good torch versions pass in both topologies, and
every check fails on an image broken in exactly its way, naming what was expected and what was seen,
while the unrelated checks still pass (in the topologies where the defect can differ: ``Broken.topologies``).
Marked ``docker``.
"""

from __future__ import annotations

import secrets
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from distval.cli.main import main
from distval_suite import coverage
from tests.default_runs import DefaultRuns
from tests.docker_helpers import (
    DEFAULT_CONFIG,
    DEFAULT_LAYOUTS,
    GOOD,
    TOPOLOGIES,
    cases,
    layout_key,
    leftovers,
    outcome,
    validate,
)

pytestmark = pytest.mark.docker


@pytest.fixture
def run_id(docker_client: object) -> object:
    value = "s" + secrets.token_hex(4)
    yield value
    assert leftovers(docker_client, value) == [], "the run left containers or networks behind"


def run(config: str, image: str, run_id: str, junit: Path) -> tuple[int, dict[str, dict[str, tuple[str, str]]]]:
    """Exit code and, per topology (layout_key), every testcase's (outcome, message)."""
    code = main(["run", config, "--image", image, "--junit", str(junit), "--run-id", run_id, "--quiet"])
    return code, by_topology(junit)


def by_topology(junit: Path) -> dict[str, dict[str, tuple[str, str]]]:
    """Per topology (layout_key), every testcase's (outcome, message)."""
    root: ET.Element = validate(junit)
    found: dict[str, dict[str, tuple[str, str]]] = {}
    for (suite, name), case in cases(root).items():
        found.setdefault(layout_key(suite), {})[name] = outcome(case)
    return found


def red_texts(junit: Path) -> dict[str, str]:
    """Every failed or errored testcase's whole message and output, for an assertion's message: the
    summary line cut an exit_status error short (CI, 2026-12-03), and its cause was lost."""
    texts: dict[str, str] = {}
    for suite in ET.parse(junit).getroot().iter("testsuite"):
        for case in suite.iter("testcase"):
            for red in [*case.iter("failure"), *case.iter("error")]:
                key = f"{suite.get('name')} {case.get('name')}"
                texts[key] = f"{red.get('message')}\n{(red.text or '')[-3000:]}"
    return texts


# -- good images (GOOD: in docker_helpers, the host tests compare with it too) ---------------------


@pytest.mark.parametrize("image", sorted(GOOD))
def test_default_config_passes_with_every_skip_explained(default_run: DefaultRuns, image: str) -> None:
    expected_skips, timeout_path = GOOD[image]
    done = default_run(image)  # shared with test_docker.py's test of the default image's reports (tests/default_runs.py)
    assert done.left_behind == [], "the run left containers or networks behind"
    results = by_topology(done.junit)
    assert done.code == 0, results
    assert set(results) == set(DEFAULT_LAYOUTS)
    for topology, found in results.items():
        skipped = {name for name, (status, _) in found.items() if status == "skipped"}
        assert skipped == expected_skips, (topology, skipped)
        for name in skipped:
            reason = found[name][1]
            # reconfigure is gated on the torch version; the collectives' parts on what the image's gloo supports.
            expected = "reconfigure needs torch >= 2.14" if name == "reconfigure" else "not supported by this image"
            assert expected in reason, (name, reason)
        assert {status for status, _ in found.values()} <= {"passed", "skipped"}, found
        for name in ("env", "identity", "process_group", "launch", "all_reduce", "ddp_sync", "ddp_sampler", "store", "timeout"):
            assert found[name][0] == "passed", (topology, name, found[name])
        assert sum(1 for name in found if name.startswith("collectives.")) == 19


@pytest.mark.waits
def test_junit_says_which_timeout_path_ran(fixture_image: Callable[[str], str], run_id: str, tmp_path: Path) -> None:
    config = tmp_path / "timeout.yaml"
    config.write_text("scenarios:\n  - {topology: cross-container, world_size: 2, checks: [timeout]}\n")
    for image in GOOD:
        fixture_image(image)  # all of them before the first run: a missing one skips the test at once
    for image, (_, path) in GOOD.items():
        junit = tmp_path / f"{image.split(':')[1]}.xml"
        code = main(["run", str(config), "--image", image, "--junit", str(junit), "--run-id", run_id, "--quiet"])
        assert code == 0
        stdout = [
            c.findtext("system-out") or "" for c in ET.parse(junit).getroot().iter("testcase") if c.get("name") == "timeout"
        ]
        assert any("(timeout via " in text and path in text for text in stdout), (image, stdout)


# -- broken images ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Broken:
    image: str
    checks: str  # the YAML list of checks to run
    failing: dict[str, tuple[str, ...]]  # testcase -> fragments its message must contain
    passing: tuple[str, ...]  # unrelated testcases that must still pass
    settings: str = ""
    # A check that hangs by design (a rank waiting for a peer that never comes) costs this per topology.
    check_timeout_s: int = 60
    hangs: bool = False  # a check hangs by design: the test mostly waits (pytest.mark.waits)
    # The topologies the image runs in. A defect in torch's Python API (a collective, the store, DDP, a missing
    # module) is the same in one container as across two, so in-container alone proves its check catches it (the
    # good images run every check in both: test_default_config_passes_with_every_skip_explained). A defect in
    # what the launcher gives each worker runs in both: the layout decides that (one launcher for both ranks, or
    # one per container with its node rank).
    topologies: tuple[str, ...] = ("in-container",)


COLLECTIVES = "{name: collectives, args: {large_mib: 1}}"
ALL_REDUCE_CASES = (
    "collectives.all_reduce.sum",
    "collectives.all_reduce.max",
    "collectives.all_reduce.min",
    "collectives.all_reduce.product",
)
BROKEN = [
    Broken(
        "distval-fixtures/broken:allreduce-noop",
        f"[env, launch, all_reduce, {COLLECTIVES}, ddp_sync, store]",
        {
            "all_reduce": ("rank 0:", "rank 1:", "expected 3.0 in every element, got 1.0", "got 2.0"),
            **{case: ("expected",) for case in ALL_REDUCE_CASES},
            "collectives.subgroup": ("world all_reduce after the subgroup's", "expected 2.0, got 1.0"),
        },
        ("env", "launch", "collectives.broadcast", "collectives.all_gather", "ddp_sync", "store"),
    ),
    Broken(
        "distval-fixtures/broken:allreduce-wrong",
        f"[env, all_reduce, {COLLECTIVES}, ddp_sync]",
        {
            "all_reduce": ("expected 3.0 in every element, got 4.0",),
            **{case: ("expected",) for case in ALL_REDUCE_CASES},
            "collectives.subgroup": ("expected",),
        },
        ("env", "collectives.broadcast", "collectives.gather", "ddp_sync"),
    ),
    Broken(
        "distval-fixtures/broken:broadcast-ignores-root",
        f"[env, all_reduce, {COLLECTIVES}]",
        {"collectives.broadcast": ("in place, root 1: broadcast from rank 1: element 0: expected 1.0, got 2.0",)},
        ("env", "all_reduce", "collectives.all_reduce.sum", "collectives.scatter", "collectives.broadcast_object_list"),
    ),
    Broken(
        "distval-fixtures/broken:allgather-stale",
        f"[env, launch, {COLLECTIVES}, ddp_sync, ddp_sampler]",
        {"collectives.all_gather": ("in place: all_gather, slot of rank 0: element 0: expected 2.0, got -7.0",)},
        ("env", "launch", "collectives.all_gather_object", "ddp_sync", "ddp_sampler"),
    ),
    Broken(
        "distval-fixtures/broken:ddp-no-grad-sync",
        f"[env, {COLLECTIVES}, ddp_sync, ddp_sampler, store]",
        {
            "ddp_sync": ("expected identical parameters on every rank after one DDP step", "rank(s) [1] differ from rank 0"),
            "ddp_sampler": ("expected identical weights on every rank after the step",),
        },
        ("env", "collectives.all_reduce.sum", "store"),
    ),
    Broken(
        "distval-fixtures/broken:sampler-same-shard",
        "[env, ddp_sync, ddp_sampler]",
        {"ddp_sampler": ("expected disjoint shards covering samples 0..3; got [[0, 2], [0, 2]]", "overlapping: [0, 2]")},
        ("env", "ddp_sync"),
    ),
    Broken(
        "distval-fixtures/broken:launch-wrong-world-size",
        "[env, launch, all_reduce]",
        {"launch": ("rank 1: expected WORLD_SIZE=2 (the scenario's layout); got 3",)},
        ("env",),
        "collective_timeout_s: 10\n",
        check_timeout_s=20,  # all_reduce waits for a third rank: 60 s per topology otherwise
        hangs=True,
        topologies=TOPOLOGIES,  # the launcher's environment for rank 1: a local worker, or node 1's only one
    ),
    Broken(
        "distval-fixtures/broken:gloo-unavailable",
        "[env, all_reduce]",
        {
            "env": ("expected backend 'gloo' to be available; torch.distributed.is_gloo_available() is False",),
            "process_group": ("expected init_process_group(backend='gloo') to succeed", "ProcessGroupGloo is not available"),
        },
        (),
    ),
    Broken(
        "distval-fixtures/broken:timeout-ignored",
        "[env, all_reduce, {name: timeout, args: {deadline_s: 2, margin_s: 2}}]",
        {
            "timeout": (
                "expected all_reduce to fail with a timeout error 2.0 s after rank 1 stayed away",
                "still blocked after 9.0 s",
            )
        },
        ("env", "all_reduce"),
    ),
    Broken(
        "distval-fixtures/broken:store-add-wrong",
        f"[env, launch, store, {COLLECTIVES}]",
        {"store": ("add(counter): expected 3 after every rank added rank+1, got 5",)},
        ("env", "launch", "collectives.barrier", "collectives.all_reduce.sum"),
    ),
    Broken(
        "distval-fixtures/broken:reconfigure-unsupported",
        "[env, all_reduce, reconfigure]",
        {"reconfigure": ("expected a gloo group created with enable_reconfigure=True to support reconfigure",)},
        ("env", "all_reduce"),
    ),
    Broken(
        "distval-fixtures/broken:no-numpy",
        f"[env, {COLLECTIVES}]",
        {
            name: ("numpy is missing from the image", "Numpy is not available")
            for name in ("collectives.broadcast_object_list", "collectives.all_gather_object", "collectives.gather_object")
        },
        ("env", "collectives.all_reduce.sum", "collectives.all_gather", "collectives.reduce_scatter"),
    ),
    Broken(
        "distval-fixtures/broken:no-torch-dist-info",
        "[env, all_reduce]",
        {"process_group": ("Unknown c10d backend type", "dist-info")},
        ("env",),
    ),
]


# Known answers (issue 19): each image breaks exactly what an old known answer could not tell apart.
KNOWN_ANSWERS = [
    Broken(
        "distval-fixtures/broken:product-is-max",
        f"[env, all_reduce, {COLLECTIVES}]",
        {"collectives.all_reduce.product": ("all_reduce(PRODUCT): element",), "collectives.reduce": ("reduce(PRODUCT) to rank",)},
        ("env", "all_reduce", "collectives.all_reduce.max", "collectives.all_reduce.sum", "collectives.broadcast"),
    ),
    Broken(
        "distval-fixtures/broken:minmax-one-rank",
        f"[env, all_reduce, {COLLECTIVES}]",
        {
            "collectives.all_reduce.min": ("all_reduce(MIN): element",),
            "collectives.all_reduce.max": ("all_reduce(MAX): element",),
        },
        ("env", "all_reduce", "collectives.all_reduce.sum", "collectives.all_reduce.product", "collectives.broadcast"),
    ),
    Broken(
        "distval-fixtures/broken:async-work-ignored",
        f"[env, all_reduce, {COLLECTIVES}]",
        {
            "collectives.all_reduce.sum": ("7 elements, async: all_reduce(SUM): element",),
            "collectives.broadcast": ("7 elements, async, root ",),
            "collectives.all_gather": ("7 elements, async: all_gather, slot of rank",),
        },
        ("env", "all_reduce", "collectives.gather", "collectives.scatter", "collectives.reduce"),
    ),
    Broken(
        "distval-fixtures/broken:view-offset-ignored",
        f"[env, all_reduce, {COLLECTIVES}]",
        {
            "collectives.all_reduce.sum": ("7 elements, view at offset 1: all_reduce(SUM): element",),
            "collectives.broadcast": ("7 elements, view at offset 1, root ",),
        },
        ("env", "all_reduce", "collectives.all_gather", "collectives.gather", "collectives.reduce"),
    ),
    Broken(
        "distval-fixtures/broken:ddp-sums-gradients",
        "[env, all_reduce, ddp_sync]",
        {
            "ddp_sync": (
                "expected the parameters of one SGD step on the gradient averaged over all 2 ranks' batches",
                "summing the gradients instead of averaging would give",
            )
        },
        ("env", "all_reduce"),
    ),
    # What only the collectives' coverage model (distval_suite/coverage.py) catches: a dtype and a layout.
    Broken(
        "distval-fixtures/broken:half-precision-wrong",
        f"[env, all_reduce, {COLLECTIVES}]",
        {
            "collectives.all_reduce.sum": ("float16, 7 elements, in place: all_reduce(SUM): element",),
            "collectives.all_reduce.product": ("float16, 7 elements, in place: all_reduce(PRODUCT): element",),
            "collectives.reduce": ("float16, 7 elements, in place, SUM, root ",),
        },
        # MIN and MAX stay right: float16 and bfloat16 order positive values alike.
        ("env", "all_reduce", "collectives.all_reduce.max", "collectives.all_reduce.min", "collectives.broadcast"),
    ),
    Broken(
        "distval-fixtures/broken:noncontiguous-ignored",
        f"[env, all_reduce, {COLLECTIVES}]",
        {
            **{case: ("15 elements, transposed: all_reduce(",) for case in ALL_REDUCE_CASES},
            "collectives.broadcast": ("15 elements, transposed, root 1: broadcast from rank 1: element",),
        },
        ("env", "all_reduce", "collectives.reduce", "collectives.all_gather", "collectives.send_recv_ring"),
    ),
]
BROKEN += KNOWN_ANSWERS


@pytest.mark.parametrize(
    "broken",
    [pytest.param(b, marks=pytest.mark.waits if b.hangs else ()) for b in BROKEN],
    ids=[b.image.split(":")[1] for b in BROKEN],
)
def test_broken_image_is_caught_by_its_check(
    fixture_image: Callable[[str], str], broken: Broken, run_id: str, tmp_path: Path
) -> None:
    fixture_image(broken.image)
    config = tmp_path / "broken.yaml"
    config.write_text(
        f"timeout_s: 150\ncheck_timeout_s: {broken.check_timeout_s}\n"
        + broken.settings
        + "scenarios:\n"
        + "".join(f"  - {{topology: {topology}, world_size: 2, checks: {broken.checks}}}\n" for topology in broken.topologies)
    )
    code, results = run(str(config), broken.image, run_id, tmp_path / "results.xml")
    assert code == 1
    assert set(results) == set(broken.topologies)
    for topology, found in results.items():
        for name, fragments in broken.failing.items():
            status, message = found[name]
            assert status == "failure", (topology, name, status, message)
            for fragment in fragments:
                assert fragment in message, (topology, name, fragment, message)
        for name in broken.passing:
            assert found[name][0] == "passed", (topology, name, found[name])


@pytest.mark.parametrize(
    ("image", "want"),
    [("distval-fixtures/torch:2.6-debian", "passed"), ("distval-fixtures/broken:sampler-same-shard", "failure")],
)
def test_ddp_sampler_at_a_world_size_that_does_not_divide_four(
    fixture_image: Callable[[str], str], image: str, want: str, run_id: str, tmp_path: Path
) -> None:
    """At 3 ranks DistributedSampler pads a 4-sample dataset by design: the check's data must be sized by the
    world (it once failed every good image at 3 ranks), and must still catch the same-shard defect there."""
    fixture_image(image)
    config = tmp_path / "three.yaml"
    config.write_text("timeout_s: 150\nscenarios:\n  - {topology: in-container, world_size: 3, checks: [ddp_sampler]}\n")
    code, results = run(str(config), image, run_id, tmp_path / "results.xml")
    status, message = results["in-container"]["ddp_sampler"]
    assert (code, status) == ((0, "passed") if want == "passed" else (1, "failure")), message
    if want == "failure":
        assert "expected disjoint shards covering samples 0..5; got [[0, 3], [0, 3], [0, 3]]" in message


def test_identity_catches_the_wrong_torch_in_a_tag(fixture_image: Callable[[str], str], run_id: str, tmp_path: Path) -> None:
    old, new = fixture_image("distval-fixtures/torch:1.13-debian"), fixture_image("distval-fixtures/torch:2.6-debian")
    config = tmp_path / "identity.yaml"
    config.write_text(
        "scenarios:\n  - topology: in-container\n    world_size: 2\n"
        "    checks: [env, {name: identity, args: {torch: '>=2.6,<2.7', build: cpu, backends: [gloo]}}]\n"
    )
    code, results = run(str(config), old, run_id, tmp_path / "results.xml")
    assert code == 1
    status, message = results["in-container"]["identity"]
    assert status == "failure" and "expected torch >=2.6,<2.7; image has 1.13" in message
    assert results["in-container"]["env"][0] == "passed"
    code, results = run(str(config), new, run_id, tmp_path / "results2.xml")
    assert code == 0 and results["in-container"]["identity"][0] == "passed"


def test_required_check_turns_a_skip_into_a_failure(fixture_image: Callable[[str], str], run_id: str, tmp_path: Path) -> None:
    image = fixture_image("distval-fixtures/torch:2.6-debian")
    config = tmp_path / "required.yaml"
    config.write_text(
        "scenarios:\n  - {topology: in-container, world_size: 2, checks: [env, {name: reconfigure, required: true}]}\n"
    )
    code, results = run(str(config), image, run_id, tmp_path / "results.xml")
    assert code == 1
    status, message = results["in-container"]["reconfigure"]
    assert status == "failure"
    assert (
        "expected required check reconfigure to run; it was skipped: reconfigure needs torch >= 2.14; image has 2.6.0" in message
    )


def test_debian_bookworm_stock_torchrun_is_caught(fixture_image: Callable[[str], str], run_id: str, tmp_path: Path) -> None:
    """Debian's torch 1.13 on Python 3.11: torchrun's Std.from_str('0') is None, the launcher dies."""
    image = fixture_image("distval-fixtures/torch:1.13-debian-stock")
    code, results = run(DEFAULT_CONFIG, image, run_id, tmp_path / "results.xml")
    assert code == 1
    for found in results.values():
        status, message = found["env"]
        assert status == "error" and "AttributeError: 'NoneType' object has no attribute 'get'" in message


# -- one check's failure does not cascade -------------------------------------------------------------
@dataclass(frozen=True)
class OneRank:
    image: str
    case: str  # the one testcase that must not pass
    status: str
    fragments: tuple[str, ...]


ONE_RANK = [
    # Rank 1 alone sees different initial parameters; before, rank 0 went on into DDP's all_reduce and
    # waited out the 60 s group timeout, and ddp_sampler and store then errored too.
    OneRank(
        "distval-fixtures/broken:ddp-no-broadcast-rank1",
        "ddp_sync",
        "failure",
        ("expected DDP to start every rank from rank 0's parameters", "rank(s) [1] differ from rank 0", "rank 0:"),
    ),
    # Rank 1 leaves ddp_sampler with an exception while rank 0 waits for it in DDP's gradient all_reduce.
    OneRank(
        "distval-fixtures/broken:sampler-raises-rank1",
        "ddp_sampler",
        "error",
        ("rank 1: IndexError: distval-broken: DistributedSampler has no shard for rank 1", "after rank 1 had left the check"),
    ),
]
ONE_RANK_CHECKS = "[env, launch, all_reduce, ddp_sync, ddp_sampler, store, {name: collectives, args: {large_mib: 1}}]"


@pytest.mark.parametrize("defect", ONE_RANK, ids=[d.image.split(":")[1] for d in ONE_RANK])
def test_a_defect_on_one_rank_is_one_red_testcase_and_costs_no_timeout(
    fixture_image: Callable[[str], str], defect: OneRank, run_id: str, tmp_path: Path
) -> None:
    """The ranks agree on each check's outcome through the store, and the checks after a failed one get
    a fresh process group: the defect shows once, where it is, long before collective_timeout_s."""
    config = tmp_path / "one-rank.yaml"
    config.write_text(
        "timeout_s: 300\ncollective_timeout_s: 90\ncheck_timeout_s: 150\nscenarios:\n"
        f"  - {{topology: in-container, world_size: 2, checks: {ONE_RANK_CHECKS}}}\n"
        f"  - {{topology: cross-container, world_size: 2, checks: {ONE_RANK_CHECKS}}}\n"
    )
    fixture_image(defect.image)
    junit = tmp_path / "results.xml"
    code, results = run(str(config), defect.image, run_id, junit)
    assert code == 1
    assert set(results) == set(TOPOLOGIES)
    for topology, found in results.items():
        red = {name: status for name, (status, _) in found.items() if status not in ("passed", "skipped")}
        assert red == {defect.case: defect.status}, (topology, red, red_texts(junit))
        message = found[defect.case][1]
        for fragment in defect.fragments:
            assert fragment in message, (topology, fragment, message)
        for name in ("env", "launch", "process_group", "all_reduce", "store", "collectives.all_reduce.sum", "exit_status"):
            assert found[name][0] == "passed", (topology, name, found[name])
    # A cascade waits out the 90 s process-group timeout in at least one testcase; here none comes near it
    # (the defective check included; measured 5-11 s with a load average of 10 on 2 cores).
    for suite in ET.parse(junit).getroot().iter("testsuite"):
        for case in suite.iter("testcase"):
            if case.get("name") != "exit_status":
                assert float(case.get("time") or 0) < 60, (suite.get("name"), case.get("name"), case.get("time"))


# -- counts over repeated runs ---------------------------------------------------------------------------
def test_repeated_runs_are_counted_once_each(fixture_image: Callable[[str], str], run_id: str, tmp_path: Path) -> None:
    """all_reduce.sum with repeat 4 is 120 runs: distval_suite/coverage.py's 30 variants (9 dtypes in place, float32
    async, 9 dtypes at offset 1, float32 transposed, 0 elements, 9 dtypes large), 4 times. The flaky image's
    all_reduce is call-counted: every 2nd call wrong (+1; on bool the +1 raises; on 0 elements it shows nothing),
    every 4th raises, and it returns no work handle for async_op=True (an error of its own). The capability probes of
    bfloat16, float16 and bool (torch 2.6) are calls 1-3, so the runs are calls 4-123: 24 wrong and 38 raised, each
    counted once (distval_suite/coverage.py's plan, counted the same way)."""
    config = tmp_path / "flaky.yaml"
    config.write_text(
        "scenarios:\n"
        "  - {topology: in-container, world_size: 2, checks: [{name: collectives, args: {repeat: 4, large_mib: 1}}]}\n"
    )
    fixture_image("distval-fixtures/broken:allreduce-flaky")
    code, results = run(str(config), "distval-fixtures/broken:allreduce-flaky", run_id, tmp_path / "results.xml")
    assert code == 1
    status, message = results["in-container"]["collectives.all_reduce.sum"]
    assert status == "failure"
    first_wrong = "rank 0: 24 of 120 runs wrong; first: run 1, int64, 7 elements, in place: all_reduce(SUM): "
    assert message.startswith(first_wrong), message
    assert "; 38 of 120 runs raised; first: run 1, float32, 7 elements, in place: RuntimeError: " in message
    assert results["in-container"]["collectives.broadcast"][0] == "passed"


def test_a_defect_past_2_22_elements_is_caught_by_the_default_size(
    fixture_image: Callable[[str], str], run_id: str, tmp_path: Path
) -> None:
    """broken:allreduce-large-truncated reduces only the first 2**22 elements: the old 4 MiB default passed
    it; the default config's 16 MiB of float32 (+3 elements, as many in every dtype) fails all_reduce in every dtype
    at the large size, float64 and int64 too (16 MiB of their own stopped at 2**21 elements and passed them)."""
    image = fixture_image("distval-fixtures/broken:allreduce-large-truncated")
    config = tmp_path / "large.yaml"
    config.write_text(
        "timeout_s: 600\ncheck_timeout_s: 400\nscenarios:\n"
        "  - {topology: in-container, world_size: 2, checks: [env, all_reduce, {name: collectives, args: {large_mib: 16}}]}\n"
    )
    code, results = run(str(config), image, run_id, tmp_path / "results.xml")
    assert code != 0
    (found,) = results.values()
    for name in ("collectives.all_reduce.sum", "collectives.all_reduce.max", "collectives.all_reduce.product"):
        status, message = found[name]
        assert status == "failure" and "4194307 elements, in place: all_reduce(" in message, (name, found[name])
    # Every dtype's large all_reduce(SUM) is wrong, and nothing else in the part (its 7-element variants are right).
    summed = found["collectives.all_reduce.sum"]
    assert f"rank 0: {len(coverage.DTYPES)} of " in summed[1], summed  # "rank 0: 9 of 30 runs wrong; first: ..."
    for name in ("env", "all_reduce", "collectives.broadcast", "collectives.all_gather"):
        assert found[name][0] == "passed", (name, found[name])
