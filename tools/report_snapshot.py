"""Every report of the inputs the quick tests summarize and render, written out, so that a change to distval/results/
or distval/reports/ can be shown to leave every byte of every report as it was.

    python tools/report_snapshot.py capture INPUTS.pickle     # in the checkout before the change
    python tools/report_snapshot.py render INPUTS.pickle OLD   # there
    python tools/report_snapshot.py render INPUTS.pickle NEW   # in the checkout after it
    diff -r OLD NEW                                            # no output: no report changed

``capture`` runs the quick test files of ``TEST_FILES`` (recorded pod logs and result files of real runs in
tests/data/kube, the hand-made outcomes of the results tests, the reports' goldens) with this file as a pytest plugin,
which keeps every ``ScenarioOutcome`` handed to ``summarize_scenario`` and every ``RunSummary`` handed to a report
renderer or to the report stage. ``render`` summarizes each outcome again and renders each summary in every format
(JUnit, JSON, Markdown, the terminal summary, the step summary), one file per input; the time of day a report
takes from the clock where a scenario has no start of its own (today's or yesterday's date) is masked. The pickle
is this tool's own file: never render one from elsewhere (unpickling runs code).
"""

from __future__ import annotations

import atexit
import copyreg
import os
import pickle
import re
import subprocess
import sys
import tempfile
import time
import traceback
import types
from typing import Any

import distval.reports.json_report
import distval.reports.junit
import distval.reports.markdown
import distval.reports.summary
import distval.results.scenario

ENABLED = "DISTVAL_REPORT_SNAPSHOT"  # where set (the capture's pytest), the pickle this plugin appends to
TEST_FILES = (
    "tests/results/test_results.py",
    "tests/results/test_faults_results.py",
    "tests/results/test_diagnosis.py",
    "tests/results/test_bandwidth.py",
    "tests/targets/kubernetes/test_kube_collect.py",
    "tests/targets/slurm/test_slurm_target.py",
    "tests/targets/local/test_host_runtime.py",
    "tests/reports/test_report.py",
    "tests/reports/test_junit.py",
    "tests/reports/test_report_writers.py",
    "tests/project/test_fuzz_image_output.py",
    "tests/cli/test_exit_codes.py",
    "tests/cli/test_sample_image.py",
    "tests/comparing/test_history.py",
)


def _proxy(items: dict[Any, Any]) -> types.MappingProxyType[Any, Any]:
    return types.MappingProxyType(items)


# Plans hold read-only mappings, which pickle cannot store as they are.
copyreg.pickle(types.MappingProxyType, lambda proxy: (_proxy, (dict(proxy),)))
sys.modules.setdefault("report_snapshot", sys.modules[__name__])  # one name for _proxy, as plugin and as script


def _install(pickle_path: str) -> None:
    """Wrap the summarizer and the renderers before any module binds them by name (this plugin loads first)."""
    kept: list[tuple[str, Any]] = []

    def keep(kind: str, value: Any) -> None:
        try:
            pickle.dumps(value)
        except Exception:  # an input that holds a test's stand-in object: not kept
            return
        kept.append((kind, value))

    summarize = distval.results.scenario.summarize_scenario

    def summarize_and_keep(outcome: Any, require_gpu: bool = False, fail_on_skip: bool = False) -> Any:
        keep("outcome", (outcome, require_gpu, fail_on_skip))
        return summarize(outcome, require_gpu=require_gpu, fail_on_skip=fail_on_skip)

    distval.results.scenario.summarize_scenario = summarize_and_keep
    for module, name in (
        (distval.reports.junit, "render_junit"),
        (distval.reports.json_report, "render_json"),
        (distval.reports.markdown, "render_markdown"),
        (distval.reports.summary, "render_summary"),
    ):
        setattr(module, name, _keeping(getattr(module, name), keep))

    def _write() -> None:
        earlier = _load(pickle_path) if os.path.exists(pickle_path) else []
        with open(pickle_path, "wb") as handle:
            pickle.dump(earlier + kept, handle)

    atexit.register(_write)


def _keeping(render: Any, keep: Any) -> Any:
    """``render``, keeping the summary it is handed."""

    def render_and_keep(summary: Any, *args: Any, **kwargs: Any) -> Any:
        keep("summary", summary)
        return render(summary, *args, **kwargs)

    return render_and_keep


def _load(path: str) -> list[tuple[str, Any]]:
    with open(path, "rb") as handle:
        inputs: list[tuple[str, Any]] = pickle.load(handle)  # noqa: S301 - this tool's own file
    return inputs


if os.environ.get(ENABLED):
    _install(os.environ[ENABLED])


def capture(pickle_path: str) -> int:
    if os.path.exists(pickle_path):
        os.remove(pickle_path)
    environ = {**os.environ, ENABLED: os.path.abspath(pickle_path), "PYTHONPATH": os.path.dirname(os.path.abspath(__file__))}
    for test_file in TEST_FILES:
        command = [sys.executable, "-m", "pytest", "-q", "-p", "report_snapshot", "-m", "not docker and not host", test_file]
        if subprocess.run(command, env=environ, check=False).returncode != 0:
            print(f"report_snapshot: {test_file} failed: fix it first", file=sys.stderr)
            return 1
    print(f"{len(_load(pickle_path))} inputs kept in {pickle_path}")
    return 0


def _renders(summary: Any) -> str:
    parts = []
    for name, render in (
        ("junit", distval.reports.junit.render_junit),
        ("json", distval.reports.json_report.render_json),
        ("markdown", distval.reports.markdown.render_markdown),
        ("summary", distval.reports.summary.render_summary),
    ):
        try:
            parts.append(f"==== {name}\n{render(summary)}")
        except Exception as exc:
            parts.append(f"==== {name} raised {type(exc).__name__}: {exc}")
    with tempfile.NamedTemporaryFile("r", suffix=".md", encoding="utf-8") as step:
        distval.reports.markdown.append_step_summary(summary, {"GITHUB_STEP_SUMMARY": step.name})
        parts.append(f"==== step summary\n{step.read()}")
    return "\n".join(parts)


def _clock() -> re.Pattern[str]:
    """Today's and yesterday's times in UTC, as the reports write the clock's (a scenario without a start of its own)."""
    days = "|".join(time.strftime("%Y-%m-%d", time.gmtime(time.time() - back)) for back in (0, 86400))
    return re.compile(rf"({days})[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|\+00:00)?")


def render(pickle_path: str, directory: str) -> int:
    clock = _clock()
    os.makedirs(directory, exist_ok=True)
    inputs = _load(pickle_path)
    for number, (kind, value) in enumerate(inputs):
        try:
            if kind == "outcome":
                outcome, require_gpu, fail_on_skip = value
                result = distval.results.scenario.summarize_scenario(outcome, require_gpu=require_gpu, fail_on_skip=fail_on_skip)
                summary = distval.results.scenario.RunSummary(
                    "snapshot", (result,), engine_version="27", host="h", config_path="c.yaml"
                )
                text = f"{result!r}\n{_renders(summary)}"
            else:
                text = _renders(value)
        except Exception:
            text = "raised\n" + traceback.format_exc().splitlines()[-1]
        path = os.path.join(directory, f"{number:05d}.{kind}.txt")
        with open(path, "w", encoding="utf-8", errors="backslashreplace") as handle:
            handle.write(clock.sub("(clock)", text))
    print(f"{len(inputs)} inputs rendered into {directory}")
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "capture":
        return capture(argv[1])
    if len(argv) == 3 and argv[0] == "render":
        return render(argv[1], argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
