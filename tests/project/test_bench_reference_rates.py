"""benchmarks/bench_reference_rates.py without Docker: accumulating rounds in one file across sessions (append,
refuse, the stop rule) and the error-rate table's bound, with fake runs."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from distval.comparing.baseline import baseline_case
from distval.config import parse_config
from distval.plan.identity import with_hashes
from distval.reports.json_report import json_report
from distval.results.outcome import FAILED, PASSED, SKIPPED, CaseResult
from distval.results.scenario import RunSummary, ScenarioResult
from distval.targets.engines.planning import plan_scenario
from distval_suite import bandwidth_figures
from tests.paths import ROOT


def _load() -> ModuleType:
    # The script imports ``common`` and ``bench_bandwidth_spread`` from its own directory, as when it runs as a script.
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location(
            "bench_reference_rates_script", ROOT / "benchmarks" / "bench_reference_rates.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


rates = _load()
GOOD = "distval-fixtures/torch:2.6-debian"
SLOW = "distval-fixtures/broken:slow-busbw-40"
IDS = {GOOD: "sha256:good", SLOW: "sha256:slow40"}
RECIPES = {GOOD: "recipe:a1", SLOW: "recipe:b2"}  # the fixtures' pins: their recipe hashes


class FakeRuns:
    """A runner that records what it ran; its clock advances by ``minutes_per_run`` at every run."""

    def __init__(self, minutes_per_run: float = 0.5) -> None:
        self.ran: list[str] = []
        self.now = 0.0
        self.step = minutes_per_run * 60

    def run(self, image: str, label: str) -> dict[str, Any]:
        self.ran.append(image)
        self.now += self.step
        return {"scenarios": [{"name": "bw", "image": image}]}

    def clock(self) -> float:
        return self.now


def collect(fake: FakeRuns, candidates: Any, pairs: int, earlier: Any = (), **kwargs: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = rates.collect_rounds(
        GOOD,
        candidates,
        pairs,
        fake.run,
        earlier,
        clock=fake.clock,
        load=lambda: (2.5, 2.0, 1.5),
        now=lambda: "2026-12-06T18:00:00+00:00",
        **kwargs,
    )
    return found


def test_unchanged_image_alone_costs_two_runs_a_round_and_keeps_load_and_times() -> None:
    fake = FakeRuns()
    rounds = collect(fake, [(rates.SAME, GOOD)], 3)
    assert fake.ran == [GOOD] * 6
    assert [(r["candidate"], r["round"], r["order"]) for r in rounds] == [
        (rates.SAME, 1, ["candidate", "reference"]),
        (rates.SAME, 2, ["reference", "candidate"]),
        (rates.SAME, 3, ["candidate", "reference"]),
    ]
    assert rounds[0]["load"] == [2.5, 2.5]
    assert rounds[0]["started"] == rounds[0]["finished"] == "2026-12-06T18:00:00+00:00"
    assert rounds[0]["machine"]


def test_appended_rounds_number_on_and_each_candidate_keeps_alternating_its_order() -> None:
    first = collect(FakeRuns(), [(rates.SAME, GOOD)], 3)
    # A later session runs the slow image too: the unchanged image's 4th pair goes reference first (ABBA over all of
    # its rounds), the slow image's first pair candidate first.
    both = collect(FakeRuns(), [(rates.SAME, GOOD), (SLOW, SLOW)], 1, first)
    assert both[:3] == first
    assert [(r["candidate"], r["round"], r["order"][0]) for r in both[3:]] == [
        (rates.SAME, 4, "reference"),
        (SLOW, 4, "candidate"),
    ]
    # Disjoint groups of 2 over the unchanged image's four rounds: two comparisons, each one AB and one BA pair.
    groups = rates.groups([r for r in both if r["candidate"] == rates.SAME], 2, True)
    assert [[r["order"][0] for r in g] for g in groups] == [["candidate", "reference"], ["candidate", "reference"]]


def test_stops_after_the_round_that_passes_max_minutes_and_hands_every_round_over() -> None:
    fake = FakeRuns(minutes_per_run=0.5)  # a round of the unchanged image: 1 minute
    seen: list[int] = []
    rounds = collect(fake, [(rates.SAME, GOOD)], 100, max_minutes=2.5, on_round=lambda found: seen.append(len(found)))
    assert len(rounds) == 3  # the round ending at 3 minutes passed 2.5; none starts after it
    assert seen == [1, 2, 3]
    assert len(collect(FakeRuns(), [(rates.SAME, GOOD)], 2, max_minutes=60)) == 2  # --pairs still bounds it


def header(**changes: Any) -> dict[str, Any]:
    wanted = rates.header(GOOD, RECIPES[GOOD], {SLOW: RECIPES[SLOW]})
    return {**wanted, **changes}


def test_a_file_takes_rounds_made_alike_and_a_slow_image_it_has_not_seen() -> None:
    assert rates.refusal(header(), header()) is None
    assert rates.refusal(header(slow_pins={}), header()) is None  # the false alarms first, the misses later
    assert rates.refusal(header(), header(slow_pins={})) is None


@pytest.mark.parametrize(
    ("found", "says"),
    [
        ({"config_sha256": "0" * 64}, "another config text"),
        ({"measurement_sha256": "0" * 64}, "timed by other suite code (distval_suite/bandwidth.py"),
        ({"measurement_sha256": None}, "timed by other suite code"),  # a file from before the pin
        ({"good_pin": "recipe:changed"}, "recipe:changed"),
        ({"good_pin": "sha256:good"}, "sha256:good"),  # an image without a recipe is held to its id
        ({"good": "distval-fixtures/torch:2.15-debian"}, "torch:2.15"),
        ({"slow_pins": {SLOW: "recipe:changed"}}, f"its {SLOW} is image recipe:changed"),
        ({"rules": {"distval": "0.0.1"}}, "other rules"),
        ({"format": 1}, "format"),
        ({"format": 2}, "its format is 2, not 3"),
    ],
)
def test_a_file_refuses_rounds_made_otherwise(found: dict[str, Any], says: str) -> None:
    why = rates.refusal(header(**found), header())
    assert why is not None and says in why


def runs_on(monkeypatch: pytest.MonkeyPatch, fake: FakeRuns) -> None:
    """``main``'s runs go to ``fake`` instead of distval and the Engine (``docker_runner``'s context manager)."""

    class Runner:
        def __enter__(self) -> Any:
            return fake.run

        def __exit__(self, *exc: object) -> None:
            return None

    monkeypatch.setattr(rates, "docker_runner", Runner)


def test_append_creates_extends_and_refuses_in_one_line_with_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeRuns()
    ids = dict(IDS)
    recipes: dict[str, str | None] = {GOOD: "a1", SLOW: "b2"}
    monkeypatch.setattr(rates, "check_image", lambda image: ids[image])
    monkeypatch.setattr(rates, "image_recipe", lambda image: recipes[image])

    runs_on(monkeypatch, fake)
    target = tmp_path / "rates.json"
    quiet = ["--no-baseline", "--judge-pairs", "50"]  # no judging of the fake reports: only what the file keeps
    assert rates.main(["--append", str(target), "--pairs", "2", "--slow", "none", *quiet]) == 0
    assert rates.main(["--append", str(target), "--pairs", "1", "--slow", SLOW, "--no-same", *quiet]) == 0
    data = json.loads(target.read_text(encoding="utf-8"))
    assert [(r["candidate"], r["round"]) for r in data["rounds"]] == [(rates.SAME, 1), (rates.SAME, 2), (SLOW, 3)]
    assert data["header"]["slow_pins"] == {SLOW: "recipe:b2"} and data["header"]["good_pin"] == "recipe:a1"
    assert set(data) == {"header", "rounds"}  # the table is derived from the rounds (--docs), never stored beside them
    assert [r["image_ids"] for r in data["rounds"]] == [
        {"candidate": IDS[GOOD], "reference": IDS[GOOD]},
        {"reference": IDS[GOOD], "candidate": IDS[GOOD]},
        {"candidate": IDS[SLOW], "reference": IDS[GOOD]},
    ]
    assert fake.ran == [GOOD] * 4 + [SLOW, GOOD]
    capsys.readouterr()

    # The next session's machine is fresh: its fixtures are built again from the same recipes, new image ids.
    ids[GOOD] = "sha256:rebuilt"
    assert rates.main(["--append", str(target), "--pairs", "1", "--slow", "none", *quiet]) == 0
    data = json.loads(target.read_text(encoding="utf-8"))
    assert data["rounds"][-1]["image_ids"] == {"reference": "sha256:rebuilt", "candidate": "sha256:rebuilt"}
    assert data["rounds"][0]["image_ids"]["candidate"] == IDS[GOOD]  # each round says what it ran
    capsys.readouterr()

    recipes[GOOD] = "c3"  # another recipe: another image
    assert rates.main(["--append", str(target), "--pairs", "1", "--slow", "none", *quiet]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "refusing to append" in err and "recipe:a1, not" in err and "recipe:c3" in err
    assert json.loads(target.read_text(encoding="utf-8")) == data  # untouched
    assert not list(tmp_path.glob(".*partial"))


def test_an_image_without_a_recipe_is_held_to_its_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeRuns()
    ids = {"my/torch:dev": "sha256:mine"}
    monkeypatch.setattr(rates, "check_image", lambda image: ids[image])
    monkeypatch.setattr(rates, "image_recipe", lambda image: None)

    runs_on(monkeypatch, fake)
    target = tmp_path / "rates.json"
    argv = ["--append", str(target), "--image", "my/torch:dev", "--pairs", "1", "--slow", "none", "--no-baseline"]
    assert rates.main(argv) == 0
    assert json.loads(target.read_text(encoding="utf-8"))["header"]["good_pin"] == "sha256:mine"
    ids["my/torch:dev"] = "sha256:rebuilt"
    capsys.readouterr()
    assert rates.main(argv) == 2
    assert "its good image is my/torch:dev sha256:mine, not my/torch:dev sha256:rebuilt" in capsys.readouterr().err


def test_an_old_file_is_refused_in_one_line(tmp_path: Path) -> None:
    old = tmp_path / "rates.json"  # format 2: images pinned by id, whole reports
    old.write_text(json.dumps({"header": {**header(), "format": 2}, "rounds": []}), encoding="utf-8")
    with pytest.raises(rates.Refused) as refused:
        rates.read_accumulated(old, header())
    assert len(str(refused.value).splitlines()) == 1 and "its format is 2, not 3" in str(refused.value)


def test_the_upper_bound_is_clopper_pearsons_and_about_the_rule_of_three_at_zero() -> None:
    assert rates.upper_bound(0, 100) == pytest.approx(1 - 0.05 ** (1 / 100), rel=1e-9)  # 2.95 %, ~3/n
    assert rates.upper_bound(1, 100) == pytest.approx(0.0466, abs=5e-5)
    assert rates.upper_bound(3, 10) == pytest.approx(0.6066, abs=5e-5)
    assert rates.upper_bound(4, 4) == 1.0 and rates.upper_bound(0, 0) == 1.0


def test_the_table_says_per_candidate_rounds_independent_comparisons_bound_load_and_dates() -> None:
    def entry(label: str, number: int, load: float, day: str) -> dict[str, Any]:
        return {"candidate": label, "round": number, "load": [load], "started": day, "finished": day, "machine": "2 CPUs, vm"}

    rounds = [entry(rates.SAME, n, 1.0 + n, f"2026-12-0{n}T10:00:00+00:00") for n in range(1, 5)] + [
        entry(SLOW, 5, 7.0, "2026-12-07T11:00:00+00:00")
    ]
    seen = {"failed": 0, "comparisons": 100, "busbw_regressed": 0, "busbw_figures": 6400}
    slow = {"failed": 2, "comparisons": 2, "busbw_regressed": 100, "busbw_figures": 128}
    rows = [
        {"rule": "--reference --pairs 2, disjoint", "independent": True, rates.SAME: seen, SLOW: slow},
        {"rule": "--reference --pairs 2, every choice", "independent": False, rates.SAME: seen, SLOW: slow},
    ]
    table = rates.markdown(rows, rounds, "elsewhere")
    lines = table.splitlines()
    assert lines[0].startswith("Machine: 2 CPUs, vm. 5 rounds.")
    same_row = next(line for line in lines if line.startswith("| --reference --pairs 2, disjoint | false alarms"))
    assert same_row == (
        "| --reference --pairs 2, disjoint | false alarms (unchanged image) | 4 | 100 independent | 0 | 0.0% | 3.0% "
        "| 0 of 6400 | 2.0-5.0 | 2026-12-01 10:00 - 2026-12-04 10:00 |"
    )
    slow_row = next(line for line in lines if line.startswith("| --reference --pairs 2, disjoint | missed"))
    assert "| 1 | 2 independent | 0 | 0.0% | 77.6% | 28 of 128 | 7.0-7.0 |" in slow_row
    overlapping = [line for line in lines if "every choice" in line]
    assert all("overlapping" in line and "| n/a |" in line for line in overlapping)


def test_an_append_file_that_is_no_file_of_rounds_is_refused(tmp_path: Path) -> None:
    broken = tmp_path / "rates.json"
    broken.write_text("{half", encoding="utf-8")
    with pytest.raises(rates.Refused, match="not a JSON file"):
        rates.read_accumulated(broken, header())
    old = tmp_path / "old.json"  # the first format: no header, so no image ids to hold the rounds to
    old.write_text(json.dumps({"good": GOOD, "rounds": []}), encoding="utf-8")
    with pytest.raises(rates.Refused, match="no header"):
        rates.read_accumulated(old, header())
    assert rates.read_accumulated(tmp_path / "new.json", header()) == (header(), [])


def _round(number: int, candidate_busbw: float) -> dict[str, Any]:
    """A round of the unchanged image whose candidate run measured ``candidate_busbw`` against the reference's 1.0."""

    def entry(busbw: float) -> dict[str, Any]:
        figures = [
            {"operation": "all_reduce", "size": size, "label": label, "busbw_gbps": busbw * scale, "iterations": 5}
            for size, label, scale in ((65536, "64KiB", 1.0), (1048576, "1MiB", 2.0))
        ]
        cases = [{"name": "all_reduce", "status": "passed", "duration_s": 1.0, "message": "m"}]
        return {
            "name": "bw",
            "image_id": "sha256:good",
            "status": "passed",
            "duration_s": 10.0,
            "bandwidth": figures,
            "cases": cases,
        }

    order = ["candidate", "reference"] if number % 2 else ["reference", "candidate"]
    runs = {"candidate": {"scenarios": [entry(candidate_busbw)]}, "reference": {"scenarios": [entry(1.0)]}}
    return {"candidate": rates.SAME, "round": number, "order": order, "runs": runs}


def test_confirmation_rounds_are_judged_where_the_first_pairs_regressed_and_only_then() -> None:
    # Three pairs 30 % slower (the tolerance is 20 %), then two even ones: a swing over three pairs, the next two unhit.
    swing = [_round(n, 0.7 if n <= 3 else 1.0) for n in range(1, 6)]
    without = rates.judge_paired(swing, rates.SAME, 3, rates.PairedTolerances(), disjoint=True)
    assert (without["failed"], without["comparisons"]) == (1, 1)  # the first three rounds alone: a false alarm
    confirmed = rates.judge_paired(swing, rates.SAME, 3, rates.PairedTolerances(), confirm=2)
    assert (confirmed["failed"], confirmed["comparisons"]) == (0, 1)  # contradicted by the two that followed
    # Slower in every pair: confirmed, a failure.
    steady = [_round(n, 0.7) for n in range(1, 6)]
    assert rates.judge_paired(steady, rates.SAME, 3, rates.PairedTolerances(), confirm=2)["failed"] == 1
    # Nothing regressed over the first three: their comparison alone, the two rounds after it unused by it.
    even = [_round(n, 1.0 if n <= 3 else 0.5) for n in range(1, 6)]
    assert rates.judge_paired(even, rates.SAME, 3, rates.PairedTolerances(), confirm=2)["failed"] == 0
    rows = rates.judge(swing, [3], baseline=False, disjoint=True, confirm_pairs=2)
    assert [row["rule"] for row in rows] == [
        "--reference --pairs 3, disjoint",
        "--reference --pairs 3 --confirm-pairs 2 (as run: sequential groups)",
    ]


def test_the_confirmation_row_judges_groups_one_after_the_other_as_run() -> None:
    # Rounds 1-5 slower in every pair (triggered after 3, confirmed over 5); 6-8 even (not triggered: 3 rounds);
    # 9-11 slower, 12-13 even (triggered, contradicted); 14-15 left over (fewer than 3: no comparison).
    speeds = [0.7] * 5 + [1.0] * 3 + [0.7] * 3 + [1.0] * 2 + [0.7] * 2
    rounds = [_round(n, speed) for n, speed in enumerate(speeds, start=1)]
    tolerances = rates.PairedTolerances()
    taken = rates.sequential_groups(rounds, 3, 2, tolerances)
    assert [[r["round"] for r in group] for group in taken] == [[1, 2, 3, 4, 5], [6, 7, 8], [9, 10, 11, 12, 13]]
    seen = rates.judge_paired(rounds, rates.SAME, 3, tolerances, confirm=2)
    assert (seen["failed"], seen["comparisons"], seen["rounds_used"]) == (1, 3, 13)
    # A group triggered by its last three rounds that cannot be confirmed (the rounds ran out) is not judged.
    assert [[r["round"] for r in g] for g in rates.sequential_groups(rounds[:7], 3, 2, tolerances)] == [[1, 2, 3, 4, 5]]
    # Without confirmation pairs: disjoint groups of 3, whatever they found.
    assert len(rates.sequential_groups(rounds, 3, 0, tolerances)) == 5


# --- whole reports as distval writes them, and the slim rounds an --append file keeps -------------------------------

# busbw (GB/s) of the 2.6 fixture per operation and size, 2 ranks, one run on this machine (docs/measurements.md, "The
# bandwidth check"), and the raw TCP yardstick per size ("Efficiency against raw TCP"): in one container, across two.
SIZES = tuple(4096 * 4**i for i in range(8))
BUSBW = {
    "bw-in-container": {
        "all_reduce": (0.008, 0.004, 0.146, 0.313, 0.861, 0.639, 0.825, 0.846),
        "all_gather": (0.008, 0.002, 0.012, 0.247, 0.506, 0.387, 0.484, 0.231),
        "broadcast": (0.027, 0.114, 0.396, 1.110, 2.281, 2.630, 2.131, 2.354),
        "all_to_all": (0.001, 0.023, 0.072, 0.260, 0.475, 0.570, 0.768, 0.833),
    },
    "bw-cross-container": {
        "all_reduce": (0.007, 0.027, 0.099, 0.034, 0.101, 0.311, 0.415, 0.610),
        "all_gather": (0.001, 0.026, 0.067, 0.181, 0.430, 0.422, 0.410, 0.123),
        "broadcast": (0.015, 0.058, 0.213, 0.419, 0.691, 1.013, 0.857, 0.733),
        "all_to_all": (0.006, 0.018, 0.057, 0.141, 0.253, 0.256, 0.556, 0.427),
    },
}
TCP = {
    "bw-in-container": (0.070, 0.279, 1.298, 2.539, 3.431, 4.018, 3.190, 2.897),
    "bw-cross-container": (0.046, 0.177, 0.615, 0.897, 1.407, 1.540, 1.388, 1.364),
}


def whole_report(
    image: str, image_id: str, speed: float, rng: random.Random, run_id: str, sizes: int = 8, broken: str = ""
) -> dict[str, Any]:
    """A run of the reference-rates sweep as distval's JSON writer writes it (distval/reports/json_report.py), its
    bandwidth figures made by the suite's own code (distval_suite/bandwidth_figures.py) from per-iteration times around
    the measured busbw x ``speed``, each run and iteration with its noise: min_time_s 0.1 s per figure (100 samples kept
    at most), the yardstick, reduce_scatter skipped (Debian's gloo), logs, properties. ``broken``: an operation that
    failed its check in this run."""
    scenarios = []
    for scenario in parse_config(rates.CONFIG, "bw.yaml").scenarios:
        plan = with_hashes(plan_scenario(scenario, run_id, image))
        name = scenario.name
        run_speed = speed * rng.lognormvariate(0, 0.1)
        cases = [
            CaseResult(
                "bandwidth.yardstick",
                PASSED,
                "raw TCP between ring neighbours",
                1.5,
                output="yardstick output\n" * 20,
                details={"figures": [{"size": s, "tcp_gbps": t} for s, t in zip(SIZES[:sizes], TCP[name], strict=False)]},
            )
        ]
        for operation, busbws in BUSBW[name].items():
            factor = bandwidth_figures.bus_factor(operation, 2)
            per_rank: list[list[list[float]]] = [[], []]
            medians, bests, counts = [], [], []
            for size, busbw in zip(SIZES[:sizes], busbws, strict=False):
                call_s = size * factor / (busbw * run_speed * 1e9)
                count = max(5, min(1000, math.ceil(0.1 / call_s)))
                # The calls the suite keeps (SAMPLES_MAX, evenly spaced over all of them): drawn alike, so only those.
                kept = min(count, bandwidth_figures.SAMPLES_MAX)
                times = [[call_s * rng.lognormvariate(0, 0.2) for _ in range(kept)] for _rank in range(2)]
                medians.append(max(statistics.median(t) for t in times))
                bests.append(max(min(t) for t in times))
                counts.append(count)
                for rank in range(2):
                    per_rank[rank].append(bandwidth_figures.bounded(times[rank]))
            figures = bandwidth_figures.figures(operation, list(SIZES[:sizes]), medians, 2, bests, counts)
            bandwidth_figures.add_efficiency(figures, {s: (t, t * 1.2) for s, t in zip(SIZES, TCP[name], strict=False)})
            bandwidth_figures.add_samples(figures, per_rank)
            details = {
                "operation": operation,
                "world_size": 2,
                "iterations": 5,
                "min_time_s": 0.1,
                "warmup": 1,
                "statistic": "median of 5-100 iterations per rank; the slowest rank's median",
                "device": "cpu",
                "figures": figures,
                "link": {"interface": "lo", "nominal_gbps": None},
            }
            status, message = (FAILED, f"{operation} gave wrong data") if operation == broken else (PASSED, "busbw up to ...")
            cases.append(CaseResult(f"bandwidth.{operation}", status, message, 2.0 + rng.random(), "output\n" * 10, (), details))
        cases.append(CaseResult("bandwidth.reduce_scatter", SKIPPED, "not supported by this image: no gloo reduce_scatter", 0.1))
        cases += [
            CaseResult("process_group", PASSED, "formed", 3.0),
            CaseResult("exit_status", PASSED, "every container exited 0", 20.0),
        ]
        hashes = (("scenario_hash", plan.scenario_hash or ""), ("scenario_hash_any_image", plan.scenario_hash_any_image or ""))
        properties = (("image", image), ("image_id", image_id), ("backend", "gloo"), ("torch_version", "2.6.0"), *hashes)
        result = ScenarioResult(plan, tuple(cases), properties, "rank 0: log line\n" * 300, 25.0 + rng.random(), started_at=1.7e9)
        scenarios.append(result)
    summary = RunSummary(run_id, tuple(scenarios), engine_version="20.10.24", host="vm", config_path="bw.yaml")
    report: dict[str, Any] = json.loads(json.dumps(json_report(summary)))  # as read back from the file
    return report


def whole_rounds(speeds: list[tuple[str, float, float]], seed: int = 1, sizes: int = 8) -> list[dict[str, Any]]:
    """Rounds of whole reports, in ``collect_rounds``' shape: per (candidate label, candidate speed, reference speed),
    one round, each candidate's pairs alternating ABBA."""
    rng = random.Random(seed)
    rounds: list[dict[str, Any]] = []
    for number, (label, candidate_speed, reference_speed) in enumerate(speeds, start=1):
        index = sum(1 for r in rounds if r["candidate"] == label)
        order = list(rates.schedule(index + 1)[index])
        image = GOOD if label == rates.SAME else label
        broken = "broadcast" if number == 2 else ""  # a check the candidate failed in one run: the image's fault
        runs = {
            "candidate": whole_report(image, IDS[image], candidate_speed, rng, f"c{number}", sizes, broken),
            "reference": whole_report(GOOD, IDS[GOOD], reference_speed, rng, f"r{number}", sizes),
        }
        rounds.append({"candidate": label, "round": number, "order": order, "runs": runs, "load": [2.0, 2.1]})
    return rounds


def slimmed(rounds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**r, "runs": {member: rates.slim_report(report) for member, report in r["runs"].items()}} for r in rounds]


def test_slim_rounds_are_judged_exactly_as_whole_ones(capsys: pytest.CaptureFixture[str]) -> None:
    # The unchanged image with a load swing over its first three pairs (its candidate runs 30 % slower: the
    # confirmation is triggered), then calm; the 40 % image.
    same = [(rates.SAME, 0.7 if n < 3 else 1.0, 1.0) for n in range(7)]
    rounds = whole_rounds(same + [(SLOW, 0.6, 1.0)] * 5, sizes=3)
    slim = slimmed(rounds)
    whole_rows = rates.judge(rounds, [3], baseline=False, disjoint=True, confirm_pairs=2)
    assert rates.judge(slim, [3], baseline=False, disjoint=True, confirm_pairs=2) == whole_rows
    confirmed = next(row for row in whole_rows if row["rule"].startswith("--reference --pairs 3 --confirm-pairs 2"))
    assert confirmed[rates.SAME]["rounds_used"] == 5 and confirmed[SLOW]["failed"] == 1  # something was judged
    assert any(row[rates.SAME]["failed"] for row in whole_rows) and any(row[SLOW]["busbw_regressed"] for row in whole_rows)
    assert rates.markdown(whole_rows, rounds, "vm") == rates.markdown(whole_rows, slim, "vm")
    # Every choice of 2 rounds, and the baseline judge (every ordered choice of re-measures): three rounds each.
    few = [r for r in rounds if r["round"] in (4, 5, 6, 8, 9, 10)]
    assert rates.judge(slimmed(few), [2]) == rates.judge(few, [2])
    # The baseline's disjoint rows (one good run, the median of three): on every round.
    with_baseline = rates.judge(rounds, [3], disjoint=True, confirm_pairs=0)
    assert rates.judge(slim, [3], disjoint=True, confirm_pairs=0) == with_baseline
    # Each testcase word for word, on the rounds with a failed check and the trigger.
    pick = [r["runs"] for r in rounds[:3]], [r["runs"] for r in slim[:3]]
    for scenario in range(2):
        cases = []
        for runs in pick:
            candidates = [run["candidate"]["scenarios"][scenario] for run in runs]
            references = [run["reference"]["scenarios"][scenario] for run in runs]
            case = rates.reference_case(candidates, references, rates.schedule(3), "good", rates.PairedTolerances())
            old = runs[0]["reference"]
            base = baseline_case(candidates[0], old, rates.Tolerances(), "good.json", candidates[1:])
            cases.append((case.status, case.message, case.details, base.status, base.message, base.details))
        assert cases[0] == cases[1]
        assert cases[0][0] == "failed" and "bandwidth.broadcast" in cases[0][1]
    capsys.readouterr()


def test_a_slim_round_is_a_seventh_of_the_whole_and_the_file_keeps_a_round_a_line(tmp_path: Path) -> None:
    rounds = whole_rounds([(rates.SAME, 1.0, 1.0)])
    whole = len(json.dumps(rounds[0], indent=2))
    path = tmp_path / "rates.json"
    data = {"header": header(), "rounds": slimmed(rounds) * 3, "rates": []}
    rates.write_atomically(path, data)
    assert json.loads(path.read_text(encoding="utf-8")) == data
    lines = path.read_text(encoding="utf-8").splitlines()
    round_lines = [line for line in lines if line.startswith('    {"candidate"')]
    assert len(round_lines) == 3
    # Measured on this model of the default sweep (2 scenarios x 32 figures, 7,139 samples a round of the unchanged
    # image): 664 KB whole (indented), 92 KB slim, of which 59 KB are the per-iteration samples the rank test reads.
    slim = len(round_lines[0])
    assert slim < whole / 6 and slim < 100_000, (slim, whole)


def _run_ids(comparison: tuple[list[dict[str, Any]], dict[str, Any], list[dict[str, Any]]]) -> tuple[list[str], str, list[str]]:
    good, new, again = comparison
    return [r["run_id"] for r in good], new["run_id"], [r["run_id"] for r in again]


def test_the_baseline_is_judged_on_disjoint_groups_of_three_rounds_with_one_or_three_good_runs() -> None:
    rounds = slimmed(whole_rounds([(rates.SAME, 1.0, 1.0)] * 7 + [(SLOW, 0.6, 1.0)] * 3, sizes=2))
    # 7 rounds of the unchanged image: two groups of 3, the 7th left over; each group's own reference runs are its
    # baseline, its first candidate run the new one, the next two the re-measures: no run in two comparisons.
    assert [_run_ids(c) for c in rates.baseline_comparisons(rounds, rates.SAME, True, 3)] == [
        (["r1", "r2", "r3"], "c1", ["c2", "c3"]),
        (["r4", "r5", "r6"], "c4", ["c5", "c6"]),
    ]
    assert [_run_ids(c) for c in rates.baseline_comparisons(rounds, rates.SAME, True, 1)] == [
        (["r1"], "c1", ["c2", "c3"]),
        (["r4"], "c4", ["c5", "c6"]),
    ]
    assert [_run_ids(c) for c in rates.baseline_comparisons(rounds, SLOW, True, 3)] == [
        (["r8", "r9", "r10"], "c8", ["c9", "c10"])
    ]
    # Every choice (one good run only): every reference run of every round against every ordered choice of three of
    # the candidate's runs.
    assert len(rates.baseline_comparisons(rounds, SLOW, False)) == 10 * 3 * 2 * 1
    with pytest.raises(ValueError):
        rates.baseline_comparisons(rounds, SLOW, False, 3)


def test_the_baseline_rows_are_independent_and_catch_a_slower_image(capsys: pytest.CaptureFixture[str]) -> None:
    rounds = slimmed(whole_rounds([(rates.SAME, 1.0, 1.0)] * 3 + [(SLOW, 0.6, 1.0)] * 3, sizes=2))
    rows = {row["rule"]: row for row in rates.judge(rounds, [3], disjoint=True, confirm_pairs=0)}
    one = rows["--baseline (one good run) --remeasure 2, disjoint"]
    three = rows["--baseline (the median of 3 good runs) --remeasure 2, disjoint"]
    assert one["independent"] and three["independent"]
    assert not any("every choice" in rule for rule in rows)  # --disjoint: no overlapping row
    for row in (one, three):
        assert row[SLOW]["comparisons"] == 1 and row[SLOW]["failed"] == 1  # 40 % slower in every run: caught
        assert row[rates.SAME]["comparisons"] == 1
    # Without --disjoint, the overlapping row of one good run joins them.
    overlapping = [row for row in rates.judge(rounds, [3], confirm_pairs=0) if row["rule"].startswith("--baseline")]
    assert [row["independent"] for row in overlapping] == [True, True, False]
    capsys.readouterr()


def test_the_measurement_pin_follows_each_module_that_times_the_sweep(tmp_path: Path) -> None:
    for name in rates.MEASUREMENT_MODULES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(f"# {name}\n", encoding="utf-8")
    before = rates.measurement_sha256(tmp_path)
    assert rates.measurement_sha256(tmp_path) == before
    for name in rates.MEASUREMENT_MODULES:
        (tmp_path / name).write_text(f"# {name}, changed\n", encoding="utf-8")
        assert rates.measurement_sha256(tmp_path) != before, name
        before = rates.measurement_sha256(tmp_path)
    assert rates.header(GOOD, RECIPES[GOOD], {})["measurement_sha256"] == rates.measurement_sha256()


def test_the_docs_table_and_the_readme_sentence_are_the_accumulated_files(capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads((ROOT / "benchmarks" / "data" / "reference-rates.json").read_text(encoding="utf-8"))
    page = (ROOT / rates.DOCS_PAGE).read_text(encoding="utf-8")
    readme = (ROOT / rates.README_PAGE).read_text(encoding="utf-8")
    table, said = rates.docs_views(data["rounds"])
    again = "run: python benchmarks/bench_reference_rates.py --reports benchmarks/data/reference-rates.json --docs"
    assert rates.with_docs_table(page, table) == page, again
    assert rates.with_readme_findings(readme, said) == readme, again
    assert "--reference --pairs 3 --confirm-pairs 2 (as run: sequential groups) | false alarms (unchanged image)" in table
    assert table.endswith(f"\nSo far, {said}.\n") and said.startswith("judged as a run judges by default")
    capsys.readouterr()


def test_the_docs_table_goes_between_its_lines_and_the_sentence_between_its_markers_and_nowhere_else() -> None:
    page = f"intro\n{rates.DOCS_BEGIN}\nold table\n{rates.DOCS_END}\nafter\n"
    assert rates.with_docs_table(page, "| new |\n") == f"intro\n{rates.DOCS_BEGIN}\n| new |\n{rates.DOCS_END}\nafter\n"
    with pytest.raises(rates.BenchError, match="measurements.md has no place for the measurements"):
        rates.with_docs_table("intro\nafter\n", "| new |\n")
    readme = f"So far, {rates.README_BEGIN}old words{rates.README_END}; more.\n"
    assert rates.with_readme_findings(readme, "new") == f"So far, {rates.README_BEGIN}new{rates.README_END}; more.\n"
    with pytest.raises(rates.BenchError, match="README.md has no place for the measurements"):
        rates.with_readme_findings(f"So far, {rates.README_BEGIN}old words.\n", "new")


def _counts(failed: int, comparisons: int) -> dict[str, int]:
    return {"failed": failed, "comparisons": comparisons, "busbw_regressed": failed, "busbw_figures": 64 * comparisons}


def _runs_of_busbw(figures: dict[tuple[str, int], tuple[float, float]], scenarios: int = 1) -> dict[str, Any]:
    """A round's runs whose every scenario has these busbw figures: (operation, size) -> (candidate's, reference's)."""

    def side(index: int) -> dict[str, Any]:
        bandwidth = [
            {"operation": op, "size": size, "label": f"{size}B", "world_size": 2, "busbw_gbps": values[index]}
            for (op, size), values in figures.items()
        ]
        return {"scenarios": [{"bandwidth": bandwidth} for _ in range(scenarios)]}

    return {"candidate": side(0), "reference": side(1)}


def test_a_slower_images_measured_slowdown_is_the_median_over_figures_of_each_figures_median_over_rounds() -> None:
    def slow_round(figures: dict[tuple[str, int], tuple[float, float]]) -> dict[str, Any]:
        return {"candidate": SLOW, "runs": _runs_of_busbw(figures, scenarios=2)}

    rounds = [
        slow_round({("all_reduce", 4096): (0.7, 1.0), ("all_gather", 4096): (2.0, 4.0), ("broadcast", 4096): (0.0, 1.0)}),
        slow_round({("all_reduce", 4096): (0.9, 1.0), ("all_gather", 4096): (1.0, 4.0), ("broadcast", 4096): (1.0, 0.0)}),
        slow_round({("all_reduce", 4096): (0.8, 1.0), ("all_gather", 4096): (0.6, 1.0), ("all_gather", 8192): (3.0, 1.0)}),
        {"candidate": rates.SAME, "runs": _runs_of_busbw({("all_reduce", 4096): (0.1, 1.0)}, scenarios=2)},
    ]
    # all_reduce 4 KiB: 0.7/0.8/0.9 -> 0.8; all_gather 4 KiB: 0.5/0.25/0.6 -> 0.5; all_gather 8 KiB: 3.0; broadcast
    # measured by neither pair (0 on one side); each figure of both scenarios, the other candidate's rounds apart.
    median, lowest, highest = rates.measured_slowdown(rounds, SLOW)
    assert (round(median, 6), lowest, highest) == (0.8, 0.5, 3.0)
    assert rates.measured_slowdown(rounds, "mine/other") is None
    assert rates.measured_slowdown([slow_round({("broadcast", 4096): (1.0, 0.0)})], SLOW) is None


def test_the_sentence_says_the_defaults_alarms_bound_load_the_baselines_range_and_each_slower_images_catches() -> None:
    def entry(label: str, number: int, load: float) -> dict[str, Any]:
        return {"candidate": label, "round": number, "load": [load, load / 2]}

    custom = "mine/broken:late-allreduce"
    slow = {**entry(SLOW, 4, 9.0), "runs": _runs_of_busbw({("all_reduce", 4096): (0.6, 1.0), ("all_gather", 4096): (0.5, 1.0)})}
    nothing = {**entry(custom, 5, 9.0), "runs": _runs_of_busbw({})}  # no figure measured: no slowdown said
    rounds = [entry(rates.SAME, n, 1.5 + n) for n in range(1, 4)] + [slow, nothing]
    rows = [
        # A row judged otherwise, placed first: the sentence takes the default's row, wherever it is.
        {
            "rule": "--reference --pairs 3, disjoint",
            "independent": True,
            rates.SAME: _counts(9, 100),
            SLOW: _counts(0, 20),
            custom: _counts(0, 20),
        },
        {
            "rule": "as run",
            "independent": True,
            "as_run": True,
            rates.SAME: _counts(1, 100),
            SLOW: _counts(19, 20),
            custom: _counts(3, 12),
        },
        {
            "rule": "one good run",
            "independent": True,
            "baseline": True,
            rates.SAME: _counts(42, 100),
            SLOW: _counts(20, 20),
            custom: _counts(12, 12),
        },
        {
            "rule": "three good runs",
            "independent": True,
            "baseline": True,
            rates.SAME: _counts(7, 25),
            SLOW: _counts(20, 20),
            custom: _counts(12, 12),
        },
    ]
    said = rates.findings(rows, rounds)
    assert said == (
        "judged as a run judges by default (`--pairs 3 --confirm-pairs 2`), the unchanged image failed 1 of 100 "
        "independent comparisons over 3 rounds (load 1.2-4.5; 95 % bound 4.7 %; `--baseline` 28-42 % on the same "
        "rounds); the 40 % slower image (load 4.5-9.0; busbw measured 0.55x the good image's, 0.50-0.60x by figure) was "
        "caught in 19 of 20 (95 % bound on misses 22 %); `late-allreduce` (load 4.5-9.0) was "
        "caught in 3 of 12 (95 % bound on misses 93 %); the 10 % and 25 % slower images have no rounds yet"
    )


def test_the_sentence_says_which_images_have_no_rounds_and_refuses_rows_without_the_default_judge() -> None:
    rounds = [{"candidate": "distval-fixtures/broken:slow-busbw-10", "round": 1}]
    rows = [{"rule": "as run", "independent": True, "as_run": True, rounds[0]["candidate"]: _counts(0, 0)}]
    assert rates.findings(rows, rounds).endswith(
        "the unchanged image has no rounds yet; the 10 % slower image has 1 round, too few for a comparison; the 25 % "
        "and 40 % slower images have no rounds yet"
    )
    rounds.append({"candidate": rates.SAME, "round": 2})
    rows[0][rates.SAME] = _counts(0, 0)
    assert "the unchanged image has 1 round, too few for a comparison; the 10 %" in rates.findings(rows, rounds)
    with pytest.raises(rates.BenchError, match="no row judged as a run judges by default"):
        rates.findings([{**rows[0], "as_run": False}], rounds)


def _loops_of(parent: int) -> list[int]:
    """The pids of the running ``BUSY_LOOP`` processes whose argument is ``parent``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                state = (entry / "stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if rates.BUSY_LOOP.encode() in argv and str(parent).encode() in argv and state != "Z":
                found.append(int(entry.name))
    return found


def _wait_for(condition: Any, seconds: float) -> bool:
    # Waiting for an event, not timing it: the deadline only bounds a test that fails.
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _shown(parent: int, count: int) -> list[int]:
    """The loops of ``parent`` once ``count`` of them show their program. Popen returns once the exec has closed
    its close-on-exec pipe, which the kernel does before it gives the new program its arguments: for a moment
    /proc/PID/cmdline is empty (12 of 200 spawns read it so on a quiet 2-core VM, 343 of 400 at a load of 6), so the
    loops are waited for (a hang guard only). Their priority needs no wait: busy_cpus sets it by pid."""
    assert _wait_for(lambda: len(_loops_of(parent)) >= count, seconds=300)
    return _loops_of(parent)


def test_busy_cpus_start_at_nice_19_and_sched_idle_end_with_the_block_and_say_what_ran_beside() -> None:
    with rates.busy_cpus(2) as beside:
        assert beside == {"busy_cpus": 2}
        loops = _shown(os.getpid(), 2)
        assert len(loops) == 2
        assert all(os.sched_getscheduler(pid) == os.SCHED_IDLE for pid in loops)
        assert all(os.getpriority(os.PRIO_PROCESS, pid) == 19 for pid in loops)
    assert _loops_of(os.getpid()) == []
    with rates.busy_cpus(0) as beside:
        assert beside == {} and _loops_of(os.getpid()) == []


def test_busy_cpus_end_when_the_benchmark_is_killed() -> None:
    # SIGKILL runs no finally: each loop ends on its own once its parent is gone (it sees itself adopted).
    script = (
        "import os, sys, time\n"
        f"sys.path.insert(0, {str(ROOT / 'benchmarks')!r})\n"
        "import bench_reference_rates as rates\n"
        "with rates.busy_cpus(2):\n"
        "    print(os.getpid(), flush=True)\n"
        "    time.sleep(60)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert child.stdout is not None
    parent = int(child.stdout.readline())  # printed inside the block: both loops have been started
    try:
        assert len(_shown(parent, 2)) == 2
    finally:
        child.kill()
        child.wait()
    # A loop must be scheduled once to see its new parent, and at SCHED_IDLE beside a load of 20 that can take
    # seconds: the bound is a hang guard only.
    assert _wait_for(lambda: _loops_of(parent) == [], seconds=300)
    assert os.getpid() != parent


def test_rounds_keep_what_ran_beside_them_and_only_then() -> None:
    busy = collect(FakeRuns(), [(rates.SAME, GOOD)], 2, beside={"busy_cpus": 2})
    assert [r["beside"] for r in busy] == [{"busy_cpus": 2}] * 2
    assert all("beside" not in r for r in collect(FakeRuns(), [(rates.SAME, GOOD)], 2, beside={}))


def test_a_cohort_is_the_candidate_and_what_ran_beside_it() -> None:
    quiet = {"candidate": SLOW}
    busy = {"candidate": SLOW, "beside": {"busy_cpus": 2}}
    assert rates.cohort(quiet) == SLOW and rates.cohort({**quiet, "beside": {"busy_cpus": 0}}) == SLOW
    assert rates.cohort(busy) == f"{SLOW} with 2 CPUs kept busy"
    for entry in (quiet, busy, {"candidate": rates.SAME, "beside": {"busy_cpus": 3}}):
        label = rates.cohort(entry)
        assert rates.candidate_of(label) == entry["candidate"]
        assert rates.candidate_of(label) + rates.beside_of(label) == label


def test_rounds_with_the_cpus_kept_busy_are_judged_apart(capsys: pytest.CaptureFixture[str]) -> None:
    # The 40 % image caught in its quiet rounds and missed in its busy ones (its busy candidate runs as fast as the
    # reference): were they judged together, the rows would mix both states of the machine.
    quiet = whole_rounds([(SLOW, 0.6, 1.0)] * 5, sizes=3)  # caught: 3 rounds and 2 confirmation pairs
    calm = whole_rounds([(SLOW, 1.0, 1.0)] * 4, seed=2, sizes=3)
    del calm[1]  # whole_rounds' round 2 has a failed check (the image's fault): this image is only slow, or not
    busy = [{**r, "round": r["round"] + 5, "beside": {"busy_cpus": 2}} for r in calm]
    rounds = quiet + busy
    label = f"{SLOW} with 2 CPUs kept busy"
    rows = rates.judge(rounds, [3], baseline=False, disjoint=True, confirm_pairs=2)
    as_run = next(row for row in rows if row.get("as_run"))
    assert (as_run[SLOW]["failed"], as_run[SLOW]["comparisons"]) == (1, 1)
    assert (as_run[label]["failed"], as_run[label]["comparisons"]) == (0, 1)
    assert rates.errors(label, as_run[label]) == (1, as_run[label]["busbw_figures"])  # a miss, counted as one
    table = rates.markdown(rows, rounds, "vm")
    assert "| missed: slow-busbw-40 | 5 | 1 independent | 0 |" in table
    assert "| missed: slow-busbw-40 with 2 CPUs kept busy | 3 | 1 independent | 1 |" in table
    said = rates.findings(rows, rounds)
    quiet_part = "the 40 % slower image (load 2.0-2.1; busbw measured 0.57x the good image's, 0.55-0.62x by figure)"
    assert f"{quiet_part} was caught in 1 of 1" in said
    busy_part = (
        "the 40 % slower image with 2 CPUs kept busy beside it (load 2.0-2.1; busbw measured 0.94x the good image's, 0.89-1.04x"
    )
    assert f"{busy_part} by figure) was caught in 0 of 1" in said
    assert rates.measured_slowdown(rounds, label) != rates.measured_slowdown(rounds, SLOW)
    # The baseline's comparisons take their good runs from rounds in the same state only.
    every = rates.baseline_comparisons(rounds, label, disjoint=False)
    busy_references = [id(r["runs"]["reference"]) for r in busy]
    assert every and all(id(good[0]) in busy_references for good, _, _ in every)
    capsys.readouterr()


def test_the_unchanged_image_with_the_cpus_kept_busy_has_its_own_part_of_the_sentence() -> None:
    rounds = [{"candidate": rates.SAME, "round": 1, "load": [2.0]}, {"candidate": rates.SAME, "round": 2, "load": [4.0]}]
    rounds.append({"candidate": rates.SAME, "round": 3, "load": [4.5], "beside": {"busy_cpus": 2}})
    label = f"{rates.SAME} with 2 CPUs kept busy"
    rows = [{"rule": "as run", "independent": True, "as_run": True, rates.SAME: _counts(0, 100), label: _counts(0, 0)}]
    said = rates.findings(rows, rounds)
    assert "the unchanged image failed 0 of 100 independent comparisons over 2 rounds (load 2.0-4.0;" in said
    assert "the unchanged image with 2 CPUs kept busy beside it has 1 round, too few for a comparison" in said
