"""Benchmark: the error rates of ``distval run --reference`` (candidate against reference in pairs) next to
``--baseline`` with ``--remeasure 2``, on the same runs: false alarms (the good image judged against itself) and
misses (an image whose collectives are slower by a known fraction, judged against the good image).

The runs: ``--pairs`` rounds; in each, for every candidate (the good image again and each ``--slow`` image: by
default ``broken:slow-busbw-10``, ``-25`` and ``-40``, whose timed collectives are right and 10, 25 and 40 % slower),
one run of the candidate and one of the good image as its reference, in the order
``distval run --reference`` uses (distval/reports/reference.py ``schedule``: ABBA...). Each run is the default
bandwidth sweep (bench_bandwidth_spread's config: one container and across two, 2 ranks) with ``--json``. Then
both judges, on those reports:

- paired, as ``--reference --pairs N`` would (``reference_case``, with the rank test over the run's figures): for
  every candidate, every choice of N of the rounds' pairs (``--disjoint``: consecutive groups of N rounds that share
  no run, so that the comparisons are independent); a comparison fails when any scenario's ``reference`` testcase
  fails; figure by figure too (each busbw figure's verdict);
- last-known-good, as ``--baseline GOOD.json --remeasure 2`` would (``baseline_case``): each good reference run as
  the baseline, each candidate run with two other runs of the same candidate as its re-measures (every ordered
  choice); a comparison fails when any scenario's ``baseline`` testcase fails; figure by figure too.

A false alarm is a failed comparison of the good image against itself; a miss is a comparison of a slow image
that did not fail. The load average is printed with every run and kept with it; ``--markdown`` writes the table
for docs/measurements.md (the machine, the load range, each rule's counts and rates).

    python benchmarks/bench_reference_rates.py --pairs 4 --json reference-rates.json
    python benchmarks/bench_reference_rates.py --reports reference-rates.json --judge-pairs 2 --judge-pairs 3
    # The error-rate table: >= 100 independent comparisons of 2 pairs each of the unchanged image (about 8 runs of
    # the sweep per round: budget hours), judged as --reference --pairs 2, disjoint:
    python benchmarks/bench_reference_rates.py --pairs 200 --no-baseline --judge-pairs 2 --disjoint \
        --json rates.json --markdown rates.md
    # A smoke run: 2 comparisons (2 rounds, the unchanged image and the 40 % one, judged as --pairs 2):
    python benchmarks/bench_reference_rates.py --pairs 2 --no-baseline --judge-pairs 2 --disjoint \
        --slow distval-fixtures/broken:slow-busbw-40
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench_bandwidth_spread import CONFIG, DEFAULT_IMAGE, run_once
from common import BenchError, bench_run_id, check_image, distval_executable

from distval.comparing.baseline import baseline_case
from distval.comparing.deltas import Tolerances, confirm, deltas
from distval.comparing.reference import (
    CANDIDATE,
    DEFAULT_PAIRS,
    PairedTolerances,
    paired,
    reference_case,
    sampled_figures,
    schedule,
)
from distval.session.remeasure import DEFAULT_REMEASURE

SAME = "same image"  # the good image as the candidate: its comparisons count false alarms
SLOW_IMAGES = tuple(f"distval-fixtures/broken:slow-busbw-{percent}" for percent in (10, 25, 40))


def run_rounds(good: str, pairs: int, slow: Sequence[str] = SLOW_IMAGES) -> list[dict[str, Any]]:
    """Every round's pair for every candidate, in ``schedule``'s order: [{candidate, round, order, runs, load}]."""
    for image in (good, *slow):
        check_image(image)
    distval = distval_executable(None)
    found: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-reference-") as tmp:
        config = Path(tmp) / "bw.yaml"
        config.write_text(CONFIG, encoding="utf-8")
        for number, order in enumerate(schedule(pairs), start=1):
            for label, image in ((SAME, good), *((s, s) for s in slow)):
                runs: dict[str, dict[str, Any]] = {}
                loads: list[float] = []
                for member in order:
                    run_image = image if member == CANDIDATE else good
                    report = Path(tmp) / f"r{number}-{len(found)}-{member}.json"
                    run_id = bench_run_id("bx", f"{number}-{len(found)}{member[0]}")
                    runs[member] = run_once(distval, config, run_image, report, run_id)
                    loads.append(os.getloadavg()[0])
                    load = "/".join(f"{v:.1f}" for v in os.getloadavg())
                    print(f"round {number} {label}: {member} {run_image}: load {load}", flush=True)
                found.append({"candidate": label, "round": number, "order": list(order), "runs": runs, "load": loads})
    return found


def _busbw(figures: Sequence[Any]) -> list[Any]:
    return [f for f in figures if f.kind == "busbw"]


def _efficiencies(entry: dict[str, Any]) -> dict[tuple[str, int], float]:
    return {
        (str(f["operation"]), int(f["size"])): float(f["efficiency"])
        for f in entry.get("bandwidth") or []
        if isinstance(f.get("efficiency"), (int, float)) and f["efficiency"] > 0
    }


def _efficiency_regressed(candidates: Sequence[Any], references: Sequence[Any], tolerances: PairedTolerances) -> list[bool]:
    """The paired judgement of each figure's efficiency (busbw / raw TCP of the same run) instead of its busbw: whether
    normalising each run by its own yardstick cancels the machine's run-to-run noise (one verdict per figure)."""
    by_pair = [(_efficiencies(c), _efficiencies(r)) for c, r in zip(candidates, references, strict=True)]
    keys = [k for k in by_pair[0][0] if all(k in c and k in r for c, r in by_pair)]
    return [paired("busbw", str(k), [c[k] for c, _ in by_pair], [r[k] for _, r in by_pair], tolerances).regressed for k in keys]


def groups(mine: Sequence[dict[str, Any]], used: int, disjoint: bool) -> list[tuple[dict[str, Any], ...]]:
    """The comparisons: every choice of ``used`` rounds, or (``disjoint``) consecutive groups that share no run."""
    if disjoint:
        return [tuple(mine[i : i + used]) for i in range(0, len(mine) - used + 1, used)]
    return list(itertools.combinations(mine, used))


def judge_paired(
    rounds: Sequence[dict[str, Any]],
    label: str,
    used: int,
    tolerances: PairedTolerances,
    efficiency: bool = False,
    disjoint: bool = False,
) -> dict[str, Any]:
    """``--reference --pairs used`` over the candidate's rounds (``groups``); ``efficiency``: each busbw figure judged
    by its efficiency instead (the checks and durations as --reference judges them). The rank test's family is every
    sampled figure of the comparison, as one ``distval run --reference`` of the config would have it."""
    mine = [r for r in rounds if r["candidate"] == label]
    failed = comparisons = figures = regressed = 0
    for chosen in groups(mine, used, disjoint):
        comparisons += 1
        order = [tuple(r["order"]) for r in chosen]
        any_failed = False
        scenarios = range(len(chosen[0]["runs"]["candidate"]["scenarios"]))
        sides = [
            ([r["runs"]["candidate"]["scenarios"][i] for r in chosen], [r["runs"]["reference"]["scenarios"][i] for r in chosen])
            for i in scenarios
        ]
        family = sum(sampled_figures(*side) for side in sides)
        for candidates, references in sides:
            case = reference_case(candidates, references, order, "good", tolerances, family)
            if efficiency:
                # The testcase's verdict with its busbw figures judged by efficiency instead.
                verdicts = _efficiency_regressed(candidates, references, tolerances)
                others = [f for f in case.details["figures"] if f["kind"] != "busbw"]
                checks_failed = any(c["verdict"] == "the image" for c in case.details["checks"])
                any_failed |= checks_failed or any(verdicts) or any(f["regressed"] for f in others)
            else:
                verdicts = [f["regressed"] for f in case.details["figures"] if f["kind"] == "busbw"]
                any_failed |= case.status == "failed"
            figures += len(verdicts)
            regressed += sum(verdicts)
        failed += any_failed
    return {"failed": failed, "comparisons": comparisons, "busbw_regressed": regressed, "busbw_figures": figures}


def judge_baseline(rounds: Sequence[dict[str, Any]], label: str, tolerances: Tolerances) -> dict[str, Any]:
    """``--baseline REFERENCE_RUN --remeasure 2``: each good reference run as the baseline; each candidate run with
    every ordered choice of two other candidate runs as its re-measures."""
    baselines = [r["runs"]["reference"] for r in rounds]
    candidates = [r["runs"]["candidate"] for r in rounds if r["candidate"] == label]
    failed = comparisons = figures = regressed = 0
    for number, old in enumerate(baselines):
        for combo in itertools.permutations(range(len(candidates)), 1 + DEFAULT_REMEASURE):
            new, again = candidates[combo[0]], [candidates[k] for k in combo[1:]]
            comparisons += 1
            any_failed = False
            for index, scenario in enumerate(new["scenarios"]):
                remeasured = [run["scenarios"][index] for run in again]
                case = baseline_case(scenario, old, tolerances, f"good{number}.json", remeasured)
                any_failed |= case.status == "failed"
                previous = old["scenarios"][index]
                found = confirm(deltas(previous, scenario, tolerances), [deltas(previous, a, tolerances) for a in remeasured])
                figures += len(_busbw(found))
                regressed += sum(1 for d in _busbw(found) if d.regressed)
            failed += any_failed
    return {"failed": failed, "comparisons": comparisons, "busbw_regressed": regressed, "busbw_figures": figures}


def judge(
    rounds: Sequence[dict[str, Any]], used_pairs: Sequence[int], baseline: bool = True, disjoint: bool = False
) -> list[dict[str, Any]]:
    rows = []
    labels = tuple(dict.fromkeys(r["candidate"] for r in rounds))
    with_efficiency = any(_efficiencies(r["runs"]["candidate"]["scenarios"][0]) for r in rounds)
    for used in used_pairs:
        for efficiency in (False, True) if with_efficiency else (False,):
            rule = f"--reference --pairs {used}" + (", by efficiency" if efficiency else "") + (", disjoint" if disjoint else "")
            row: dict[str, Any] = {"rule": rule}
            for label in labels:
                row[label] = judge_paired(rounds, label, used, PairedTolerances(), efficiency, disjoint)
            rows.append(row)
    if baseline:
        row = {"rule": f"--baseline (one good run) --remeasure {DEFAULT_REMEASURE}"}
        for label in labels:
            row[label] = judge_baseline(rounds, label, Tolerances())
        rows.append(row)
    for row in rows:
        parts = []
        for label in labels:
            seen = row[label]
            kind = "false alarms" if label == SAME else f"{label.rsplit(':', 1)[1]} missed"
            count = seen["failed"] if label == SAME else seen["comparisons"] - seen["failed"]
            figure_count = seen["busbw_regressed"] if label == SAME else seen["busbw_figures"] - seen["busbw_regressed"]
            parts.append(
                f"{kind} {count} of {seen['comparisons']} comparisons ({figure_count} of {seen['busbw_figures']} busbw figures)"
            )
        print(f"{row['rule']}: " + "; ".join(parts), flush=True)
    return rows


def markdown(rows: Sequence[dict[str, Any]], rounds: Sequence[dict[str, Any]], machine: str) -> str:
    """The error-rate table: per rule, false alarms of the unchanged image and misses of each slower one, per
    comparison (and per busbw figure), with the machine and the range of the load average over the runs."""
    labels = tuple(dict.fromkeys(r["candidate"] for r in rounds))
    loads = [value for r in rounds for value in r.get("load") or []]
    load = f"{min(loads):.1f}-{max(loads):.1f}" if loads else "not recorded"
    heads = ["false alarms (unchanged image)" if label == SAME else f"missed: {label.rsplit(':', 1)[-1]}" for label in labels]
    lines = [
        f"Machine: {machine}; load average (1 min) over the runs: {load}; {len({r['round'] for r in rounds})} rounds.",
        "",
        "| rule | " + " | ".join(heads) + " |",
        "|---|" + "---|" * len(heads),
    ]
    for row in rows:
        cells = []
        for label in labels:
            seen = row[label]
            count = seen["failed"] if label == SAME else seen["comparisons"] - seen["failed"]
            share = count / seen["comparisons"] if seen["comparisons"] else float("nan")
            figure_count = seen["busbw_regressed"] if label == SAME else seen["busbw_figures"] - seen["busbw_regressed"]
            cells.append(f"{count} of {seen['comparisons']} ({share:.1%}; figures {figure_count} of {seen['busbw_figures']})")
        lines.append(f"| {row['rule']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pairs", type=int, default=4, help="rounds, each a pair per candidate (default 4; at least 3)")
    parser.add_argument("--image", default=DEFAULT_IMAGE, help=f"the good image (default {DEFAULT_IMAGE})")
    parser.add_argument(
        "--judge-pairs",
        type=int,
        action="append",
        metavar="N",
        help=f"judge as --reference --pairs N (repeatable; default {DEFAULT_PAIRS})",
    )
    parser.add_argument(
        "--slow", action="append", metavar="IMAGE", help=f"a slower candidate (repeatable; default {', '.join(SLOW_IMAGES)})"
    )
    parser.add_argument(
        "--disjoint", action="store_true", help="judge groups of rounds that share no run (independent comparisons)"
    )
    parser.add_argument(
        "--no-baseline", action="store_true", help="judge --reference only (then --pairs may be 2: no re-measures needed)"
    )
    parser.add_argument("--markdown", type=Path, metavar="PATH", help="write the error-rate table here")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write every report and the rates here")
    parser.add_argument("--reports", type=Path, metavar="PATH", help="judge the runs of an earlier --json file")
    args = parser.parse_args(argv)
    if args.pairs < (2 if args.no_baseline else 3):
        parser.error("--pairs must be at least 3 (the baseline's run and its two re-measures), 2 with --no-baseline")
    if args.reports:
        rounds = json.loads(args.reports.read_text(encoding="utf-8"))["rounds"]
    else:
        rounds = run_rounds(args.image, args.pairs, tuple(args.slow or SLOW_IMAGES))
    used = [n for n in (args.judge_pairs or [DEFAULT_PAIRS]) if 2 <= n <= len({r["round"] for r in rounds})]
    rows = judge(rounds, used, baseline=not args.no_baseline, disjoint=args.disjoint)
    if args.markdown:
        machine = f"{os.cpu_count()} CPUs, {platform.node() or 'this host'} ({platform.platform(terse=True)})"
        args.markdown.write_text(markdown(rows, rounds, machine), encoding="utf-8")
        print(f"wrote {args.markdown}")
    if args.json and not args.reports:
        args.json.write_text(json.dumps({"good": args.image, "rounds": rounds, "rates": rows}, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"bench_reference_rates: {exc}", file=sys.stderr)
        sys.exit(1)
