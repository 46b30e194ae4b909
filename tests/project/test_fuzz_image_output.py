"""Property-based fuzzing of every reader of what the image under test writes (Hypothesis): its ranks' records,
its stack files, the Kubernetes logs collected from it, the figure labels of its bandwidth records and the doctor's
probe output. Invalid UTF-8, lone surrogates, Unicode noncharacters, deep JSON, huge texts and values of the wrong
type each become that rank's error or a refusal, never an exception (distval's exit 4); every report (JUnit, JSON,
Markdown, HTML) is still written and parses; stack files and labels are capped (distval/text_caps.py).

Conventions as tests/project/test_fuzz.py: DISTVAL_FUZZ_EXAMPLES examples per property, derandomized in CI.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distval.comparing.history import build_history, checked_report
from distval.comparing.html import render_html
from distval.doctor.torch_probe import TorchFacts, read_answer
from distval.reports.json_report import render_json
from distval.reports.junit import render_junit
from distval.reports.markdown import render_markdown
from distval.results.outcome import ScenarioOutcome
from distval.results.scenario import RunSummary, summarize_scenario
from distval.targets.kubernetes.collect import STDOUT_MARKER, _node_of, read_log
from distval.text_caps import STACKS_MAX_CHARS
from tests.history_helpers import figure, report, scenario
from tests.results.test_results import container, env_record, jsonl, plans, record
from tests.runner_environment import IN_CI

EXAMPLES = int(os.environ.get("DISTVAL_FUZZ_EXAMPLES", "25"))
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=IN_CI,
    database=None if IN_CI else settings.default.database,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# What well-formed text never holds, and what a careless reader trips on.
NOT_TEXT = ["\udc80", "\ud800", "\udfff", "\ufffe", "\uffff", "\U0010ffff", "\ufdd0", "\x00", "\x1b[31m", "\u202e"]
TEXT = st.lists(st.one_of(st.sampled_from(NOT_TEXT), st.text(max_size=6)), max_size=8).map("".join)
WRONG = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    TEXT,
    st.lists(st.integers(), max_size=3),
    st.dictionaries(TEXT, st.integers(), max_size=2),
)


def _deep(levels: int) -> str:
    return "[" * levels + "]" * levels


def _json_text(value: Any) -> str:
    """``value`` as the image's JSON would carry it: lone surrogates as \\u escapes (as json.dumps writes them)."""
    return json.dumps(value, allow_nan=True)


RECORD_LINES = st.one_of(
    TEXT.map(lambda text: record("all_reduce", 1, message=text, detail=text)),
    st.builds(
        lambda key, value: _json_text({"check": "all_reduce", "rank": 1, "status": "passed", key: value}),
        st.sampled_from(["rank", "check", "status", "message", "duration_s", "details", "case"]),
        WRONG,
    ),
    st.integers(min_value=90, max_value=3000).map(_deep),
    st.integers(min_value=90, max_value=3000).map(
        lambda n: '{"check": "all_reduce", "rank": 1, "status": "passed", "details": ' + _deep(n) + "}"
    ),
    st.just('{"check": "all_reduce", "rank": 1, "status": "failed", "status": "passed"}'),
    st.just('{"rank": ' + "9" * 5000 + "}"),
    st.binary(max_size=40).map(lambda raw: raw.decode("latin-1")),
)


def _reports_of(summary: RunSummary) -> None:
    """Every report renders and parses."""
    ET.fromstring(render_junit(summary).encode("utf-8", "backslashreplace"))
    data = json.loads(render_json(summary).encode("utf-8", "backslashreplace"))
    render_markdown(summary).encode("utf-8", "backslashreplace")
    checked_report("fuzz.json", data)
    page = render_html(build_history([("fuzz.json", data)]), "/tmp/fuzz/index.html")
    page.encode("utf-8")  # no lone surrogate reaches the page


@FUZZ
@given(st.lists(RECORD_LINES, min_size=1, max_size=4), st.binary(max_size=64))
def test_any_record_lines_become_a_ranks_error_and_every_report_is_written(lines: list[str], raw: bytes) -> None:
    inside, _ = plans()
    files = {
        "rank-0.jsonl": jsonl(env_record(0), record("all_reduce", 0)),
        "rank-1.jsonl": jsonl(env_record(1), *lines) + raw,
    }
    result = summarize_scenario(ScenarioOutcome(inside, "id", 2.0, (container(inside, 0, files),)))
    _reports_of(RunSummary("fuzz", (result,)))


@FUZZ
@given(TEXT, st.integers(min_value=0, max_value=4))
def test_a_stack_file_of_any_size_and_text_is_capped(text: str, megabytes: int) -> None:
    inside, _ = plans()
    stack = (text + "\n").encode(
        "utf-8", "surrogatepass"
    ) + b'Thread 0x1 (most recent call first):\n  File "x.py", line 1 in f\n' * (megabytes * 20_000)
    files = {f"rank-{r}.jsonl": jsonl(env_record(r), record("all_reduce", r)) for r in (0, 1)}
    files["stacks-rank-1.txt"] = stack
    result = summarize_scenario(ScenarioOutcome(inside, "id", 2.0, (container(inside, 0, files, exit_code=1, killed=True),)))
    summary = RunSummary("fuzz", (result,))
    assert len(render_json(summary)) < 4 * STACKS_MAX_CHARS + 200_000
    _reports_of(summary)


@FUZZ
@given(st.lists(st.one_of(TEXT, st.sampled_from([_deep(3000), '{"a": 1, "a": 2}'])), max_size=3), WRONG)
def test_collected_log_lines_are_read_or_garbled_never_raised(pieces: list[str], node_rank: Any) -> None:
    start = _json_text({"start": {"rank": 0, "node_rank": node_rank}})
    lines = [f"{STDOUT_MARKER} v1 r=0 n=0 p=1/1 {start}"]
    lines += [f"{STDOUT_MARKER} v1 r=0 n={n} p=1/1 {piece}" for n, piece in enumerate(pieces, start=1)]
    for source in read_log("pod.log", "\n".join(lines)):
        node = _node_of(source)
        assert node is None or isinstance(node, int)


@FUZZ
@given(st.one_of(TEXT, st.sampled_from([_deep(50_000), '{"torch": true, "torch": false}']), WRONG.map(_json_text)))
def test_the_doctors_probe_answer_is_facts_or_a_reason(line: str) -> None:
    answer = read_answer(0, "ready\n" + line + "\n", "")
    assert isinstance(answer, TorchFacts | str)
    if isinstance(answer, str):
        answer.encode("utf-8")  # what the doctor prints: no lone surrogate


@FUZZ
@given(TEXT, TEXT)
def test_figure_labels_of_any_text_make_a_page(label: str, operation: str) -> None:
    run = report("r1", [scenario("s", [("c", "passed", "ok")], bandwidth=[figure(operation or "op", 1024, label, 1.0, 0.5)])])
    page = render_html(build_history([("a.json", run), ("b.json", run)]), "/tmp/fuzz/index.html")
    page.encode("utf-8")
