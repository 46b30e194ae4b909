"""``distval compare`` people can gate on: every regression (a worse verdict, a figure past the tolerance, a
vanished scenario or figure) listed first and exit 1; a comparison that compared nothing is not a pass; unchanged
rows are one count line unless --all; --format json says the same as the text, with the exit code; what the
reports say is escaped in text and Markdown; the help lists the exit codes."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from distval.cli.main import build_parser, main
from distval.comparing.baseline import compare_reports
from distval.comparing.comparison import NOTHING_COMPARED, REGRESSED, STATUSES, VERDICTS, judge
from distval.comparing.comparison_markdown import render_comparison_markdown
from distval.comparing.comparison_text import render_comparison_text
from distval.comparing.deltas import Tolerances
from distval.errors import EXIT_BAD_INPUT, EXIT_CHECKS_FAILED, EXIT_PASSED
from distval.results.outcome import ERROR, FAILED, PASSED, SKIPPED
from tests.comparing.test_baseline import TWO_FIGURES, case, entry, figure, report


def compare(
    tmp_path: Path, old: dict[str, Any], new: dict[str, Any], capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, str, str]:
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(new))
    argv = ["compare", str(tmp_path / "old.json"), str(tmp_path / "new.json"), "--markdown", str(tmp_path / "cmp.md")]
    code = main([*argv, *extra])
    return code, capsys.readouterr().out, (tmp_path / "cmp.md").read_text()


def as_json(tmp_path: Path, old: dict[str, Any], new: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> tuple[int, Any]:
    code, out, _ = compare(tmp_path, old, new, capsys, "--format", "json")
    return code, json.loads(out)


def section(text: str, title: str) -> list[str]:
    """The indented lines under a section title of the text output ('Regressions (2):')."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    found = []
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        found.append(line.strip())
    return found


CHECKS = [case("env"), case("collectives.all_reduce")]
OLD = report("old", entry(TWO_FIGURES, CHECKS))


@pytest.mark.parametrize("now", [FAILED, ERROR, SKIPPED, "gone"])
def test_a_check_that_passed_and_now_did_not_is_a_regression_listed_first(
    now: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = [case("env")] + ([] if now == "gone" else [case("collectives.all_reduce", now)])
    new = report("new", entry(TWO_FIGURES, cases, status=PASSED if now in (SKIPPED, "gone") else now))
    code, text, markdown = compare(tmp_path, OLD, new, capsys)
    assert code == EXIT_CHECKS_FAILED
    # The first thing after the header is the regressions section, and it names the check with old -> new.
    assert text.splitlines()[4].startswith("Regressions (")
    after = "-" if now == "gone" else f"{now} 1.00 s"
    whys = {"gone": "passed in OLD, gone from NEW", SKIPPED: "passed in OLD, skipped in NEW: not validated"}
    why = whys.get(now, "verdict worse")
    assert f"bw: testcase collectives.all_reduce: passed 1.00 s -> {after} ({why})" in section(text, "Regressions"), text
    assert text.rstrip().endswith("verdict: regressed (exit code 1)")
    assert "### Regressions (" in markdown and "collectives.all\\_reduce: passed 1.00 s -&gt;" in markdown
    code, data = as_json(tmp_path, OLD, new, capsys)
    assert (code, data["exit_code"], data["verdict"]) == (EXIT_CHECKS_FAILED, EXIT_CHECKS_FAILED, REGRESSED.name)
    (item,) = [i for s in data["scenarios"] for i in s["items"] if i["name"] == "collectives.all_reduce"]
    assert item["status"] == "regression" and item["old"] == {"status": PASSED, "duration_s": 1.0}
    # The other way round is an improvement, no regression: the guard can pass.
    code, text, _ = compare(tmp_path, new, OLD, capsys)
    assert code == EXIT_PASSED, text
    assert "Regressions: none" in text and "verdict: no regression (exit code 0)" in text


@pytest.mark.parametrize("scenario_too", [False, True])
def test_failed_then_skipped_is_no_fix_and_skipped_then_failed_is_worse(
    scenario_too: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def run(run_id: str, status: str) -> dict[str, Any]:
        cases = [case("env"), case("collectives.all_reduce", status)]
        return report(run_id, entry(TWO_FIGURES, cases, status=status if scenario_too else PASSED))

    failed, skipped = run("failed", FAILED), run("skipped", SKIPPED)
    code, text, _ = compare(tmp_path, failed, skipped, capsys)
    assert code == EXIT_CHECKS_FAILED, text
    line = "bw: testcase collectives.all_reduce: failed 1.00 s -> skipped 1.00 s (failed in OLD, skipped in NEW: not validated)"
    assert line in section(text, "Regressions"), text
    if scenario_too:
        assert "scenario bw: failed -> skipped (failed in OLD, skipped in NEW: not validated)" in section(text, "Regressions")
    code, text, _ = compare(tmp_path, skipped, failed, capsys)
    assert code == EXIT_CHECKS_FAILED, text
    assert "bw: testcase collectives.all_reduce: skipped 1.00 s -> failed 1.00 s (verdict worse)" in section(text, "Regressions")
    if scenario_too:
        assert "scenario bw: skipped -> failed (verdict worse)" in section(text, "Regressions")
    # Skipped on both: unchanged, no regression.
    code, text, _ = compare(tmp_path, skipped, skipped, capsys)
    assert code == EXIT_PASSED, text


def test_a_scenario_or_a_figure_that_vanished_is_a_regression(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = report("old", entry(TWO_FIGURES, [case("env")]), entry(TWO_FIGURES, [case("env")], name="other"))
    new = report("new", entry(TWO_FIGURES, [case("env")]))
    code, text, markdown = compare(tmp_path, old, new, capsys)
    assert code == EXIT_CHECKS_FAILED
    assert "scenario other: passed -> - (in OLD, not in NEW: the scenario vanished)" in section(text, "Regressions")
    assert "scenario other: passed -&gt; - (in OLD, not in NEW: the scenario vanished)" in markdown
    fewer = report("new", entry(TWO_FIGURES[:1], [case("env")]), entry(TWO_FIGURES, [case("env")], name="other"))
    code, text, _ = compare(tmp_path, old, fewer, capsys)
    assert code == EXIT_CHECKS_FAILED
    assert "bw: busbw all_reduce 1MiB: 2 GB/s -> - (in OLD, not in NEW: the figure vanished)" in section(text, "Regressions")
    # A scenario or figure only in NEW is new, not compared: no regression.
    code, text, _ = compare(tmp_path, new, old, capsys)
    assert code == EXIT_PASSED, text


def test_busbw_and_duration_regressions_and_improvements_each_say_old_new_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = report("old", entry(TWO_FIGURES, [case("env"), case("bandwidth.all_reduce", duration_s=2.0)]))
    slower = [figure("all_reduce", 65536, "64KiB", 0.5), figure("all_reduce", 1048576, "1MiB", 4.0)]
    new = report("new", entry(slower, [case("env"), case("bandwidth.all_reduce", duration_s=9.0)]))
    code, text, _ = compare(tmp_path, old, new, capsys, "--duration-tolerance", "50%")
    assert code == EXIT_CHECKS_FAILED
    assert section(text, "Regressions") == [
        "bw: testcase bandwidth.all_reduce: passed 2.00 s -> passed 9.00 s "
        "(slower past the tolerance: 4.50x, tolerance +50% and +1 s)",
        "bw: busbw all_reduce 64KiB: 1 GB/s -> 0.5 GB/s (dropped past the tolerance: 0.50x, tolerance -20%)",
    ]
    assert section(text, "Improvements") == ["bw: busbw all_reduce 1MiB: 2 GB/s -> 4 GB/s (rose past the tolerance: 2.00x)"]
    # Without --duration-tolerance the duration is a note, not a regression; busbw is judged all the same.
    code, text, markdown = compare(tmp_path, old, new, capsys)
    assert code == EXIT_CHECKS_FAILED
    assert section(text, "Regressions") == [
        "bw: busbw all_reduce 64KiB: 1 GB/s -> 0.5 GB/s (dropped past the tolerance: 0.50x, tolerance -20%)",
    ]
    assert section(text, "Notes (1, not judged)") == [
        "bw: testcase bandwidth.all_reduce: passed 2.00 s -> passed 9.00 s "
        "(slower: 2.00 -> 9.00 s (4.50x; durations are judged with --duration-tolerance))"
    ]
    assert "durations not judged" in text and "### Notes (1, not judged)" in markdown


def test_one_failure_among_durations_that_moved_is_one_regression(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Around one real failure (a hung collective, a rank restarted) every check's time moves: compare lists the one
    verdict that got worse as the regression and the durations as notes, whatever the order of the reports."""
    names = [f"check{i}" for i in range(13)]
    good = report("good", entry(TWO_FIGURES, [case("env"), *(case(n, duration_s=1.0) for n in names)]))
    bad_cases = [case("env", status=FAILED), *(case(n, duration_s=4.0) for n in names)]
    bad = report("bad", entry(TWO_FIGURES, bad_cases))
    code, text, _ = compare(tmp_path, good, bad, capsys)
    assert code == EXIT_CHECKS_FAILED
    (regression,) = section(text, "Regressions")
    assert regression.startswith("bw: testcase env: passed") and "verdict worse" in regression
    assert len(section(text, "Notes (13, not judged)")) == 13


@pytest.mark.parametrize(
    "old, new, why",
    [
        (
            OLD,
            report("new", entry(TWO_FIGURES, CHECKS, name="unrelated")),
            "no scenario of NEW matched one of OLD (by scenario_hash, scenario_hash_any_image or name)",
        ),
        (
            report("old", entry([], [case("process_group")])),
            report("new", entry([], [case("process_group")])),
            "scenario bw (matched by scenario_hash): the reports have no busbw figure or check's duration in common",
        ),
        (report("old"), report("new"), "OLD (run old) has no scenario: nothing to compare"),
        (OLD, report("new"), "NEW (run new) has no scenario: nothing to compare"),
        (
            OLD,
            report("new", entry(TWO_FIGURES, CHECKS), early_error={"kind": "environment", "message": "Engine gone"}),
            "NEW (run new) ended early: environment: Engine gone",
        ),
        (
            report("old", entry(TWO_FIGURES, CHECKS), early_error={"kind": "interrupted", "message": "signal 15"}),
            report("new", entry(TWO_FIGURES, CHECKS)),
            "OLD (run old) ended early: interrupted: signal 15",
        ),
    ],
    ids=["no common scenario", "no figure", "both empty", "NEW empty", "NEW ended early", "OLD ended early"],
)
def test_a_comparison_that_compared_nothing_is_not_a_pass(
    old: dict[str, Any], new: dict[str, Any], why: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, text, markdown = compare(tmp_path, old, new, capsys)
    assert code != EXIT_PASSED and code in (REGRESSED.exit_code, NOTHING_COMPARED.exit_code), text
    assert why in section(text, "Nothing compared"), text
    assert "no regression" not in text and "✅" not in markdown
    code, data = as_json(tmp_path, old, new, capsys)
    assert data["exit_code"] == code != EXIT_PASSED and why in data["nothing_compared"]
    # Where no scenario of OLD vanished from NEW (a regression of its own), the verdict says nothing was compared.
    vanished = any(item["why"].endswith("the scenario vanished") for s in data["scenarios"] for item in s["items"])
    assert data["verdict"] == (REGRESSED.name if vanished else NOTHING_COMPARED.name)
    # The same reports with figures in common pass: the guard can pass.
    code, text, _ = compare(tmp_path, OLD, OLD, capsys)
    assert code == EXIT_PASSED, text


def test_unchanged_rows_are_one_count_line_unless_all(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, text, markdown = compare(tmp_path, OLD, OLD, capsys)
    assert code == EXIT_PASSED
    assert "4 unchanged (2 testcase(s), 2 busbw figure(s)): --all lists them" in text
    assert "all_reduce 64KiB" not in text and "collectives.all_reduce" not in text
    assert "4 unchanged (2 testcase(s), 2 busbw figure(s))." in markdown and "all\\_reduce 64KiB" not in markdown
    for option in ("--all", "--verbose"):
        code, text, markdown = compare(tmp_path, OLD, OLD, capsys, option)
        assert code == EXIT_PASSED and "unchanged (" not in text
        rows = [line.split() for line in text.splitlines()]
        assert ["all_reduce", "64KiB", "1", "GB/s", "1", "GB/s", "1.00x", "unchanged"] in rows, text
        assert "| all\\_reduce 64KiB | 1 GB/s | 1 GB/s | 1.00x | unchanged |  |" in markdown


def test_json_is_one_object_with_identities_verdict_exit_code_and_every_item(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hostile = "env\x1b]0;owned\x07\u202e"
    old = report("old\x1b[2J", entry(TWO_FIGURES, [case(hostile)], image="good/img"))
    new = report("new", entry(TWO_FIGURES[:1], [case(hostile, FAILED)], image="bad/img", status=FAILED))
    code, out, _ = compare(tmp_path, old, new, capsys, "--format", "json")
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out and out.isascii()  # JSON escaped it
    data = json.loads(out)
    assert data["schema_version"] == 1 and data["exit_code"] == code == EXIT_CHECKS_FAILED
    assert data["verdict"] == REGRESSED.name
    assert data["old"]["run_id"] == "old\x1b[2J" and data["old"]["images"] == ["good/img"]
    assert data["new"]["images"] == ["bad/img"] and data["new"]["path"].endswith("new.json")
    items = [i for s in data["scenarios"] for i in s["items"]]
    assert {i["status"] for i in items} <= set(STATUSES)
    assert {(i["kind"], i["name"], i["status"]) for i in items} == {
        ("scenario", "bw", "regression"),
        ("testcase", hostile, "regression"),
        ("busbw", "all_reduce 64KiB", "unchanged"),
        ("busbw", "all_reduce 1MiB", "regression"),
    }
    (bw,) = [i for i in items if i["name"] == "all_reduce 64KiB"]
    assert bw["old"]["busbw_gbps"] == bw["new"]["busbw_gbps"] == 1.0 and bw["ratio"] == 1.0
    assert data["counts"] == {"regression": 3, "improvement": 0, "unchanged": 1, "note": 0, "not-compared": 0}


def test_compare_markdown_escapes_what_the_reports_say() -> None:
    hostile = "<img src=x onerror=alert(1)>|`x`"
    old = report("old`run|<b>", entry(TWO_FIGURES, [case("env")], image="good|<img src=a>"))
    new = report(
        "new",
        entry(
            TWO_FIGURES, [case("env", status=hostile), case(f"check{hostile}")], image="bad*image*_x_", status=f"failed{hostile}"
        ),
    )
    markdown = render_comparison_markdown(judge(compare_reports(old, new, Tolerances(), "old.json", "new.json")))
    assert "<img" not in markdown and "<b>" not in markdown
    assert "&lt;img src=x onerror=alert(1)&gt;\\|\\`x\\`" in markdown
    assert "old\\`run\\|&lt;b&gt;" in markdown  # the run id
    assert "bad\\*image\\*\\_x\\_" in markdown and "good\\|&lt;img src=a&gt;" in markdown  # image names
    for line in markdown.splitlines():
        if line.startswith("| ") and "check" in line:
            assert line.count("|") - line.count("\\|") == 7, line  # six cells: no cell broken by a "|"


def test_compare_text_keeps_escape_sequences_from_the_terminal() -> None:
    old = report("old\x1b]0;owned\x07", entry(TWO_FIGURES, [case("env")], image="img\x1b[2J"))
    new = report("new", entry(TWO_FIGURES, [case("env\x1b[31m", FAILED)], status=FAILED))
    for show_all in (False, True):
        text = render_comparison_text(judge(compare_reports(old, new, Tolerances())), show_all)
        assert "\x1b" not in text and "\x07" not in text
        assert "img[2J" in text


def test_compare_help_lists_its_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["compare", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "Exit codes: 0 " in help_text
    for verdict in VERDICTS:
        assert f"{verdict.meaning}" in help_text, verdict
    assert f"{EXIT_BAD_INPUT} bad input" in help_text


def test_compare_refuses_a_markdown_path_that_is_one_of_its_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = tmp_path / "old.json"
    text = json.dumps(report("old", entry(TWO_FIGURES, [case("env")])))
    old.write_text(text)
    os.symlink(old, tmp_path / "link.md")
    assert main(["compare", str(old), str(old), "--markdown", str(tmp_path / "link.md")]) == EXIT_BAD_INPUT
    assert "is the report" in capsys.readouterr().err and old.read_text() == text
