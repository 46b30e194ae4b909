"""A history (distval/comparing/history.py) -> one self-contained static HTML page (``distval history --html DIR``,
``distval run --html FILE``).

The page carries no JavaScript and loads nothing: its charts are inline SVG (distval/comparing/charts.py), its style
an inline <style>, and its Content-Security-Policy forbids everything else (``default-src 'none'``), so it opens
from a CI artifact on the file system with no network, and text that slipped past escaping could not run anyway.
Every text from a report is escaped here (``_text``: controls and bidi overrides out, HTML-escaped); links go only
to files beside the reports, as relative paths with every character that could start a scheme percent-encoded.
Each cell says its status in words (pass, FAIL, skip, ERROR, none), not only in colour.
"""

from __future__ import annotations

import html
import os
import urllib.parse
from collections.abc import Sequence
from pathlib import Path

from distval import __version__
from distval.comparing import charts
from distval.comparing.history import (
    ABSENT,
    Cell,
    CheckRegression,
    Column,
    FigureRegression,
    History,
    Run,
    Series,
    Trend,
    build_history,
    checked_report,
)
from distval.errors import EXIT_MEANINGS, EXIT_PASSED
from distval.escape import strip_controls
from distval.reports.files import write_atomically
from distval.reports.json_report import json_report
from distval.results.outcome import ERROR, FAILED, PASSED, SKIPPED
from distval.results.scenario import RunSummary

HISTORY_PAGE = "index.html"  # what distval history --html DIR writes in DIR
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
# What a cell says, by status: text first, colour second.
CELL_WORDS = {PASSED: "pass", FAILED: "FAIL", SKIPPED: "skip", ERROR: "ERROR", ABSENT: "—"}
# Texts of the image's shown in full at most this long (a name in a heading, a message in a tooltip).
NAME_MAX_CHARS = 200
MESSAGE_MAX_CHARS = 500
STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #1a1a1a; }
h1 { font-size: 1.4em; } h2 { font-size: 1.2em; margin-top: 1.6em; } h3 { font-size: 1.05em; margin: 1.2em 0 .3em; }
table.matrix { border-collapse: collapse; font-size: 12px; }
.matrix th, .matrix td { border: 1px solid #ccc; padding: 2px 5px; text-align: center; white-space: nowrap; }
.matrix th.run, .matrix td.run { text-align: left; }
.matrix thead th { background: #f3f3f3; }
td.passed { background: #e3f4e3; } td.failed { background: #f9d6d6; font-weight: bold; }
td.error { background: #f6c9a8; font-weight: bold; } td.skipped { background: #eee; color: #555; }
td.absent { color: #aaa; } td.regression { outline: 3px solid #c00000; outline-offset: -3px; }
.mark { color: #c00000; font-weight: bold; }
ul.regressions li { margin: .2em 0; }
li.verdict.failed > strong { color: #c00000; } li.verdict.passed > strong { color: #1a7f1a; }
section.scenario > div.charts { display: flex; flex-wrap: wrap; gap: 0 1.5em; align-items: flex-start; }
figure { margin: .4em 0 1em; } figcaption { font-size: 12px; color: #444; }
.none { color: #666; font-style: italic; }
code { background: #f3f3f3; padding: 0 .2em; }
"""


def _text(text: object, limit: int = NAME_MAX_CHARS) -> str:
    """A report's text for the page: one line, no controls or bidi overrides, cut at ``limit``, HTML-escaped."""
    one_line = " ".join(strip_controls(str(text)).split())
    if len(one_line) > limit:
        one_line = f"{one_line[:limit]}… [{len(one_line)} characters]"
    return html.escape(one_line, quote=True)


def href(target: str, page_dir: str) -> str:
    """A link from the page in ``page_dir`` to the file ``target``: a relative path, percent-encoded (a ':' is
    %3A, so no scheme such as ``javascript:`` can start it), never absolute."""
    relative = os.path.relpath(os.path.abspath(target), os.path.abspath(page_dir)).replace(os.sep, "/")
    return urllib.parse.quote(relative, safe="/")


def run_label(run: Run) -> str:
    return f"#{run.number}"


def _run_cell(run: Run, page_dir: str) -> str:
    images = ", ".join(_text(image) for image in run.images) or "no scenario"
    digests = ", ".join(_text(charts.series_name(d.removeprefix("sha256:"))[:12]) for d in run.image_ids)
    links = [
        f'<a href="{href(path, page_dir)}">{what}</a>'
        for what, path in (("JUnit", run.junit), ("Markdown", run.markdown), ("JSON", run.path))
        if path  # a run's page without --json has no JSON report to link
    ]
    early = f'<br><span class="mark">ended early: {_text(run.early_error, MESSAGE_MAX_CHARS)}</span>' if run.early_error else ""
    return (
        f'<td class="run" data-run="{run.number}"><strong>{run_label(run)}</strong> {html.escape(run.date)} '
        f"<code>{images}</code>"
        + (f" <small>{digests}</small>" if digests else "")
        + f"<br><small>run {_text(run.run_id)} · "
        + " · ".join(links)
        + f"</small>{early}</td>"
    )


def _cell(cell: Cell, run: int, runs: Sequence[Run]) -> str:
    classes = [cell.status.replace(ABSENT, "absent")]
    words = CELL_WORDS.get(cell.status, _text(cell.status))
    mark = ""
    title = _text(cell.message, MESSAGE_MAX_CHARS) if cell.message else ""
    if cell.regressed_since is not None:
        classes.append("regression")
        since = runs[cell.regressed_since]
        # The run that introduced it says so; the runs after it name that run.
        started = "new" if cell.regressed_since == run else f"since {run_label(since)}"
        mark = f' <span class="mark">▼ {started}</span>'
        title = f"regression since run {run_label(since)}" + (f": {title}" if title else "")
    attributes = f' class="{" ".join(classes)}" data-status="{html.escape(cell.status)}"'
    if cell.regressed_since is not None:
        attributes += f' data-regressed-since="{runs[cell.regressed_since].number}"'
    if title:
        attributes += f' title="{title}"'
    return f"<td{attributes}>{words}{mark}</td>"


FAILING_LISTED = 20  # a run's failing cells named in its verdict line; the rest are counted


def _verdict_words(run: Run) -> tuple[str, str]:
    """(class, words) of a run's verdict, from its exit code: what a reader needs before any column."""
    if run.exit_code is None:
        return "absent", "verdict unknown (no exit code in the report)"
    meaning = EXIT_MEANINGS.get(run.exit_code, "an exit code distval does not use")
    kind = "passed" if run.exit_code == EXIT_PASSED else "failed"
    word = "passed" if run.exit_code == EXIT_PASSED else "FAILED"
    return kind, f"{word} (exit code {run.exit_code}: {meaning})"


def _verdicts(history: History) -> str:
    """Each run's verdict, newest first, with the cells that failed in it, so that a failure is read before the
    matrix, whose failing cell may sit far to the right of a wide table."""
    items = []
    for run, cells in reversed(list(zip(history.runs, history.cells, strict=True))):
        kind, words = _verdict_words(run)
        failing = [(column, cell) for column, cell in zip(history.columns, cells, strict=True) if cell.status in (FAILED, ERROR)]
        named = "".join(
            f"<li><code>{_text(column.scenario)}</code> <code>{_text(column.check)}</code>: "
            f"{CELL_WORDS.get(cell.status, _text(cell.status))} {_text(cell.message, MESSAGE_MAX_CHARS)}</li>"
            for column, cell in failing[:FAILING_LISTED]
        )
        more = (
            f"<li>and {len(failing) - FAILING_LISTED} more failing cell(s) in the matrix</li>"
            if len(failing) > FAILING_LISTED
            else ""
        )
        early = f" · ended early: {_text(run.early_error, MESSAGE_MAX_CHARS)}" if run.early_error else ""
        items.append(
            f'<li class="verdict {kind}" data-run="{run.number}"><strong>{run_label(run)}</strong> '
            f"{html.escape(run.date)}: <strong>{words}</strong>{early}" + (f"<ul>{named}{more}</ul>" if named else "") + "</li>"
        )
    return '<h2 id="verdicts">Verdicts</h2><ul class="verdicts">' + "".join(items) + "</ul>"


def _matrix(history: History, page_dir: str) -> str:
    scenarios: dict[str, list[Column]] = {}
    for column in history.columns:
        scenarios.setdefault(column.scenario, []).append(column)
    top = "".join(f'<th colspan="{len(columns)}" scope="colgroup">{_text(name)}</th>' for name, columns in scenarios.items())
    checks = "".join(f'<th scope="col">{_text(column.check)}</th>' for column in history.columns)
    rows = []
    for run, cells in zip(history.runs, history.cells, strict=True):
        rows.append("<tr>" + _run_cell(run, page_dir) + "".join(_cell(cell, run.index, history.runs) for cell in cells) + "</tr>")
    return (
        '<table class="matrix" id="matrix"><thead>'
        f'<tr><th class="run" rowspan="2" scope="col">run</th>{top}</tr><tr>{checks}</tr>'
        "</thead><tbody>" + "".join(rows) + "</tbody></table>"
    )


def _check_regression(found: CheckRegression, runs: Sequence[Run]) -> str:
    first, last = runs[found.run], runs[found.until]
    through = "" if found.until == found.run else f" (failing through {run_label(last)})"
    return (
        f'<li data-kind="check"><strong>{_text(found.column.scenario)} / {_text(found.column.check)}</strong>: passed in '
        f"{run_label(runs[found.last_pass])}, failing since {run_label(first)} ({html.escape(first.date)}, "
        f"{_text(', '.join(first.images))}){through}</li>"
    )


def _figure_regression(found: FigureRegression, runs: Sequence[Run]) -> str:
    ratio = f" ({found.new / found.old:.2f}x)" if found.old else ""
    run, previous = runs[found.run], runs[found.previous_run]
    return (
        f'<li data-kind="figure"><strong>{_text(found.scenario)}</strong>: {html.escape(found.metric)} '
        f"{_text(found.name) if found.name != found.metric else ''} {found.old:.4g} → {found.new:.4g} {found.unit}{ratio} "
        f"in {run_label(run)} ({html.escape(run.date)}) against {run_label(previous)}</li>"
    )


def _regressions(history: History) -> str:
    items = [_check_regression(r, history.runs) for r in history.check_regressions]
    items += [_figure_regression(r, history.runs) for r in history.figure_regressions]
    tolerances = history.tolerances
    rule = (
        f"A check that passed and then failed; a busbw figure down by more than {tolerances.busbw:.0%} against the "
        f"previous run (its call slower by more than {tolerances.busbw_slack_us:g} us too, as <code>distval compare</code> "
        f"judges); a time to verdict up by more than {tolerances.duration:.0%} and {tolerances.duration_slack_s:g} s."
    )
    if not items:
        return f'<h2 id="regressions">Regressions: none</h2><p class="none">{rule}</p>'
    return f'<h2 id="regressions">Regressions: {len(items)}</h2><p>{rule}</p><ul class="regressions">{"".join(items)}</ul>'


def _figure(kind: str, runs: Sequence[str], series: Sequence[Series], title: str, caption: str) -> str:
    chart = charts.render(runs, series, title)
    regressed = f", {chart.regressed} regressed (red ▼)" if chart.regressed else ""
    return (
        f'<figure class="chart" data-chart="{kind}" data-points="{chart.points}" data-regressed="{chart.regressed}">'
        f"{chart.svg}<figcaption>{caption}: {chart.points} point(s){regressed}</figcaption></figure>"
    )


def _trend(trend: Trend, number: int, runs: Sequence[str]) -> str:
    parts = [f'<section class="scenario" id="scenario-{number}" data-scenario="{_text(trend.scenario)}">']
    parts.append(f'<h3>{_text(trend.scenario)}</h3><div class="charts">')
    parts.append(_figure("time_to_verdict", runs, [trend.time_to_verdict], "time to verdict (s)", "time to verdict (s)"))
    if trend.busbw:
        parts.append(_figure("busbw", runs, trend.busbw, "busbw (GB/s)", "busbw per operation and size (GB/s)"))
    else:
        parts.append('<p class="none" data-chart="busbw">no bandwidth figure recorded</p>')
    if trend.efficiency:
        caption = "efficiency: busbw ÷ raw TCP throughput"
        parts.append(_figure("efficiency", runs, trend.efficiency, "efficiency", caption))
    else:
        parts.append('<p class="none" data-chart="efficiency">no efficiency recorded</p>')
    parts.append("</div></section>")
    return "".join(parts)


def render_html(history: History, page_path: str | Path, title: str = "distval history") -> str:
    """The page for ``history``, to be written at ``page_path`` (its links are relative to that file's folder)."""
    charts.require()
    page_dir = os.path.dirname(os.path.abspath(page_path))
    runs = [run_label(run) for run in history.runs]
    first, last = (history.runs[0].date, history.runs[-1].date) if history.runs else ("", "")
    scenarios = len(history.trends)
    body = [
        f"<h1>{html.escape(title)}</h1>",
        f'<p id="summary">{len(history.runs)} run(s), {scenarios} scenario(s), {len(history.columns)} check(s); '
        f"{html.escape(first)} to {html.escape(last)}. Written by distval {html.escape(__version__)}.</p>",
        _verdicts(history),
        _regressions(history),
        '<h2 id="runs">Runs × checks</h2>',
        "<p>Each row is a run (in start order), each column a scenario's check; a cell says pass, FAIL, skip, ERROR or "
        "— (not in that run). A red frame and ▼ mark a check failing since the run named after a pass; hover a cell for "
        "its message.</p>",
        _matrix(history, page_dir),
        '<h2 id="trends">Trends per scenario</h2>',
        "<p>x: the runs above; red ▼: a figure past the tolerance against the previous run.</p>",
        *(_trend(trend, number, runs) for number, trend in enumerate(history.trends, start=1)),
    ]
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>\n<body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def render_run_html(
    summary: RunSummary, page_path: str | Path, json_path: str | None, junit: str | None, markdown: str | None
) -> str:
    """``distval run --html``: the same page for one run, from its JSON report as data (checked by the history's
    reader like any other report), linking the run's own --junit, --markdown and --json files."""
    report = json_report(summary)
    label = json_path or ""
    checked_report(label or "the run's report", report)
    history = build_history([(label, report)], links={label: (junit, markdown)})
    return render_html(history, page_path, f"distval run {summary.run_id}")


def write_run_html(summary: RunSummary, path: str, json_path: str | None, junit: str | None, markdown: str | None) -> None:
    write_atomically(path, render_run_html(summary, path, json_path, junit, markdown))


def write_history_html(history: History, directory: str | Path) -> Path:
    """The history page as DIRECTORY/index.html (the directory made if missing); its path."""
    page = Path(directory) / HISTORY_PAGE
    write_atomically(page, render_html(history, page))
    return page
