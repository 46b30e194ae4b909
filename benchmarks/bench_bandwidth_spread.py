"""Benchmark: the run-to-run spread of the bandwidth figures, which the baseline's busbw tolerance must exceed.

Runs ``distval run CONFIG --image IMAGE --json`` ``--repeat`` times back to back (default config: the
default bandwidth sweep, every operation, in one container and across two, 2 ranks each), then compares
every consecutive pair of runs figure by figure, as ``--baseline`` would (distval.comparing.baseline): for each
pair, the median and the lowest ratio new/old of the median busbw and of the best busbw (the slowest
rank's fastest iteration), how many figures fall below 1 - tolerance, and the ``baseline`` verdict at the
default tolerances. Then, over every ordered pair of runs, how often ``baseline`` fails under each rule:
the fraction alone, with the call-time slack, and with one re-measure (each other run in turn standing
for the run ``--remeasure`` would make). The load average is printed with every run: every figure is wall time on a possibly
shared machine.

Run from the repository root, with the image in the Engine (nothing is pulled)::

    python benchmarks/bench_bandwidth_spread.py --repeat 5
    python benchmarks/bench_bandwidth_spread.py --repeat 3 --image distval-fixtures/torch:2.15-pypi --json spread.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from common import REPO_ROOT, BenchError, bench_run_id, check_image, distval_executable

from distval.comparing.baseline import baseline_case
from distval.comparing.deltas import DEFAULT_BUSBW_TOLERANCE, Tolerances
from distval.comparing.reading import combined_baseline
from distval.session.remeasure import DEFAULT_REMEASURE

DEFAULT_IMAGE = "distval-fixtures/torch:2.6-debian"
CONFIG = """\
version: 1
timeout_s: 600
check_timeout_s: 540
scenarios:
  - name: bw-in-container
    topology: in-container
    world_size: 2
    checks: [bandwidth]
  - name: bw-cross-container
    topology: cross-container
    world_size: 2
    checks: [bandwidth]
"""


def run_once(distval: str, config: Path, image: str, report: Path, run_id: str) -> dict[str, Any]:
    argv = [distval, "run", str(config), "--image", image, "--quiet", "--jobs", "1", "--run-id", run_id, "--json", str(report)]
    done = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise BenchError(f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout[-3000:]}")
    data: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
    return data


def figures(scenario: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(str(f["operation"]), int(f["size"])): f for f in scenario.get("bandwidth") or []}


def pair_stats(old: dict[str, Any], new: dict[str, Any], key: str, tolerance: float) -> tuple[float, float, int, int]:
    """(median ratio new/old, lowest ratio, figures below 1 - tolerance, figures) over every scenario's figures."""
    ratios = []
    for before, after in zip(old["scenarios"], new["scenarios"], strict=True):
        old_f, new_f = figures(before), figures(after)
        ratios += [new_f[k][key] / old_f[k][key] for k in old_f if k in new_f and old_f[k].get(key)]
    below = sum(1 for r in ratios if r < 1 - tolerance)
    return statistics.median(ratios), min(ratios), below, len(ratios)


def verdict_rates(reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """How often the `baseline` testcase fails between runs of one image, per rule: every baseline (one run,
    or every set of runs whose median is the baseline: --baseline given several times) against every other
    run as the new one; with re-measures, every ordered choice of the remaining runs as the runs that
    re-measured the new one's scenarios (what --remeasure does, from runs already made). A comparison
    fails when any scenario's `baseline` fails."""
    rules = [
        ("fraction alone (--busbw-slack-us 0 --remeasure 0)", Tolerances(busbw_slack_us=0), 0, 1),
        ("fraction and call-time slack (--remeasure 0)", Tolerances(), 0, 1),
        ("fraction alone, re-measured once (--busbw-slack-us 0 --remeasure 1)", Tolerances(busbw_slack_us=0), 1, 1),
        ("fraction and slack, re-measured once (--remeasure 1)", Tolerances(), 1, 1),
        (f"the defaults: fraction, slack and {DEFAULT_REMEASURE} re-measures", Tolerances(), DEFAULT_REMEASURE, 1),
        ("the defaults against the median of 3 reports (--baseline x3)", Tolerances(), DEFAULT_REMEASURE, 3),
    ]
    rows = []
    for rule, tolerances, remeasures, baselines in rules:
        if len(reports) < baselines + 1 + remeasures:
            continue
        failed = comparisons = 0
        for chosen in itertools.combinations(range(len(reports)), baselines):
            path, old = combined_baseline([(f"run{i + 1}.json", reports[i]) for i in chosen])
            rest = [i for i in range(len(reports)) if i not in chosen]
            for combo in itertools.permutations(rest, 1 + remeasures):
                new, again = reports[combo[0]], [reports[k] for k in combo[1:]]
                comparisons += 1
                for index, scenario in enumerate(new["scenarios"]):
                    remeasured = [run["scenarios"][index] for run in again]
                    if baseline_case(scenario, old, tolerances, path, remeasured).status == "failed":
                        failed += 1
                        break
        rows.append({"rule": rule, "failed": failed, "comparisons": comparisons})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=5, help="runs, back to back (default 5; at least 2)")
    parser.add_argument("--image", default=DEFAULT_IMAGE, help=f"image (default {DEFAULT_IMAGE})")
    parser.add_argument("--config", type=Path, help="scenario file (default: the default sweep, in one container and across two)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write every run's report and the pair statistics here")
    args = parser.parse_args(argv)
    if args.repeat < 2:
        parser.error("--repeat must be at least 2")
    check_image(args.image)
    distval = distval_executable(None)
    tolerance = DEFAULT_BUSBW_TOLERANCE
    with tempfile.TemporaryDirectory(prefix="bench-bw-") as tmp:
        config = args.config or Path(tmp) / "bw.yaml"
        if args.config is None:
            config.write_text(CONFIG, encoding="utf-8")
        reports = []
        for i in range(1, args.repeat + 1):
            report = run_once(distval, config, args.image, Path(tmp) / f"run{i}.json", bench_run_id("bb", i))
            reports.append(report)
            load = "/".join(f"{v:.1f}" for v in os.getloadavg())
            durations = ", ".join(f"{s['name']} {s['duration_s']:.1f} s" for s in report["scenarios"])
            print(f"run {i}: {durations}   load {load}", flush=True)
    pairs = []
    print(f"\nconsecutive pairs (tolerance -{tolerance:.0%}; ratio = new/old busbw):")
    for i in range(1, len(reports)):
        old, new = reports[i - 1], reports[i]
        median_stats = pair_stats(old, new, "busbw_gbps", tolerance)
        best_stats = pair_stats(old, new, "best_busbw_gbps", tolerance)
        verdicts = [baseline_case(s, old, Tolerances(), f"run{i}.json") for s in new["scenarios"]]
        failed = [v.message for v in verdicts if v.status != "passed"]
        pairs.append({"pair": [i, i + 1], "median": median_stats, "best": best_stats, "baseline_failed": failed})
        print(
            f"  runs {i}-{i + 1}: median busbw: median ratio {median_stats[0]:.2f}, lowest {median_stats[1]:.2f}, "
            f"{median_stats[2]} of {median_stats[3]} below; best busbw: median {best_stats[0]:.2f}, lowest {best_stats[1]:.2f}, "
            f"{best_stats[2]} of {best_stats[3]} below; baseline: {'passed' if not failed else 'FAILED'}"
        )
        for message in failed:
            print(f"    {message[:600]}")
    rates = verdict_rates(reports)
    print("\nevery ordered pair of runs (baseline, new), judged as `distval run --baseline` would:")
    for row in rates:
        print(f"  {row['rule']}: {row['failed']} of {row['comparisons']} comparisons failed")
    if args.json:
        document = {"image": args.image, "reports": reports, "pairs": pairs, "verdicts": rates}
        args.json.write_text(json.dumps(document, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"bench_bandwidth_spread: {exc}", file=sys.stderr)
        sys.exit(1)
