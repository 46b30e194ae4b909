"""The bandwidth check and last-known-good against the real Engine (marked ``docker``): a second run of the
good image passes the first one's baseline; an image made slow on purpose (``broken:slow-collectives``:
right answers, 5 ms late per call) fails it, confirmed by a re-measuring run, and fails a busbw
threshold, both with the numbers in the message; wrong data fails the check.

Small on purpose (in-container, two sizes, two or three operations): speed is asserted only against
a baseline and thresholds far from the noise. The slow image cannot beat 64 KiB / 5 ms = 0.013 GB/s.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from distval.cli.main import main
from distval.comparing.baseline import baseline_case
from distval.comparing.deltas import Tolerances
from tests.docker_helpers import leftovers

# CI runs this file in its second process (.ci/run): alone in a CI run, images built, it kept 60 % (100.4 s) of the 2 cores busy
# (2026-12-07, /proc/stat every 10 s), a core idle much of its time; tests/budgets.py WAITING_S holds its budget.
pytestmark = [pytest.mark.docker, pytest.mark.waits]

GOOD = "distval-fixtures/torch:2.6-debian"
SLOW = "distval-fixtures/broken:slow-collectives"
WRONG = "distval-fixtures/broken:allreduce-wrong"

BASELINE_CONFIG = """\
version: 1
timeout_s: 180
scenarios:
  - name: bw
    topology: in-container
    world_size: 2
    checks:
      - {name: bandwidth, args: {sizes: [64KiB, 1MiB], iterations: 25, warmup: 3, ops: [all_reduce, broadcast]}}
"""
THRESHOLD_CONFIG = """\
version: 1
timeout_s: 180
scenarios:
  - name: bw
    topology: in-container
    world_size: 2
    checks:
      - name: bandwidth
        args: {sizes: [64KiB], iterations: 5, ops: [all_reduce, all_gather, reduce_scatter], min_busbw_gbps: {64KiB: 0.02}}
"""


@pytest.fixture
def run_ids(docker_client: object) -> Any:
    made: list[str] = []

    def make() -> str:
        made.append("t" + secrets.token_hex(4))
        return made[-1]

    yield make
    for run_id in made:
        assert leftovers(docker_client, run_id) == [], "the run left containers or networks behind"


def distval(config: Path, image: str, report: Path, run_id: str, *extra: str) -> tuple[int, dict[str, Any]]:
    code = main(["run", str(config), "--image", image, "--json", str(report), "--run-id", run_id, "--quiet", *extra])
    return code, json.loads(report.read_text())


def cases(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in report["scenarios"][0]["cases"]}


def test_a_slow_image_fails_the_good_images_baseline_and_the_default_tolerance_holds(
    fixture_image: Callable[[str], str], run_ids: Any, tmp_path: Path
) -> None:
    for image in (GOOD, SLOW):
        fixture_image(image)
    config = tmp_path / "bw.yaml"
    config.write_text(BASELINE_CONFIG)
    code, good = distval(config, GOOD, tmp_path / "good.json", run_ids())
    assert code == 0, cases(good)
    assert {(f["operation"], f["label"]) for f in good["scenarios"][0]["bandwidth"]} == {
        ("all_reduce", "64KiB"),
        ("all_reduce", "1MiB"),
        ("broadcast", "64KiB"),
        ("broadcast", "1MiB"),
    }

    # The same image again matches its own baseline by scenario_hash, compares every figure and passes. At tolerances
    # no load swing reaches, not the defaults: how often an unchanged image fails a stored baseline at the defaults is
    # a rate, which the benchmarks measure (docs/measurements.md, "Noise" and "Candidate against reference": 56-58 %
    # of comparisons of the default sweep on this shared VM). In a CI run beside the fault tests, broadcast 1 MiB
    # measured 0.58x, 0.98x and 0.76x of the stored run in the run and its two re-measures (its best 0.72x), and the raw
    # TCP yardstick 0.58x: the machine slowed, not the image. Here a figure regresses only when its median and its best
    # both fell below 0.4x in two of three runs, and a check only when it took 4x as long and 1 s more. The default
    # tolerances' boundary is asserted deterministically below, on shifted figures.
    code_again, again = distval(
        config,
        GOOD,
        tmp_path / "again.json",
        run_ids(),
        "--baseline",
        str(tmp_path / "good.json"),
        "--busbw-tolerance",
        "0.6",
        "--duration-tolerance",
        "3",
    )
    same = cases(again)["baseline"]
    assert (code_again, same["status"]) == (0, "passed"), same["message"]
    assert "matched by scenario_hash" in same["message"] and "4 busbw" in same["message"]

    code_slow, slow = distval(config, SLOW, tmp_path / "slow.json", run_ids(), "--baseline", str(tmp_path / "good.json"))
    baseline = cases(slow)["baseline"]
    assert (code_slow, baseline["status"]) == (1, "failed"), baseline["message"]
    assert "matched by scenario_hash_any_image" in baseline["message"]
    # Confirmed by re-measuring before it fails: with --remeasure 2 (the default) a figure regresses in 2 of 3
    # runs, and slow in the run and in the first re-measure decides the busbw figures; a duration near its
    # tolerance can still ask for the third run.
    assert re.search(
        r"did in more than half of the [23] runs \(the run and the (run|2 runs) re-measuring it\)", baseline["message"]
    ), baseline["message"]
    assert baseline["details"]["remeasures"] in (1, 2)
    # Both numbers and the ratio, for the figure 5 ms per call ruins most: all_reduce at 64 KiB.
    found = re.search(
        r"busbw all_reduce 64KiB: ([0-9.e-]+) -> ([0-9.e-]+) GB/s \(([0-9.]+)x, tolerance -20%; best [0-9.e-]+ -> [0-9.e-]+ GB/s",
        baseline["message"],
    )
    assert found, baseline["message"]
    before, after, ratio = (float(v) for v in found.groups())
    assert after < 0.0132 < before and ratio < 0.8
    for name in ("bandwidth.all_reduce", "bandwidth.broadcast"):
        assert cases(slow)[name]["status"] == "passed"  # right answers: only the baseline sees it is slow

    # The default fractions on the good image's own figures, deterministically: every busbw (median and
    # best) 15 % lower and every duration 40 % longer stays within them (-20 %, +50 %); 25 % lower fails
    # naming the figure. Without the call-time slack: 25 % lower busbw makes a 64 KiB call here (~0.3 ms)
    # only ~0.1 ms longer, which the default slack would call noise.
    for factor, slower, expected in ((0.85, 1.4, "passed"), (0.75, 1.0, "failed")):
        shifted = json.loads(json.dumps(good))
        for figure in shifted["scenarios"][0]["bandwidth"]:
            figure["busbw_gbps"] *= factor
            figure["best_busbw_gbps"] *= factor
            figure["time_us"] /= factor
            figure["best_time_us"] /= factor
        for case in shifted["scenarios"][0]["cases"]:
            case["duration_s"] *= slower
        verdict = baseline_case(shifted["scenarios"][0], good, Tolerances(busbw_slack_us=0), str(tmp_path / "good.json"))
        assert verdict.status == expected, verdict.message
    assert "busbw all_reduce 64KiB" in verdict.message and "(0.75x, tolerance -20%; best " in verdict.message


def test_threshold_fails_a_slow_image_and_wrong_data_fails_the_check(
    fixture_image: Callable[[str], str], run_ids: Any, tmp_path: Path
) -> None:
    for image in (SLOW, WRONG):
        fixture_image(image)
    config = tmp_path / "threshold.yaml"
    config.write_text(THRESHOLD_CONFIG)
    code, slow = distval(config, SLOW, tmp_path / "slow.json", run_ids())
    assert code == 1
    found = cases(slow)
    message = found["bandwidth.all_reduce"]["message"]
    assert found["bandwidth.all_reduce"]["status"] == "failed", message
    assert re.search(r"at 64KiB: 0\.0[01][0-9]* GB/s < 0\.02 GB/s \(time [0-9.]+ us, algbw", message), message
    # 5 ms per call: min_time_s (0.1 s) adds calls to the 5 asked for, and the message says how many.
    assert re.search(r"median of \d+ iterations \(at least 5 and 0\.1 s per size\), slowest of 2 ranks", message), message
    assert found["bandwidth.all_gather"]["status"] == "failed"
    # Debian's torch 2.6 gloo has no reduce_scatter: skipped with torch's words, not failed.
    assert found["bandwidth.reduce_scatter"]["status"] == "skipped"
    assert "ProcessGroupGloo does not support reduce_scatter" in found["bandwidth.reduce_scatter"]["message"]

    code, wrong = distval(config, WRONG, tmp_path / "wrong.json", run_ids())
    assert code == 1
    found = cases(wrong)
    message = found["bandwidth.all_reduce"]["message"]
    assert found["bandwidth.all_reduce"]["status"] == "failed"
    assert "all_reduce gave wrong data while measuring its bandwidth" in message and "expected 3.0, got 4.0" in message


TOPOLOGIES_CONFIG = """\
version: 1
timeout_s: 240
scenarios:
  - name: in-container-2ranks
    topology: in-container
    world_size: 2
    checks: &checks
      - {name: bandwidth, args: {sizes: [16KiB, 1MiB], iterations: 3, warmup: 1, min_time_s: 0.02}}
  - name: cross-container-2ranks
    topology: cross-container
    world_size: 2
    checks: *checks
"""
# reduce_scatter: Debian's gloo in 1.13 and 2.6 has none (skipped with torch's words); PyPI's 2.15 has it.
FIXTURES_AND_SKIPS = [
    ("distval-fixtures/torch:1.13-debian", {"reduce_scatter"}),
    ("distval-fixtures/torch:2.6-debian", {"reduce_scatter"}),
    ("distval-fixtures/torch:2.15-pypi", set()),
]


# An efficiency (busbw / raw TCP) past this is no measurement: measured here up to 1.94 (one slow median of raw TCP;
# docs/measurements.md, "Efficiency against raw TCP"), and up to 5.6 with a yardstick that received large messages
# one segment per Python call, which this bound would still let pass: a bound on nonsense, not a target.
EFFICIENCY_SANE = 20.0


def cases_of(scenario: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in scenario["cases"]}


def assert_efficiencies(figures: list[dict[str, Any]]) -> None:
    """Every gloo figure has its raw TCP throughput and a sane efficiency, consistent with its busbw."""
    assert figures
    for f in figures:
        assert f["tcp_gbps"] is not None and f["tcp_gbps"] > 0, f
        assert 0 < f["efficiency"] <= EFFICIENCY_SANE, f
        assert f["efficiency"] == pytest.approx(f["busbw_gbps"] / f["tcp_gbps"], rel=0.01, abs=1e-4), f
        assert f["best_tcp_gbps"] >= f["tcp_gbps"] and 0 < f["best_efficiency"] <= EFFICIENCY_SANE, f


EFFICIENCY_CONFIG = """\
version: 1
timeout_s: 180
scenarios:
  - name: bw
    topology: in-container
    world_size: 2
    checks:
      - name: bandwidth
        args: {sizes: [64KiB, 1MiB], iterations: 5, ops: [all_reduce, broadcast], min_efficiency: {64KiB: 0.99}}
"""


def test_every_gloo_figure_has_its_efficiency_and_min_efficiency_can_fail(
    fixture_image: Callable[[str], str], run_ids: Any, tmp_path: Path
) -> None:
    """On the good 2.6 image: the yardstick passes, every figure has tcp_gbps and efficiency, and all_reduce at
    64 KiB (measured here at 0.06-0.12 of raw TCP: several messages and a reduction, against one message) fails a
    min_efficiency of 0.99 with both numbers; 1 MiB has no threshold."""
    fixture_image(GOOD)
    config = tmp_path / "efficiency.yaml"
    config.write_text(EFFICIENCY_CONFIG)
    code, report = distval(config, GOOD, tmp_path / "report.json", run_ids())
    assert code == 1
    found = cases(report)
    assert found["bandwidth.yardstick"]["status"] == "passed", found["bandwidth.yardstick"]["message"]
    assert found["bandwidth.yardstick"]["message"].startswith("raw TCP between ring neighbours over loopback")
    assert_efficiencies(report["scenarios"][0]["bandwidth"])
    message = found["bandwidth.all_reduce"]["message"]
    assert found["bandwidth.all_reduce"]["status"] == "failed", message
    assert re.search(
        r"expected all_reduce efficiency \(busbw / raw TCP\) >= min_efficiency; at 64KiB: [0-9.]+ < 0\.99 "
        r"\(busbw [0-9.]+ GB/s, raw TCP [0-9.]+ GB/s\)",
        message,
    ), message
    assert "at 1MiB" not in message


@pytest.mark.parametrize(("image", "skipped"), FIXTURES_AND_SKIPS)
def test_bandwidth_runs_in_both_topologies_on_every_fixture(
    image: str, skipped: set[str], fixture_image: Callable[[str], str], run_ids: Any, tmp_path: Path
) -> None:
    fixture_image(image)
    config = tmp_path / "topologies.yaml"
    config.write_text(TOPOLOGIES_CONFIG)
    code, report = distval(config, image, tmp_path / "report.json", run_ids(), "--jobs", "1")
    assert code == 0, [(s["name"], c["name"], c["status"], c["message"]) for s in report["scenarios"] for c in s["cases"]]
    measured = {"all_reduce", "all_gather", "broadcast", "reduce_scatter", "all_to_all"} - skipped
    for scenario in report["scenarios"]:
        statuses = {c["name"]: c["status"] for c in scenario["cases"] if c["name"].startswith("bandwidth.")}
        expected = {f"bandwidth.{op}": "skipped" if op in skipped else "passed" for op in measured | skipped}
        assert statuses == {**expected, "bandwidth.yardstick": "passed"}
        # The raw TCP yardstick over the scenario's own path: loopback in one container, the network across two.
        yardstick = cases_of(scenario)["bandwidth.yardstick"]["details"]
        assert (yardstick["path"] == "loopback") == (scenario["name"] == "in-container-2ranks"), yardstick["path"]
        assert {(p["from"], p["to"]) for p in yardstick["pairs"]} == {(0, 1), (1, 0)}
        assert_efficiencies(scenario["bandwidth"])
        figures = {(f["operation"], f["label"]) for f in scenario["bandwidth"]}
        assert figures == {(op, size) for op in measured for size in ("16KiB", "1MiB")}, scenario["name"]
        assert all(f["busbw_gbps"] > 0 and f["best_busbw_gbps"] >= f["busbw_gbps"] for f in scenario["bandwidth"])
        # min_time_s (0.02 s here) adds timed calls to the 3 asked for wherever 3 calls take less: any call
        # under 2 ms (a 16 KiB call here, unless the machine is loaded) must have had more than 3.
        assert all(f["iterations"] > 3 or f["time_us"] >= 2000 for f in scenario["bandwidth"]), scenario["bandwidth"]
    # Cross-container next to in-container for the same world size, per operation and size.
    rows = report["bandwidth_topologies"]
    assert {(r["operation"], r["label"]) for r in rows} == {(op, size) for op in measured for size in ("16KiB", "1MiB")}
