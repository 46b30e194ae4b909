"""Benchmark: the baseline's error rates, both kinds: false alarms (the same image judged against itself) and
misses (an image whose collectives are slower by a known fraction, judged against the good image).

Runs the default bandwidth sweep (one container and across two, 2 ranks each; bench_bandwidth_spread's
config) ``--repeat`` times for each image, interleaved (good, slow 25 %, slow 40 %, good, ...) so that the
machine's drift hits every image alike. Then judges, as ``distval run --baseline`` would (distval.comparing.baseline):

- false alarm: a baseline made of good runs (one, or the median of three) against another good run, its
  re-measures being other good runs: every ordered choice; the comparison fails when any scenario's
  ``baseline`` testcase fails;
- miss: the same baselines against a slow run, re-measured by other runs of the same slow image; a miss is
  a comparison in which no scenario's ``baseline`` failed.

The slow images (``distval-fixtures/broken:slow-busbw-25``, ``-40``) lower every timed collective's bus
bandwidth to 75 % and 60 % of the good image's (distval/images/files/slow_by_fraction.py). The load
average is printed with every run.

    python benchmarks/bench_baseline_rates.py --repeat 6 --json rates.json
    python benchmarks/bench_baseline_rates.py --reports rates.json --busbw-tolerance 0.2 --busbw-tolerance 0.3
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench_bandwidth_spread import CONFIG, DEFAULT_IMAGE, run_once
from common import BenchError, bench_run_id, check_image, distval_executable

from distval.comparing.baseline import baseline_case
from distval.comparing.deltas import Tolerances
from distval.comparing.reading import combined_baseline
from distval.session.remeasure import DEFAULT_REMEASURE

SLOW_IMAGES = ("distval-fixtures/broken:slow-busbw-25", "distval-fixtures/broken:slow-busbw-40")


def failed_comparisons(
    good: Sequence[dict[str, Any]],
    candidates: Sequence[dict[str, Any]],
    same: bool,
    remeasures: int,
    baselines: int,
    tolerances: Tolerances,
) -> tuple[int, int]:
    """(comparisons whose `baseline` failed, comparisons): every choice of ``baselines`` good runs as the
    baseline, every candidate run (another good run when ``same``) as the new one, every ordered choice of
    ``remeasures`` other candidate runs as its re-measures."""
    failed = comparisons = 0
    for chosen in itertools.combinations(range(len(good)), baselines):
        path, old = combined_baseline([(f"good{i + 1}.json", good[i]) for i in chosen])
        pool = [i for i in range(len(candidates)) if not (same and i in chosen)]
        for combo in itertools.permutations(pool, 1 + remeasures):
            new, again = candidates[combo[0]], [candidates[k] for k in combo[1:]]
            comparisons += 1
            for index, scenario in enumerate(new["scenarios"]):
                remeasured = [run["scenarios"][index] for run in again]
                if baseline_case(scenario, old, tolerances, path, remeasured).status == "failed":
                    failed += 1
                    break
    return failed, comparisons


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=6, help="runs of each image, interleaved (default 6; at least 4)")
    parser.add_argument("--image", default=DEFAULT_IMAGE, help=f"the good image (default {DEFAULT_IMAGE})")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write every report and the rates here")
    parser.add_argument(
        "--busbw-tolerance",
        type=float,
        action="append",
        metavar="FRACTION",
        help="judge with this busbw tolerance too (repeatable; default: distval's default only): the same runs, "
        "so the tolerances are compared on equal noise",
    )
    parser.add_argument(
        "--reports", type=Path, metavar="PATH", help="judge the runs of an earlier --json file instead of running again"
    )
    args = parser.parse_args(argv)
    if args.repeat < 4:
        parser.error("--repeat must be at least 4 (a baseline of 3 and a run to judge)")
    images = (args.image, *SLOW_IMAGES)
    reports: dict[str, list[dict[str, Any]]] = (
        json.loads(args.reports.read_text(encoding="utf-8"))["reports"] if args.reports else run_interleaved(images, args.repeat)
    )
    rows = []
    for busbw in args.busbw_tolerance or [Tolerances().busbw]:
        rows += judge(reports, args.image, Tolerances(busbw=busbw))
    if args.json and not args.reports:
        args.json.write_text(json.dumps({"images": images, "reports": reports, "rates": rows}, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


def run_interleaved(images: Sequence[str], repeat: int) -> dict[str, list[dict[str, Any]]]:
    for image in images:
        check_image(image)
    distval = distval_executable(None)
    reports: dict[str, list[dict[str, Any]]] = {image: [] for image in images}
    with tempfile.TemporaryDirectory(prefix="bench-rates-") as tmp:
        config = Path(tmp) / "bw.yaml"
        config.write_text(CONFIG, encoding="utf-8")
        for i in range(1, repeat + 1):
            for n, image in enumerate(images):
                report = Path(tmp) / f"run{i}-{n}.json"
                reports[image].append(run_once(distval, config, image, report, bench_run_id("br", f"{i}-{n}")))
                load = "/".join(f"{v:.1f}" for v in os.getloadavg())
                print(f"run {i} {image}: load {load}", flush=True)
    return reports


def judge(reports: dict[str, list[dict[str, Any]]], good_image: str, tolerances: Tolerances) -> list[dict[str, Any]]:
    """Each rule's false alarms and misses at these tolerances, printed and returned."""
    good = reports[good_image]
    rows = []
    for remeasures, baselines in ((0, 1), (DEFAULT_REMEASURE, 1), (DEFAULT_REMEASURE, 3)):
        rule = f"--remeasure {remeasures}, {'one baseline' if baselines == 1 else f'median of {baselines} baselines'}"
        row: dict[str, Any] = {"rule": rule, "busbw_tolerance": tolerances.busbw}
        row["false_alarms"] = failed_comparisons(good, good, True, remeasures, baselines, tolerances)
        for image in SLOW_IMAGES:
            caught, comparisons = failed_comparisons(good, reports[image], False, remeasures, baselines, tolerances)
            row[image] = (comparisons - caught, comparisons)  # misses
        rows.append(row)
        alarms = row["false_alarms"]
        if alarms[1] == 0:  # fewer good runs than a baseline, a run and its re-measures need: nothing compared
            print(f"busbw tolerance {tolerances.busbw:.0%}, {rule}: not measured (needs --repeat {baselines + 1 + remeasures})")
            continue
        misses = "; ".join(f"{image.rsplit(':', 1)[1]} missed {row[image][0]} of {row[image][1]}" for image in SLOW_IMAGES)
        print(f"busbw tolerance {tolerances.busbw:.0%}, {rule}: false alarms {alarms[0]} of {alarms[1]}; {misses}", flush=True)
    return rows


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"bench_baseline_rates: {exc}", file=sys.stderr)
        sys.exit(1)
