"""Soak: run the default config many times on the good fixture images and count false failures.

A good image passes ``configs/default.yaml`` by definition, so every run that does not exit 0 is a false
failure (a flake of distval, of the suite, or of the machine). For each image the script runs::

    distval run configs/default.yaml --image IMAGE --jobs 1 --json <tmp> --quiet --run-id soak-...

``--repeat`` times, one run at a time, and prints per image the number of runs and of false failures; for
each false failure its exit code and every failing testcase with its message (from the run's JSON report,
or the command's last output lines when it wrote none).

Run from the repository root, with the images already in the Engine (nothing is pulled)::

    python benchmarks/soak.py --repeat 20
    python benchmarks/soak.py --repeat 1 --image distval-fixtures/torch:2.6-debian --json soak.json

Exit code: 0 when no run failed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import secrets
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from common import REPO_ROOT, distval_executable

GOOD_IMAGES = (
    "distval-fixtures/torch:1.13-debian",
    "distval-fixtures/torch:2.6-debian",
    "distval-fixtures/torch:2.15-pypi",
)
DEFAULT_CONFIG = str(REPO_ROOT / "configs" / "default.yaml")
# The default config's scenarios finish in well under a minute each; this only stops a run that hangs.
RUN_TIMEOUT_S = 1800.0


@dataclass
class FailedCase:
    scenario: str
    testcase: str
    status: str
    message: str


@dataclass
class Run:
    image: str
    index: int
    run_id: str
    exit_code: int
    duration_s: float
    failures: list[FailedCase] = field(default_factory=list)
    note: str = ""  # why there is no per-testcase detail (no JSON report, a timeout)


def failing_cases(report: dict[str, object]) -> list[FailedCase]:
    """Every testcase of a JSON report that did not pass or skip, plus the run's early error if any."""
    found: list[FailedCase] = []
    early = report.get("early_error")
    if isinstance(early, dict):
        found.append(FailedCase("(run)", str(early.get("kind")), "error", str(early.get("message"))))
    scenarios = report.get("scenarios")
    for scenario in scenarios if isinstance(scenarios, list) else []:
        for case in scenario.get("cases", []):
            if case.get("status") not in ("passed", "skipped"):
                found.append(FailedCase(scenario["name"], case["name"], case["status"], str(case.get("message"))))
    return found


def run_once(executable: str, config: str, image: str, index: int) -> Run:
    run_id = f"soak-{secrets.token_hex(3)}"
    with tempfile.TemporaryDirectory(prefix="distval-soak-") as work:
        report_path = Path(work) / "report.json"
        command = [executable, "run", config, "--image", image, "--jobs", "1", "--json", str(report_path)]
        command += ["--quiet", "--run-id", run_id]
        started = time.monotonic()
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            return Run(image, index, run_id, -1, time.monotonic() - started, note=f"no exit within {RUN_TIMEOUT_S:g} s")
        run = Run(image, index, run_id, proc.returncode, time.monotonic() - started)
        if proc.returncode == 0:
            return run
        try:
            run.failures = failing_cases(json.loads(report_path.read_text()))
        except (OSError, ValueError) as exc:
            tail = " | ".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
            run.note = f"no readable JSON report ({exc}); last output: {tail}"
        return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=20, help="runs per image (default 20)")
    parser.add_argument("--image", action="append", help="an image to soak (repeatable; default: the three good fixtures)")
    parser.add_argument("--config", default=DEFAULT_CONFIG, help="the config to run (default configs/default.yaml)")
    parser.add_argument("--distval", help="the distval executable (default: beside this Python, else on PATH)")
    parser.add_argument("--json", dest="json_path", help="write every run and the counts to this file")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    executable = distval_executable(args.distval)
    images = args.image or list(GOOD_IMAGES)
    runs: list[Run] = []
    for image in images:
        for index in range(1, args.repeat + 1):
            run = run_once(executable, args.config, image, index)
            runs.append(run)
            verdict = "ok" if run.exit_code == 0 else f"FALSE FAILURE (exit {run.exit_code})"
            print(f"{image} run {index}/{args.repeat} ({run.run_id}): {verdict} in {run.duration_s:.1f} s", flush=True)
            for case in run.failures:
                print(f"    {case.scenario} / {case.testcase}: {case.status}: {case.message}", flush=True)
            if run.note:
                print(f"    {run.note}", flush=True)
    print()
    counts = {}
    for image in images:
        mine = [r for r in runs if r.image == image]
        failed = [r for r in mine if r.exit_code != 0]
        counts[image] = {"runs": len(mine), "false_failures": len(failed)}
        print(f"{image}: {len(failed)} false failure(s) in {len(mine)} run(s)")
    total = sum(1 for r in runs if r.exit_code != 0)
    print(f"total: {total} false failure(s) in {len(runs)} run(s)")
    if args.json_path:
        payload = {"config": args.config, "repeat": args.repeat, "counts": counts, "runs": [asdict(r) for r in runs]}
        Path(args.json_path).write_text(json.dumps(payload, indent=2) + "\n")
    return 0 if total == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
