"""Text from the image under test (op names, size labels, case names, messages) and from configs is data:
never Markdown or HTML in a report, never a Mermaid directive, never an escape sequence on a terminal; and a
config cannot carry control characters or bidi overrides at all (distval/escape.py, config/values.py)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

import distval.cli.main
from distval.cli.plan_render import render_plan
from distval.config import parse_config
from distval.errors import EngineError
from distval.escape import markdown_cell, markdown_code, strip_controls, terminal_line
from distval.plan.model import RunPlan
from distval.reports.markdown import render_markdown
from distval.reports.mermaid import Series, busbw_chart, palette_directive
from distval.reports.summary import render_summary
from distval.results.outcome import ContainerOutcome, ScenarioOutcome
from distval.results.scenario import RunSummary, ScenarioResult, summarize_scenario
from distval.run.progress import ProgressDisplay
from tests.config_helpers import FILE, problems_of, yaml_text
from tests.report_helpers import plans

# What a hostile image writes: HTML, a table cell break, Markdown, a terminal's OSC title and screen clear,
# CSI as one C1 byte, a bidi override, and a lone surrogate (json.loads makes one of "\udc80").
HTML = "<img src=x onerror=alert(1)>"
ESCAPES = "\x1b]0;owned\x07\x1b[2J\x9b31m\u202etxt.exe"
FORBIDDEN_ON_TERMINAL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def unescaped_pipes(row: str) -> int:
    return len(re.findall(r"(?<!\\)\|", row))


# -- escape.py -------------------------------------------------------------------------------------------


def test_terminal_line_removes_every_control_and_override_and_can_be_printed() -> None:
    line = terminal_line(f"a{ESCAPES}\nb\udc80\tc")
    assert FORBIDDEN_ON_TERMINAL.search(line) is None
    assert line == "a]0;owned[2J31mtxt.exe b\ufffd c"
    line.encode("utf-8")  # strict, as sys.stdout encodes: a lone surrogate would raise here


def test_strip_controls_keeps_line_breaks_and_tabs() -> None:
    assert strip_controls("a\x1b\n\tb\u2066") == "a\n\tb"


def test_a_markdown_cell_is_text_in_one_cell() -> None:
    assert markdown_cell(HTML) == "&lt;img src=x onerror=alert(1)&gt;"
    assert markdown_cell("a|b\nc") == "a\\|b c"
    assert markdown_cell("[x](javascript:1) *b* `c`") == "\\[x\\](javascript:1) \\*b\\* \\`c\\`"


@pytest.mark.parametrize(("text", "expected"), [("abc123", "`abc123`"), ("a`b", "``a`b``"), ("`x", "`` `x ``")])
def test_inline_code_is_fenced_past_every_backtick_run(text: str, expected: str) -> None:
    assert markdown_code(text) == expected


# -- the Markdown report -----------------------------------------------------------------------------------


def bandwidth_line(rank: int, operation: str, labels: tuple[str, str]) -> str:
    figures = [
        {"size": size, "label": label, "time_us": 10.0, "algbw_gbps": 1.0, "busbw_gbps": 1.0}
        for size, label in zip((1024, 2048), labels, strict=True)
    ]
    details = {"iterations": 5, "world_size": 2, "figures": figures}
    record = {"check": "bandwidth", "case": f"bandwidth.{operation}", "rank": rank, "status": "passed", "message": "ok"}
    return json.dumps({**record, "duration_s": 0.1, "details": details})


def hostile_result(operation: str, labels: tuple[str, str], failing_case: str, message: str) -> ScenarioResult:
    inside, _ = plans()
    lines = []
    for rank in (0, 1):
        lines.append(bandwidth_line(rank, operation, labels))
        lines.append(json.dumps({"check": "env", "case": failing_case, "rank": rank, "status": "failed", "message": message}))
    files = {"rank-0.jsonl": ("\n".join(lines) + "\n").encode()}
    c = inside.containers[0]
    outcome = ScenarioOutcome(inside, "sha256:1", 1.0, (ContainerOutcome(c.name, c.node_rank, c.ranks, 0, False, "", "", files),))
    return summarize_scenario(outcome)


def test_the_images_op_names_labels_case_names_and_messages_are_text_in_the_markdown() -> None:
    result = hostile_result(f"{HTML}|x", (f"{HTML}", "a|b"), f"env|{HTML}", f"```\n{HTML}\n````\n## not a heading")
    summary = RunSummary("run`1", (result,), engine_version=f"27 {HTML}", host="ci|host", config_path="c.yaml")
    text = render_markdown(summary)
    outside_code = re.sub(r"^(`{3,})[^\n]*\n.*?^\1$", "", text, flags=re.M | re.S)  # fenced blocks are literal
    assert "<" not in outside_code and "```" not in outside_code, outside_code
    table = text[text.index("| scenario | operation |") :].split("\n\n")[0].splitlines()
    assert len(table) == 3 and len({unescaped_pipes(row) for row in table}) == 1, table  # 4 columns in every row
    assert "| &lt;img src=x onerror=alert(1)&gt;\\|x |" in table[2]
    assert "Run ``run`1``" in text and "host `ci|host`" in text
    failure = text[text.index("#### ") :]
    assert failure.startswith("#### inside: error\n\n**env\\|&lt;img src=x onerror=alert(1)&gt;**: failed\n")
    # The message's own fences (``` and ````) stay inside a longer fence: "## not a heading" is code.
    fence = re.search(r"^(`{5,})$", failure, flags=re.M)
    assert fence is not None and failure.count(fence.group(1) + "\n") >= 2


def test_a_record_cannot_put_an_escape_sequence_in_the_markdown_file() -> None:
    result = hostile_result("all_reduce", ("1KiB", "2KiB"), "env", f"boom {ESCAPES}")
    text = render_markdown(RunSummary("r", (result,), host="h", config_path="c.yaml"))
    assert FORBIDDEN_ON_TERMINAL.search(text) is None


# -- Mermaid ----------------------------------------------------------------------------------------------


def test_mermaid_labels_cannot_end_their_string_become_markup_or_a_directive() -> None:
    inside, _ = plans()
    operation = 'x" ]\n%%{init: {"theme": "dark"}}%%<b>'
    result = hostile_result(operation, ('"><script>', "%%{init: {}}%%"), "env", "m")
    chart = busbw_chart(operation, [Series('scen"a', result.figures)])
    assert chart is not None
    directive, *lines = chart.split("\n")
    assert directive == palette_directive(1)  # distval's own: the only directive in the chart
    quoted = r'"[^"\n]*"'
    assert re.fullmatch(rf"    title {quoted}", lines[1]), lines[1]
    assert re.fullmatch(rf"    x-axis {quoted} \[{quoted}, {quoted}\]", lines[2]), lines[2]
    body = "\n".join(lines)
    assert "%%" not in body and "<" not in body and ">" not in body.replace("-->", "")


# -- terminal lines -----------------------------------------------------------------------------------------


def test_the_terminal_summary_carries_no_escape_sequence_and_can_be_printed() -> None:
    result = hostile_result("all_reduce", ("1KiB", "2KiB"), f"env{ESCAPES}", f"failed {ESCAPES} \udc80")
    text = render_summary(RunSummary("r", (result,), early_error=(f"k{ESCAPES}", ESCAPES), host="h", config_path="c.yaml"))
    assert FORBIDDEN_ON_TERMINAL.search(text) is None, repr(text)
    text.encode("utf-8")


@pytest.mark.parametrize("tty", [False, True])
def test_progress_lines_carry_no_escape_sequence_but_its_own(tty: bool) -> None:
    result = hostile_result("all_reduce", ("1KiB", "2KiB"), f"env{ESCAPES}", "m")
    stream = io.StringIO()
    display = ProgressDisplay(stream, tty=tty, clock=lambda: 0.0, columns=200, rows=20)
    display.scenario_started(result.plan, 1, 1)
    display.note(result.plan, f"container stopped {ESCAPES}")
    display.log(f"  build: {ESCAPES}")
    display.scenario_finished(result)
    display.close()
    # The display's own cursor-up and carriage returns, on a terminal only.
    own = re.sub(r"\x1b\[\d+A", "", stream.getvalue()).replace("\r", "")
    assert FORBIDDEN_ON_TERMINAL.search(own) is None, repr(own)


def test_an_error_message_quoting_others_text_reaches_stderr_without_controls() -> None:
    assert str(EngineError(f"the Engine said: {ESCAPES}")) == "the Engine said: ]0;owned[2J31mtxt.exe"


def test_the_plan_shows_no_escape_sequence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / f"suite{ESCAPES}.yaml"
    config.write_text(yaml_text(VALID), encoding="utf-8")
    assert distval.cli.main.main(["plan", str(config), "--image", "example/torch:1"]) == 0
    out = capsys.readouterr().out
    assert "scenario" in out and FORBIDDEN_ON_TERMINAL.search(out) is None, repr(out[:300])


def test_render_plan_strips_what_no_config_can_hold() -> None:
    (scenario,) = parse_config(yaml_text(VALID), FILE).scenarios
    inside, _ = plans()
    text = render_plan(RunPlan("r", f"c{ESCAPES}.yaml", (inside,)))
    assert FORBIDDEN_ON_TERMINAL.search(text) is None and scenario.name == "one"


# -- configs ------------------------------------------------------------------------------------------------

VALID = """
scenarios:
  - name: one
    topology: cross-container
    world_size: 2
    checks: [env]
"""


@pytest.mark.parametrize(
    ("line", "key_path", "code_point"),
    [
        ('working_dir: "/w\\e[2J/x"', "working_dir", "U+001B"),
        ('env: {A: "\\e]0;title\\a"}', "env.A", "U+001B"),
        ('env: {A: "x\\x9b31m"}', "env.A", "U+009B"),
        ('env: {A: "x\\N"}', "env.A", "U+0085"),
        ('python: "python3\\u202e"', "python", "U+202E"),
        ('x-note: "\\u2066hidden"', "x-note", "U+2066"),
        ('"x-\\e[8m": 1', "['x-\\x1b[8m']", "U+001B"),
    ],
    ids=["working_dir-esc", "env-osc", "env-csi-c1", "env-nel", "python-bidi", "extension-isolate", "key"],
)
def test_controls_and_bidi_overrides_are_refused_in_every_config_text(line: str, key_path: str, code_point: str) -> None:
    (problem,) = problems_of(yaml_text(VALID) + line + "\n")
    assert problem.startswith(f"{FILE}:6: {key_path}: expected text without control characters"), problem
    assert code_point in problem and "\x1b" not in problem


def test_a_tab_in_a_value_is_still_text() -> None:
    (scenario,) = parse_config(yaml_text(VALID) + 'env: {A: "a\\tb"}\n', FILE).scenarios
    assert dict(scenario.env) == {"A": "a\tb"}


def test_distval_plan_refuses_an_escape_in_working_dir_with_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(yaml_text(VALID) + 'working_dir: "/work\\e[1A\\e[2K/safe"\n', encoding="utf-8")
    assert distval.cli.main.main(["plan", str(config), "--image", "example/torch:1"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    (line,) = captured.err.splitlines()
    assert line.startswith(f"{config}:6: working_dir: expected text without control characters")
