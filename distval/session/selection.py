"""What a run runs: --filter's scenarios (a pattern that matches nothing is bad input), the check selection, and
the plan of those scenarios on a target, with those the selection left no check set apart."""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Sequence

from distval.config import Config
from distval.config.yaml_nodes import shown
from distval.errors import FilterMismatch
from distval.plan.model import RunPlan
from distval.plan.selection import Selected, Selection, select_checks
from distval.results.scenario import ScenarioResult
from distval.targets.base import Target, plan_on

# Patterns and scenario names listed in one message, at most (a matrix may have thousands).
_LISTED_MAX = 10


def matching_names(config_path: str, names: Sequence[str], patterns: Sequence[str] | None) -> list[str]:
    """The names that match a pattern (fnmatch, case-sensitive); all without patterns. A pattern that matches
    nothing is bad input (a typo must not quietly run less)."""
    if not patterns:
        return list(names)
    unmatched = [p for p in patterns if not any(fnmatch.fnmatchcase(n, p) for n in names)]
    if unmatched:
        which = ", ".join(shown(p) for p in unmatched[:_LISTED_MAX])
        listed = ", ".join(names[:_LISTED_MAX]) + (f", ... ({len(names)} in all)" if len(names) > _LISTED_MAX else "")
        raise FilterMismatch(
            f"--filter {which} match{'es' if len(unmatched) == 1 else ''} no scenario of {config_path}; "
            f"its scenarios: {listed or '(none)'}"
        )
    return [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in patterns)]


def select(config: Config, patterns: Sequence[str] | None, selection: Selection) -> Selected:
    """--filter and the check selection on a config: FilterMismatch or SelectionError before anything is planned."""
    names = matching_names(config.path, [s.name for s in config.scenarios], patterns)
    return select_checks(config, selection, names if patterns else None)


def filtered(config: Config, patterns: Sequence[str] | None) -> Config:
    """The config with --filter's scenarios only."""
    names = set(matching_names(config.path, [s.name for s in config.scenarios], patterns))
    return dataclasses.replace(config, scenarios=tuple(s for s in config.scenarios if s.name in names))


def plan_selected(target: Target, selected: Selected, run_id: str) -> RunPlan:
    """Every scenario planned with the checks it runs (so that its hash covers the selection, and its slug is unique
    among all the config's), then those --filter matched; those the selection left no check are set apart
    (``RunPlan.unselected``), planned and reported but not run."""
    plan = plan_on(target, selected.config, run_id)
    matched = [s for s in plan.scenarios if selected.matched is None or s.scenario.name in selected.matched]
    return dataclasses.replace(
        plan,
        scenarios=tuple(s for s in matched if s.scenario.name not in selected.unselected),
        unselected=tuple(s for s in matched if s.scenario.name in selected.unselected),
        selection_notes=selected.kept,
    )


def in_config_order(config: Config, results: Sequence[ScenarioResult]) -> list[ScenarioResult]:
    """The results in the order of the config's scenarios (run ones and unselected ones interleave there)."""
    position = {s.name: index for index, s in enumerate(config.scenarios)}
    return sorted(results, key=lambda r: position.get(r.plan.scenario.name, len(position)))
