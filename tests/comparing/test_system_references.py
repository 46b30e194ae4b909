"""A run judged against its machine's references (distval/reports/system_references.py, distval/cli/references.py):
figures below their floors fail, a figure with no reference fails, expected failures are said and strict, bad
references files are one line each with exit 2 before anything runs, and ``references suggest`` writes a file from
good runs that the next good run passes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from distval.cli.main import build_parser, main
from distval.comparing.judges import ReferencesOptions, with_references
from distval.comparing.reading import scenario_entries
from distval.comparing.references_suggest import MIN_TOLERANCE, suggest, tolerance_of
from distval.comparing.system_references import Machine, expected_failures, references_case
from distval.config import parse_config
from distval.config.references import REFERENCES_CASE, load_references, parse_references
from distval.errors import EXIT_BAD_INPUT, EXIT_PASSED, BadInput, ConfigError
from distval.results.outcome import ERROR, FAILED, PASSED, SKIPPED, CaseResult
from distval.results.scenario import RunSummary, ScenarioResult
from distval.results.shape import Straggler
from distval.session.references import references_options
from distval.targets.engines.planning import plan_scenario

TEXT = """\
version: 1
systems:
  ci-2core:
    bw:
      busbw:
        all_reduce:
          64KiB: {gbps: 1.0, tolerance: 0.2}
          1MiB: {gbps: 2.0, tolerance: 0.25}
      expected_failures:
        store: "the store's host is firewalled on this machine"
  other: {}
"""
CONFIG = """\
scenarios:
  - name: bw
    topology: in-container
    world_size: 2
    checks: [bandwidth, store]
  - name: quiet
    topology: in-container
    world_size: 2
    checks: [store]
"""


def figure(size: int, label: str, busbw: float) -> dict[str, Any]:
    return {"size": size, "label": label, "busbw_gbps": busbw, "time_us": 10.0, "algbw_gbps": busbw / 2}


def entry(small: float, large: float | None = 2.0, name: str = "bw", status: str = PASSED) -> dict[str, Any]:
    bandwidth = [{"operation": "all_reduce", **figure(65536, "64KiB", small)}]
    if large is not None:
        bandwidth.append({"operation": "all_reduce", **figure(1048576, "1MiB", large)})
    return {"name": name, "status": status, "bandwidth": bandwidth, "cases": []}


REFS = parse_references(TEXT, "refs.yaml")
BW = REFS.systems["ci-2core"]["bw"]


def test_figures_at_their_floors_pass_and_below_fail() -> None:
    at = references_case(entry(0.8, 1.5), BW, "ci-2core", "refs.yaml")
    assert at is not None and at.status == PASSED, at.message
    assert at.message.startswith("2 figure(s) at or above their floors on ci-2core in refs.yaml")
    below = references_case(entry(0.79, 1.5), BW, "ci-2core", "refs.yaml")
    assert below is not None and below.status == FAILED
    assert "1 figure(s) below the floor: all_reduce 64KiB: 0.79 GB/s, floor 0.8 (1 -20%)" in below.message


def test_a_figure_with_no_reference_fails_and_a_referenced_one_not_measured_fails() -> None:
    extra = entry(1.0, 2.0)
    extra["bandwidth"].append({"operation": "broadcast", **figure(65536, "64KiB", 1.0)})
    case = references_case(extra, BW, "ci-2core", "refs.yaml")
    assert case is not None and case.status == FAILED
    assert "1 figure(s) with no reference (a figure is judged or fails): broadcast 64KiB" in case.message
    missing = references_case(entry(1.0, None), BW, "ci-2core", "refs.yaml")
    assert missing is not None and missing.status == FAILED
    assert "1 referenced figure(s) not measured: all_reduce 1MiB" in missing.message
    # A scenario the file lacks that measured figures: failed, and says how to make references.
    unknown = references_case(entry(1.0), None, "ci-2core", "refs.yaml")
    assert unknown is not None and unknown.status == FAILED and "references suggest" in unknown.message
    # One that measured nothing is asked nothing.
    assert references_case({"name": "quiet", "cases": []}, None, "ci-2core", "refs.yaml") is None
    # References that name nothing judge nothing: not a pass.
    empty = parse_references("version: 1\nsystems:\n  s:\n    bw: {}\n", "e.yaml").systems["s"]["bw"]
    nothing = references_case({"name": "bw", "cases": []}, empty, "s", "e.yaml")
    assert nothing is not None and nothing.status == FAILED and "nothing to judge" in nothing.message


def result(name: str, cases: tuple[CaseResult, ...]) -> ScenarioResult:
    (scenario,) = [s for s in parse_config(CONFIG, "c.yaml").scenarios if s.name == name]
    return ScenarioResult(plan_scenario(scenario, "run1", "img:1"), cases, (), "", 5.0)


def bandwidth_case(small: float, large: float) -> CaseResult:
    details = {"figures": [figure(65536, "64KiB", small), figure(1048576, "1MiB", large)], "iterations": 5, "world_size": 2}
    return CaseResult("bandwidth.all_reduce", PASSED, "ok", 1.0, details=details)


def test_expected_failures_are_skips_with_the_reason_and_strict() -> None:
    options = ReferencesOptions(REFS, "ci-2core")
    failed = RunSummary("run1", (result("bw", (bandwidth_case(1.0, 2.0), CaseResult("store", FAILED, "refused", 1.0))),))
    (scenario,) = with_references(failed, options, scenario_entries(failed, failed.scenarios)).scenarios
    store = next(c for c in scenario.cases if c.name == "store")
    assert store.status == SKIPPED
    assert store.message == (
        "expected to fail on ci-2core (the store's host is firewalled on this machine); it did: failed: refused"
    )
    assert scenario.cases[-1].name == REFERENCES_CASE and scenario.cases[-1].status == PASSED, scenario.cases[-1].message
    assert scenario.status == PASSED
    # It passed: the file is out of date, and the references testcase says so.
    passed = RunSummary("run1", (result("bw", (bandwidth_case(1.0, 2.0), CaseResult("store", PASSED, "ok", 1.0))),))
    (scenario,) = with_references(passed, options, scenario_entries(passed, passed.scenarios)).scenarios
    last = scenario.cases[-1]
    assert last.status == FAILED and "store passed, which the references expect to fail" in last.message
    # A scenario the file lacks with no figure gets no testcase; one with figures fails.
    quiet = RunSummary("run1", (result("quiet", (CaseResult("store", PASSED, "ok", 1.0),)),))
    assert [c.name for c in with_references(quiet, options, scenario_entries(quiet, quiet.scenarios)).scenarios[0].cases] == [
        "store"
    ]
    other = with_references(failed, ReferencesOptions(REFS, "other"), scenario_entries(failed, failed.scenarios)).scenarios[0]
    assert other.cases[-1].status == FAILED and other.status == FAILED


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("version: 1\nsystems:\n  s:\n    bw:\n      busbw:\n        all_reduce:\n          64KiB: {gbps: 0, tolerance: 0.1}\n",
         "refs.yaml:7: systems.s.bw.busbw.all_reduce.64KiB.gbps: expected a busbw in GB/s > 0"),
        ("version: 1\nsystems:\n  s:\n    bw:\n      busbw:\n        all_reduce:\n          64KiB: {gbps: 1, tolerance: 1}\n",
         "refs.yaml:7: systems.s.bw.busbw.all_reduce.64KiB.tolerance: expected a tolerance from 0 up to (not including) 1"),
        ("version: 1\nsystems:\n  s:\n    bw:\n      busbw:\n        all_reduce:\n          lots: {gbps: 1, tolerance: 0.1}\n",
         "refs.yaml:7: systems.s.bw.busbw.all_reduce.lots: expected a message size"),
        ("version: 1\nsystems:\n  s:\n    bw:\n      busbw:\n        all_reduce:\n          64KiB: {gbps: 1}\n",
         "refs.yaml:7: systems.s.bw.busbw.all_reduce.64KiB.tolerance: required key is missing"),
        ("version: 1\nsystems:\n  s:\n    bw:\n      floor: 3\n",
         "refs.yaml:5: systems.s.bw.floor: unknown key; expected one of busbw, expected_failures"),
        ("version: 2\nsystems: {}\n", "refs.yaml:1: version: expected 1 (the only references version)"),
        ("systems:\n  'bad name': {}\n", "refs.yaml:1: version: required key is missing"),
    ],
)  # fmt: skip
def test_a_bad_references_file_is_one_line_with_file_line_key_path_and_expected(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_references(text, "refs.yaml")
    assert any(line.startswith(expected) for line in caught.value.problems), caught.value.problems
    assert caught.value.exit_code == EXIT_BAD_INPUT


def test_run_refuses_bad_references_options_before_anything_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "refs.yaml"
    path.write_text(TEXT)

    def options(*argv: str) -> ReferencesOptions:
        args = build_parser().parse_args(["run", *argv])
        return references_options(args.references, args.system)

    assert options("--references", str(path), "--system", "ci-2core").system == "ci-2core"
    for argv, expected in [
        (("--references", str(path)), "give --system NAME too"),
        (("--system", "ci-2core"), "give --references FILE too"),
        (("--references", str(path), "--system", "elsewhere"), "--system elsewhere: not in"),
    ]:
        with pytest.raises(BadInput, match=expected):
            options(*argv)
    (tmp_path / "bad.yaml").write_text("version: 1\nsystems:\n  s:\n    bw: 3\n")
    code = main(["run", "--local", "--references", str(tmp_path / "bad.yaml"), "--system", "s", "--quiet"])
    assert code == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert f"{tmp_path / 'bad.yaml'}:4: systems.s.bw: expected a mapping with keys busbw, expected_failures; got '3'" in err
    assert "Traceback" not in err


def report(*scenarios: dict[str, Any]) -> dict[str, Any]:
    return {"schema_version": 1, "run_id": "r", "scenarios": list(scenarios), "early_error": None}


def test_suggest_writes_a_file_the_next_good_run_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = [(0.50, 2.0), (0.55, 2.1), (0.45, 1.9), (0.52, 2.05), (0.40, 2.0)]
    paths = []
    for index, (small, large) in enumerate(good):
        path = tmp_path / f"good{index}.json"
        path.write_text(json.dumps(report(entry(small, large))))
        paths.append(str(path))
    out = tmp_path / "refs.yaml"
    assert main(["references", "suggest", *paths, "--system", "ci-2core", "--output", str(out)]) == EXIT_PASSED
    written = load_references(out)
    (small, large) = written.systems["ci-2core"]["bw"].busbw
    assert (small.label, small.gbps, large.gbps) == ("64KiB", 0.5, 2.0)
    assert small.tolerance >= 1.25 * (0.5 - 0.40) / 0.5 and large.tolerance == MIN_TOLERANCE
    # The next good run, as slow as the slowest good one: passes. Far slower: fails.
    for values, status in [((0.40, 1.9), PASSED), ((0.5, 2.0), PASSED), ((0.2, 2.0), FAILED), ((0.5, 1.5), FAILED)]:
        case = references_case(entry(*values), written.systems["ci-2core"]["bw"], "ci-2core", str(out))
        assert case is not None and case.status == status, (values, case.message)
    # To standard output without --output; a report with a failed scenario only is no good run (exit 2).
    assert main(["references", "suggest", paths[0], "--system", "ci-2core"]) == EXIT_PASSED
    assert capsys.readouterr().out.startswith("# distval references suggest: 1 good run(s) of ci-2core")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(report(entry(0.5, 2.0, status=FAILED))))
    assert main(["references", "suggest", str(bad), "--system", "ci-2core"]) == EXIT_BAD_INPUT
    assert "no passed scenario with a busbw figure" in capsys.readouterr().err


def test_the_suggested_tolerance_covers_the_spread_and_keeps_its_minimum() -> None:
    assert tolerance_of([1.0]) == (1.0, MIN_TOLERANCE)
    median, tolerance = tolerance_of([1.0, 1.0, 1.0, 0.5])
    assert median == 1.0 and tolerance == pytest.approx(1.25 * 0.5)
    # Robust spread: 3 x 1.4826 x MAD / median.
    median, tolerance = tolerance_of([1.0, 0.9, 1.1, 0.8, 1.2])
    assert tolerance == pytest.approx(max(3 * 1.4826 * 0.1 / 1.0, 1.25 * 0.2))
    assert tolerance_of([1.0, 0.01])[1] == 0.9
    assert len(suggest([("a", report(entry(1.0))), ("b", report(entry(1.0, None)))])) == 1  # only what both have


def test_a_floor_the_reference_image_misses_too_is_the_machines_and_names_the_node() -> None:
    below = entry(0.5, 1.0)  # both figures far below their floors
    machine = Machine(reference_busbw={"all_reduce 64KiB": (0.4, 0.5), "all_reduce 1MiB": (1.0, 1.1)}, nodes=2)
    case = references_case(below, BW, "ci-2core", "refs.yaml", machine=machine)
    assert case is not None and case.status == ERROR, case.message
    assert case.message.startswith("the machine, not the candidate: 2 figure(s) below the floor on ci-2core in refs.yaml")
    assert case.message.endswith("no straggler among the ranks: nodes 0..1 alike")
    slow = Straggler(rank=3, node=1, slowest_in=4, figures=4, ratio=1.5)
    named = references_case(below, BW, "ci-2core", "refs.yaml", machine=dataclasses.replace(machine, straggler=slow))
    assert named is not None and named.message.endswith(
        "rank 3 on node 1 is a straggler: the slowest rank in 4 of 4 figures, its calls 1.50x the other ranks' "
        "(median over the figures)"
    )
    # The reference image reached the floor where the candidate did not: the candidate's.
    mixed = Machine(reference_busbw={"all_reduce 64KiB": (1.0, 1.0), "all_reduce 1MiB": (1.0, 1.1)})
    case = references_case(below, BW, "ci-2core", "refs.yaml", machine=mixed)
    assert case is not None and case.status == FAILED and "1 figure(s) below the floor: all_reduce 64KiB" in case.message
    # A curve that falls past its plateau fails, whatever the floors.
    fell = references_case(entry(1.0, 2.0), BW, "ci-2core", "refs.yaml", machine=Machine(shape=("all_reduce busbw falls",)))
    assert fell is not None and fell.status == FAILED and fell.message.endswith("all_reduce busbw falls")
    # A straggler alone: the machine's.
    alone = references_case(entry(1.0, 2.0), BW, "ci-2core", "refs.yaml", machine=Machine(straggler=slow))
    assert alone is not None and alone.status == ERROR and "rank 3 on node 1 is a straggler" in alone.message


def test_an_expected_failure_of_a_check_with_parts_skips_the_failed_parts_only() -> None:
    refs = parse_references("version: 1\nsystems:\n  s:\n    bw:\n      expected_failures:\n        store: known\n", "r.yaml")
    cases = (CaseResult("store.get", FAILED, "lost", 1.0), CaseResult("store.set", PASSED, "ok", 1.0))
    from_refs = refs.systems["s"]["bw"]
    judged, problems, notes = expected_failures(cases, from_refs, "s")
    assert [(c.name, c.status) for c in judged] == [("store.get", SKIPPED), ("store.set", PASSED)]
    assert problems == [] and notes == []


def test_a_figure_exactly_at_its_floor_passes_in_the_details_too() -> None:
    case = references_case(entry(0.8, 1.5), BW, "ci-2core", "refs.yaml")
    assert case is not None and case.status == PASSED
    assert [row["passed"] for row in case.details["figures"]] == [True, True]
    assert case.duration_s == 0.0


def test_the_machine_is_blamed_only_where_the_reference_image_measured_below_the_floor() -> None:
    # The candidate below its floor on 64KiB (0.5 < 0.8); 1MiB at its floor. The reference image's busbw decides.
    below = entry(0.5, 1.5)

    def status(values: tuple[float, ...]) -> str:
        machine = Machine(reference_busbw={"all_reduce 64KiB": values})
        case = references_case(below, BW, "ci-2core", "refs.yaml", machine=machine)
        assert case is not None
        return case.status

    assert status((0.5,)) == ERROR  # one pair is enough to blame the machine
    assert status((0.79, 0.8, 0.81)) == FAILED  # the reference image's median at the floor: it reached it
    assert status(()) == FAILED  # no pair measured it: nothing blames the machine, and nothing breaks
    # A figure at its floor passes, whatever the reference image measured.
    at = references_case(entry(0.8, 1.5), BW, "ci-2core", "refs.yaml", machine=Machine({"all_reduce 64KiB": (0.1,)}))
    assert at is not None and at.status == PASSED, at.message


def test_the_references_testcase_says_each_figure_and_the_closest_and_takes_no_time() -> None:
    case = references_case(entry(0.88, 2.0), BW, "ci-2core", "refs.yaml", notes=["store (expected to fail) did not run"])
    assert case is not None and case.status == PASSED
    assert case.message == (
        "2 figure(s) at or above their floors on ci-2core in refs.yaml; closest: all_reduce 64KiB at 1.10x its floor; "
        "store (expected to fail) did not run"
    )
    mixed = references_case(entry(0.9, 1.0), BW, "ci-2core", "refs.yaml")
    assert mixed is not None and [row["passed"] for row in mixed.details["figures"]] == [True, False]
    odd = parse_references(
        "version: 1\nsystems:\n  s:\n    bw:\n      busbw:\n        all_reduce:\n"
        "          64KiB: {gbps: 1.0, tolerance: 0.123456789}\n",
        "r.yaml",
    ).systems["s"]["bw"]
    one = references_case(entry(1.0, None), odd, "s", "r.yaml")
    assert one is not None
    rows: Any = one.details["figures"]
    (row,) = rows
    assert row["floor_gbps"] == 0.876543
    machine = Machine(reference_busbw={"all_reduce 64KiB": (0.1,)})
    cases = [
        references_case(entry(1.0), None, "ci-2core", "refs.yaml"),
        references_case(entry(0.1, 1.5), BW, "ci-2core", "refs.yaml"),
        references_case(entry(0.1, 1.5), BW, "ci-2core", "refs.yaml", machine=machine),
    ]
    assert [(c.status, c.duration_s) for c in cases if c is not None] == [(FAILED, 0.0), (FAILED, 0.0), (ERROR, 0.0)]


def test_a_message_names_ten_figures_at_most_and_counts_them_all() -> None:
    sizes = [2**k for k in range(10, 21)]  # 11 sizes, 1KiB .. 1MiB
    lines = "".join(f"          {size}: {{gbps: 1.0, tolerance: 0.1}}\n" for size in sizes)
    text = f"version: 1\nsystems:\n  s:\n    bw:\n      busbw:\n        all_reduce:\n{lines}"
    refs = parse_references(text, "r.yaml").systems["s"]["bw"]
    slow = {
        "name": "bw",
        "cases": [],
        "bandwidth": [{"operation": "all_reduce", **figure(size, str(size), 0.1)} for size in sizes],
    }
    case = references_case(slow, refs, "s", "r.yaml")
    assert case is not None and case.status == FAILED
    named = case.message.split("11 figure(s) below the floor: ", 1)[1].split("; ")
    assert [part.split(":")[0] for part in named] == [f"all_reduce {size}" for size in sizes[:10]]
