"""A run judged against the references of the machine it ran on (``distval run --references FILE --system NAME``;
the file's format is distval/config/references.py), like ReFrame's per-system references.

One testcase ``references`` per scenario:

- each busbw figure the scenario's entry in the file names must be measured and reach its floor (``gbps`` x
  (1 - ``tolerance``)), the figure being the slowest rank's median, as ``--baseline`` reads it;
- **a figure with no reference fails**: every busbw figure a run measures is asked to be judged, so a figure the
  file lacks (a new size, a scenario never recorded on this system) is a failure that says so, never a pass; a
  scenario the file lacks that measured nothing gets no testcase;
- **expected failures**: a check the file says fails on this system (``expected_failures``) that failed is
  reported skipped with the file's reason and its own message (it validated nothing, and fails nothing); one that
  passed fails the testcase (the file is out of date: a strict expected failure). One that did not run is said.

``suggest`` writes a file from good runs (distval/reports/references_suggest.py).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from distval.comparing.deltas import busbw_figures
from distval.config.references import REFERENCES_CASE, FigureReference, ScenarioReferences
from distval.results.outcome import ERROR, FAILED, PASSED, SKIPPED, CaseResult
from distval.results.shape import Straggler

BAD = (FAILED, ERROR)
SHOWN = 10  # figures and checks named in one message, at most


def _matches(case_name: str, listed: str) -> bool:
    return case_name == listed or case_name.startswith(f"{listed}.")


def expected_failures(
    cases: Sequence[CaseResult], references: ScenarioReferences | None, system: str
) -> tuple[tuple[CaseResult, ...], list[str], list[str]]:
    """The cases with each expected failure that failed made a skip (the file's reason, the case's own words), the
    problems (an expected failure that passed) and the notes (one that did not run)."""
    listed = dict(references.expected_failures) if references is not None else {}
    problems, notes = [], []
    judged = list(cases)
    for name, reason in listed.items():
        matching = [i for i, c in enumerate(judged) if _matches(c.name, name)]
        bad = [i for i in matching if judged[i].status in BAD]
        if bad:
            for i in bad:
                case = judged[i]
                judged[i] = dataclasses.replace(
                    case,
                    status=SKIPPED,
                    message=f"expected to fail on {system} ({reason}); it did: {case.status}: {case.message}",
                )
        elif any(judged[i].status == PASSED for i in matching):
            problems.append(f"{name} passed, which the references expect to fail on {system} ({reason}): update the file")
        else:
            notes.append(f"{name} (expected to fail) did not run")
    return tuple(judged), problems, notes


@dataclass(frozen=True)
class Machine:
    """What the run knows of the machine beside the candidate's figures: the reference image's busbw per figure in
    this run's pairs (``--reference``; figure name -> its value per pair), its shape findings and the ranks per node."""

    reference_busbw: Mapping[str, Sequence[float]] = field(default_factory=dict)
    shape: Sequence[str] = ()
    straggler: Straggler | None = None
    nodes: int = 1


def references_case(
    entry: Mapping[str, Any],
    references: ScenarioReferences | None,
    system: str,
    path: str,
    problems: Sequence[str] = (),
    notes: Sequence[str] = (),
    machine: Machine | None = None,
) -> CaseResult | None:
    """The ``references`` testcase of one scenario (``entry``: its JSON report entry), None where nothing is asked of
    it (no reference, no figure, no expected failure judged). ``problems`` and ``notes`` come from
    ``expected_failures``; ``machine`` blames the machine for a floor the reference image misses too."""
    machine = machine or Machine()
    measured = {key: f for key, f in busbw_figures(entry).items()}
    where = f"{system} in {path}"
    if references is None:
        if not measured and not problems:
            return None
        return CaseResult(
            REFERENCES_CASE,
            FAILED,
            f"expected a reference for each busbw figure; scenario {entry.get('name')} has none on {where} "
            f"({len(measured)} figure(s) measured: distval references suggest writes them from good runs)",
            0.0,
            details={"system": system, "references": path, "figures": []},
        )
    below: list[str] = []
    blamed: list[str] = []  # below the floor on the reference image too: the machine's
    missing: list[str] = []
    rows: list[dict[str, Any]] = []
    for ref in references.busbw:
        figure = measured.get((ref.operation, ref.size))
        value = None if figure is None else figure.median
        rows.append(_row(ref, value))
        if value is None:
            missing.append(f"{ref.operation} {ref.label}")
        elif not value >= ref.floor and _reference_misses(machine, ref):
            values = machine.reference_busbw[f"{ref.operation} {ref.label}"]
            blamed.append(
                f"{ref.operation} {ref.label}: {value:.4g} GB/s, the reference image {statistics.median(values):.4g}, "
                f"floor {ref.floor:.4g}"
            )
        elif not value >= ref.floor:  # NaN never passes
            below.append(
                f"{ref.operation} {ref.label}: {value:.4g} GB/s, floor {ref.floor:.4g} ({ref.gbps:.4g} -{ref.tolerance:.0%})"
            )
    known = {(ref.operation, ref.size) for ref in references.busbw}
    unreferenced = [f"{key[0]} {figure.label}" for key, figure in measured.items() if key not in known]
    details = {"system": system, "references": path, "figures": rows}
    found = list(problems)
    if below:
        found.append(f"{len(below)} figure(s) below the floor: " + "; ".join(below[:SHOWN]))
    if missing:
        found.append(f"{len(missing)} referenced figure(s) not measured: " + ", ".join(missing[:SHOWN]))
    if unreferenced:
        found.append(
            f"{len(unreferenced)} figure(s) with no reference (a figure is judged or fails): " + ", ".join(unreferenced[:SHOWN])
        )
    found += list(machine.shape)
    judged = len(rows) - len(missing)
    if not found and not judged and not references.expected_failures:
        found.append("nothing to judge: the scenario's references name no figure and no expected failure")
    if found:
        return CaseResult(REFERENCES_CASE, FAILED, f"against {where}: " + "; and ".join(found), 0.0, details=details)
    if blamed or machine.straggler is not None:
        where_slow = (
            machine.straggler.describe()
            if machine.straggler is not None
            else f"no straggler among the ranks: nodes 0..{machine.nodes - 1} alike"
        )
        return CaseResult(
            REFERENCES_CASE,
            ERROR,
            "the machine, not the candidate: "
            + (
                f"{len(blamed)} figure(s) below the floor on {where} on the reference image too: "
                + "; ".join(blamed[:SHOWN])
                + "; "
                if blamed
                else ""
            )
            + where_slow,
            0.0,
            details=details,
        )
    lowest = min(
        ((r["busbw_gbps"] / r["floor_gbps"], f"{r['operation']} {r['size']}") for r in rows if r["busbw_gbps"] is not None),
        default=None,
    )
    return CaseResult(
        REFERENCES_CASE,
        PASSED,
        f"{judged} figure(s) at or above their floors on {where}"
        + (f"; closest: {lowest[1]} at {lowest[0]:.2f}x its floor" if lowest is not None else "")
        + (f"; {'; '.join(notes)}" if notes else ""),
        0.0,
        details=details,
    )


def _reference_misses(machine: Machine, ref: FigureReference) -> bool:
    values = machine.reference_busbw.get(f"{ref.operation} {ref.label}")
    return values is not None and len(values) > 0 and statistics.median(values) < ref.floor


def _row(ref: FigureReference, value: float | None) -> dict[str, Any]:
    return {
        "operation": ref.operation,
        "size": ref.label,
        "reference_gbps": ref.gbps,
        "tolerance": ref.tolerance,
        "floor_gbps": round(ref.floor, 6),
        "busbw_gbps": value,
        "passed": value is not None and value >= ref.floor,
    }
