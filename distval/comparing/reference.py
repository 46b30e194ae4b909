"""Candidate against reference in one run: was it the image or the machine? (``distval run --reference``)

``distval run CONFIG --image CANDIDATE --reference REFERENCE`` runs every scenario for both images on the same
Engine(s), in ``pairs`` pairs, one run after the other (``schedule``), and judges the candidate against the
reference pair by pair, so that what the machine did (a burst of load, a cold page cache, a slow disk) hits both
images of a pair alike. A report from another day (``--baseline``) cannot tell a slower image from a slower
night; a pair can.

The order is counterbalanced, ABBA...: pair 1 runs the candidate first, pair 2 the reference first, and so on.
Adjacent runs share the machine's state; alternating who goes first cancels a drift that is linear over two pairs
and the advantage of going second (a page cache warmed by the first run of the same layers). Randomized blocks do
the same on average, but with three pairs one run in four would put the same image first every time.

One testcase ``reference`` per scenario says what the pairs found:

- **a check** (a testcase that validates: not the bookkeeping ones, ``process_group``, ``exit_status``, nor the
  ``baseline``) that failed or errored in a candidate run while it passed on the reference (and failed in no
  reference run) is **caused by the image**: the testcase fails. Failed in both is **not attributable to the
  image** (the machine, the config, or both images): the testcase is an error, saying so; the candidate's own
  testcase still fails the run. Failed on the candidate and skipped (or absent) in every reference run is
  **unpaired**: nothing was compared, so nothing excuses it, and the testcase fails. Failed only on the reference
  is said, and judged by nothing;
- **a figure** (each busbw of the bandwidth check, operation x message size; each check's duration; the scenario's
  time to verdict) that both images have in every pair: the logarithm of the candidate/reference ratio of each pair,
  their mean, and a two-sided 90 % Student-t interval around it (each side 95 %), reported as ratios. A figure
  regresses only when the whole interval lies past the tolerance: busbw when its upper end is below 1 - tolerance,
  a duration when its lower end is above 1 + tolerance and the mean difference is above the slack. One noisy pair
  widens the interval instead of deciding the verdict, so the noise rules of ``--baseline`` (medians against bests,
  the call-time slack, re-measures) are not needed here;
- **nothing compared is not a pass**: with no figure and no check both images ran (the reference image missing,
  every reference run ended early), the testcase fails; where every run of both images was skipped (no GPU the
  Engine can give), it is skipped with their reasons, as the scenario is.

**Confirmation pairs.** A regression must be seen again to be called (PyTorch's regression reports need two
consecutive violations; asv re-runs a benchmark before it calls a regression). Where, after a scenario's ``pairs``
pairs, any of its figures regresses by the rule above (``regressed_figures``: the run stage asks it, the one rule),
the run stage runs that scenario for ``confirm_pairs`` more pairs, continuing the ABBA order, and the figures are
judged on every pair. A figure is then called regressed only where it both triggered the confirmation and regresses
again over all the pairs: a load swing that hit two or three consecutive pairs the same way is diluted by pairs that
it did not hit, while a real slowdown is in every pair. So the confirmation never makes a verdict harsher than the
first pairs' alone. The trigger judges the scenario's figures by themselves (its rank test shares the significance
among this scenario's figures only, the run's others not yet measured), which is at least as ready to trigger as the
final judgement over the whole run: no figure the final rule would call regressed after the first pairs escapes the
confirmation. A check's failure is judged as without confirmation (it triggers nothing), and a confirmation run that
fails a check fails the testcase like any pair's. Confirmation pairs that did not all complete fail the testcase:
what triggered them stands.

A candidate run after the first that fails (pairs 2...) fails the testcase too: a failure in any run is a failure.
The first candidate run is the scenario's own result (its testcases, figures and logs in every report); the others
and the reference's runs are in the ``reference`` testcase's details.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from distval.comparing.baseline import skip_reasons
from distval.comparing.deltas import (
    DEFAULT_BUSBW_TOLERANCE,
    DEFAULT_DURATION_SLACK_S,
    DEFAULT_DURATION_TOLERANCE,
    busbw_figures,
    check_durations,
)
from distval.comparing.rank_test import FAMILY_ALPHA, mann_whitney_greater, per_figure_alpha
from distval.config.references import REFERENCES_CASE
from distval.results.bandwidth import times_of
from distval.results.outcome import ERROR, FAILED, PASSED, SKIPPED, CaseResult
from distval_suite.bandwidth_figures import SAMPLES_MAX

REFERENCE_CASE = "reference"
CANDIDATE, REFERENCE = "candidate", "reference"
DEFAULT_PAIRS = 3
# More pairs where a figure regressed after the first (the module's docstring); 0: none. Two pairs give the ones that
# triggered them a fresh look in both orders (ABBA) at the cost of 4 more runs of that scenario only.
DEFAULT_CONFIRM_PAIRS = 2
MAX_PAIRS = 50  # every pair of a scenario, confirmation pairs included
# --baseline's tolerances. Measured on the same runs (docs/measurements.md, "Candidate against reference"): at -10 %
# one comparison of an unchanged image in four failed on one of its 64 busbw figures, at -20 % none, and both
# slower images were caught in every comparison at either; a pair does not cancel this machine's whole-run noise
# well enough for a tighter default.
DEFAULT_PAIRED_BUSBW_TOLERANCE = DEFAULT_BUSBW_TOLERANCE
DEFAULT_PAIRED_DURATION_TOLERANCE = DEFAULT_DURATION_TOLERANCE
DEFAULT_PAIRED_DURATION_SLACK_S = DEFAULT_DURATION_SLACK_S
# Bookkeeping testcases: not checks of the image (the group forming and the containers' life are judged by the
# checks that need them), and the comparisons' own testcases.
NOT_CHECKS = ("process_group", "exit_status", "baseline", REFERENCE_CASE, REFERENCES_CASE)
BAD = (FAILED, ERROR)
# Whose failure a check's failure is (``attribute_checks``).
THE_IMAGE = "the image"  # failed on the candidate, passed on the reference and never failed there
NOT_ATTRIBUTABLE = "not attributable"  # failed on both images
UNPAIRED = "the candidate, unpaired"  # failed on the candidate, never run on the reference (skipped or absent)
REFERENCE_ONLY = "the reference only"
# Student's t, 0.95 quantile (two-sided 90 %), by degrees of freedom; past the table, the normal's with a
# first-order correction (within 0.2 % of the exact value at 31 and above).
_T95: tuple[float, ...] = (
    *(6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812, 1.796, 1.782, 1.771, 1.761, 1.753),
    *(1.746, 1.740, 1.734, 1.729, 1.725, 1.721, 1.717, 1.714, 1.711, 1.708, 1.706, 1.703, 1.701, 1.699, 1.697),
)


def t95(degrees: int) -> float:
    """Student's t 0.95 quantile for ``degrees`` degrees of freedom (>= 1)."""
    if degrees < 1:
        raise ValueError("at least one degree of freedom")
    if degrees <= len(_T95):
        return _T95[degrees - 1]
    z = statistics.NormalDist().inv_cdf(0.95)
    return z + (z**3 + z) / (4 * degrees)


def schedule(pairs: int) -> tuple[tuple[str, str], ...]:
    """The order of each pair's two runs: ABBA... (see the module's docstring)."""
    return tuple((CANDIDATE, REFERENCE) if index % 2 == 0 else (REFERENCE, CANDIDATE) for index in range(pairs))


@dataclass(frozen=True)
class PairedTolerances:
    busbw: float = DEFAULT_PAIRED_BUSBW_TOLERANCE
    duration: float = DEFAULT_PAIRED_DURATION_TOLERANCE
    duration_slack_s: float = DEFAULT_PAIRED_DURATION_SLACK_S


@dataclass(frozen=True)
class PairedFigure:
    kind: str  # "busbw" (higher is better), "duration" or "time to verdict" (lower is better)
    name: str
    candidate: tuple[float, ...]  # per pair
    reference: tuple[float, ...]
    ratio: float  # candidate / reference: the geometric mean over the pairs
    low: float  # the 90 % interval of the ratio
    high: float
    regressed: bool
    # busbw with per-iteration samples on both sides: the rank test's one-sided p-value that the candidate's calls
    # are slower, and the significance it had to reach (FAMILY_ALPHA over the figures of the run); None without.
    p_value: float | None = None
    alpha: float | None = None

    @property
    def label(self) -> str:
        """What names the figure in a confirmation's trigger: its kind and name ("busbw all_reduce 1MiB")."""
        return f"{self.kind} {self.name}"

    @property
    def unit(self) -> str:
        return "GB/s" if self.kind == "busbw" else "s"

    def describe(self) -> str:
        return (
            f"{self.kind} {self.name}: {self.ratio:.2f}x the reference (90% interval {self.low:.2f}..{self.high:.2f}x "
            f"over {len(self.candidate)} pairs; candidate {_values(self.candidate)}, reference {_values(self.reference)} "
            f"{self.unit}"
            + (f"; rank test p={self.p_value:.2g}, needed < {self.alpha:.2g}" if self.p_value is not None and self.alpha else "")
            + ")"
        )


def _values(values: Sequence[float]) -> str:
    return "/".join(f"{v:.4g}" for v in values)


def paired(
    kind: str,
    name: str,
    candidate: Sequence[float],
    reference: Sequence[float],
    tolerances: PairedTolerances,
    samples: tuple[Sequence[float], Sequence[float]] | None = None,
    alpha: float = FAMILY_ALPHA,
) -> PairedFigure:
    """One figure over the pairs (``candidate[i]`` and ``reference[i]`` from pair i; every value > 0). ``samples``:
    busbw's per-iteration call times of every candidate run and of every reference run, pooled; ``alpha`` the
    significance the rank test must reach for this figure (``per_figure_alpha`` of the run's figures)."""
    logs = [math.log(c / r) for c, r in zip(candidate, reference, strict=True)]
    mean = statistics.fmean(logs)
    spread = t95(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs)) if len(logs) > 1 else math.inf
    low, high = math.exp(mean - spread), math.exp(mean + spread) if math.isfinite(spread) else math.inf
    p_value = None
    if kind == "busbw":
        # Past the tolerance by the pairs' interval, and -- where both images wrote their iterations -- slower by
        # the rank test at the run's corrected significance: either alone raises more false alarms than a run of
        # many figures can afford (the module's docstring).
        p_value = mann_whitney_greater(*samples) if samples is not None else None
        regressed = high < 1 - tolerances.busbw and (p_value is None or p_value < alpha)
    else:
        slower_by_s = statistics.fmean(c - r for c, r in zip(candidate, reference, strict=True))
        regressed = low > 1 + tolerances.duration and slower_by_s > tolerances.duration_slack_s
    return PairedFigure(
        kind,
        name,
        tuple(candidate),
        tuple(reference),
        math.exp(mean),
        low,
        high,
        regressed,
        p_value,
        alpha if p_value is not None else None,
    )


def _positive(value: Any) -> float | None:
    number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    return float(number) if number is not None and math.isfinite(number) and number > 0 else None


def _figure_values(entry: Mapping[str, Any]) -> dict[tuple[str, str], float]:
    """(kind, name) -> value of every figure of one run's JSON report entry that can be paired (finite, > 0)."""
    found: dict[tuple[str, str], float] = {}
    for (operation, _size), figure in busbw_figures(entry).items():
        value = _positive(figure.median)
        if value is not None:
            found[("busbw", f"{operation} {figure.label}")] = value
    for name, seconds in check_durations(entry, NOT_CHECKS).items():
        value = _positive(seconds)
        if value is not None:
            found[("duration", name)] = value
    verdict = _positive(entry.get("duration_s"))
    if verdict is not None:
        found[("time to verdict", "scenario")] = verdict
    return found


def _samples(entry: Mapping[str, Any]) -> dict[str, tuple[float, ...]]:
    """busbw figure name -> its per-iteration call times (microseconds), where the run's entry has usable ones."""
    found: dict[str, tuple[float, ...]] = {}
    for item in entry.get("bandwidth") or []:
        if isinstance(item, dict):
            times = times_of(item.get("samples_us"), SAMPLES_MAX)
            if times is not None:
                found[f"{item.get('operation')} {item.get('label')}"] = times
    return found


def _pooled(runs: Sequence[Mapping[str, tuple[float, ...]]], name: str) -> list[float] | None:
    """One figure's samples of every run pooled, or None where a run has none (never judged on part of the runs)."""
    if not runs or any(name not in run for run in runs):
        return None
    return [value for run in runs for value in run[name]]


def sampled_figures(candidates: Sequence[Mapping[str, Any]], references: Sequence[Mapping[str, Any]]) -> int:
    """How many busbw figures of one scenario the rank test judges: the scenario's share of the run's family."""
    pairs = list(zip(candidates, references, strict=False))
    return _sampled_count([_samples(c) for c, _ in pairs], [_samples(r) for _, r in pairs])


def _sampled_count(c_runs: Sequence[Mapping[str, tuple[float, ...]]], r_runs: Sequence[Mapping[str, tuple[float, ...]]]) -> int:
    """How many of the candidate's first run's sampled figures every run of both images has samples of."""
    names = c_runs[0] if c_runs else {}
    return sum(1 for name in names if _pooled(c_runs, name) is not None and _pooled(r_runs, name) is not None)


def paired_figures(
    candidates: Sequence[Mapping[str, Any]],
    references: Sequence[Mapping[str, Any]],
    tolerances: PairedTolerances,
    family: int | None = None,
) -> tuple[PairedFigure, ...]:
    """Every figure both images have in every pair (pairs: ``zip(candidates, references)``), in the candidate's order.
    ``family``: the busbw figures with samples in the whole run (``sampled_figures`` summed over its scenarios); None:
    this scenario's own."""
    pairs = list(zip(candidates, references, strict=False))
    if not pairs:
        return ()
    by_pair = [(_figure_values(c), _figure_values(r)) for c, r in pairs]
    c_runs, r_runs = [_samples(c) for c, _ in pairs], [_samples(r) for _, r in pairs]
    alpha = per_figure_alpha(_sampled_count(c_runs, r_runs) if family is None else family)
    first = by_pair[0][0]
    keys = [key for key in first if all(key in c and key in r for c, r in by_pair)]
    figures = []
    for kind, name in keys:
        c_samples, r_samples = _pooled(c_runs, name), _pooled(r_runs, name)
        samples = (c_samples, r_samples) if kind == "busbw" and c_samples is not None and r_samples is not None else None
        values = [c[(kind, name)] for c, _ in by_pair], [r[(kind, name)] for _, r in by_pair]
        figures.append(paired(kind, name, *values, tolerances, samples, alpha))
    return tuple(figures)


def regressed_figures(
    candidates: Sequence[Mapping[str, Any]], references: Sequence[Mapping[str, Any]], tolerances: PairedTolerances
) -> tuple[str, ...]:
    """The labels of one scenario's figures that regress over its pairs so far: what triggers its confirmation pairs
    (the module's docstring). The rank test's family is the scenario's own figures: the rest of the run is not
    measured yet, and a smaller family only makes the trigger readier than the final judgement."""
    return tuple(figure.label for figure in paired_figures(candidates, references, tolerances) if figure.regressed)


@dataclass(frozen=True)
class Confirmation:
    """Confirmation pairs asked for one scenario: ``pairs`` more after its first ``after``, because the figures
    ``triggered_by`` (their labels) regressed over those."""

    after: int
    pairs: int
    triggered_by: tuple[str, ...]


@dataclass(frozen=True)
class CheckAttribution:
    name: str
    candidate: tuple[str, ...]  # the testcase's status in each candidate run
    reference: tuple[str, ...]  # ... in each reference run ("absent": not in that run)
    verdict: str  # THE_IMAGE, NOT_ATTRIBUTABLE, UNPAIRED, REFERENCE_ONLY, "" (no failure)


def _statuses(entry: Mapping[str, Any]) -> dict[str, str]:
    return {
        str(case.get("name")): str(case.get("status"))
        for case in entry.get("cases") or []
        if isinstance(case, dict) and case.get("name") not in NOT_CHECKS
    }


def attribute_checks(
    candidates: Sequence[Mapping[str, Any]], references: Sequence[Mapping[str, Any]]
) -> tuple[CheckAttribution, ...]:
    """Each check either image ran, with whose failure a failure is (see the module's docstring)."""
    cand = [_statuses(entry) for entry in candidates]
    ref = [_statuses(entry) for entry in references]
    names = list(dict.fromkeys(name for run in cand + ref for name in run))
    found = []
    for name in names:
        seen_c = tuple(run.get(name, "absent") for run in cand)
        seen_r = tuple(run.get(name, "absent") for run in ref)
        candidate_bad = any(s in BAD for s in seen_c)
        reference_bad = any(s in BAD for s in seen_r)
        if candidate_bad and reference_bad:
            verdict = NOT_ATTRIBUTABLE
        elif candidate_bad and PASSED in seen_r:
            verdict = THE_IMAGE
        elif candidate_bad:
            # Skipped or absent in every reference run: nothing shows the machine at fault, and a candidate's
            # failure is never excused by a comparison that did not happen.
            verdict = UNPAIRED
        elif reference_bad:
            verdict = REFERENCE_ONLY
        else:
            verdict = ""
        found.append(CheckAttribution(name, seen_c, seen_r, verdict))
    return tuple(found)


def _compared(check: CheckAttribution) -> bool:
    """Whether both images ran the check (in at least one run each), so that the pair says something about it."""
    ran = (PASSED, FAILED, ERROR)
    return any(s in ran for s in check.candidate) and any(s in ran for s in check.reference)


def reference_case(
    candidates: Sequence[Mapping[str, Any]],
    references: Sequence[Mapping[str, Any]],
    order: Sequence[tuple[str, str]],
    reference_image: str,
    tolerances: PairedTolerances,
    family: int | None = None,
    confirmation: Confirmation | None = None,
) -> CaseResult:
    """The ``reference`` testcase of one scenario: ``candidates`` and ``references`` are the JSON report entries of its
    runs, pair by pair (the first candidate run is the scenario's own); ``order`` each pair's order as it ran;
    ``family`` the run's busbw figures the rank test judges (``paired_figures``); ``confirmation`` the confirmation
    pairs the run stage asked for, if any (then a figure regresses only where it triggered them and regresses again
    over every pair)."""
    figures = paired_figures(candidates, references, tolerances, family)
    if confirmation is not None:
        figures = tuple(replace(f, regressed=f.regressed and f.label in confirmation.triggered_by) for f in figures)
    checks = attribute_checks(candidates, references)
    compared_checks = [c for c in checks if _compared(c)]
    pairs = min(len(candidates), len(references))
    confirmed = None
    if confirmation is not None:
        confirmed = {
            "after_pairs": confirmation.after,
            "pairs": confirmation.pairs,
            "ran": max(0, pairs - confirmation.after),
            "triggered_by": list(confirmation.triggered_by),
            "confirmed": [f.label for f in figures if f.regressed],
        }
    reference_id = next((str(r.get("image_id")) for r in references if r.get("image_id")), None)
    details: dict[str, Any] = {
        "reference_image": reference_image,
        "reference_image_id": reference_id,
        "pairs": pairs,
        # Confirmation pairs run because a figure regressed after the first pairs (None: none were asked).
        "confirmation": confirmed,
        "order": [f"{first} first" for first, _ in order[:pairs]],
        "tolerances": asdict(tolerances),
        "figures": [_figure_data(f) for f in figures],
        "checks": [asdict(c) for c in checks if c.verdict],
        "runs": {
            CANDIDATE: [_run_data(e) for e in candidates],
            REFERENCE: [_run_data(e) for e in references],
        },
    }
    against = f"the reference {reference_image}" + (f" ({reference_id[:19]})" if reference_id else "")
    caused = [c for c in checks if c.verdict == THE_IMAGE]
    unpaired = [c for c in checks if c.verdict == UNPAIRED]
    regressed = [f for f in figures if f.regressed]
    shared = [c for c in checks if c.verdict == NOT_ATTRIBUTABLE]
    problems = []
    if caused:
        problems.append(
            f"expected no check to fail on the candidate that passes on {against}; caused by the image: "
            + "; ".join(f"{c.name} ({'/'.join(c.candidate)} vs {'/'.join(c.reference)})" for c in caused[:10])
        )
    if unpaired:
        problems.append(
            f"expected no check to fail on the candidate that {against} did not run; failed on the candidate, "
            "skipped or absent on the reference (nothing compared, nothing excuses it): "
            + "; ".join(f"{c.name} ({'/'.join(c.candidate)} vs {'/'.join(c.reference)})" for c in unpaired[:10])
        )
    if regressed:
        problems.append(
            f"expected no figure past the tolerance against {against} (busbw -{tolerances.busbw:.0%}, durations "
            f"+{tolerances.duration:.0%} and +{tolerances.duration_slack_s:g} s); {len(regressed)} of {len(figures)} "
            + (
                f"regressed over the first {confirmation.after} pairs and again over all {pairs}: "
                if confirmation is not None
                else "regressed: "
            )
            + "; ".join(f.describe() for f in regressed[:10])
        )
    if confirmation is not None and pairs < confirmation.after + confirmation.pairs:
        # Stopped before the confirmation was complete: what triggered it was neither confirmed nor contradicted.
        problems.append(
            f"expected {confirmation.pairs} confirmation pairs after the first {confirmation.after} (run because "
            f"{listed(confirmation.triggered_by)} regressed there); {max(0, pairs - confirmation.after)} completed"
        )
    if pairs < 2:
        # One pair gives a ratio, not an interval: no figure could regress, and a pass would say nothing.
        problems.append(f"expected at least 2 complete pairs with {against} to judge by; {pairs} ran")
    elif not compared_checks:
        # Every figure but the time to verdict comes from a check: without a check that both images ran, the pairs
        # compared nothing (a reference that errored before its checks still has a time to verdict).
        problems.append(
            f"expected {against} and the candidate to have run something to compare in {pairs} pair(s); "
            + (
                "no reference run finished"
                if not references
                else "no figure and no check is in both"
                if not figures
                else "no check ran on both images (a time to verdict alone compares nothing)"
            )
        )
    runs = [*candidates, *references]
    if not compared_checks and references and all(e.get("status") == SKIPPED for e in runs):
        # Skipped on both images (no GPU the Engine can give, every check version-gated): the scenario's own skip
        # says why; a comparison that had nothing to compare on either image neither passes nor fails it.
        return CaseResult(
            REFERENCE_CASE,
            SKIPPED,
            f"the scenario was skipped on the candidate and on {against}: {skip_reasons(runs)}",
            0.0,
            details=details,
        )
    if problems:
        return CaseResult(REFERENCE_CASE, FAILED, "; and ".join(problems), 0.0, details=details)
    if shared:
        return CaseResult(
            REFERENCE_CASE,
            ERROR,
            f"not attributable to the image: {', '.join(c.name for c in shared[:10])} failed on {against} too (the "
            "machine, the config, or both images); the candidate is no worse than the reference",
            0.0,
            details=details,
        )
    busbw = [f for f in figures if f.kind == "busbw"]
    lowest = min(busbw, key=lambda f: f.ratio, default=None)
    reference_only = [c.name for c in checks if c.verdict == REFERENCE_ONLY]
    return CaseResult(
        REFERENCE_CASE,
        PASSED,
        f"{len(figures)} figure(s) and {len(compared_checks)} check(s) paired with {against} over {pairs} pair(s), none "
        "worse on the candidate"
        + (
            f"; {pairs - confirmation.after} of them confirmation pairs, run because {listed(confirmation.triggered_by)} "
            f"regressed over the first {confirmation.after}, not confirmed over all {pairs}"
            if confirmation is not None
            else ""
        )
        + (f"; lowest busbw {lowest.describe()}" if lowest is not None else "")
        + (f"; failed on the reference only: {', '.join(reference_only[:10])}" if reference_only else ""),
        0.0,
        details=details,
    )


def listed(labels: Sequence[str]) -> str:
    """Figure labels for a sentence: the first ten, and how many more."""
    return ", ".join(labels[:10]) + (f" and {len(labels) - 10} more" if len(labels) > 10 else "")


def _figure_data(figure: PairedFigure) -> dict[str, Any]:
    data = asdict(figure)
    data.update(
        ratio=round(figure.ratio, 4), low=round(figure.low, 4), high=round(figure.high, 4) if math.isfinite(figure.high) else None
    )
    return data


def _run_data(entry: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "status": entry.get("status"),
        "image": entry.get("image"),
        "image_id": entry.get("image_id"),
        "duration_s": entry.get("duration_s"),
        "started_at": entry.get("started_at"),
    }
