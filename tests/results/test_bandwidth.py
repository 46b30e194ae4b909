"""The bandwidth check's harness side without Docker: its arguments, its figures in the reports (JUnit
properties, JSON, Markdown with a Mermaid chart), the last-known-good comparison and ``distval compare``.

The chart is verified twice: with Mermaid's own parser (Mermaid 11.11, bundled in the PyPI package
mermaid-parser-py, run with ``node``; the test is skipped with the reason when either is missing: npm is
not reachable here, and mermaid-parser-py's Python side needs pythonmonkey, so CI installs only its
bundle with ``pip install --no-deps``), and always with a strict check of the xychart-beta grammar
distval emits (title, x-axis with quoted categories, y-axis with a label and a range, ``line`` series
with as many numbers as categories, inside the range).
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from distval.cli.main import main
from distval.comparing.baseline import apply_baseline, baseline_case, compare_reports
from distval.comparing.comparison import NO_REGRESSION, NOT_COMPARED, REGRESSED, REGRESSION, judge
from distval.comparing.comparison_markdown import render_comparison_markdown
from distval.comparing.comparison_text import render_comparison_text
from distval.comparing.deltas import BASELINE_CASE, Tolerances, busbw_figures, confirm, deltas
from distval.comparing.judges import BaselineOptions
from distval.comparing.reading import combined_baseline
from distval.config import parse_config
from distval.config.byte_sizes import byte_size_value
from distval.plan.identity import with_hashes
from distval.plan.model import ScenarioPlan
from distval.reports.json_report import json_report
from distval.reports.markdown import efficiency_table, render_markdown
from distval.reports.mermaid import PALETTE, Series, busbw_chart, colour, legend
from distval.results.bandwidth import figure_properties, figures_from_details, figures_of, link_of, topology_rows
from distval.results.outcome import ERROR, FAILED, PASSED, SKIPPED, CaseResult, ContainerOutcome, ScenarioOutcome
from distval.results.scenario import RunSummary, ScenarioResult
from distval.results.scenario import summarize_scenario as summarize
from distval.session.remeasure import remeasure
from distval.targets.engines.planning import plan_scenario
from distval_suite.bandwidth_figures import SAMPLES_MAX, add_samples, bounded

CONFIG = """\
scenarios:
  - name: inside
    topology: in-container
    world_size: 2
    checks: [env, {name: bandwidth, args: {sizes: [4KiB, 1MiB]}}]
  - name: across
    topology: cross-container
    world_size: 2
    checks: [env, {name: bandwidth, args: {sizes: [4KiB, 1MiB]}}]
"""
SIZES = ((4096, "4KiB"), (1048576, "1MiB"))


def plans(image: str = "example/torch:good") -> tuple[ScenarioPlan, ScenarioPlan]:
    inside, across = parse_config(CONFIG, "bw.yaml").scenarios
    return with_hashes(plan_scenario(inside, "run1", image)), with_hashes(plan_scenario(across, "run1", image))


def details(operation: str, busbw: tuple[float, float], iterations: int = 5) -> dict[str, Any]:
    factor = 1.0 if operation == "broadcast" else 2 * (2 - 1) / 2 if operation == "all_reduce" else 0.5
    figures = []
    for (size, label), value in zip(SIZES, busbw, strict=True):
        algbw = value / factor
        figures.append(
            {
                "size": size,
                "label": label,
                "bytes": size,
                "time_us": round(size / algbw / 1e3, 3),
                "algbw_gbps": algbw,
                "busbw_gbps": value,
            }
        )
    return {"operation": operation, "world_size": 2, "iterations": iterations, "warmup": 1, "figures": figures}


def records(operation_busbw: dict[str, tuple[float, float]], skip: tuple[str, ...] = ()) -> bytes:
    lines = []
    for rank in (0, 1):
        lines.append({"check": "env", "case": "env", "rank": rank, "status": PASSED, "message": "ok", "duration_s": 0.01})
        for operation, busbw in operation_busbw.items():
            lines.append(
                {
                    "check": "bandwidth",
                    "case": f"bandwidth.{operation}",
                    "rank": rank,
                    "status": PASSED,
                    "message": f"{operation} ok",
                    "duration_s": 0.8,
                    "details": details(operation, busbw),
                }
            )
        for operation in skip:
            lines.append(
                {
                    "check": "bandwidth",
                    "case": f"bandwidth.{operation}",
                    "rank": rank,
                    "status": SKIPPED,
                    "message": "not supported by this image: RuntimeError: ProcessGroupGloo does not support reduce_scatter",
                    "duration_s": 0.0,
                }
            )
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def scenario_result(plan: ScenarioPlan, operation_busbw: dict[str, tuple[float, float]]) -> ScenarioResult:
    data = records(operation_busbw, skip=("reduce_scatter",))
    files = {"rank-0.jsonl": data}  # both ranks' records in one file: what matters here is what the harness reads
    nodes = (0,) if plan.scenario.topology == "in-container" else (0, 1)
    containers = tuple(
        ContainerOutcome(f"c{n}", n, (0, 1) if len(nodes) == 1 else (n,), 0, False, "", "", files if n == 0 else {})
        for n in nodes
    )
    return summarize(ScenarioOutcome(plan, "sha256:feed", 10.0, containers))


GOOD = {"all_reduce": (0.5, 2.0), "broadcast": (0.4, 1.6)}
SLOW = {"all_reduce": (0.025, 1.2), "broadcast": (0.02, 1.5)}  # 4KiB: 8 -> 164 us and 10 -> 205 us per call


def run_summary(busbw: dict[str, tuple[float, float]], image: str = "example/torch:good", run_id: str = "run1") -> RunSummary:
    inside, across = plans(image)
    return RunSummary(run_id, (scenario_result(inside, busbw), scenario_result(across, busbw)), config_path="bw.yaml")


# --- arguments -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [("4KiB", 4096), ("64MiB", 64 * 2**20), ("1 GiB", 2**30), ("4096", 4096), ("10B", 10), ("2GiB", None), ("0", None)]
    + [("4KB", None), ("4k", None), ("-1", None), ("1.5MiB", None)],
)
def test_byte_sizes_are_binary_units_up_to_one_gib(text: str, value: int | None) -> None:
    assert byte_size_value(text) == value


def test_sizes_and_thresholds_reach_the_suite_as_bytes() -> None:
    text = "scenarios:\n  - {topology: in-container, world_size: 2, checks: [{name: bandwidth, args: %s}]}\n"
    (scenario,) = parse_config(text % "{sizes: [64MiB, 4KiB, 4096], min_busbw_gbps: {64MiB: 1.5}}", "x.yaml").scenarios
    assert dict(scenario.checks[0].args) == {"sizes": (4096, 64 * 2**20), "min_busbw_gbps": {str(64 * 2**20): 1.5}}
    (scenario,) = parse_config(text % "{min_busbw_gbps: 0.25}", "x.yaml").scenarios
    assert dict(scenario.checks[0].args) == {"min_busbw_gbps": 0.25}


# --- figures in the reports ------------------------------------------------------------------------------


def test_figures_become_properties_and_json() -> None:
    summary = run_summary(GOOD)
    inside = summary.scenarios[0]
    properties = dict(inside.properties)
    assert properties["bandwidth.all_reduce.1MiB.busbw_gbps"] == "2.0000"
    assert properties["bandwidth.all_reduce.1MiB.algbw_gbps"] == "2.0000"  # 2(n-1)/n = 1 for 2 ranks
    assert properties["bandwidth.broadcast.4KiB.busbw_gbps"] == "0.4000"
    assert properties["bandwidth.iterations"] == "5"
    report = json_report(summary)
    entry = report["scenarios"][0]
    assert [(f["operation"], f["label"], f["busbw_gbps"]) for f in entry["bandwidth"]] == [
        ("all_reduce", "4KiB", 0.5),
        ("all_reduce", "1MiB", 2.0),
        ("broadcast", "4KiB", 0.4),
        ("broadcast", "1MiB", 1.6),
    ]
    cases = {c["name"]: c for c in entry["cases"]}
    assert cases["bandwidth.all_reduce"]["details"]["iterations"] == 5
    assert cases["bandwidth.reduce_scatter"]["status"] == SKIPPED
    # In-container next to cross-container at the same world size: one line of the JSON report.
    row = report["bandwidth_topologies"][1]
    assert row == {
        "world_size": 2,
        "operation": "all_reduce",
        "size": 1048576,
        "label": "1MiB",
        "in_container": "inside",
        "cross_container": "across",
        "in_container_busbw_gbps": 2.0,
        "cross_container_busbw_gbps": 2.0,
        "ratio": 1.0,
    }


def with_yardstick(found: dict[str, Any], tcp: tuple[float, float]) -> dict[str, Any]:
    """``found``'s figures with raw TCP per size and their efficiency, as distval_suite/bandwidth_figures.py adds them."""
    found = copy.deepcopy(found)
    for figure, gbps in zip(found["figures"], tcp, strict=True):
        figure["tcp_gbps"] = gbps
        figure["efficiency"] = round(figure["busbw_gbps"] / gbps, 4)
        figure["best_busbw_gbps"] = figure["busbw_gbps"] * 1.5
        figure["best_tcp_gbps"] = gbps * 2
        figure["best_efficiency"] = round(figure["best_busbw_gbps"] / figure["best_tcp_gbps"], 4)
    return found


def test_efficiency_reaches_the_figures_properties_json_and_markdown() -> None:
    found = figures_from_details("all_reduce", with_yardstick(details("all_reduce", (0.5, 2.0)), (1.0, 4.0)))
    assert [(f.tcp_gbps, f.efficiency, f.best_tcp_gbps, f.best_efficiency) for f in found] == [
        (1.0, 0.5, 2.0, 0.375),
        (4.0, 0.5, 8.0, 0.375),
    ]
    properties = figure_properties(found)
    assert properties["bandwidth.all_reduce.4KiB.tcp_gbps"] == "1.0000"
    assert properties["bandwidth.all_reduce.1MiB.efficiency"] == "0.5000"
    assert properties["bandwidth.all_reduce.1MiB.best_efficiency"] == "0.3750"
    assert dataclasses.asdict(found[0])["efficiency"] == 0.5  # the JSON report's bandwidth entries are these
    summary = run_summary(GOOD)
    series = [Series("inside", found)]
    table = efficiency_table(series)
    assert table[table.index("| scenario | operation | 4KiB | 1MiB |") + 2 :] == [
        "| inside | raw TCP (GB/s) | 1.000 | 4.000 |",
        "| inside | all\\_reduce | 0.50 | 0.50 |",
        "",
    ]
    # Without a yardstick (off, or a report from before it) there is no such table.
    assert efficiency_table([Series("inside", summary.scenarios[0].figures)]) == []
    assert "Efficiency against raw TCP" not in render_markdown(summary)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"tcp_gbps": float("inf")}, "not finite"),
        ({"tcp_gbps": 0.0}, "no throughput"),
        ({"tcp_gbps": -1.0}, "negative"),
        ({"tcp_gbps": 1e6}, "past any link"),
        ({"efficiency": 1e3}, "past the bound"),
        ({"efficiency": 0.9}, "not busbw / tcp_gbps"),
        ({"efficiency": "0.5"}, "a string"),
        ({"efficiency": None}, "absent"),
    ],
)
def test_an_untrusted_efficiency_is_dropped_not_reported(change: dict[str, Any], why: str) -> None:
    """The image wrote these numbers: only finite, in-range, consistent ones reach the reports; the busbw figure stays."""
    raw = with_yardstick(details("all_reduce", (0.5, 2.0)), (1.0, 4.0))
    raw["figures"][0].update(change)
    first, second = figures_from_details("all_reduce", raw)
    assert (first.tcp_gbps, first.efficiency, first.best_efficiency) == (None, None, None), why
    assert first.busbw_gbps == 0.5 and second.efficiency == 0.5


@pytest.mark.parametrize("busbw", [0.0, -0.5])
def test_an_impossible_busbw_refuses_the_record_never_a_figure_or_a_pass(busbw: float) -> None:
    """A busbw of 0 or below (the image wrote it) is refused as the record reader refuses any impossible number: the
    testcase errors with the reason, and the figure reaches no property, no JSON entry and no comparison."""
    inside, _ = plans()
    lines = [json.loads(line) for line in records(GOOD).decode().splitlines()]
    for line in lines:
        if line["case"] == "bandwidth.all_reduce":
            line["details"]["figures"][0]["busbw_gbps"] = busbw
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    container = ContainerOutcome("c0", 0, (0, 1), 0, False, "", "", {"rank-0.jsonl": data})
    result = summarize(ScenarioOutcome(inside, "sha256:feed", 10.0, (container,)))
    cases = {case.name: case for case in result.cases}
    refused = cases["bandwidth.all_reduce"]
    assert refused.status == ERROR and result.status == ERROR
    assert "distval refused this rank's record" in refused.message
    assert f"details.figures[0].busbw_gbps is {busbw!r}" in refused.message, refused.message
    assert cases["results"].status == ERROR and "busbw_gbps" in cases["results"].message
    assert cases["bandwidth.broadcast"].status == PASSED  # the other operation's record stands
    assert [f.operation for f in result.figures] == ["broadcast", "broadcast"]
    assert not any(name.startswith("bandwidth.all_reduce.") for name, _ in result.properties)
    summary = RunSummary("run1", (result,), config_path="bw.yaml")
    assert summary.exit_code == 1
    assert "busbw_gbps is" in render_markdown(summary)


@pytest.mark.parametrize("busbw", [0.0, -0.5])
def test_compare_refuses_an_impossible_busbw_of_an_older_report_with_the_reason(busbw: float) -> None:
    """A report written before such records were refused may hold the figure: compare says it is no measurement (a
    regression where NEW has it, whatever OLD has, not compared where OLD alone has it), never a ratio of 0.00x."""
    good = json_report(run_summary(GOOD))
    bad = copy.deepcopy(good)
    for scenario in bad["scenarios"]:
        scenario["bandwidth"][0]["busbw_gbps"] = busbw  # all_reduce 4KiB
    assert ("all_reduce", 4096) not in busbw_figures(bad["scenarios"][0])
    assert [d.name for d in deltas(good["scenarios"][0], bad["scenarios"][0], Tolerances()) if d.kind == "busbw"] == [
        "all_reduce 1MiB",
        "broadcast 4KiB",
        "broadcast 1MiB",
    ]
    worse = judge(compare_reports(good, bad, Tolerances()))
    assert worse.verdict == REGRESSED
    (item,) = [i for i in worse.having(REGRESSION) if i.scenario == "inside"]
    assert item.name == "all_reduce 4KiB" and f"in NEW no measurement, refused: busbw_gbps is {busbw!r}" in item.why
    text = render_comparison_text(worse)
    assert "0.00x" not in text and "no measurement, refused" in text, text
    better = judge(compare_reports(bad, good, Tolerances()))
    assert better.verdict == NO_REGRESSION
    (item,) = [i for i in better.items if i.scenario == "inside" and i.name == "all_reduce 4KiB"]
    assert item.status == NOT_COMPARED and "in OLD no measurement, refused" in item.why
    both = judge(compare_reports(bad, copy.deepcopy(bad), Tolerances()))
    (item,) = [i for i in both.items if i.scenario == "inside" and i.name == "all_reduce 4KiB"]
    assert item.status == REGRESSION and "in OLD no measurement" in item.why and "in NEW no measurement" in item.why


def test_compare_says_of_a_figure_one_report_lacks_or_refused_which_and_why() -> None:
    """Every way one busbw figure can be missing from one side: absent (never measured) or refused (no measurement),
    in OLD or in NEW or both. Each is said once, with the refusal's own reason; a figure NEW refused is a regression
    wherever OLD stands, one NEW alone has is not compared."""
    good = json_report(run_summary(GOOD))
    refused, absent = copy.deepcopy(good), copy.deepcopy(good)
    for scenario in refused["scenarios"]:
        scenario["bandwidth"][0]["busbw_gbps"] = -0.5  # all_reduce 4KiB
    for scenario in absent["scenarios"]:
        del scenario["bandwidth"][0]
    reason = "busbw_gbps is -0.5, not a finite number of 0 or more"

    def items(old: dict[str, Any], new: dict[str, Any]) -> list[Any]:
        found = judge(compare_reports(old, new, Tolerances())).items
        return [i for i in found if i.scenario == "inside" and i.name == "all_reduce 4KiB"]

    (only_new,) = items(absent, good)
    assert only_new.status == NOT_COMPARED and only_new.why == "only in NEW"
    (refused_old,) = items(refused, good)
    assert refused_old.status == NOT_COMPARED and refused_old.why == f"in OLD no measurement, refused: {reason}"
    (refused_new_only,) = items(absent, refused)
    assert refused_new_only.status == REGRESSION and refused_new_only.why == f"in NEW no measurement, refused: {reason}"
    (refused_old_only,) = items(refused, absent)
    assert refused_old_only.status == NOT_COMPARED and refused_old_only.why == f"in OLD no measurement, refused: {reason}"
    (both,) = items(refused, copy.deepcopy(refused))
    assert both.status == REGRESSION
    assert both.why == f"in OLD no measurement, refused: {reason}; in NEW no measurement, refused: {reason}"


@pytest.mark.parametrize(
    ("link", "shown"),
    [
        ({"interface": "eth0", "nominal_gbps": 1.25}, "eth0, nominal 1.25 GB/s"),
        ({"interface": "ib0", "nominal_gbps": None}, "ib0, no nominal speed reported"),
        ({"interface": "eth0", "nominal_gbps": 1e9}, "eth0, no nominal speed reported"),  # past any link
        ({"interface": "eth0\x1b[31m", "nominal_gbps": 1.25}, None),  # not an interface name: not shown
        ({"interface": None, "nominal_gbps": None}, None),
        ("eth0", None),
    ],
)
def test_the_link_is_named_where_the_suite_found_it(link: object, shown: str | None) -> None:
    found = {**details("all_reduce", (0.5, 2.0)), "link": link}
    assert link_of([("bandwidth.yardstick", {"link": {"interface": "lo"}}), ("bandwidth.all_reduce", found)]) == shown


def test_the_link_reaches_the_junit_properties_and_the_markdown() -> None:
    summary = run_summary(GOOD)
    assert "bandwidth.link" not in dict(summary.scenarios[0].properties)  # a report from before it: nothing said
    linked = [
        dataclasses.replace(s, properties=(*s.properties, ("bandwidth.link", "eth0, nominal 1.25 GB/s")))
        for s in summary.scenarios
    ]
    text = render_markdown(dataclasses.replace(summary, scenarios=tuple(linked)))
    assert (
        "Link (the interface the backend's sockets use, its nominal speed): inside: eth0, nominal 1.25 GB/s; "
        "across: eth0, nominal 1.25 GB/s." in text
    )


def test_the_yardsticks_own_testcase_is_no_operation() -> None:
    yardstick_details = {"path": "loopback", "tcp": [{"size": 4096, "tcp_gbps": 1.0}], "figures": [{"size": 4096}]}
    assert figures_of([("bandwidth.yardstick", yardstick_details)]) == ()


def test_topology_rows_need_both_topologies_at_one_world_size() -> None:
    figures = figures_from_details("all_reduce", details("all_reduce", (1.0, 2.0)))
    assert topology_rows([("a", "in-container", 2, figures), ("b", "cross-container", 4, figures)]) == []
    assert len(topology_rows([("a", "in-container", 2, figures), ("b", "cross-container", 2, figures)])) == 2
    assert figure_properties(()) == {}


def test_markdown_has_the_bandwidth_section_and_a_chart_per_operation() -> None:
    text = render_markdown(run_summary(GOOD))
    assert "### Bandwidth" in text
    assert "| inside | all\\_reduce | 0.500 | 2.000 |" in text  # the op name is the image's text: escaped
    # Across containers against one container: the ratios only, not the busbw of the table above again.
    ratios = text[text.index("#### Across containers") :].split("\n\n")[2].splitlines()
    assert ratios == [
        "| ranks | in one container | across containers | operation | 4KiB | 1MiB |",
        "|---:|---|---|---|---:|---:|",
        "| 2 | inside | across | all\\_reduce | 1.00x | 1.00x |",
        "| 2 | inside | across | broadcast | 1.00x | 1.00x |",
    ]
    assert text.count("| 0.500 |") == 2 and "median of 5 timed iterations per" in text  # inside and across, once each
    blocks = mermaid_blocks(text)
    assert len(blocks) == 2  # all_reduce, broadcast
    for block in blocks:
        assert_xychart(block, series=2, categories=["4KiB", "1MiB"])
    assert text.count("Lines: 1. blue (#0072B2): inside; 2. orange (#E69F00): across.\n") == 2


def test_each_line_of_a_chart_has_the_colour_its_legend_names() -> None:
    """xychart-beta draws no legend: the palette is set in the chart, and the text after it names each colour."""
    many = [Series(f"s{i}", run_summary(GOOD).scenarios[0].figures) for i in range(len(PALETTE) + 2)]
    for series in (many[:2], many[:1], many):
        chart = busbw_chart("all_reduce", series)
        assert chart is not None
        palette = palette_colours(chart)
        named = re.findall(r"[0-9]+\. [a-z ]+ \((#[0-9A-F]{6})\): s[0-9]+", legend(series))
        assert len(named) == len(series)
        # Mermaid gives the n-th line the n-th colour of the palette, cycling past its end.
        assert named == [palette[i % len(palette)] for i in range(len(series))]
    assert "The colours repeat after 8 lines" in legend(many) and "repeat" not in legend(many[:8])


def test_one_timed_iteration_is_said_in_the_singular() -> None:
    summary = run_summary(GOOD)
    once = tuple(
        dataclasses.replace(
            s, cases=tuple(dataclasses.replace(c, details={**c.details, "iterations": 1}) if c.details else c for c in s.cases)
        )
        for s in summary.scenarios
    )
    text = render_markdown(dataclasses.replace(summary, scenarios=once))
    assert "median of 1 timed iteration per operation" in text


# --- the chart: Mermaid's parser where it can run, and always the strict grammar --------------------------


def mermaid_blocks(markdown: str) -> list[str]:
    return re.findall(r"```mermaid\n(.*?)\n```", markdown, flags=re.S)


QUOTED = r'"[^"\n]*"'
NUMBER = r"-?[0-9]+(?:\.[0-9]+)?(?:e[-+]?[0-9]+)?"


def palette_colours(block: str) -> list[str]:
    """The colours of the chart's init directive (JSON inside ``%%{init: ...}%%``), in drawing order."""
    found = re.fullmatch(r"%%\{init: (.*)\}%%", block.split("\n")[0])
    assert found, block
    return json.loads(found.group(1))["themeVariables"]["xyChart"]["plotColorPalette"].split(", ")


def assert_xychart(block: str, series: int, categories: list[str]) -> None:
    """The xychart-beta subset distval emits, strictly: its palette, then one statement per line, in this order."""
    assert palette_colours(block) == [colour(i)[1] for i in range(min(series, len(PALETTE)))]
    lines = block.split("\n")[1:]
    assert lines[0] == "xychart-beta", lines
    assert re.fullmatch(rf"    title {QUOTED}", lines[1]), lines[1]
    x_axis = re.fullmatch(rf"    x-axis {QUOTED} \[((?:{QUOTED}, )*{QUOTED})\]", lines[2])
    assert x_axis, lines[2]
    assert re.findall(QUOTED, x_axis.group(1)) == [f'"{c}"' for c in categories]
    y_axis = re.fullmatch(rf"    y-axis {QUOTED} ({NUMBER}) --> ({NUMBER})", lines[3])
    assert y_axis, lines[3]
    low, high = float(y_axis.group(1)), float(y_axis.group(2))
    assert low < high
    assert len(lines) == 4 + series, lines
    for line in lines[4:]:
        values = re.fullmatch(rf"    line \[((?:{NUMBER}, )*{NUMBER})\]", line)
        assert values, line
        numbers = [float(v) for v in values.group(1).split(", ")]
        assert len(numbers) == len(categories), line
        assert all(low <= n <= high for n in numbers), (line, high)


def mermaid_bundle() -> Path | None:
    spec = importlib.util.find_spec("mermaid_parser")
    for location in (spec.submodule_search_locations or []) if spec else []:
        bundle = Path(location) / "js" / "parser.bundle.js"
        if bundle.exists():
            return bundle
    return None


PARSE_SCRIPT = """
const parse = require(process.argv[1]);
let text = "";
process.stdin.on("data", (chunk) => { text += chunk; });
process.stdin.on("end", () => {
  parse(text).then((result) => { console.log(JSON.parse(result).graph_type); })
    .catch((error) => { console.log("ERROR " + String(error)); process.exit(1); });
});
"""


def mermaid_parse(block: str) -> subprocess.CompletedProcess[str]:
    node, bundle = shutil.which("node"), mermaid_bundle()
    if node is None or bundle is None:
        pytest.skip(
            "Mermaid's parser is not here: "
            + ("node is not installed" if node is None else "pip install --no-deps mermaid-parser-py (it bundles Mermaid 11)")
        )
    return subprocess.run(
        [node, "-e", PARSE_SCRIPT, str(bundle)], input=block, capture_output=True, text=True, timeout=120, check=False
    )


def test_mermaid_parses_the_charts_of_a_run_and_of_a_comparison() -> None:
    run_chart = mermaid_blocks(render_markdown(run_summary(GOOD)))[0]
    good, slow = json_report(run_summary(GOOD)), json_report(run_summary(SLOW, "example/torch:slow", "run2"))
    compare_chart = mermaid_blocks(render_comparison_markdown(judge(compare_reports(good, slow, Tolerances()))))[0]
    for block in (run_chart, compare_chart):
        parsed = mermaid_parse(block)
        assert parsed.returncode == 0 and parsed.stdout.strip() == "xychart", parsed.stdout + parsed.stderr
    # The parser is strict enough to notice a broken block (a line without its closing bracket).
    broken = mermaid_parse(run_chart.replace("]", "", 2))
    assert broken.returncode != 0 and "Parse error" in broken.stdout, broken.stdout


def test_chart_quotes_names_and_needs_a_common_size() -> None:
    figures = figures_from_details("all_reduce", details("all_reduce", (0.5, 2.0)))
    chart = busbw_chart("all_reduce", [Series('my "quoted" run', figures)])
    assert chart is not None
    assert_xychart(chart, series=1, categories=["4KiB", "1MiB"])
    assert '"' not in chart.split("\n")[1][len('    title "') : -1]
    assert busbw_chart("broadcast", [Series("a", figures)]) is None
    assert busbw_chart("all_reduce", []) is None


# --- last-known-good ---------------------------------------------------------------------------------------


def test_the_same_figures_do_not_regress_and_a_slow_image_does() -> None:
    good = json_report(run_summary(GOOD))
    again = apply_baseline(run_summary(GOOD, run_id="run2"), good, Tolerances(), "GOOD.json")
    case = again.scenarios[0].cases[-1]
    assert (case.name, case.status) == (BASELINE_CASE, PASSED), case.message
    assert "matched by scenario_hash" in case.message and "medians of 5 iterations" in case.message
    assert again.exit_code == 0

    slow = apply_baseline(run_summary(SLOW, "example/torch:slow", "run2"), good, Tolerances(), "GOOD.json")
    case = slow.scenarios[0].cases[-1]
    assert case.status == FAILED
    # Another image: matched by the hash of the same scenario on any image.
    assert "matched by scenario_hash_any_image, baseline image example/torch:good" in case.message
    assert "busbw all_reduce 4KiB: 0.5 -> 0.025 GB/s (0.05x, tolerance -20%)" in case.message
    assert "busbw all_reduce 1MiB: 2 -> 1.2 GB/s (0.60x, tolerance -20%)" in case.message
    assert "broadcast 1MiB" not in case.message  # 1.6 -> 1.5 is within 20 %
    assert slow.exit_code == 1
    assert [d["name"] for d in case.details["deltas"] if d["regressed"]] == [
        "all_reduce 4KiB",
        "all_reduce 1MiB",
        "broadcast 4KiB",
    ]


def busbw_scenario(median: float, best: float | None) -> dict[str, Any]:
    figure: dict[str, Any] = {"operation": "all_reduce", "size": 65536, "label": "64KiB", "busbw_gbps": median}
    if best is not None:
        figure["best_busbw_gbps"] = best
    return {"bandwidth": [figure], "cases": []}


@pytest.mark.parametrize(
    ("old", "new", "regressed", "noise"),
    [
        ((1.0, 1.2), (0.7, 1.15), False, True),  # the median dropped 30 %, the best 4 %: a noisy run, not a slower image
        ((1.0, 1.2), (0.7, 0.9), True, False),  # both dropped 25-30 %: slower
        ((1.0, 1.2), (0.85, 0.9), False, False),  # the median within 20 %: the best alone never fails a figure
        ((1.0, None), (0.7, 1.15), True, False),  # a baseline without best figures (older report): the median decides
        ((1.0, 1.2), (0.7, None), True, False),
    ],
)
def test_busbw_regresses_when_its_median_and_its_best_both_drop_past_the_tolerance(
    old: tuple[float, float | None], new: tuple[float, float | None], regressed: bool, noise: bool
) -> None:
    (delta,) = deltas(busbw_scenario(*old), busbw_scenario(*new), Tolerances())
    assert (delta.regressed, delta.within_noise) == (regressed, noise)
    if old[1] is not None and new[1] is not None:
        assert f"best {old[1]:.4g} -> {new[1]:.4g} GB/s" in delta.describe(Tolerances())


def timed_scenario(busbw: float, time_us: float, best: float, best_time_us: float) -> dict[str, Any]:
    figure = {"operation": "broadcast", "size": 65536, "label": "64KiB", "busbw_gbps": busbw, "time_us": time_us}
    return {"bandwidth": [{**figure, "best_busbw_gbps": best, "best_time_us": best_time_us}], "cases": []}


@pytest.mark.parametrize(
    ("new", "slack_us", "regressed", "why"),
    [
        ((0.7, 380.0, 0.7, 300.0), 100.0, False, "its median call +80 us, within the 100 us slack"),
        ((0.5, 500.0, 0.75, 335.0), 100.0, False, "its best call +85 us, within the 100 us slack"),
        ((0.5, 500.0, 0.5, 420.0), 100.0, True, ""),  # both past the fraction and 200 / 170 us slower
        ((0.7, 380.0, 0.7, 300.0), 0.0, True, ""),  # no slack: the fraction alone
    ],
)
def test_a_busbw_drop_regresses_only_when_the_call_is_slower_by_more_than_the_slack(
    new: tuple[float, float, float, float], slack_us: float, regressed: bool, why: str
) -> None:
    old = timed_scenario(1.0, 300.0, 1.0, 250.0)  # busbw 1 GB/s median (300 us per call) and best (250 us)
    (delta,) = deltas(old, timed_scenario(*new), Tolerances(busbw_slack_us=slack_us))
    assert (delta.regressed, delta.noise_why) == (regressed, why)


def test_a_noisy_median_is_named_in_the_passed_baseline_and_the_comparison() -> None:
    old = {"run_id": "old", "scenarios": [{**busbw_scenario(1.0, 1.2), "name": "bw", "properties": {"scenario_hash": "h"}}]}
    new = {**busbw_scenario(0.7, 1.15), "name": "bw", "properties": {"scenario_hash": "h"}}
    case = baseline_case(new, old, Tolerances(), "GOOD.json")
    assert case.status == PASSED, case.message
    assert (
        "1 busbw median(s) below the tolerance, their best held or their call slower by at most 100 us "
        "(noise, not a slower image)" in case.message
    )
    assert "busbw all_reduce 64KiB: 1 -> 0.7 GB/s (0.70x, tolerance -20%; best 1.2 -> 1.15 GB/s (0.96x))" in case.message
    table = render_comparison_text(judge(compare_reports(old, {"run_id": "new", "scenarios": [new]}, Tolerances())), True)
    assert "median past tolerance, its best held (0.96x): noise" in table


def test_a_regression_stands_when_most_runs_confirm_it() -> None:
    old = {"run_id": "old", "scenarios": [{**busbw_scenario(1.0, 1.2), "name": "bw", "properties": {"scenario_hash": "h"}}]}
    bw = {"name": "bw", "status": PASSED, "properties": {"scenario_hash": "h"}}
    slow = {**busbw_scenario(0.5, 0.6), **bw}
    recovered = {**busbw_scenario(0.95, 1.18), **bw}
    still_slow = {**busbw_scenario(0.52, 0.61), **bw}
    not_measured = {"bandwidth": [], "cases": [], **bw}

    noise = baseline_case(slow, old, Tolerances(), "GOOD.json", [recovered])
    assert noise.status == PASSED, noise.message
    assert "1 regressed in the run and not in most of the 2 runs (noise, not a slower image)" in noise.message
    assert (
        "busbw all_reduce 64KiB: 1 -> 0.5 GB/s (0.50x, tolerance -20%; best 1.2 -> 0.6 GB/s (0.50x)); "
        "re-measured: 0.95 GB/s (0.95x) (regressed in 1 of 2 runs)" in noise.message
    )
    assert noise.details["remeasures"] == 1
    assert noise.details["deltas"][0]["cleared"] is True and noise.details["deltas"][0]["remeasured"] == (0.95,)

    slower = baseline_case(slow, old, Tolerances(), "GOOD.json", [still_slow, still_slow])
    assert slower.status == FAILED
    assert "1 of 1 did in more than half of the 3 runs (the run and the 2 runs re-measuring it)" in slower.message
    assert "re-measured: 0.52 GB/s (0.52x), 0.52 GB/s (0.52x) (regressed in 3 of 3 runs)" in slower.message
    # Two of three runs regressed: the median run did, so the figure did (the rule "every run" missed this).
    assert baseline_case(slow, old, Tolerances(), "GOOD.json", [still_slow, recovered]).status == FAILED
    assert baseline_case(slow, old, Tolerances(), "GOOD.json", [recovered, recovered]).status == PASSED
    # A re-measure without the figure (its run failed before its check) clears nothing.
    failed_again = baseline_case(slow, old, Tolerances(), "GOOD.json", [not_measured])
    assert failed_again.status == FAILED and "re-measured: not measured" in failed_again.message
    # Figures that did not regress in the run are not re-judged by a slower re-measure.
    (kept,) = confirm(deltas(busbw_scenario(1.0, 1.2), busbw_scenario(1.0, 1.2), Tolerances()), [()])
    assert not kept.regressed and kept.remeasured == ()


def test_remeasure_runs_again_only_what_the_runs_so_far_left_undecided(tmp_path: Path) -> None:
    good = json_report(run_summary(GOOD))
    first = RunSummary("run2", (scenario_result(plans()[0], SLOW), scenario_result(plans()[1], GOOD)), config_path="bw.yaml")
    args = BaselineOptions((("GOOD.json", good),), 3, Tolerances(), fail_on_skip=False)
    lines: list[str] = []
    asked: list[list[str]] = []
    # 4 runs in all, a figure regresses in 3: slow in the run, slow, fast, fast -> cleared after the third
    # re-measure (2 of 4 cannot become 3); the fourth answer is never asked for.
    answers = iter([SLOW, GOOD, GOOD, SLOW])

    def run_again(plans_again: tuple[ScenarioPlan, ...]) -> list[ScenarioResult]:
        asked.append([p.scenario.name for p in plans_again])
        return [scenario_result(p, next(answers)) for p in plans_again]

    found = remeasure(first, args, run_again, lines.append)
    assert asked == [["inside"], ["inside"], ["inside"]]  # "across" never regressed
    assert list(found) == [0] and len(found[0]) == 3
    assert lines[0] == "re-measuring 1 scenario(s) with a figure past the tolerance against GOOD.json (1 of 3): inside"
    summary = apply_baseline(first, good, Tolerances(), "GOOD.json", found)
    case = summary.scenarios[0].cases[-1]
    assert case.status == PASSED and "not in most of the 4 runs" in case.message, case.message
    assert summary.exit_code == 0
    # Decided early: slow in the run and in the first two re-measures is 3 of 4, no third re-measure.
    answers = iter([SLOW, SLOW, GOOD])
    asked.clear()
    found = remeasure(first, args, run_again, lines.append)
    assert asked == [["inside"], ["inside"]]
    assert apply_baseline(first, good, Tolerances(), "GOOD.json", found).exit_code == 1
    # A scenario that failed a check fails the run anyway (and --keep-on-failure may hold its containers).
    broken = dataclasses.replace(
        first.scenarios[0], cases=(*first.scenarios[0].cases, CaseResult("env", FAILED, "expected torch 2.6", 0.1))
    )
    assert remeasure(dataclasses.replace(first, scenarios=(broken, first.scenarios[1])), args, run_again, lines.append) == {}
    # --remeasure 0: the run alone decides.
    assert remeasure(first, dataclasses.replace(args, remeasure=0), run_again, lines.append) == {}
    assert apply_baseline(first, good, Tolerances(), "GOOD.json").exit_code == 1


def test_several_baselines_give_the_median_of_each_figure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def report(run_id: str, busbw: float, best: float, time_us: float, duration_s: float) -> dict[str, Any]:
        figure = {"operation": "all_reduce", "size": 65536, "label": "64KiB", "busbw_gbps": busbw}
        figure |= {"best_busbw_gbps": best, "time_us": time_us, "best_time_us": time_us * 0.8}
        case = {"name": "bandwidth.all_reduce", "status": PASSED, "duration_s": duration_s}
        scenario = {"name": "bw", "properties": {"scenario_hash": "h", "scenario_hash_any_image": "a"}}
        return {"run_id": run_id, "scenarios": [{**scenario, "bandwidth": [figure], "cases": [case]}]}

    typical, lucky = report("r1", 1.0, 1.2, 300.0, 2.0), report("r2", 2.6, 3.0, 100.0, 1.0)  # r2: fast as a whole
    label, combined = combined_baseline([("a.json", typical), ("b.json", lucky), ("c.json", report("r3", 1.1, 1.3, 280.0, 3.0))])
    assert label == "the median of a.json, b.json, c.json" and combined["run_id"] == "r1/r2/r3"
    (scenario,) = combined["scenarios"]
    (figure,) = scenario["bandwidth"]
    assert (figure["busbw_gbps"], figure["best_busbw_gbps"], figure["time_us"]) == (1.1, 1.3, 280.0)
    assert scenario["cases"][0]["duration_s"] == 2.0
    new = report("r4", 0.9, 1.1, 320.0, 2.1)["scenarios"][0]
    assert baseline_case(new, lucky, Tolerances(), "b.json").status == FAILED  # against the lucky run alone
    case = baseline_case(new, combined, Tolerances(), label)
    assert case.status == PASSED and "within tolerance of the median of a.json, b.json, c.json (run r1/r2/r3)" in case.message
    assert combined_baseline([("a.json", typical)]) == ("a.json", typical)
    # On the command line: --baseline given several times.
    paths = []
    for name, data in (("a.json", typical), ("b.json", lucky)):
        (tmp_path / name).write_text(json.dumps({"schema_version": 1, **data}))
        paths += ["--baseline", str(tmp_path / name)]
    assert main(["run", str(tmp_path / "missing.yaml"), *paths]) == 2  # the config, not the baselines
    assert "missing.yaml" in capsys.readouterr().err


def test_remeasure_needs_a_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "bw.yaml"
    config.write_text(CONFIG)
    assert main(["run", str(config), "--remeasure", "2"]) == 2
    assert (
        "--remeasure runs again the scenarios that regressed against --baseline: give --baseline too" in capsys.readouterr().err
    )
    assert main(["run", str(config), "--remeasure", "-1"]) == 2
    assert "argument --remeasure: expected a whole number >= 0; got '-1'" in capsys.readouterr().err


def test_durations_regress_past_the_fraction_and_the_slack() -> None:
    old = {"cases": [{"name": "a", "status": PASSED, "duration_s": 0.2}, {"name": "b", "status": PASSED, "duration_s": 4.0}]}
    new = {"cases": [{"name": "a", "status": PASSED, "duration_s": 0.9}, {"name": "b", "status": PASSED, "duration_s": 6.5}]}
    found = {d.name: d for d in deltas(old, new, Tolerances())}
    assert not found["a"].regressed  # 4.5x, but only 0.7 s longer
    assert found["b"].regressed  # 1.6x and 2.5 s longer
    assert not deltas(old, new, Tolerances(duration=1.0))[1].regressed
    for name in ("exit_status", "process_group"):  # not checks: startup noise
        before = {"cases": [{"name": name, "status": PASSED, "duration_s": 0.1}]}
        assert deltas(before, {"cases": [{"name": name, "status": PASSED, "duration_s": 99.0}]}, Tolerances()) == ()


def test_a_scenario_missing_from_the_baseline_is_skipped_with_its_hashes() -> None:
    entry = json_report(run_summary(GOOD))["scenarios"][0]
    case = baseline_case(entry, {"run_id": "old", "scenarios": []}, Tolerances(), "GOOD.json")
    assert case.status == SKIPPED and "GOOD.json (run old)" in case.message and "scenario_hash" in case.message


def test_compare_table_and_markdown_show_both_sides_and_what_changed() -> None:
    good = json_report(run_summary(GOOD))
    slow = json_report(run_summary(SLOW, "example/torch:slow", "run2"))
    comparison = judge(compare_reports(good, slow, Tolerances(), "good.json", "slow.json"))
    assert comparison.verdict == REGRESSED
    text = render_comparison_text(comparison)
    assert "image                 example/torch:good  example/torch:slow" in text
    assert re.search(r"all_reduce 4KiB\s+0\.5 GB/s\s+0\.025 GB/s\s+0\.05x\s+regression\s+dropped past the tolerance", text), text
    assert "bandwidth iterations  5                   5" in text
    markdown = render_comparison_markdown(comparison)
    assert "| all\\_reduce 4KiB | 0.5 GB/s | 0.025 GB/s | 0.05x | **regression** | dropped past the tolerance: 0.05x" in markdown
    assert "Lines: 1. blue (#0072B2): old: example/torch:good; 2. orange (#E69F00): new: example/torch:slow." in markdown
    same = judge(compare_reports(good, copy.deepcopy(good), Tolerances()))
    assert same.verdict == NO_REGRESSION and "Regressions: none" in render_comparison_text(same)


def test_cli_compare_and_run_baseline_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, slow = tmp_path / "good.json", tmp_path / "slow.json"
    good.write_text(json.dumps(json_report(run_summary(GOOD))))
    slow.write_text(json.dumps(json_report(run_summary(SLOW, "example/torch:slow", "run2"))))
    assert main(["compare", str(good), str(good)]) == 0
    assert main(["compare", str(good), str(slow), "--markdown", str(tmp_path / "cmp.md")]) == 1
    assert "dropped past the tolerance" in (tmp_path / "cmp.md").read_text()
    assert main(["compare", str(good), str(slow), "--busbw-tolerance", "99%"]) == 0
    (tmp_path / "junk.json").write_text("[1]")
    assert main(["compare", str(good), str(tmp_path / "junk.json")]) == 2
    capsys.readouterr()
    assert main(["run", "bw.yaml", "--baseline", str(tmp_path / "missing.json")]) == 2  # usage errors return 2
    assert "cannot read the JSON report" in capsys.readouterr().err
    assert main(["compare", str(good), str(slow), "--duration-tolerance", "lots"]) == 2


def test_a_case_keeps_the_lowest_ranks_details() -> None:
    case = run_summary(GOOD).scenarios[0].cases[1]
    assert isinstance(case, CaseResult) and case.name == "bandwidth.all_reduce"
    assert case.details["world_size"] == 2


@pytest.mark.parametrize("command", ["run", "compare"])
def test_help_of_the_commands_with_tolerances_renders(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """argparse formats help with %: a literal percent sign in a help text must be doubled."""
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "(default 20%" in out and "%%" not in out


def test_per_iteration_samples_are_the_slowest_ranks_per_call_and_are_validated() -> None:
    # The suite: per iteration the slowest rank's time, each rank's median, a bounded count (the same indexes).
    assert bounded(list(range(7))) == list(range(7))
    long = [float(i) for i in range(1000)]
    assert len(bounded(long)) == SAMPLES_MAX and bounded(long)[:3] == [0.0, 10.0, 20.0]
    figures: list[dict[str, object]] = [{"size": 4}]
    add_samples(figures, [[[1e-6, 5e-6, 2e-6]], [[3e-6, 1e-6, 2e-6]]])
    assert figures[0]["samples_us"] == [3.0, 5.0, 2.0] and figures[0]["rank_time_us"] == [2.0, 2.0]
    # The host: taken only when every value is a finite time in range, at most SAMPLES_MAX of them.
    base = {"size": 4, "label": "4B", "time_us": 1.0, "algbw_gbps": 1.0, "busbw_gbps": 1.0}
    for samples, kept in [
        ([3.0, 5.0], (3.0, 5.0)),
        ([3.0, -1.0], None),
        ([3.0, True], None),
        ([3.0, float("inf")], None),
        ([3.0, float("nan")], None),
        ([3.0, 0], None),
        ([3.0, 3600e6], (3.0, 3600e6)),
        ([3.0, 3600e6 + 1], None),
        ([3, 10**400], None),  # an integer no float holds: no samples, never an OverflowError
        ([1.0] * (SAMPLES_MAX + 1), None),
        ([], None),
        ("3,5", None),
    ]:
        (found,) = figures_from_details("all_reduce", {"figures": [{**base, "samples_us": samples}], "world_size": 2})
        assert found.samples_us == kept, samples
    (two,) = figures_from_details("all_reduce", {"figures": [{**base, "rank_time_us": [1.0, 2.0, 3.0]}], "world_size": 2})
    assert two.rank_time_us is None  # three ranks' medians in a world of two
