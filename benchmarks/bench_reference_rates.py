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
- last-known-good, as ``--baseline GOOD.json --remeasure 2`` would (``baseline_case``), with one good run and with
  the median of three (``--baseline`` three times, its best settings here): on disjoint groups of 3 of the
  candidate's rounds, the group's reference runs the baseline, its first candidate run the new one and the next two
  its re-measures (``baseline_comparisons``: independent, and as cheap to judge as the pairs); and, unless
  ``--disjoint``, each good reference run as the baseline, each candidate run with every ordered choice of two other
  runs of the same candidate as its re-measures; a comparison fails when any scenario's ``baseline`` testcase fails;
  figure by figure too.

A false alarm is a failed comparison of the good image against itself; a miss is a comparison of a slow image
that did not fail. The load average is printed with every run and kept with it; ``--markdown`` writes the table
for docs/measurements.md (the machine, the load range, each rule's counts and rates).

    python benchmarks/bench_reference_rates.py --pairs 4 --json reference-rates.json
    python benchmarks/bench_reference_rates.py --reports reference-rates.json --judge-pairs 2 --judge-pairs 3
    # A smoke run: 2 comparisons (2 rounds, the unchanged image and the 40 % one, judged as --pairs 2):
    python benchmarks/bench_reference_rates.py --pairs 2 --no-baseline --judge-pairs 2 --disjoint \
        --slow distval-fixtures/broken:slow-busbw-40

The error-rate table (>= 100 independent comparisons of the unchanged image with the default judge, ``--reference
--pairs 3 --confirm-pairs 2``: hundreds of runs of the sweep, many hours) is accumulated over sessions in one file,
committed as ``benchmarks/data/reference-rates.json``. ``--append FILE`` adds this session's rounds to FILE (created
when absent), rewrites it atomically after every round (a session stopped mid-way keeps every finished round) and
judges every round in it. Each run is kept as what the judges read of its report (``slim_report``: figures, samples,
checks' statuses and durations; no logs, environment or details), each round on one line: 94-99 KB a round of the
unchanged image as measured here (2026-12-07), about 60 % of it the per-iteration samples the rank test needs (whole
reports made 0.87 MB a round). The file's header says what made its
rounds: the sweep's config text, the hash of the suite's modules that time it and make its figures
(``MEASUREMENT_MODULES``), the good image's and each slow image's pin (a fixture's recipe hash, its label
``distval.fixture.recipe``: every session's machine is fresh and builds the fixtures again from their recipes, each
build a new image id; an image without a recipe is pinned by its id), distval's version and the judges' default
tolerances; an append made otherwise, or to a file of an older format, is refused in one line (exit 2). Each round
keeps the image ids it ran (``image_ids``). A slow image the file has not seen may join it. ``--slow none`` runs the
unchanged image alone (2 runs a round: the false alarms accumulate 4x faster), ``--no-same`` the slow images alone
(their misses); a round holds the candidates it ran and each candidate's pairs alternate ABBA over all of its rounds
in the file, so that its disjoint groups of 2 rounds are each one AB and one BA pair, as ``--reference --pairs 2``
runs them. A group of 3 or 5 rounds begins with whichever order its first round has, where ``distval run`` always
begins candidate first: with the unchanged image a group that begins reference first is the mirror of one that begins
candidate first, so that if going first or second changed a run, the table would mix the two kinds where a run has
only the first. ``--max-minutes M`` starts no round after one ended past M minutes (``--pairs`` still bounds the
rounds). ``--busy-cpus N`` keeps N CPUs busy at the lowest priority beside the rounds (``busy_cpus``: they take only the time the
runs leave idle, and end with the benchmark, SIGKILL included), so that the machine never idles; each round keeps
that (``beside``), and the judges take such rounds apart from the others (``cohort``: "... with 2 CPUs kept busy" is
a row and a part of the sentence of its own). A slower image waits out its extra time keeping its CPU busy where the
good image's idles, and on an otherwise idle VM that made its own collectives faster than the good image's: with the
CPUs kept busy both images run on CPUs that never idle (docs/measurements.md, "How to read it").

The table: per rule and candidate, its rounds, its comparisons (independent: groups sharing no run; overlapping:
every choice of rounds, not independent), the errors, their rate and one-sided 95 % Clopper-Pearson upper bound
(independent ones only; about 3/n at 0), the load range and dates of its rounds, the machines. The confirmation row
(``--confirm-pairs K``, default 2) judges the rounds as ``distval run --reference --pairs N --confirm-pairs K`` would
take them, one comparison after the other (``sequential_groups``): N rounds, and K more only where a figure
regressed over those N; the next comparison starts after the last round taken. Its comparisons are independent:
they share no run, and where each starts depends only on the rounds before it, never on its own, so that each is
one draw of what a run would do; and one comparison costs N rounds, N + K only when it was triggered. A session's
slot, one file for every session:

    nice -n 19 python benchmarks/bench_reference_rates.py --append benchmarks/data/reference-rates.json \
        --slow none --pairs 1000 --max-minutes 30 --judge-pairs 3 --disjoint --docs
    nice -n 19 python benchmarks/bench_reference_rates.py --append benchmarks/data/reference-rates.json \
        --no-same --pairs 1000 --max-minutes 30 --judge-pairs 3 --disjoint --docs
    nice -n 19 python benchmarks/bench_reference_rates.py --append benchmarks/data/reference-rates.json \
        --no-same --busy-cpus 2 --pairs 1000 --max-minutes 30 --judge-pairs 3 --disjoint --docs

then commit the file, docs/measurements.md and the README: ``--docs`` wrote the table and the sentence that says
what it shows (``docs_views``: judged as ``distval run`` judges by default, whatever else the command asked; a quick
test fails where the page's table or the README's sentence is not the file's).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import hashlib
import itertools
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench_bandwidth_spread import CONFIG, DEFAULT_IMAGE, run_once
from common import REPO_ROOT, BenchError, bench_run_id, check_image, distval_executable, image_recipe

import distval
from distval.comparing.baseline import baseline_case
from distval.comparing.deltas import Tolerances, busbw_figures, confirm, deltas
from distval.comparing.reading import combined_baseline
from distval.comparing.reference import (
    CANDIDATE,
    DEFAULT_CONFIRM_PAIRS,
    DEFAULT_PAIRS,
    Confirmation,
    PairedTolerances,
    paired,
    reference_case,
    regressed_figures,
    sampled_figures,
    schedule,
)
from distval.results.outcome import PASSED
from distval.session.remeasure import DEFAULT_REMEASURE

# --baseline's best settings here (docs/measurements.md): the median of 3 good runs and the default re-measures.
BEST_BASELINES = 3
SAME = "same image"  # the good image as the candidate: its comparisons count false alarms
SLOW_IMAGES = tuple(f"distval-fixtures/broken:slow-busbw-{percent}" for percent in (10, 25, 40))
# The --json file's layout: a header saying what made its rounds (``header``), then the rounds. 3: images pinned by
# recipe (``pin``) and each round's image ids; --append rounds keep what the judges read of each run (``slim_report``).
FORMAT = 3
# The suite's modules that time the sweep's calls and make its figures: rounds timed by other code are another
# measurement, so a file's header pins them (``measurement_sha256``). distval's version cannot: it is always 0.1.0.
MEASUREMENT_MODULES = ("distval_suite/bandwidth.py", "distval_suite/bandwidth_figures.py", "distval_suite/yardstick.py")
# docs/measurements.md holds the accumulated file's table between these lines (``docs_views``, ``--docs``).
DOCS_PAGE = "docs/measurements.md"
DOCS_BEGIN = "<!-- the accumulated error-rate table: benchmarks/bench_reference_rates.py --docs writes it -->"
DOCS_END = "<!-- the end of the accumulated error-rate table -->"
# The README's front-door paragraph holds what the table says in one sentence (``findings``) between these.
README_PAGE = "README.md"
README_BEGIN = "<!-- bench_reference_rates.py --docs: -->"
README_END = "<!-- (end) -->"
# A report of one run of ``image``, told apart from the others by ``label``.
Runner = Callable[[str, str], dict[str, Any]]
# ``--busy-cpus``: a process that keeps one CPU busy until its parent (the benchmark) is gone, however that ends
# (SIGKILL included: the loop sees itself adopted by another parent). ``busy_cpus`` gives it the lowest priority, nice
# 19 and SCHED_IDLE, so that it takes only the time the runs leave idle and the CPUs never idle: a slower image's wait
# keeps its own CPU busy where the good image's idles, and on an idle VM that made its collectives faster than the good
# image's (docs/measurements.md, "How to read it"). SCHED_IDLE, not only nice 19: the benchmark and its ``distval
# run`` commonly run at nice 19 themselves, and loops of the same weight took half of the CPU from them (a run of the
# sweep took 75 s instead of 35).
BUSY_LOOP = "import os, sys\nparent = int(sys.argv[1])\nwhile os.getppid() == parent:\n    pass\n"
# How a ``cohort`` label says what ran beside its rounds; the pattern that reads the candidate back is derived from it.
BUSY_SUFFIX = " with {count} CPUs kept busy"
BUSY_PATTERN = "(.*)" + re.escape(BUSY_SUFFIX).replace(re.escape("{count}"), r"\d+")


class Refused(Exception):
    """An --append file whose rounds were made otherwise (another config, image, distval or judging rules)."""


def rules() -> dict[str, Any]:
    """What the judges' verdicts rest on besides the runs: distval's version and the default tolerances and counts.
    Every round of a file is judged again at every append, under today's rules; a file whose rounds were taken for
    other rules is refused rather than re-judged silently, so that a table says what it was measured for."""
    return {
        "distval": distval.__version__,
        "paired": dataclasses.asdict(PairedTolerances()),
        "baseline": dataclasses.asdict(Tolerances()),
        "remeasure": DEFAULT_REMEASURE,
    }


def pin(image_id: str, recipe: str | None) -> str:
    """What an image is held to across sessions: a fixture's recipe hash ("recipe:<hash>", its label
    ``distval.fixture.recipe``: every session's machine is fresh and builds the fixtures again from their recipes, each
    build a new image id of the same image), else its image id (an image without a recipe is known by its id only)."""
    return f"recipe:{recipe}" if recipe else image_id


def image_pin(image: str) -> tuple[str, str]:
    """(``pin``, image id) of an image in the Engine; BenchError where it is missing or a stale fixture."""
    found = check_image(image)
    return pin(found, image_recipe(image)), found


def measurement_sha256(root: Path = REPO_ROOT) -> str:
    """The hash of the ``MEASUREMENT_MODULES`` under ``root``, each with its path."""
    digest = hashlib.sha256()
    for name in MEASUREMENT_MODULES:
        digest.update(name.encode() + b"\0" + (root / name).read_bytes() + b"\0")
    return digest.hexdigest()


def header(good: str, good_pin: str, slow_pins: dict[str, str], config: str = CONFIG) -> dict[str, Any]:
    """What the rounds of a file must share: the sweep's config text, the suite code that times it
    (``measurement_sha256``), the images' ``pin`` (recipe or id) and ``rules``. The image ids that each round ran are
    kept with the round (``collect_rounds``)."""
    return {
        "format": FORMAT,
        "config_sha256": hashlib.sha256(config.encode()).hexdigest(),
        "config": config,
        "measurement_sha256": measurement_sha256(),
        "good": good,
        "good_pin": good_pin,
        "slow_pins": dict(slow_pins),
        "rules": rules(),
    }


def refusal(found: dict[str, Any], wanted: dict[str, Any]) -> str | None:
    """Why the rounds of a file (its header ``found``) cannot take rounds made as ``wanted`` says; None when they
    can. A slow image the file has not seen yet may join; one it has seen must keep its pin (recipe or id)."""
    if found.get("format") != FORMAT:
        return (
            f"its format is {found.get('format', 'the first (no header: image ids unknown)')}, not {FORMAT} (images "
            "pinned by recipe, runs kept slim): start a new file"
        )
    if found.get("config_sha256") != wanted["config_sha256"]:
        return "its rounds ran another config text"
    if found.get("measurement_sha256") != wanted["measurement_sha256"]:
        return f"its rounds were timed by other suite code ({', '.join(MEASUREMENT_MODULES)}): start a new file"
    if found.get("good") != wanted["good"] or found.get("good_pin") != wanted["good_pin"]:
        return f"its good image is {found.get('good')} {found.get('good_pin')}, not {wanted['good']} {wanted['good_pin']}"
    for name, image in wanted["slow_pins"].items():
        known = (found.get("slow_pins") or {}).get(name)
        if known is not None and known != image:
            return f"its {name} is image {known}, not {image}"
    if found.get("rules") != wanted["rules"]:
        return f"its rounds were judged under other rules ({found.get('rules')}, now {wanted['rules']})"
    return None


def read_accumulated(path: Path, wanted: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and rounds of an --append file (a new header and no rounds where there is no file yet); Refused
    where its rounds were made otherwise (``refusal``)."""
    if not path.exists():
        return dict(wanted), []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise Refused(f"refusing to append to {path}: not a JSON file of rounds ({exc})") from None
    found = (data.get("header") if isinstance(data, dict) else None) or {}
    why = refusal(found, wanted)
    if why:
        raise Refused(f"refusing to append to {path}: {why}")
    merged = dict(found, slow_pins={**(found.get("slow_pins") or {}), **wanted["slow_pins"]})
    return merged, list(data.get("rounds") or [])


def render(data: dict[str, Any]) -> str:
    """``data`` as JSON: indented, but each of its ``rounds`` on one line of its own, without spaces: an indented
    sample list takes a line per number, and a file that grows by whole lines is a small change to commit."""
    parts = []
    for key, value in data.items():
        if key == "rounds" and isinstance(value, list) and value:
            lines = ",\n".join("    " + json.dumps(r, separators=(",", ":"), allow_nan=False) for r in value)
            parts.append(f'  "rounds": [\n{lines}\n  ]')
        else:
            parts.append(f"  {json.dumps(key)}: " + json.dumps(value, indent=2, allow_nan=False).replace("\n", "\n  "))
    return "{\n" + ",\n".join(parts) + "\n}\n"


def write_atomically(path: Path, data: dict[str, Any]) -> None:
    """Replace ``path`` by ``data`` (``render``) in one rename: a session stopped mid-write leaves the previous file
    whole."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.write_text(render(data), encoding="utf-8")
    os.replace(partial, path)


# What the judges read of one run's JSON report, and nothing else (``slim_report``). Of a scenario's entry: the
# paired judge (distval/comparing/reference.py) its busbw figures, samples, checks' statuses and durations, time to
# verdict and the reference's image id; the baseline judge (distval/comparing/baseline.py, deltas.py) the same
# figures with their bests, call times and yardstick, the scenario hashes it matches by and the iterations and
# messages it words its verdict with; ``_efficiencies`` each figure's efficiency. ``reference_case`` also copies
# image, started_at and status into its details.
ENTRY_KEYS = ("name", "image", "image_id", "status", "duration_s", "started_at")
PROPERTY_KEYS = ("scenario_hash", "scenario_hash_any_image")  # comparing/reading.py ``match``
CASE_KEYS = ("name", "status", "duration_s")
# What skip_reasons and failed_remeasures quote of a case's message: kept for a case or scenario that did not pass.
MESSAGE_CHARS = 200
FIGURE_KEYS = (
    *("operation", "size", "label", "world_size", "iterations"),
    *("busbw_gbps", "best_busbw_gbps", "time_us", "best_time_us", "tcp_gbps", "efficiency", "samples_us"),
)


def slim_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """One scenario's JSON report entry with only what the judges read (``ENTRY_KEYS`` ...): no logs, diagnosis,
    reproduce command, other properties, cases' output and details (the bandwidth figures' second copy)."""
    found = {key: entry[key] for key in ENTRY_KEYS if key in entry}
    properties = entry.get("properties")
    if isinstance(properties, dict):
        found["properties"] = {key: properties[key] for key in PROPERTY_KEYS if key in properties}
    if "cases" in entry:
        cases = []
        for case in entry.get("cases") or []:
            if isinstance(case, dict):
                kept = {key: case[key] for key in CASE_KEYS if key in case}
                if (case.get("status"), entry.get("status")) != (PASSED, PASSED) and "message" in case:
                    kept["message"] = str(case["message"])[:MESSAGE_CHARS]
                cases.append(kept)
        found["cases"] = cases
    if "bandwidth" in entry:
        found["bandwidth"] = [
            {key: figure[key] for key in FIGURE_KEYS if key in figure}
            for figure in entry.get("bandwidth") or []
            if isinstance(figure, dict)
        ]
    return found


def slim_report(report: dict[str, Any]) -> dict[str, Any]:
    """A run's JSON report with only what the judges read: its run id (the baseline judge names it) and each scenario
    slimmed (``slim_entry``). Judged, it gives the same verdicts as the whole report (tests/project/
    test_bench_reference_rates.py), at about a seventh of its size (the per-iteration samples are most of what is left)."""
    return {
        "run_id": report.get("run_id"),
        "scenarios": [slim_entry(s) for s in report.get("scenarios") or [] if isinstance(s, dict)],
    }


def _utc_now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def machine() -> str:
    return f"{os.cpu_count()} CPUs, {platform.node() or 'this host'} ({platform.platform(terse=True)})"


def collect_rounds(
    good: str,
    candidates: Sequence[tuple[str, str]],
    pairs: int,
    run: Runner,
    earlier: Sequence[dict[str, Any]] = (),
    max_minutes: float | None = None,
    on_round: Callable[[list[dict[str, Any]]], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    load: Callable[[], tuple[float, float, float]] = os.getloadavg,
    now: Callable[[], str] = _utc_now,
    image_ids: Mapping[str, str] | None = None,
    beside: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Up to ``pairs`` rounds after the ``earlier`` ones, each a pair per candidate ((label, image); SAME's image is
    ``good``): [{candidate, round, order, runs, load, started, finished, machine, image_ids}]. A candidate's pairs go
    in ``schedule``'s order counted over all of its rounds, the earlier included, so that consecutive rounds of one
    candidate still alternate ABBA... across sessions. ``on_round`` gets every round so far after each round;
    ``max_minutes``: no round starts once a round has ended past that many minutes; ``image_ids``: image -> the id
    this session ran (kept per round: the file pins a fixture by recipe, each session builds it anew); ``beside``: what
    ran beside the rounds (``busy_cpus``), kept per round where anything did."""
    found = list(earlier)
    first = max((int(r["round"]) for r in earlier), default=0) + 1
    started_at = clock()
    for number in range(first, first + pairs):
        for label, image in candidates:
            index = sum(1 for r in found if r["candidate"] == label)
            order = schedule(index + 1)[index]
            runs: dict[str, dict[str, Any]] = {}
            loads: list[float] = []
            started = now()
            for member in order:
                run_image = image if member == CANDIDATE else good
                runs[member] = run(run_image, f"{len(found) - len(earlier)}{member[0]}")  # unique in this process
                average = load()
                loads.append(average[0])
                print(f"round {number} {label}: {member} {run_image}: load {'/'.join(f'{v:.1f}' for v in average)}", flush=True)
            found.append(
                {
                    "candidate": label,
                    "round": number,
                    "order": list(order),
                    "runs": runs,
                    "load": loads,
                    "started": started,
                    "finished": now(),
                    "machine": machine(),
                    "image_ids": {member: (image_ids or {}).get(image if member == CANDIDATE else good) for member in order},
                    **({"beside": dict(beside)} if beside else {}),
                }
            )
        if on_round is not None:
            on_round(found)
        if max_minutes is not None and clock() - started_at >= max_minutes * 60:
            print(f"stopping after round {number}: past {max_minutes:g} minutes", flush=True)
            break
    return found


def cohort(entry: dict[str, Any]) -> str:
    """The label the judges know a round's candidate by: the candidate, and what ran beside the round where it kept
    that (``collect_rounds``' ``beside``). Rounds with the CPUs kept busy are another state of the machine, judged
    apart: the unchanged image's false alarms and a slower image's misses are each counted in one state."""
    busy = (entry.get("beside") or {}).get("busy_cpus")
    return f"{entry['candidate']}{BUSY_SUFFIX.format(count=busy)}" if busy else str(entry["candidate"])


def candidate_of(label: str) -> str:
    """The candidate of a ``cohort`` label (the label without what ran beside it)."""
    found = re.fullmatch(BUSY_PATTERN, label)
    return found.group(1) if found else label


def beside_of(label: str) -> str:
    """What ran beside a ``cohort`` label's rounds, as its label says it (empty where nothing did)."""
    return label[len(candidate_of(label)) :]


@contextmanager
def busy_cpus(count: int) -> Iterator[dict[str, Any]]:
    """``count`` processes that keep a CPU busy each (``BUSY_LOOP``) at nice 19 and SCHED_IDLE, set here as each starts
    (not by the loop itself, which would first have to be scheduled), while the block runs; and what ran beside the
    rounds as a round keeps it (``{"busy_cpus": count}``; nothing for 0)."""
    loops: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(count):
            loop = subprocess.Popen(
                [sys.executable, "-c", BUSY_LOOP, str(os.getpid())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            loops.append(loop)
            os.setpriority(os.PRIO_PROCESS, loop.pid, 19)
            os.sched_setscheduler(loop.pid, os.SCHED_IDLE, os.sched_param(0))
        yield {"busy_cpus": count} if count else {}
    finally:
        for loop in loops:
            loop.kill()
        for loop in loops:
            loop.wait()


@contextmanager
def docker_runner() -> Iterator[Runner]:
    """``distval run`` of the sweep's config, one run at a time, its reports in a directory removed afterwards."""
    distval_path = distval_executable(None)
    with tempfile.TemporaryDirectory(prefix="bench-reference-") as tmp:
        config = Path(tmp) / "bw.yaml"
        config.write_text(CONFIG, encoding="utf-8")

        def run(image: str, label: str) -> dict[str, Any]:
            return run_once(distval_path, config, image, Path(tmp) / f"r{label}.json", bench_run_id("bx", label))

        yield run


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


def triggered(chosen: Sequence[dict[str, Any]], tolerances: PairedTolerances) -> bool:
    """Whether any scenario of these rounds has a figure that regressed over them (``regressed_figures``): what makes
    ``distval run --reference`` run confirmation pairs after them."""
    scenarios = range(len(chosen[0]["runs"]["candidate"]["scenarios"]))
    return any(
        regressed_figures(
            [r["runs"]["candidate"]["scenarios"][i] for r in chosen],
            [r["runs"]["reference"]["scenarios"][i] for r in chosen],
            tolerances,
        )
        for i in scenarios
    )


def sequential_groups(
    mine: Sequence[dict[str, Any]], used: int, confirm: int, tolerances: PairedTolerances
) -> list[tuple[dict[str, Any], ...]]:
    """The comparisons of ``--reference --pairs used --confirm-pairs confirm`` as ``distval run`` makes them, one after
    the other: each takes the next ``used`` rounds, and ``confirm`` more only where a figure regressed over those
    (``triggered``); the next starts after the last round it took. A last one whose rounds ran out is not judged.

    The comparisons are independent: they share no run, and where one starts depends on the rounds before it only
    (a stopping time), never on its own; if the rounds are alike and independent, so are the rounds from any such
    start on, and each comparison is one draw of what a ``distval run`` would do. (Choosing each group's size after
    seeing all of it, or leaving out groups by their outcome, would not be.)"""
    found: list[tuple[dict[str, Any], ...]] = []
    start = 0
    while start + used <= len(mine):
        size = used + confirm if confirm and triggered(mine[start : start + used], tolerances) else used
        if start + size > len(mine):
            break
        found.append(tuple(mine[start : start + size]))
        start += size
    return found


def judge_paired(
    rounds: Sequence[dict[str, Any]],
    label: str,
    used: int,
    tolerances: PairedTolerances,
    efficiency: bool = False,
    disjoint: bool = False,
    confirm: int = 0,
) -> dict[str, Any]:
    """``--reference --pairs used`` over the candidate's rounds (``groups``); ``efficiency``: each busbw figure judged
    by its efficiency instead (the checks and durations as --reference judges them). The rank test's family is every
    sampled figure of the comparison, as one ``distval run --reference`` of the config would have it. ``confirm``:
    ``--confirm-pairs confirm`` as well: the comparisons are ``sequential_groups`` (``used`` rounds, ``used + confirm``
    where a figure regressed over the first ``used``), and a scenario is judged on all of its group's rounds, with the
    confirmation's rule, only where a figure of its own regressed over the first ``used`` (what the run stage does:
    distval/session/pairs.py). ``rounds_used``: the rounds the comparisons took, together. ``label``: a ``cohort``."""
    mine = [r for r in rounds if cohort(r) == label]
    failed = comparisons = figures = regressed = rounds_used = 0
    chosen_groups = sequential_groups(mine, used, confirm, tolerances) if confirm else groups(mine, used, disjoint)
    for chosen in chosen_groups:
        comparisons += 1
        rounds_used += len(chosen)
        order = [tuple(r["order"]) for r in chosen]
        any_failed = False
        scenarios = range(len(chosen[0]["runs"]["candidate"]["scenarios"]))
        every = [
            ([r["runs"]["candidate"]["scenarios"][i] for r in chosen], [r["runs"]["reference"]["scenarios"][i] for r in chosen])
            for i in scenarios
        ]
        sides: list[tuple[list[Any], list[Any], Confirmation | None]] = []
        for candidates, references in every:
            trigger = regressed_figures(candidates[:used], references[:used], tolerances) if confirm else ()
            if trigger:
                sides.append((candidates, references, Confirmation(used, confirm, trigger)))
            else:
                sides.append((candidates[:used], references[:used], None))
        family = sum(sampled_figures(candidates, references) for candidates, references, _ in sides)
        for candidates, references, confirmation in sides:
            case = reference_case(candidates, references, order[: len(candidates)], "good", tolerances, family, confirmation)
            details: Any = case.details  # the testcase's JSON details: figures and checks as lists of dicts
            if efficiency:
                # The testcase's verdict with its busbw figures judged by efficiency instead.
                verdicts = _efficiency_regressed(candidates, references, tolerances)
                others = [f for f in details["figures"] if f["kind"] != "busbw"]
                checks_failed = any(c["verdict"] == "the image" for c in details["checks"])
                any_failed |= checks_failed or any(verdicts) or any(f["regressed"] for f in others)
            else:
                verdicts = [f["regressed"] for f in details["figures"] if f["kind"] == "busbw"]
                any_failed |= case.status == "failed"
            figures += len(verdicts)
            regressed += sum(verdicts)
        failed += any_failed
    return {
        "failed": failed,
        "comparisons": comparisons,
        "busbw_regressed": regressed,
        "busbw_figures": figures,
        "rounds_used": rounds_used,
    }


def baseline_comparisons(
    rounds: Sequence[dict[str, Any]], label: str, disjoint: bool, baselines: int = 1
) -> list[tuple[list[dict[str, Any]], dict[str, Any], list[dict[str, Any]]]]:
    """The comparisons of ``--baseline GOOD.json (x baselines) --remeasure 2``, each (the good runs whose median is
    the baseline, the candidate's run, its re-measures).

    ``disjoint``: the candidate's consecutive rounds in groups of ``max(baselines, 1 + DEFAULT_REMEASURE)`` (3 for
    both one and three good runs): the group's first ``baselines`` reference runs are the baseline, its first
    candidate run the new one and the next two its re-measures. The groups share no run, so the comparisons are
    independent, and one costs the rounds of a ``--reference --pairs 3`` comparison. The baseline is taken in the
    minutes around the new run, which favours it: a pipeline's stored baseline is from another day.

    Otherwise (one good run only): every reference run of every round as the baseline, each candidate run with every
    ordered choice of two other candidate runs as its re-measures (overlapping, not independent)."""
    if disjoint:
        mine = [r for r in rounds if cohort(r) == label]
        size = max(baselines, 1 + DEFAULT_REMEASURE)
        found = []
        for start in range(0, len(mine) - size + 1, size):
            group = mine[start : start + size]
            good = [r["runs"]["reference"] for r in group[:baselines]]
            runs = [r["runs"]["candidate"] for r in group]
            found.append((good, runs[0], runs[1 : 1 + DEFAULT_REMEASURE]))
        return found
    if baselines != 1:
        raise ValueError("every choice of baselines is judged with one good run only")
    alike = [r for r in rounds if beside_of(cohort(r)) == beside_of(label)]  # the machine in the same state
    references = [r["runs"]["reference"] for r in alike]
    candidates = [r["runs"]["candidate"] for r in alike if cohort(r) == label]
    return [
        ([old], candidates[combo[0]], [candidates[k] for k in combo[1:]])
        for old in references
        for combo in itertools.permutations(range(len(candidates)), 1 + DEFAULT_REMEASURE)
    ]


def judge_baseline(
    rounds: Sequence[dict[str, Any]], label: str, tolerances: Tolerances, disjoint: bool = False, baselines: int = 1
) -> dict[str, Any]:
    """``--baseline GOOD.json --remeasure 2`` (``baselines`` good runs: their median, as ``--baseline`` given that many
    times) over ``baseline_comparisons``; a comparison fails when any scenario's ``baseline`` testcase fails."""
    failed = comparisons = figures = regressed = 0
    for good, new, again in baseline_comparisons(rounds, label, disjoint, baselines):
        path, old = combined_baseline([(f"good{number}.json", run) for number, run in enumerate(good)])
        comparisons += 1
        any_failed = False
        for index, scenario in enumerate(new["scenarios"]):
            remeasured = [run["scenarios"][index] for run in again]
            case = baseline_case(scenario, old, tolerances, path, remeasured)
            any_failed |= case.status == "failed"
            previous = old["scenarios"][index]
            found = confirm(deltas(previous, scenario, tolerances), [deltas(previous, a, tolerances) for a in remeasured])
            figures += len(_busbw(found))
            regressed += sum(1 for d in _busbw(found) if d.regressed)
        failed += any_failed
    return {"failed": failed, "comparisons": comparisons, "busbw_regressed": regressed, "busbw_figures": figures}


def errors(label: str, seen: dict[str, Any]) -> tuple[int, int]:
    """(comparisons judged wrongly, busbw figures judged wrongly): failures of the unchanged image (false alarms),
    passes of a slower one (misses)."""
    if candidate_of(label) == SAME:
        return seen["failed"], seen["busbw_regressed"]
    return seen["comparisons"] - seen["failed"], seen["busbw_figures"] - seen["busbw_regressed"]


def judge(
    rounds: Sequence[dict[str, Any]],
    used_pairs: Sequence[int],
    baseline: bool = True,
    disjoint: bool = False,
    confirm_pairs: int = 0,
) -> list[dict[str, Any]]:
    """One row per rule: per candidate label, its counts (``judge_paired``, ``judge_baseline``); ``independent``:
    whether the row's comparisons share no run. Paired rules are judged over disjoint groups always, and over every
    choice of rounds (overlapping) too unless ``disjoint``; with ``confirm_pairs``, each also with that many
    confirmation pairs, on the groups ``distval run`` would make one after the other (``sequential_groups``)."""
    rows = []
    labels = tuple(dict.fromkeys(cohort(r) for r in rounds))
    with_efficiency = any(_efficiencies(r["runs"]["candidate"]["scenarios"][0]) for r in rounds)
    for used in used_pairs:
        for efficiency in (False, True) if with_efficiency else (False,):
            for apart in (True,) if disjoint else (True, False):
                rule = (
                    f"--reference --pairs {used}"
                    + (", by efficiency" if efficiency else "")
                    + (", disjoint" if apart else ", every choice")
                )
                row: dict[str, Any] = {"rule": rule, "independent": apart}
                for label in labels:
                    row[label] = judge_paired(rounds, label, used, PairedTolerances(), efficiency, apart)
                rows.append(row)
        if confirm_pairs:
            rule = f"--reference --pairs {used} --confirm-pairs {confirm_pairs} (as run: sequential groups)"
            as_run = (used, confirm_pairs) == (DEFAULT_PAIRS, DEFAULT_CONFIRM_PAIRS)  # as a run judges by default
            row = {"rule": rule, "independent": True, "as_run": as_run}
            for label in labels:
                row[label] = judge_paired(rounds, label, used, PairedTolerances(), confirm=confirm_pairs)
            rows.append(row)
    if baseline:
        # Disjoint groups always (independent, and cheap to judge), every choice too unless ``disjoint``, as the pairs.
        for count, apart in ((1, True), (BEST_BASELINES, True), *(() if disjoint else ((1, False),))):
            good = "one good run" if count == 1 else f"the median of {count} good runs"
            rule = f"--baseline ({good}) --remeasure {DEFAULT_REMEASURE}" + (", disjoint" if apart else ", every choice")
            row = {"rule": rule, "independent": apart, "baseline": True}
            for label in labels:
                row[label] = judge_baseline(rounds, label, Tolerances(), apart, count)
            rows.append(row)
    for row in rows:
        parts = []
        for label in labels:
            seen = row[label]
            kind = _what(label)
            count, figure_count = errors(label, seen)
            took = f", {seen['rounds_used']} rounds" if "sequential" in row["rule"] else ""
            parts.append(
                f"{kind} {count} of {seen['comparisons']} comparisons{took} ({figure_count} of {seen['busbw_figures']} "
                "busbw figures)"
            )
        print(f"{row['rule']}: " + "; ".join(parts), flush=True)
    return rows


def upper_bound(failures: int, trials: int, confidence: float = 0.95) -> float:
    """The one-sided Clopper-Pearson upper bound of a rate seen ``failures`` times in ``trials`` independent ones: the
    rate p at which seeing at most ``failures`` has probability 1 - confidence (with 0 failures 1 - 0.05^(1/n),
    about the rule of three's 3/n)."""
    if trials <= 0:
        return 1.0
    if failures >= trials:
        return 1.0

    def at_most(p: float) -> float:
        return sum(
            math.exp(
                math.lgamma(trials + 1)
                - math.lgamma(k + 1)
                - math.lgamma(trials - k + 1)
                + k * math.log(p)
                + (trials - k) * math.log1p(-p)
            )
            for k in range(failures + 1)
        )

    low, high = failures / trials, 1.0
    for _ in range(100):  # at_most falls as p grows: bisect for at_most(p) = 1 - confidence
        middle = (low + high) / 2
        if middle <= 0.0 or at_most(middle) > 1 - confidence:
            low = middle
        else:
            high = middle
    return high


def _span(values: Sequence[str]) -> str:
    days = sorted(values)
    return f"{days[0][:16].replace('T', ' ')} - {days[-1][:16].replace('T', ' ')}" if days else "not recorded"


def _load_range(mine: Sequence[dict[str, Any]]) -> str | None:
    """The 1-minute load range over ``mine``'s runs (``1.8-5.2``); None where no round recorded its load."""
    loads = [value for r in mine for value in r.get("load") or []]
    return f"{min(loads):.1f}-{max(loads):.1f}" if loads else None


def markdown(rows: Sequence[dict[str, Any]], rounds: Sequence[dict[str, Any]], machine: str) -> str:
    """The error-rate table: per rule and candidate, its rounds, its comparisons (independent: disjoint groups that
    share no run; or overlapping), false alarms of the unchanged image or misses of a slower one, their rate and 95 %
    upper bound (independent comparisons only), busbw figures, the load range and dates of its rounds; the
    machines the rounds ran on."""
    labels = tuple(dict.fromkeys(cohort(r) for r in rounds))
    machines = sorted({str(r["machine"]) for r in rounds if r.get("machine")}) or [machine]
    lines = [
        f"Machine: {'; '.join(machines)}. {len({r['round'] for r in rounds})} rounds. Independent comparisons: disjoint "
        "groups of a candidate's consecutive rounds, sharing no run; overlapping ones share runs (not independent, "
        "no bound). Bound: one-sided 95 % Clopper-Pearson.",
        "",
        "| rule | candidate | rounds | comparisons | errors | rate | 95 % upper bound | busbw figures wrong "
        "| load (1 min) | dates (UTC) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        for label in labels:
            mine = [r for r in rounds if cohort(r) == label]
            seen = row[label]
            count, figure_count = errors(label, seen)
            n = seen["comparisons"]
            what = _what(label)
            bound = f"{upper_bound(count, n):.1%}" if row.get("independent") and n else "n/a"
            cells = [
                row["rule"],
                what,
                str(len(mine)),
                f"{n} {'independent' if row.get('independent') else 'overlapping'}",
                str(count),
                f"{count / n:.1%}" if n else "n/a",
                bound,
                f"{figure_count} of {seen['busbw_figures']}",
                _load_range(mine) or "not recorded",
                _span([str(r[k]) for r in mine for k in ("started", "finished") if r.get(k)]),
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _what(label: str) -> str:
    """A ``cohort`` label as the table names its errors: ``false alarms (unchanged image)``, ``missed: slow-busbw-25``,
    each with what ran beside its rounds."""
    candidate = candidate_of(label)
    what = "false alarms (unchanged image)" if candidate == SAME else f"missed: {candidate.rsplit(':', 1)[-1]}"
    return what + beside_of(label)


def _percent(rate: float, digits: int = 0, sign: bool = True) -> str:
    """``rate`` as the docs write a percentage (``4.7 %``); without ``sign`` for the first end of a range."""
    return f"{rate * 100:.{digits}f}" + (" %" if sign else "")


def _slower(label: str) -> str:
    tag = candidate_of(label).rsplit(":", 1)[-1]
    percent = re.fullmatch(r"slow-busbw-(\d+)", tag)
    return (f"the {percent.group(1)} % slower image" if percent else f"`{tag}`") + _beside_it(label)


def _beside_it(label: str) -> str:
    return f"{beside_of(label)} beside it" if beside_of(label) else ""


def _too_few(image: str, rounds: int) -> str:
    # A candidate with rounds but no comparison yet: "caught in 0 of 0" would read as a measurement.
    return f"{image} has {rounds} round{'' if rounds == 1 else 's'}, too few for a comparison"


def measured_slowdown(rounds: Sequence[dict[str, Any]], label: str) -> tuple[float, float, float] | None:
    """What ``label``'s rounds measured of it: each busbw figure's (scenario, operation, size) median over the rounds
    of the candidate's busbw over its reference's in the same round, then (the median, the lowest, the highest) over
    the figures; None without a figure both runs have. A slower fixture is held to its name by its own rounds: one
    whose small calls were several times slower than its label would be caught for the wrong reason. ``label``: a
    ``cohort``."""
    ratios: dict[tuple[int, str, int], list[float]] = {}
    for r in rounds:
        if cohort(r) != label:
            continue
        pairs = zip(r["runs"]["candidate"]["scenarios"], r["runs"]["reference"]["scenarios"], strict=True)
        for index, (candidate, reference) in enumerate(pairs):
            # Read as the judges read them (busbw_figures: a figure that is no measurement is no figure).
            theirs = busbw_figures(reference)
            for key, figure in busbw_figures(candidate).items():
                good = theirs.get(key)
                if good is not None and figure.median > 0 and good.median > 0:
                    ratios.setdefault((index, *key), []).append(figure.median / good.median)
    medians = sorted(statistics.median(values) for values in ratios.values())
    return (statistics.median(medians), medians[0], medians[-1]) if medians else None


def _as_measured(rounds: Sequence[dict[str, Any]], label: str) -> str:
    """What ``label``'s rounds measured of it and at what load, as the sentence says it (empty where neither is known)."""
    found = measured_slowdown(rounds, label)
    load = _load_range([r for r in rounds if cohort(r) == label])
    said = [f"load {load}"] if load else []
    if found:
        said.append(f"busbw measured {found[0]:.2f}x the good image's, {found[1]:.2f}-{found[2]:.2f}x by figure")
    return f" ({'; '.join(said)})" if said else ""


def findings(rows: Sequence[dict[str, Any]], rounds: Sequence[dict[str, Any]]) -> str:
    """What the rounds say, in one sentence derived from ``rows`` (``judge`` with the confirmation row as a run judges
    by default): the unchanged image's false alarms over independent comparisons with their load and 95 % bound, the
    range of ``--baseline``'s rates on the same rounds, each slower image's catches, and which of ``SLOW_IMAGES`` have
    no rounds yet; each ``cohort`` (what ran beside the rounds) apart. The README and the docs page hold it, so that
    no figure of theirs is typed by hand."""
    as_run = next((row for row in rows if row.get("as_run")), None)
    if as_run is None:
        raise BenchError(
            f"no row judged as a run judges by default (--pairs {DEFAULT_PAIRS} --confirm-pairs "
            f"{DEFAULT_CONFIRM_PAIRS}): nothing to say"
        )
    labels = tuple(dict.fromkeys(cohort(r) for r in rounds))
    parts = []
    same = [label for label in labels if candidate_of(label) == SAME]
    for label in same:
        seen = as_run[label]
        failed, _ = errors(label, seen)
        count = seen["comparisons"]
        mine = [r for r in rounds if cohort(r) == label]
        load = f"load {_load_range(mine) or 'not recorded'}"
        rates = sorted(
            errors(label, row[label])[0] / row[label]["comparisons"]
            for row in rows
            if row.get("baseline") and row[label]["comparisons"]
        )
        beside = f"; `--baseline` {_percent(rates[0], sign=False)}-{_percent(rates[-1])} on the same rounds" if rates else ""
        parts.append(
            f"the unchanged image{_beside_it(label)} failed {failed} of {count} independent comparisons over {len(mine)} "
            f"rounds ({load}; 95 % bound {_percent(upper_bound(failed, count), digits=1)}{beside})"
            if count
            else _too_few(f"the unchanged image{_beside_it(label)}", len(mine))
        )
    if not same:
        parts.append("the unchanged image has no rounds yet")
    for label in labels:
        if label not in same:
            seen = as_run[label]
            missed, _ = errors(label, seen)
            count = seen["comparisons"]
            parts.append(
                f"{_slower(label)}{_as_measured(rounds, label)} was caught in {count - missed} of {count} (95 % bound on misses "
                f"{_percent(upper_bound(missed, count))})"
                if count
                else _too_few(_slower(label), sum(1 for r in rounds if cohort(r) == label))
            )
    ran = {candidate_of(label) for label in labels}
    absent = [image.rsplit("-", 1)[-1] for image in SLOW_IMAGES if image not in ran]
    if absent:
        several = len(absent) > 1
        percents = " and ".join(f"{percent} %" for percent in absent)
        parts.append(f"the {percents} slower image{'s' if several else ''} {'have' if several else 'has'} no rounds yet")
    lead = f"judged as a run judges by default (`--pairs {DEFAULT_PAIRS} --confirm-pairs {DEFAULT_CONFIRM_PAIRS}`), "
    return lead + "; ".join(parts)


def docs_views(rounds: Sequence[dict[str, Any]]) -> tuple[str, str]:
    """The rounds' table as docs/measurements.md holds it, and the sentence (``findings``) that it and the README
    hold, whatever a run of the benchmark asked: judged as ``distval run --reference`` judges by default (``--pairs 3
    --confirm-pairs 2``, as run), ``--pairs 3`` alone, and ``--baseline`` beside them, on independent comparisons
    only."""
    rows = judge(rounds, [DEFAULT_PAIRS], disjoint=True, confirm_pairs=DEFAULT_CONFIRM_PAIRS)
    said = findings(rows, rounds)
    table = markdown(rows, rounds, machine())
    return f"{table}\nSo far, {said}.\n", said


def _between(page: str, begin: str, end: str, text: str, where: str) -> str:
    """``page`` with ``text`` between the markers ``begin`` and ``end``; BenchError where it lacks them."""
    before, found_begin, rest = page.partition(begin)
    _, found_end, after = rest.partition(end)
    if not found_begin or not found_end:
        raise BenchError(f"{where} has no place for the measurements: the markers {begin!r} and {end!r}")
    return f"{before}{begin}{text}{end}{after}"


def with_docs_table(page: str, table: str) -> str:
    """docs/measurements.md's ``page`` with ``table`` between ``DOCS_BEGIN`` and ``DOCS_END``, on lines of its own."""
    return _between(page, DOCS_BEGIN, DOCS_END, f"\n{table}", DOCS_PAGE)


def with_readme_findings(page: str, said: str) -> str:
    """The README's ``page`` with the sentence ``said`` between ``README_BEGIN`` and ``README_END``, inside its
    paragraph."""
    return _between(page, README_BEGIN, README_END, said, README_PAGE)


def _slow_images(given: Sequence[str] | None) -> tuple[str, ...]:
    if not given:
        return SLOW_IMAGES
    return tuple(image for image in given if image != "none")


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
        "--confirm-pairs",
        type=int,
        default=DEFAULT_CONFIRM_PAIRS,
        metavar="K",
        help=f"also judge as --reference --confirm-pairs K, on consecutive groups of N rounds and K more where a figure "
        f"regressed over the N, as distval run makes them (default {DEFAULT_CONFIRM_PAIRS}, run's; 0: not)",
    )
    parser.add_argument(
        "--slow",
        action="append",
        metavar="IMAGE",
        help=f"a slower candidate (repeatable; default {', '.join(SLOW_IMAGES)}); 'none': the unchanged image only",
    )
    parser.add_argument("--no-same", action="store_true", help="run the slower candidates only (misses, no false alarms)")
    parser.add_argument(
        "--disjoint", action="store_true", help="judge only groups of rounds that share no run (independent comparisons)"
    )
    parser.add_argument(
        "--no-baseline", action="store_true", help="judge --reference only (then --pairs may be 2: no re-measures needed)"
    )
    parser.add_argument("--markdown", type=Path, metavar="PATH", help="write the error-rate table here")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write every report (whole) and the rates here")
    parser.add_argument(
        "--append",
        type=Path,
        metavar="PATH",
        help="add the rounds to this file, each run's report slimmed to what the judges read (created when absent; "
        "rewritten after every round) and judge them all",
    )
    parser.add_argument(
        "--busy-cpus",
        type=int,
        default=0,
        metavar="N",
        help="keep N CPUs busy at the lowest priority (nice 19, SCHED_IDLE) beside the rounds, so that they never "
        "idle (kept with each round; the judges take such rounds apart from the others)",
    )
    parser.add_argument("--max-minutes", type=float, metavar="M", help="start no round after one has ended past M minutes")
    parser.add_argument("--reports", type=Path, metavar="PATH", help="judge the runs of an earlier --json file")
    parser.add_argument(
        "--docs",
        action="store_true",
        help=f"write the rounds' table into {DOCS_PAGE} and what it says into {README_PAGE} (judged as distval run "
        "judges by default, whatever else is asked here): for the accumulated file",
    )
    args = parser.parse_args(argv)
    if args.append and (args.json or args.reports):
        parser.error("--append writes its own file: not with --json or --reports")
    if args.docs and not (args.append or args.reports):
        parser.error("--docs writes the accumulated file's table: with --append, or --reports of that file")
    if args.busy_cpus < 0:
        parser.error("--busy-cpus must be 0 or more")
    if args.pairs < (1 if args.append else 2 if args.no_baseline else 3):
        parser.error("--pairs must be at least 3 (the baseline's run and its two re-measures), 2 with --no-baseline")
    slow = _slow_images(args.slow)
    candidates = (() if args.no_same else ((SAME, args.image),)) + tuple((s, s) for s in slow)
    if not candidates and not args.reports:
        parser.error("no candidate: --no-same with --slow none")
    head: dict[str, Any] = {}
    if args.reports:
        data = json.loads(args.reports.read_text(encoding="utf-8"))
        rounds = data["rounds"]
        head = data.get("header") or {}
    else:
        pins = {image: image_pin(image) for image in (args.image, *slow)}
        head = header(args.image, pins[args.image][0], {image: pins[image][0] for image in slow})
        earlier: list[dict[str, Any]] = []
        if args.append:
            try:
                head, earlier = read_accumulated(args.append, head)
            except Refused as exc:
                print(f"bench_reference_rates: {exc}", file=sys.stderr)
                return 2
        target = args.append or args.json

        def keep(found: list[dict[str, Any]]) -> None:
            if target:
                write_atomically(target, {"header": head, "rounds": found})

        with docker_runner() as run, busy_cpus(args.busy_cpus) as beside:

            def slim_run(image: str, label: str) -> dict[str, Any]:
                return slim_report(run(image, label))

            ids = {image: found for image, (_, found) in pins.items()}
            runner = slim_run if args.append else run  # --json keeps every report whole
            rounds = collect_rounds(
                args.image, candidates, args.pairs, runner, earlier, args.max_minutes, keep, image_ids=ids, beside=beside
            )
    used = [n for n in (args.judge_pairs or [DEFAULT_PAIRS]) if 2 <= n <= len({r["round"] for r in rounds})]
    rows = judge(rounds, used, baseline=not args.no_baseline, disjoint=args.disjoint, confirm_pairs=args.confirm_pairs)
    if args.markdown:
        args.markdown.write_text(markdown(rows, rounds, machine()), encoding="utf-8")
        print(f"wrote {args.markdown}")
    if args.docs:
        table, said = docs_views(rounds)
        page, readme = REPO_ROOT / DOCS_PAGE, REPO_ROOT / README_PAGE
        # Both are checked before either is written: a page without its markers leaves the other unchanged too.
        written = with_docs_table(page.read_text(encoding="utf-8"), table)
        front = with_readme_findings(readme.read_text(encoding="utf-8"), said)
        page.write_text(written, encoding="utf-8")
        readme.write_text(front, encoding="utf-8")
        print(f"wrote the table into {DOCS_PAGE} and what it says into {README_PAGE}")
    target = args.append or (None if args.reports else args.json)
    if target:
        # An --append file keeps its rounds only: its table is derived from them (``docs_views``, ``--docs``), where
        # rows stored here would be judged under whichever flags the last append had, and go stale.
        write_atomically(target, {"header": head, "rounds": rounds, **({} if args.append else {"rates": rows})})
        print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"bench_reference_rates: {exc}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        # The way to end a slot early: an --append file was rewritten after every finished round, so it keeps them.
        print("bench_reference_rates: interrupted; an --append file keeps every round finished before", file=sys.stderr)
        sys.exit(130)
