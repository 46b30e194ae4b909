"""A scenario's figures against a previous report's, as data: every bandwidth figure's busbw and every check's
duration compared within the tolerances (``deltas``), and the rule that decides a figure that regressed in the
run from its re-measures (``confirm``, ``majority``). distval/comparing/baseline.py turns them into verdicts."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from distval.comparing.reading import number_of
from distval.config.references import REFERENCES_CASE
from distval.results.bandwidth import busbw_problem
from distval.results.outcome import EXIT_STATUS_CASE, SKIPPED

BASELINE_CASE = "baseline"


DEFAULT_BUSBW_TOLERANCE = 0.20


DEFAULT_DURATION_TOLERANCE = 0.50


DEFAULT_DURATION_SLACK_S = 1.0


# A busbw figure regresses only when its call also got slower by more than this: a call of a small message
# takes 0.2-0.7 ms on a shared 2-core VM with gloo, and its time moved by up to ~0.1 ms between runs of one
# image even as the median of 100+ calls (docs/measurements.md, "Noise"). Lower it on a dedicated runner (NCCL's small
# calls take tens of microseconds); 0 judges by the fraction alone.
DEFAULT_BUSBW_SLACK_US = 100.0


NOT_COMPARED = ("process_group", EXIT_STATUS_CASE, BASELINE_CASE, REFERENCES_CASE)


@dataclass(frozen=True)
class Tolerances:
    busbw: float = DEFAULT_BUSBW_TOLERANCE  # a drop of more than this fraction regresses
    duration: float = DEFAULT_DURATION_TOLERANCE  # a growth of more than this fraction ...
    duration_slack_s: float = DEFAULT_DURATION_SLACK_S  # ... and by more than this many seconds regresses
    busbw_slack_us: float = DEFAULT_BUSBW_SLACK_US  # a busbw drop regresses when the call is this much slower too
    # Whether a duration past the tolerance regresses (--baseline) or is only said (``distval compare`` without
    # --duration-tolerance: around one real failure many checks' times move, and a list of regressions that is
    # mostly durations hides the one that matters).
    durations_judged: bool = True

    def slower(self, before_s: float, after_s: float) -> bool:
        """A duration past the tolerance: longer by more than the fraction and by more than the slack."""
        return after_s > before_s * (1 + self.duration) and after_s - before_s > self.duration_slack_s


@dataclass(frozen=True)
class Delta:
    kind: str  # "busbw" or "duration"
    name: str  # "all_reduce 1MiB" or a testcase name
    old: float
    new: float
    regressed: bool
    old_best: float | None = None  # busbw only: the best figures, where both reports have them
    new_best: float | None = None
    # busbw only: the median dropped past the tolerance, yet the best held or the call is slower by no more
    # than the slack; noise_why says which.
    within_noise: bool = False
    noise_why: str = ""
    # The same figure in each run that re-measured it (None where that run has no such figure): a figure
    # regresses when it regressed in more than half of the runs, the run and its re-measures (``majority``).
    remeasured: tuple[float | None, ...] = ()
    cleared: bool = False  # regressed in the run, not in most of the runs: noise
    votes: int = 0  # of the 1 + len(remeasured) runs, how many saw it regressed (0 where not re-measured)
    # busbw only: the raw TCP yardstick at the same size in either run (``tcp_gbps``), where both reports have it.
    # Evidence, never a verdict: the yardstick is taken once before the sweep, and judging by efficiency did not
    # cancel this machine's noise (docs/measurements.md, "Candidate against reference").
    old_tcp: float | None = None
    new_tcp: float | None = None

    @property
    def best_ratio(self) -> float | None:
        if self.old_best is None or self.new_best is None or not self.old_best:
            return None
        return self.new_best / self.old_best

    @property
    def ratio(self) -> float:
        return self.new / self.old if self.old else float("inf") if self.new else 1.0

    @property
    def tcp_ratio(self) -> float | None:
        """The raw TCP yardstick's new / old at this figure's size, where both runs measured it."""
        if self.old_tcp is None or self.new_tcp is None or not self.old_tcp:
            return None
        return self.new_tcp / self.old_tcp

    @property
    def unit(self) -> str:
        return "GB/s" if self.kind == "busbw" else "s"

    def describe(self, tolerances: Tolerances) -> str:
        if self.kind == "busbw":
            return f"busbw {self.name}: {self.old:.4g} -> {self.new:.4g} GB/s ({self.judged(tolerances)}){self._again()}"
        return f"duration {self.name}: {self.old:.2f} -> {self.new:.2f} s ({self.judged(tolerances)}){self._again()}"

    def judged(self, tolerances: Tolerances) -> str:
        """The ratio and the tolerance it was judged by, e.g. '0.50x, tolerance -20%; best 1.2 -> 0.6 GB/s (0.50x)'."""
        if self.kind == "busbw":
            best = self.best_ratio
            at_best = "" if best is None else f"; best {self.old_best:.4g} -> {self.new_best:.4g} GB/s ({best:.2f}x)"
            tcp = self.tcp_ratio
            raw = "" if tcp is None else f"; raw TCP {self.old_tcp:.4g} -> {self.new_tcp:.4g} GB/s ({tcp:.2f}x)"
            return f"{self.ratio:.2f}x, tolerance -{tolerances.busbw:.0%}{at_best}{raw}"
        return f"{self.ratio:.2f}x, tolerance +{tolerances.duration:.0%} and +{tolerances.duration_slack_s:g} s"

    def _again(self) -> str:
        """What the re-measuring runs saw of this figure, e.g. '; re-measured: 0.98 GB/s (1.02x)'."""
        if not self.remeasured:
            return ""
        unit = " GB/s" if self.kind == "busbw" else " s"
        seen = [
            "not measured"
            if value is None
            else f"{value:.4g}{unit} ({value / self.old:.2f}x)"
            if self.old
            else f"{value:.4g}{unit}"
            for value in self.remeasured
        ]
        return "; re-measured: " + ", ".join(seen) + f" (regressed in {self.votes} of {1 + len(self.remeasured)} runs)"


@dataclass(frozen=True)
class BusbwFigure:
    label: str
    median: float  # GB/s
    best: float | None  # GB/s; None in reports older than best figures
    time_us: float | None  # the median call; None where the report lacks it
    best_time_us: float | None
    tcp_gbps: float | None = None  # the raw TCP yardstick at this size; None without one (yardstick: false, older reports)


def _positive(value: Any) -> float | None:
    """A finite number above 0, else None: a stored report is read back, and its yardstick only ever informs."""
    number = number_of(value)
    return number if number is not None and math.isfinite(number) and number > 0 else None


def busbw_figures(scenario: Mapping[str, Any]) -> dict[tuple[str, int], BusbwFigure]:
    """(operation, size) -> the figure's busbw and call times; a figure whose busbw is no measurement (``refused_busbw``)
    is not one."""
    found: dict[tuple[str, int], BusbwFigure] = {}
    for figure in scenario.get("bandwidth") or []:
        try:
            if _figure_problem(figure) is not None:
                continue
            found[(str(figure["operation"]), int(figure["size"]))] = BusbwFigure(
                str(figure["label"]),
                float(figure["busbw_gbps"]),
                number_of(figure.get("best_busbw_gbps")),
                number_of(figure.get("time_us")),
                number_of(figure.get("best_time_us")),
                _positive(figure.get("tcp_gbps")),
            )
        except (AttributeError, KeyError, TypeError, ValueError):
            continue
    return found


def _figure_problem(figure: Mapping[str, Any]) -> str | None:
    """Why a report's figure has a busbw that is no measurement (0 or below, as a report written before distval
    refused such records may hold); None when it is one."""
    return busbw_problem(str(figure["operation"]), int(figure.get("world_size") or 0), figure)


def refused_busbw(scenario: Mapping[str, Any]) -> dict[tuple[str, int], tuple[str, str]]:
    """(operation, size) -> (label, why) of each figure that ``busbw_figures`` leaves out because its busbw is no
    measurement: a comparison says why, instead of a figure that vanished or a ratio of 0."""
    found: dict[tuple[str, int], tuple[str, str]] = {}
    for figure in scenario.get("bandwidth") or []:
        try:
            problem = _figure_problem(figure)
            if problem is not None:
                found[(str(figure["operation"]), int(figure["size"]))] = (str(figure["label"]), problem)
        except (AttributeError, KeyError, TypeError, ValueError):
            continue
    return found


def _slower_by_more_than(before_us: float | None, after_us: float | None, slack_us: float) -> bool:
    """Whether the call got slower by more than the slack (True where a report lacks the times)."""
    return before_us is None or after_us is None or after_us - before_us > slack_us


def check_durations(scenario: Mapping[str, Any], not_compared: Sequence[str] = NOT_COMPARED) -> dict[str, float]:
    """Each testcase's duration (one JSON report entry's), but the skipped ones and those named in ``not_compared``."""
    found: dict[str, float] = {}
    for case in scenario.get("cases") or []:
        if isinstance(case, dict) and case.get("name") not in not_compared and case.get("status") != SKIPPED:
            try:
                found[str(case["name"])] = float(case["duration_s"])
            except (KeyError, TypeError, ValueError):
                continue
    return found


def deltas(old: Mapping[str, Any], new: Mapping[str, Any], tolerances: Tolerances) -> tuple[Delta, ...]:
    """Every busbw figure and testcase duration both scenarios have, each judged against the tolerances."""
    result: list[Delta] = []
    old_bw, new_bw = busbw_figures(old), busbw_figures(new)
    floor = 1 - tolerances.busbw
    slack = tolerances.busbw_slack_us
    for key in sorted(set(old_bw) & set(new_bw), key=lambda k: list(new_bw).index(k)):
        was, now = old_bw[key], new_bw[key]
        both = was.best is not None and now.best is not None
        best_dropped = not both or (
            now.best < was.best * floor  # type: ignore[operator]
            and _slower_by_more_than(was.best_time_us, now.best_time_us, slack)
        )
        median_dropped = now.median < was.median * floor
        median_slower = median_dropped and _slower_by_more_than(was.time_us, now.time_us, slack)
        bests = (was.best, now.best) if both else (None, None)
        noise = median_dropped and not (median_slower and best_dropped)
        why = ""
        if noise and not median_slower:
            why = f"its median call {now.time_us - was.time_us:+.0f} us, within the {slack:g} us slack"  # type: ignore[operator]
        elif noise and now.best is not None and not now.best < was.best * floor:  # type: ignore[operator]
            why = f"its best held ({now.best / was.best:.2f}x)" if was.best else "its best held"
        elif noise:
            why = f"its best call {now.best_time_us - was.best_time_us:+.0f} us, within the {slack:g} us slack"  # type: ignore[operator]
        delta = Delta("busbw", f"{key[0]} {was.label}", was.median, now.median, median_slower and best_dropped, *bests, noise)
        result.append(dataclasses.replace(delta, noise_why=why, old_tcp=was.tcp_gbps, new_tcp=now.tcp_gbps))
    old_d, new_d = check_durations(old), check_durations(new)
    for name in [n for n in new_d if n in old_d]:
        before, after = old_d[name], new_d[name]
        result.append(Delta("duration", name, before, after, tolerances.durations_judged and tolerances.slower(before, after)))
    return tuple(result)


def majority(regressed: int, cleared: int, runs: int) -> bool | None:
    """The re-measure rule for one figure over ``runs`` runs (the run and its re-measures), of which
    ``regressed`` saw it regressed and ``cleared`` did not: True once it regressed in more than half of
    them, False once it no longer can, None while the runs still to come decide. With an odd number of runs
    this is "the median run regressed"; with two it needs both (a tie clears)."""
    need = runs // 2 + 1
    if regressed >= need:
        return True
    if runs - cleared < need:
        return False
    return None


def _votes(delta: Delta, by_run: Sequence[Mapping[tuple[str, str], Delta]]) -> tuple[int, int, tuple[float | None, ...]]:
    """(runs that saw ``delta`` regressed, runs that did not, the re-measured values) over the run (which saw
    it regressed) and the re-measures; a re-measure that lacks the figure counts as regressed: nothing cleared it."""
    again = [run.get((delta.kind, delta.name)) for run in by_run]
    regressed = 1 + sum(1 for d in again if d is None or d.regressed)
    return regressed, len(again) - regressed + 1, tuple(None if d is None else d.new for d in again)


def confirm(found: Sequence[Delta], remeasures: Sequence[Sequence[Delta]]) -> tuple[Delta, ...]:
    """``found`` (the run's deltas) with each regression checked against the re-measuring runs' deltas of
    the same figures: it stays a regression when it regressed in more than half of the 1 + len(remeasures)
    runs (``majority``)."""
    if not remeasures:
        return tuple(found)
    by_run = [{(d.kind, d.name): d for d in run} for run in remeasures]
    confirmed: list[Delta] = []
    for delta in found:
        if not delta.regressed:
            confirmed.append(delta)
            continue
        regressed, cleared, remeasured = _votes(delta, by_run)
        still = bool(majority(regressed, cleared, 1 + len(remeasures)))
        confirmed.append(dataclasses.replace(delta, regressed=still, remeasured=remeasured, cleared=not still, votes=regressed))
    return tuple(confirmed)


def undecided(found: Sequence[Delta], remeasures: Sequence[Sequence[Delta]], runs: int) -> bool:
    """Whether a figure that regressed in the run is still undecided after ``remeasures`` out of ``runs``
    runs in all (the run and up to ``runs - 1`` re-measures): another re-measure would decide it."""
    by_run = [{(d.kind, d.name): d for d in run} for run in remeasures]
    return any(majority(*_votes(d, by_run)[:2], runs) is None for d in found if d.regressed)


def missing(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The figures ``old`` has and ``new`` lacks: busbw figures ('busbw all_reduce 1MiB') and the durations
    of testcases that ran in ``old`` and did not run in ``new`` ('duration collectives.all_reduce')."""
    old_bw, new_bw = busbw_figures(old), busbw_figures(new)
    gone = [f"busbw {key[0]} {figure.label}" for key, figure in old_bw.items() if key not in new_bw]
    new_d = check_durations(new)
    return gone + [f"duration {name}" for name in check_durations(old) if name not in new_d]


def delta_as_data(delta: Delta) -> dict[str, Any]:
    return {**dataclasses.asdict(delta), "ratio": round(delta.ratio, 4) if math.isfinite(delta.ratio) else None}
