"""What a ``baseline.Comparison`` says, item by item: each scenario's verdict, each testcase (its verdict and its
duration) and each busbw figure of both reports is a regression, an improvement, unchanged or not compared;
why the comparison compared nothing, where it did; and the verdict with ``distval compare``'s exit code. The
text, Markdown and JSON views (comparison_text.py, comparison_markdown.py, comparison_json.py) render this one
judgement, so they cannot disagree on what regressed.

An improvement is the same rule the other way round: a figure that would regress if NEW were the baseline of
OLD (``baseline.deltas(new, old)``), so noise within the tolerance is neither.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from distval.comparing.baseline import Comparison, ScenarioComparison
from distval.comparing.deltas import BASELINE_CASE, Delta, Tolerances, busbw_figures, deltas, refused_busbw
from distval.comparing.reading import iterations_of, unusable
from distval.errors import EXIT_CHECKS_FAILED, EXIT_NOTHING_VALIDATED, EXIT_PASSED
from distval.results.outcome import ERROR, FAILED, PASSED, SKIPPED

REGRESSION = "regression"
IMPROVEMENT = "improvement"
UNCHANGED = "unchanged"
NOT_COMPARED = "not-compared"  # on one side only (a new scenario, testcase or figure): nothing to compare it with
# A duration past the tolerance where durations are not judged (compare without --duration-tolerance): said, not
# counted against the image; its verdict is judged all the same.
NOTE = "note"
STATUSES = (REGRESSION, IMPROVEMENT, UNCHANGED, NOTE, NOT_COMPARED)

SCENARIO = "scenario"  # the scenario's verdict (or the scenario itself, when one side lacks it)
TESTCASE = "testcase"  # a testcase's verdict and duration
BUSBW = "busbw"  # a bandwidth figure's busbw


@dataclass(frozen=True)
class Verdict:
    name: str
    exit_code: int
    meaning: str  # for ``distval compare --help``


NO_REGRESSION = Verdict("no regression", EXIT_PASSED, "figures were compared and none regressed")
REGRESSED = Verdict(
    "regressed",
    EXIT_CHECKS_FAILED,
    "a regression: a figure past the tolerance, a verdict that got worse (passed, now failed or errored; run, now skipped; or "
    "gone), a scenario or figure of OLD missing from NEW",
)
# Nothing compared is not a pass, and not a regression either: it exits with errors.py's code for "nothing was
# validated", so that a pipeline can tell "the image got worse" from "these two reports could not be compared".
NOTHING_COMPARED = Verdict(
    "nothing compared",
    EXIT_NOTHING_VALIDATED,
    "nothing compared: a report has no scenario or its run ended early, no scenario matched, or a matched "
    "scenario has no figure that both reports have",
)
VERDICTS = (NO_REGRESSION, REGRESSED, NOTHING_COMPARED)

# How good a verdict is: a change to a higher rank is a regression. An unknown status ranks with failures.
_RANKS = {PASSED: 0, SKIPPED: 1, FAILED: 2, ERROR: 2}


def _rank(status: object) -> int:
    return _RANKS.get(str(status), 2)


@dataclass(frozen=True)
class Item:
    """One compared thing of one scenario, with what each report says of it (None: that report lacks it)."""

    scenario: str
    kind: str  # SCENARIO, TESTCASE or BUSBW
    name: str  # the testcase, the figure ('all_reduce 64KiB'), or the scenario's name again
    status: str  # one of STATUSES
    old: Mapping[str, Any] | None
    new: Mapping[str, Any] | None
    ratio: float | None  # new / old of the figure (the duration, the busbw median); None where none or infinite
    why: str  # what changed and by which rule; "" when nothing did

    @property
    def label(self) -> str:
        return f"scenario {self.scenario}" if self.kind == SCENARIO else f"{self.scenario}: {self.kind} {self.name}"


@dataclass(frozen=True)
class ScenarioJudgement:
    comparison: ScenarioComparison
    items: tuple[Item, ...]  # the SCENARIO item first


@dataclass(frozen=True)
class Judgement:
    comparison: Comparison
    scenarios: tuple[ScenarioJudgement, ...]
    nothing_compared: tuple[str, ...]  # why the comparison compared nothing (each fails it), one line each

    @property
    def items(self) -> tuple[Item, ...]:
        return tuple(item for scenario in self.scenarios for item in scenario.items)

    def having(self, status: str) -> tuple[Item, ...]:
        return tuple(item for item in self.items if item.status == status)

    @property
    def verdict(self) -> Verdict:
        if self.having(REGRESSION):
            return REGRESSED
        # Fails closed: a reason said, or (whatever the reasons missed) not one figure compared.
        if self.nothing_compared or not any(s.comparison.deltas for s in self.scenarios):
            return NOTHING_COMPARED
        return NO_REGRESSION

    @property
    def exit_code(self) -> int:
        return self.verdict.exit_code


def judge(comparison: Comparison) -> Judgement:
    """Every item of every scenario of the comparison, and why it compared nothing, if it did."""
    t = comparison.tolerances
    scenarios = tuple(ScenarioJudgement(s, tuple(_items(s, t))) for s in comparison.scenarios)
    reasons = unusable(comparison.old, "OLD") + unusable(comparison.new, "NEW")
    matched = [s for s in comparison.scenarios if s.old is not None and s.new is not None]
    if not reasons and not matched:
        reasons.append("no scenario of NEW matched one of OLD (by scenario_hash, scenario_hash_any_image or name)")
    reasons += [
        f"scenario {s.name} (matched by {s.matched_by}): the reports have no busbw figure or check's duration in common"
        for s in matched
        if not s.deltas
    ]
    return Judgement(comparison, scenarios, tuple(reasons))


def verdict_line(code: int) -> str:
    """What ``code`` means for ``distval compare``, from VERDICTS: '1 a regression ...; or nothing compared ...'."""
    return "; or ".join(v.meaning for v in VERDICTS if v.exit_code == code)


def _items(scenario: ScenarioComparison, t: Tolerances) -> list[Item]:
    name = scenario.name
    old_side, new_side = _scenario_side(scenario.old), _scenario_side(scenario.new)
    if scenario.old is None:
        return [Item(name, SCENARIO, name, NOT_COMPARED, None, new_side, None, "only in NEW: a new scenario")]
    if scenario.new is None:
        return [Item(name, SCENARIO, name, REGRESSION, old_side, None, None, "in OLD, not in NEW: the scenario vanished")]
    before, after = _rank(scenario.old.get("status")), _rank(scenario.new.get("status"))
    skipped_now = scenario.new.get("status") == SKIPPED and scenario.old.get("status") != SKIPPED
    status, why = (
        (REGRESSION, f"{scenario.old.get('status')} in OLD, skipped in NEW: not validated")
        if skipped_now
        else (REGRESSION, "verdict worse")
        if after > before
        else (IMPROVEMENT, "verdict better")
        if after < before
        else (UNCHANGED, "")
    )
    forward = {(d.kind, d.name): d for d in scenario.deltas}
    backward = {(d.kind, d.name): d for d in deltas(scenario.new, scenario.old, t)}
    return [
        Item(name, SCENARIO, name, status, old_side, new_side, None, why),
        *_testcases(scenario, forward, backward, t),
        *_figures(scenario, forward, backward, t),
    ]


def _scenario_side(side: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if side is None:
        return None
    properties = side.get("properties") if isinstance(side.get("properties"), dict) else {}
    return {
        "status": str(side.get("status")),
        "image": str(side.get("image")),
        "torch": str((properties or {}).get("torch_version", "unknown")),
        "duration_s": _number(side.get("duration_s")),
        "iterations": iterations_of(side),
    }


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _cases(scenario: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """name -> {status, duration_s} of each testcase (the first of a name)."""
    found: dict[str, dict[str, Any]] = {}
    for case in scenario.get("cases") or []:
        if isinstance(case, dict) and "name" in case:
            found.setdefault(
                str(case["name"]), {"status": str(case.get("status")), "duration_s": _number(case.get("duration_s"))}
            )
    return found


def _ratio(delta: Delta | None) -> float | None:
    return delta.ratio if delta is not None and math.isfinite(delta.ratio) else None


def _testcases(
    scenario: ScenarioComparison,
    forward: Mapping[tuple[str, str], Delta],
    backward: Mapping[tuple[str, str], Delta],
    t: Tolerances,
) -> list[Item]:
    assert scenario.old is not None and scenario.new is not None
    old_cases, new_cases = _cases(scenario.old), _cases(scenario.new)
    found = []
    for name in [*new_cases, *(n for n in old_cases if n not in new_cases)]:
        before, after = old_cases.get(name), new_cases.get(name)
        delta, reverse = forward.get(("duration", name)), backward.get(("duration", name))
        worse, better = [], []
        if before is not None and after is not None:
            if after["status"] == SKIPPED and before["status"] != SKIPPED:
                # Failed, now skipped is no fix: the check did not run, so nothing shows the failure gone.
                worse.append(f"{before['status']} in OLD, skipped in NEW: not validated")
            elif _rank(after["status"]) > _rank(before["status"]):
                worse.append("verdict worse")
            elif _rank(after["status"]) < _rank(before["status"]):
                better.append("verdict better")
        elif name == BASELINE_CASE:
            pass  # --baseline's testcase, not a check of the image: one report made with --baseline, one without
        elif before is not None and before["status"] == PASSED:
            worse.append("passed in OLD, gone from NEW")
        notes = []
        if delta is not None and delta.regressed:
            worse.append(f"slower past the tolerance: {delta.judged(t)}")
        elif reverse is not None and reverse.regressed:
            better.append(f"faster past the tolerance: {_ratio(delta) or 0:.2f}x")
        elif delta is not None and not t.durations_judged and (t.slower(delta.old, delta.new) or t.slower(delta.new, delta.old)):
            faster = t.slower(delta.new, delta.old)
            notes.append(
                f"{'faster' if faster else 'slower'}: {delta.old:.2f} -> {delta.new:.2f} s "
                f"({_ratio(delta) or 0:.2f}x; durations are judged with --duration-tolerance)"
            )
        # A check that ran in OLD (its duration is a figure) and did not run in NEW: the figure is missing, as
        # --baseline says ("a figure the baseline has and the run lacks fails"), whatever the verdicts.
        ran_before = before is not None and before["status"] != SKIPPED and before["duration_s"] is not None
        ran_after = after is not None and after["status"] != SKIPPED and after["duration_s"] is not None
        if ran_before and not ran_after and not worse and name != BASELINE_CASE:
            worse.append("ran in OLD, did not run in NEW")
        status = (
            REGRESSION
            if worse
            else IMPROVEMENT
            if better
            else NOTE
            if notes
            else UNCHANGED
            if before is not None and after is not None
            else NOT_COMPARED
        )
        why = "; ".join(worse or better or notes) or ("only in NEW" if before is None else "only in OLD" if after is None else "")
        found.append(Item(scenario.name, TESTCASE, name, status, before, after, _ratio(delta), why))
    return found


def _figures(
    scenario: ScenarioComparison,
    forward: Mapping[tuple[str, str], Delta],
    backward: Mapping[tuple[str, str], Delta],
    t: Tolerances,
) -> list[Item]:
    assert scenario.old is not None and scenario.new is not None
    old_bw, new_bw = busbw_figures(scenario.old), busbw_figures(scenario.new)
    old_refused, new_refused = refused_busbw(scenario.old), refused_busbw(scenario.new)
    found = []
    for key in [*new_bw, *(k for k in old_bw if k not in new_bw)]:
        name = f"{key[0]} {(new_bw.get(key) or old_bw[key]).label}"
        before, after = old_bw.get(key), new_bw.get(key)
        sides = [
            None
            if f is None
            else {"busbw_gbps": f.median, "best_busbw_gbps": f.best, "time_us": f.time_us, "best_time_us": f.best_time_us}
            for f in (before, after)
        ]
        delta, reverse = forward.get(("busbw", name)), backward.get(("busbw", name))
        if after is None and key in new_refused:  # fails closed: a figure that is no measurement is never a pass
            status, why = REGRESSION, f"in NEW no measurement, refused: {new_refused[key][1]}"
        elif after is None:
            status, why = REGRESSION, "in OLD, not in NEW: the figure vanished"
        elif before is None and key in old_refused:
            status, why = NOT_COMPARED, f"in OLD no measurement, refused: {old_refused[key][1]}"
        elif before is None:
            status, why = NOT_COMPARED, "only in NEW"
        elif delta is not None and delta.regressed:
            status, why = REGRESSION, f"dropped past the tolerance: {delta.judged(t)}"
        elif reverse is not None and reverse.regressed:
            status, why = IMPROVEMENT, f"rose past the tolerance: {_ratio(delta) or 0:.2f}x"
        elif delta is not None and delta.within_noise:
            status, why = UNCHANGED, f"median past tolerance, {delta.noise_why}: noise"
        else:
            status, why = UNCHANGED, ""
        found.append(Item(scenario.name, BUSBW, name, status, sides[0], sides[1], _ratio(delta), why))
    # Refused in both, or in NEW and absent from OLD: said too. NEW's image wrote a figure that is no measurement, so it
    # regresses (fails closed, whatever OLD holds); OLD's alone compares nothing.
    for key in [*new_refused, *(k for k in old_refused if k not in new_refused)]:
        if key in old_bw or key in new_bw:
            continue
        label = (new_refused.get(key) or old_refused[key])[0]
        refusals = (("OLD", old_refused), ("NEW", new_refused))
        why = "; ".join(f"in {side} no measurement, refused: {refused[key][1]}" for side, refused in refusals if key in refused)
        status = REGRESSION if key in new_refused else NOT_COMPARED
        found.append(Item(scenario.name, BUSBW, f"{key[0]} {label}", status, None, None, None, why))
    return found


def cell(item: Item, side: Mapping[str, Any] | None) -> str:
    """One side of an item as a table cell: 'passed 1.20 s', '0.5 GB/s', 'failed', or '-' where it is absent."""
    if side is None:
        return "-"
    if item.kind == BUSBW:
        return f"{side['busbw_gbps']:.4g} GB/s"
    duration = side.get("duration_s")
    return str(side["status"]) + (f" {duration:.2f} s" if item.kind == TESTCASE and duration is not None else "")


def ratio_cell(item: Item) -> str:
    return "" if item.ratio is None else f"{item.ratio:.2f}x"


def line(item: Item) -> str:
    """An item on one line: what, old -> new, and why, e.g. 'bw: busbw all_reduce 64KiB: 1 -> 0.5 GB/s (...)'."""
    return f"{item.label}: {cell(item, item.old)} -> {cell(item, item.new)}" + (f" ({item.why})" if item.why else "")


def unchanged_count(items: Sequence[Item]) -> str:
    """'17 unchanged (12 testcases, 5 busbw figures)' for the unchanged testcases and figures of ``items``."""
    cases = sum(1 for i in items if i.status == UNCHANGED and i.kind == TESTCASE)
    figures = sum(1 for i in items if i.status == UNCHANGED and i.kind == BUSBW)
    return f"{cases + figures} unchanged ({cases} testcase(s), {figures} busbw figure(s))"


def counts(judgement: Judgement) -> str:
    """'2 regression(s), 0 improvement(s), 17 unchanged, 1 not compared (in one report only)' over every item."""
    n = {status: len(judgement.having(status)) for status in STATUSES}
    return (
        f"{n[REGRESSION]} regression(s), {n[IMPROVEMENT]} improvement(s), {n[UNCHANGED]} unchanged, "
        f"{n[NOT_COMPARED]} not compared (in one report only)"
    )
