"""distval/comparing/html.py and charts.py: the page says what the history holds, carries no executable markup
whatever the reports' text (fuzzed), links only to files beside the reports; the distval history command and
distval run --html, with and without the renderer."""

from __future__ import annotations

import html
import os
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import distval.comparing.charts
from distval.cli.main import main
from distval.comparing.charts import sanitized_svg
from distval.comparing.history import build_history, read_history
from distval.comparing.html import CSP, href, render_html, render_run_html
from tests.history_helpers import figure, night, report, scenario, write_reports
from tests.report_helpers import summary
from tests.runner_environment import IN_CI

HOSTILE = [
    "<script>alert(1)</script>",
    "</svg><script>alert(2)</script>",
    '"><img src=x onerror=alert(3)>',
    "' onmouseover='alert(4)",
    "javascript:alert(5)",
    "</style><style>body{display:none}</style>",
    "<!--",
    "]]><![CDATA[",
    "\x1b]8;;http://x\x07link\x1b]8;;\x07 \x1b[31mred",
    "nul\x00byte",
    "bidi \u202eevil\u202c \u2066x\u2069",
    "&lt;script&gt; &amp;",
    "<svg onload=alert(6)><foreignObject><iframe src=javascript:alert(7)>",
    "x" * 100_000,
]
# Elements and attribute values that run code, load something, or navigate.
FORBIDDEN_TAGS = {
    "script",
    "iframe",
    "object",
    "embed",
    "foreignobject",
    "img",
    "image",
    "use",
    "link",
    "meta-refresh",
    "base",
    "form",
}


class Parsed(HTMLParser):
    """Every start tag with its attributes, and the text, as a browser's tokenizer sees them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parsed(page: str) -> Parsed:
    parser = Parsed()
    parser.feed(page)
    parser.close()
    return parser


def executable_markup(page: str) -> list[str]:
    """What in ``page`` could run code or go elsewhere: forbidden elements, on* attributes, scheme URLs."""
    found = []
    doc = parsed(page)
    for tag, attrs in doc.tags:
        if tag in FORBIDDEN_TAGS:
            found.append(f"<{tag}>")
        for name, value in attrs:
            if name.startswith("on"):
                found.append(f"{tag} {name}=")
            if name == "style":
                found.append(f"{tag} style=")
            if name in ("href", "src", "xlink:href", "action") and value is not None and re.match(r"\s*[a-zA-Z][\w+.-]*:", value):
                found.append(f"{tag} {name}={value[:40]}")
            if value is not None and "javascript:" in value.lower() and name not in ("title", "aria-label", "data-scenario"):
                found.append(f"{tag} {name} holds javascript:")
    if re.search(r"<script", page, re.IGNORECASE):
        found.append("<script in the text")
    metas = [dict(attrs) for tag, attrs in doc.tags if tag == "meta"]
    if not any(m.get("http-equiv") == "Content-Security-Policy" and m.get("content") == CSP for m in metas):
        found.append("no CSP meta")
    return found


def _hostile_reports(text: str) -> list[tuple[str, dict[str, Any]]]:
    """Two runs whose every text field a record or a report can carry is ``text``."""

    def one(run: int, status: str) -> dict[str, Any]:
        hostile = scenario(
            text or "s",
            [(text or "c", status, text), ("ok", "passed", text)],
            image=text,
            image_id=text,
            started_at=f"2026-12-0{run}T00:00:00Z",
            bandwidth=[figure(text, 1024, text, 1.0 / run, 0.5)],
        )
        data = report(text, [hostile], exit_code=1)
        data["early_error"] = {"kind": text, "message": text}
        return data

    return [(f"{text[:20]}1.json", one(1, "passed")), (f"{text[:20]}2.json", one(2, "failed"))]


def _assert_safe(page: str, text: str) -> None:
    assert executable_markup(page) == []
    shown = " ".join(parsed(page).text)
    marker = " ".join(text.replace("\x00", "").split())[:50]
    if marker.strip() and "\x1b" not in marker and "\u202e" not in marker:
        assert html.unescape(html.escape(marker)) in shown or marker[:20] in shown, "the hostile text is shown as text"


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_text_in_every_field_is_only_text(text: str, tmp_path: Path) -> None:
    page = render_html(build_history(_hostile_reports(text)), tmp_path / "index.html")
    _assert_safe(page, text)
    assert "\x00" not in page and "\x1b" not in page and "\u202e" not in page
    assert len(page) < 2_000_000, "a huge text is cut, not copied into every place it appears"


FUZZ = settings(
    max_examples=int(os.environ.get("DISTVAL_FUZZ_EXAMPLES", "15")),
    deadline=None,
    derandomize=IN_CI,
    database=None if IN_CI else settings.default.database,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
PIECES = st.sampled_from(["<", ">", '"', "'", "&", "=", "/", "script", "onerror", "javascript:", "</svg>", "\u202e", "\x00", " "])


@FUZZ
@given(st.lists(st.one_of(PIECES, st.text(max_size=8)), max_size=12).map("".join))
def test_fuzzed_text_never_becomes_markup(text: str) -> None:
    page = render_html(build_history(_hostile_reports(text)), "/tmp/page/index.html")
    assert executable_markup(page) == []


def test_the_sanitizer_drops_what_a_renderer_should_never_have_written() -> None:
    svg = (
        '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" onload="alert(1)">'
        '<script>alert(2)</script><g clip-path="url(javascript:alert(3))" onclick="x"><text style="x">a &lt;b&gt;</text>'
        '<foreignObject><div xmlns="http://www.w3.org/1999/xhtml">hi</div></foreignObject>'
        '<a xlink:href="javascript:alert(4)"><path d="M0,0"/></a><use xlink:href="#x"/><rect clip-path="url(#clip1)"/></g></svg>'
    )
    assert sanitized_svg(svg) == (
        '<svg xmlns="http://www.w3.org/2000/svg"><g><text>a &lt;b&gt;</text><rect clip-path="url(#clip1)"></rect></g></svg>'
    )


def test_the_page_shows_the_matrix_the_regressions_and_a_chart_per_scenario(tmp_path: Path) -> None:
    nights = [night(1), night(2), night(3, allreduce="failed", busbw_factor=0.5), night(4, allreduce="failed")]
    page = render_html(build_history([(f"{i}.json", r) for i, r in enumerate(nights)]), tmp_path / "index.html")
    assert executable_markup(page) == []
    assert page.count('<td class="run"') == 4
    assert 'data-regressed-since="3"' in page and "▼ new" in page and "▼ since #3" in page
    assert "passed in #2, failing since #3" in page
    assert page.count('data-chart="time_to_verdict"') == 2 and page.count('<figure class="chart" data-chart="busbw"') == 1
    assert 'data-chart="busbw" data-points="24" data-regressed="4"' in page
    assert "no efficiency recorded" in page and "no bandwidth figure recorded" in page


def test_the_page_leads_with_each_runs_verdict_and_its_failing_cells(tmp_path: Path) -> None:
    """A failing cell may sit thousands of pixels to the right of a wide matrix: each run's verdict, newest first,
    and the cells that failed in it come before the matrix."""
    nights = [night(1), night(2), night(3, allreduce="failed")]
    page = render_html(build_history([(f"{i}.json", r) for i, r in enumerate(nights)]), tmp_path / "index.html")
    verdicts = page.index('<h2 id="verdicts">')
    assert verdicts < page.index('id="regressions"') < page.index('<table class="matrix"')
    section = page[verdicts : page.index("</ul>", page.index('<ul class="verdicts">') + 1)]
    runs = re.findall(r'<li class="verdict (\w+)" data-run="(\d+)"><strong>#\d+</strong>', page)
    assert runs == [("failed", "3"), ("passed", "2"), ("passed", "1")]
    assert "FAILED (exit code 1: a check failed or errored)" in page
    assert "<code>inside</code> <code>all_reduce</code>: FAIL got 5.0" in section


def test_the_order_of_the_arguments_changes_nothing(tmp_path: Path) -> None:
    """Runs are ordered by when they started, not by the command line: a failure after a pass is a regression
    whichever report comes first."""
    good, bad = night(1), night(2, allreduce="failed")
    forward = build_history([("good.json", good), ("bad.json", bad)])
    backward = build_history([("bad.json", bad), ("good.json", good)])
    assert [r.run_id for r in forward.runs] == [r.run_id for r in backward.runs] == ["night1", "night2"]
    assert forward.check_regressions == backward.check_regressions and len(forward.check_regressions) == 1


def test_links_are_relative_paths_that_no_scheme_can_start() -> None:
    assert href("/a/b/javascript:alert(1).xml", "/a/c") == "../b/javascript%3Aalert%281%29.xml"
    assert href("/a/b/r e&p\"o'r<t>.md", "/a/b") == "r%20e%26p%22o%27r%3Ct%3E.md"


def test_the_page_links_the_files_beside_each_report(tmp_path: Path) -> None:
    (path,) = write_reports(tmp_path / "runs", [night(1)], ["n1 <x>.json"])
    (tmp_path / "runs" / "n1 <x>.xml").write_text("<x/>")
    page = render_html(read_history([path]), tmp_path / "page" / "index.html")
    hrefs = [v for tag, attrs in parsed(page).tags if tag == "a" for k, v in attrs if k == "href"]
    assert hrefs == ["../runs/n1%20%3Cx%3E.xml", "../runs/n1%20%3Cx%3E.json"]


def test_a_run_s_page_is_the_same_view_for_one_run(tmp_path: Path) -> None:
    page = render_run_html(summary(), tmp_path / "run.html", str(tmp_path / "r.json"), str(tmp_path / "j.xml"), None)
    assert executable_markup(page) == []
    assert "distval run abc123" in page and page.count('<td class="run"') == 1
    assert 'href="j.xml">JUnit</a>' in page and 'href="r.json">JSON</a>' in page


# --- the commands ----------------------------------------------------------------------------------------


def test_distval_history_writes_the_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = write_reports(tmp_path, [night(2), night(1, allreduce="failed"), night(3, allreduce="failed")])
    assert main(["history", *map(str, paths), "--html", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert out == f"{tmp_path / 'out' / 'index.html'}: 3 run(s), 2 scenario(s), 1 regression(s)\n"
    assert executable_markup((tmp_path / "out" / "index.html").read_text()) == []


@pytest.mark.parametrize("content", ["not json", '{"schema_version": 1, "run_id": "x", "scenarios": [{"name": 1}]}'])
def test_distval_history_on_a_bad_report_is_one_line_and_exit_2(
    content: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    assert main(["history", str(bad), "--html", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"distval: {bad}") and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_without_the_renderer_html_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(distval.comparing.charts, "vl_convert", None)
    (path,) = write_reports(tmp_path, [night(1)])
    assert main(["history", str(path), "--html", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert (
        err == "distval: the HTML report needs vl-convert-python, which renders its charts offline: pip install 'distval[html]'\n"
    )
    # distval run says so before anything runs (the other reports still say why the run ended).
    junit = tmp_path / "j.xml"
    assert main(["run", "--html", str(tmp_path / "r.html"), "--junit", str(junit), "--quiet", "--local"]) == 2
    err = capsys.readouterr().err
    assert "--html needs vl-convert-python" in err and "Traceback" not in err
    assert junit.is_file() and not (tmp_path / "r.html").exists()
