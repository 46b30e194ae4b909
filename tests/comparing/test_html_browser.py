"""The history page in a real browser: Debian's headless Chromium opens it from a file:// URL with the network off
and the test checks what a person would see there (the matrix's cells, a chart per scenario with its points, the
regression marked, nothing refused by the CSP, no console message); a screenshot is kept in tests/artifacts/ (or
$DISTVAL_ARTIFACTS) as history.png. Without Chromium the tests skip, except on CI ($CI set), where .ci/run installs
it and its absence is a failure. The last tests prove the check can fail: a missing cell, a chart without its
points, and a page that tries to fetch are each caught."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import lxml.html
import pytest

from distval.comparing.history import History, build_history
from distval.comparing.html import render_html
from tests.history_helpers import ARTIFACTS, Opened, chromium, night, open_offline
from tests.runner_environment import IN_CI

CELL_WORDS = {"passed": "pass", "failed": "FAIL", "skipped": "skip", "error": "ERROR", "absent": "—"}
# Lines of Chromium's log that mean the page did something it must not: a console message (the page has no script,
# so any is a problem), a CSP refusal, a failed load.
LOG_PROBLEMS = ("CONSOLE", "Refused to", "Content Security Policy", "Uncaught", "net::ERR_")


@pytest.fixture(scope="module")
def browser() -> str:
    found = chromium()
    if found is None:
        if IN_CI:
            pytest.fail("no Chromium: .ci/run installs Debian's chromium for the browser tests")
        pytest.skip("no Chromium (apt-get install chromium): the page is not checked in a browser")
    return found


@dataclass(frozen=True)
class Expected:
    rows: list[list[str]]  # per run, the words of each cell
    points: dict[tuple[str, str], int]  # (scenario, chart) -> points
    regressed_cells: dict[int, str]  # run number -> the mark ("▼ new", "▼ since #3")


def expected(history: History) -> Expected:
    rows = [[CELL_WORDS[cell.status] for cell in row] for row in history.cells]
    points = {}
    for trend in history.trends:
        points[(trend.scenario, "time_to_verdict")] = len(trend.time_to_verdict.points)
        if trend.busbw:
            points[(trend.scenario, "busbw")] = sum(len(s.points) for s in trend.busbw)
        if trend.efficiency:
            points[(trend.scenario, "efficiency")] = sum(len(s.points) for s in trend.efficiency)
    marks = {}
    for row in history.cells:
        for cell in row:
            if cell.regressed_since is not None:
                number = history.cells.index(row) + 1
                marks[number] = "▼ new" if cell.regressed_since + 1 == number else f"▼ since #{cell.regressed_since + 1}"
    return Expected(rows, points, marks)


def problems(opened: Opened, want: Expected) -> list[str]:
    """What a person would find wrong with the page as Chromium showed it."""
    found = []
    doc = lxml.html.fromstring(opened.dom)
    rows = doc.xpath('//table[@id="matrix"]/tbody/tr')
    seen = [[" ".join(td.text_content().split()) for td in row.xpath("./td[not(@class='run')]")] for row in rows]
    shown_words = [[cell.split(" ▼")[0] for cell in row] for row in seen]
    if shown_words != want.rows:
        found.append(f"matrix cells: expected {want.rows}; got {shown_words}")
    for number, mark in want.regressed_cells.items():
        if number > len(seen) or not any(mark in cell for cell in seen[number - 1]):
            found.append(f"run #{number}: expected a cell marked {mark!r}")
    for (scenario, chart), count in want.points.items():
        figures = doc.xpath(f'//section[@data-scenario="{scenario}"]//figure[@data-chart="{chart}"]')
        if len(figures) != 1:
            found.append(f"{scenario}: expected one {chart} chart; got {len(figures)}")
            continue
        # Vega's SVG: each point of the trend layer a symbol mark described as a point (the red ▼ are another layer).
        drawn = figures[0].xpath(
            './/*[local-name()="g"][contains(@class, "role-mark") and not(contains(@class, "regressed_marks"))]'
            '/*[@aria-roledescription="point"]'
        )
        if len(drawn) != count:
            found.append(f"{scenario} {chart}: expected {count} points drawn; got {len(drawn)}")
    for line in opened.log.splitlines():
        if any(problem in line for problem in LOG_PROBLEMS):
            found.append(f"browser log: {line[:300]}")
    return found


def _history() -> History:
    nights = [night(1), night(2), night(3, allreduce="failed", busbw_factor=0.5), night(4, allreduce="failed"), night(5)]
    return build_history([(f"night{i}.json", r) for i, r in enumerate(nights)])


def test_the_page_shows_what_the_history_holds_in_chromium_offline(browser: str, tmp_path: Path) -> None:
    history = _history()
    page = tmp_path / "index.html"
    page.write_text(render_html(history, page))
    screenshot = ARTIFACTS / "history.png"
    opened = open_offline(browser, page, tmp_path / "profile", screenshot=screenshot)
    assert problems(opened, expected(history)) == []
    doc = lxml.html.fromstring(opened.dom)
    assert doc.xpath('//*[@data-regressed-since="3"]'), "the regression is marked with the run that introduced it"
    assert "no efficiency recorded" in doc.xpath('string(//section[@data-scenario="across"])')
    regressed = doc.xpath(
        '//section[@data-scenario="inside"]//figure[@data-chart="busbw"]//*[contains(@class, "regressed_marks")]/*'
    )
    assert len(regressed) == 4
    assert screenshot.stat().st_size > 20_000


def test_the_check_catches_a_missing_cell(browser: str, tmp_path: Path) -> None:
    history = _history()
    page = tmp_path / "index.html"
    text = render_html(history, page)
    first = text.index('<td class="passed"')
    page.write_text(text[:first] + text[text.index("</td>", first) + 5 :])
    assert any("matrix cells" in p for p in problems(open_offline(browser, page, tmp_path / "profile"), expected(history)))


def test_the_check_catches_a_chart_without_its_points(browser: str, tmp_path: Path) -> None:
    history = _history()
    page = tmp_path / "index.html"
    text = render_html(history, page)
    page.write_text(text.replace('aria-roledescription="point"', 'aria-roledescription="nothing"', 3))
    found = problems(open_offline(browser, page, tmp_path / "profile"), expected(history))
    assert any("points drawn" in p for p in found), found


def test_the_check_catches_a_page_that_fetches_or_scripts(browser: str, tmp_path: Path) -> None:
    history = _history()
    page = tmp_path / "index.html"
    text = render_html(history, page)
    tampered = '<img src="https://example.invalid/x.png"><script>console.log("ran")</script></body>'
    page.write_text(text.replace("</body>", tampered))
    found = problems(open_offline(browser, page, tmp_path / "profile"), expected(history))
    assert any("browser log" in p and "Content Security Policy" in p for p in found), found
