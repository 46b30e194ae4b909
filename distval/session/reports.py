"""The reports a run writes (JUnit, JSON, Markdown, HTML, $GITHUB_STEP_SUMMARY): which paths are refused before
anything runs, and each report written on its own, so that one that fails costs neither the others nor the
terminal summary."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from distval.comparing import charts
from distval.comparing.html import write_run_html
from distval.errors import BadInput, InternalError
from distval.reports.files import refusal
from distval.reports.json_report import write_json
from distval.reports.junit import write_junit
from distval.reports.markdown import STEP_SUMMARY_ENV, append_step_summary, write_markdown
from distval.results.scenario import RunSummary

# The reports -o/--output-dir DIR writes, by option: the file each gets in DIR (docs/reports.md names them; the
# help derives from here).
OUTPUT_NAMES = {"--junit": "junit.xml", "--json": "report.json", "--markdown": "summary.md"}


@dataclass(frozen=True)
class ReportPaths:
    """Where a run's reports go (None: not asked), once --output-dir has named those left out."""

    junit: str | None = None
    json: str | None = None
    markdown: str | None = None
    html: str | None = None
    output_dir: str | None = None  # -o DIR, as given (a path in it that is no directory is refused)
    step_summary: bool = True  # append to $GITHUB_STEP_SUMMARY where that is set (--no-step-summary: not)
    suite_prefix: str | None = None  # --suite-prefix: names the testsuites instead of the images

    def by_option(self) -> tuple[tuple[str, str | None], ...]:
        """(option, path) of each report -o DIR can name."""
        return (("--junit", self.junit), ("--json", self.json), ("--markdown", self.markdown))

    def in_directory(self) -> ReportPaths:
        """Each report that --junit, --json or --markdown did not name gets its file in --output-dir (when given)."""
        if not self.output_dir:
            return self
        named = {option: path or os.path.join(self.output_dir, OUTPUT_NAMES[option]) for option, path in self.by_option()}
        return dataclasses.replace(self, junit=named["--junit"], json=named["--json"], markdown=named["--markdown"])


def html_refusal() -> str | None:
    """Why no HTML page can be written (the optional renderer is missing), for ``distval run --html``; None: it can."""
    return None if charts.available() else "needs vl-convert-python to render its charts offline: pip install 'distval[html]'"


def same_file(one: str, other: str) -> bool:
    """Whether two paths name one file (after symlinks and hard links); a path that does not exist names none."""
    try:
        return os.path.samefile(one, other)
    except OSError:  # one of them does not exist (the report not written yet): not the same file
        return False


def overwrites_baseline(baselines: Sequence[str], reports: Sequence[tuple[str, str | None]]) -> list[tuple[str, str, str]]:
    """(option, path, why) for each report path among ``reports`` ((option, path) pairs; None: not asked) that is
    one of the ``baselines`` files (the same file after symlinks and hard links): a run that stopped early would
    replace the last good report with its own empty one. Asked before the run starts (exit code 2)."""
    refused = []
    for option, path in reports:
        for good in baselines:
            if path and same_file(path, good):
                refused.append((option, path, f"{path} is the --baseline {good}: the run would overwrite it"))
                break
    return refused


def refused_reports(paths: ReportPaths, baselines: Sequence[str]) -> list[tuple[str, str, str]]:
    """(option, path, why) for each report path that names something other than a regular file (a directory, a
    device, a FIFO) or one of the ``baselines``: asked before the run starts, so that nothing runs for a report that
    cannot be written."""
    overwritten = overwrites_baseline(baselines, paths.by_option())
    refused = []
    directory = paths.output_dir or ""
    not_a_directory = bool(directory) and os.path.exists(directory) and not os.path.isdir(directory)
    for option, path in paths.by_option():
        if not_a_directory and path == os.path.join(directory, OUTPUT_NAMES[option]):
            refused.append(("--output-dir", path, f"{directory} is not a directory"))
            continue
        reason = refusal(path) if path else None
        if reason is not None and path is not None:
            refused.append((option, path, reason))
    # --html is not one of the -o DIR reports: it needs the optional html extra, which a plain -o must not.
    reason = (refusal(paths.html) or html_refusal()) if paths.html else None
    if reason is not None and paths.html is not None:
        refused.append(("--html", paths.html, reason))
    return refused + overwritten


def write_reports(
    summary: RunSummary,
    paths: ReportPaths,
    skip: frozenset[str] = frozenset(),
    environ: Mapping[str, str] = os.environ,
) -> int:
    """JUnit, JSON, Markdown and $GITHUB_STEP_SUMMARY; a report that cannot be written is one line on stderr.
    ``skip``: the paths refused before the run (already said). Each writer on its own: one that fails costs
    neither the others nor the terminal summary. Returns the exit code the failed writes call for, which the
    caller uses where the verdict's own is 0 (a pipeline that publishes on 0 must find every report it asked for):
    0 when every report was written, 2 (bad input: a report path) when the system refused a write (OSError),
    4 when a writer failed for a bug of distval's. ``--suite-prefix`` (where the command has it) names the
    testsuites instead of the images."""
    summary = dataclasses.replace(summary, suite_prefix=paths.suite_prefix or summary.suite_prefix)
    writers: list[tuple[str, str | None, Callable[[str], object]]] = [
        ("JUnit XML", paths.junit, lambda path: write_junit(summary, path)),
        ("JSON report", paths.json, lambda path: write_json(summary, path)),
        ("Markdown summary", paths.markdown, lambda path: write_markdown(summary, path)),
        ("HTML page", paths.html, lambda path: write_run_html(summary, path, paths.json, paths.junit, paths.markdown)),
        (
            "step summary",
            environ.get(STEP_SUMMARY_ENV) if paths.step_summary else None,
            lambda _path: append_step_summary(summary, environ),
        ),
    ]
    code = 0
    for what, path, write in writers:
        if not path or path in skip:
            continue
        try:
            write(path)
        except OSError as exc:
            print(f"distval: cannot write the {what} to {path}: {exc.strerror or exc}", file=sys.stderr)
            code = code or BadInput.exit_code
        except Exception as exc:  # a bug of distval's, not the image's: the other reports still get written
            print(f"distval: the {what} was not written to {path}: {InternalError(exc)}", file=sys.stderr)
            code = InternalError.exit_code
    return code
