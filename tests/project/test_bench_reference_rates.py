"""benchmarks/bench_reference_rates.py without Docker: accumulating rounds in one file across sessions (append,
refuse, the stop rule) and the error-rate table's bound, with fake runs."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

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
    wanted = rates.header(GOOD, IDS[GOOD], {SLOW: IDS[SLOW]})
    return {**wanted, **changes}


def test_a_file_takes_rounds_made_alike_and_a_slow_image_it_has_not_seen() -> None:
    assert rates.refusal(header(), header()) is None
    assert rates.refusal(header(slow_ids={}), header()) is None  # the false alarms first, the misses later
    assert rates.refusal(header(), header(slow_ids={})) is None


@pytest.mark.parametrize(
    ("found", "says"),
    [
        ({"config_sha256": "0" * 64}, "another config text"),
        ({"good_id": "sha256:rebuilt"}, "sha256:rebuilt"),
        ({"good": "distval-fixtures/torch:2.15-debian"}, "torch:2.15"),
        ({"slow_ids": {SLOW: "sha256:rebuilt"}}, f"its {SLOW} is image sha256:rebuilt"),
        ({"rules": {"distval": "0.0.1"}}, "other rules"),
        ({"format": 1}, "format"),
    ],
)
def test_a_file_refuses_rounds_made_otherwise(found: dict[str, Any], says: str) -> None:
    why = rates.refusal(header(**found), header())
    assert why is not None and says in why


def test_append_creates_extends_and_refuses_in_one_line_with_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeRuns()
    ids = dict(IDS)
    monkeypatch.setattr(rates, "check_image", lambda image: ids[image])

    class Runner:
        def __enter__(self) -> Any:
            return fake.run

        def __exit__(self, *exc: object) -> None:
            return None

    monkeypatch.setattr(rates, "docker_runner", Runner)
    target = tmp_path / "rates.json"
    quiet = ["--no-baseline", "--judge-pairs", "50"]  # no judging of the fake reports: only what the file keeps
    assert rates.main(["--append", str(target), "--pairs", "2", "--slow", "none", *quiet]) == 0
    assert rates.main(["--append", str(target), "--pairs", "1", "--slow", SLOW, "--no-same", *quiet]) == 0
    data = json.loads(target.read_text(encoding="utf-8"))
    assert [(r["candidate"], r["round"]) for r in data["rounds"]] == [(rates.SAME, 1), (rates.SAME, 2), (SLOW, 3)]
    assert data["header"]["slow_ids"] == {SLOW: IDS[SLOW]} and data["header"]["good_id"] == IDS[GOOD]
    assert fake.ran == [GOOD] * 4 + [SLOW, GOOD]
    capsys.readouterr()

    ids[GOOD] = "sha256:rebuilt"
    assert rates.main(["--append", str(target), "--pairs", "1", "--slow", "none", *quiet]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "refusing to append" in err and "sha256:rebuilt" in err
    assert json.loads(target.read_text(encoding="utf-8")) == data  # untouched
    assert not list(tmp_path.glob(".*partial"))


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
        "--reference --pairs 3 --confirm-pairs 2, disjoint",
    ]
