"""Scenario matrices: the axes (keys -> lists of values), exclude entries, and the expansion into one
Scenario per combination, in a stable order, named ``<name>.<value>.<value>...``.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping
from typing import Any

import yaml

from distval.config.keys import BY_NAME, MATRIX_AXES, NAME_MAX, NAME_PATTERN, SCENARIOS_MAX
from distval.config.model import CheckSpec, Scenario
from distval.config.resolve import resolve
from distval.config.yaml_nodes import Problems, describe, key_node, mapping, shown

Axes = list[tuple[str, list[Any]]]
# An exclude entry: its axes' values, and its node (where a problem with it is reported).
Exclude = tuple[dict[str, Any], yaml.Node]
# Values listed in a message, at most (a matrix may have thousands).
_LISTED_MAX = 10


def _shown(value: Any) -> str:
    return shown(value) if isinstance(value, str) else repr(value)


def _listed(values: list[Any]) -> str:
    shown = ", ".join(str(v) for v in values[:_LISTED_MAX])
    return shown if len(values) <= _LISTED_MAX else f"{shown}, ... ({len(values)} in all)"


def _read(axis: str, node: yaml.Node, key_path: str, problems: Problems) -> Any:
    read = BY_NAME[axis].read
    assert read is not None, f"matrix axis {axis} has no reader"
    return read(node, key_path, problems)


def short(axis: str, value: Any) -> str:
    """An axis value as it appears in expanded scenario names."""
    if axis == "image":
        return re.sub(r"[^A-Za-z0-9_.-]", "-", str(value).rsplit("/", 1)[-1])
    if axis == "topology":
        return {"in-container": "in", "cross-container": "cross"}[value]
    prefix = {"nodes": "n", "nproc_per_node": "p", "world_size": "w"}.get(axis, "")
    return f"{prefix}{value}"


def read_axes(node: yaml.Node, key_path: str, fields: Mapping[str, yaml.Node], problems: Problems) -> Axes | None:
    """The axes in the order written, each with its valid values in the order written; None if not a mapping."""
    path = f"{key_path}.matrix"
    axis_nodes = mapping(node, path, MATRIX_AXES, (), problems)
    if axis_nodes is None:
        return None
    if not axis_nodes and isinstance(node, yaml.MappingNode) and not node.value:
        problems.add(
            node, path, f"expected a mapping of axes ({', '.join(MATRIX_AXES)}) to lists of values; got an empty mapping"
        )
    axes: Axes = []
    for axis, list_node in axis_nodes.items():
        axis_path = f"{path}.{axis}"
        if axis in fields:
            problems.add(
                fields[axis], f"{key_path}.{axis}", f"expected either a key or a matrix axis; {axis} is also matrix.{axis}"
            )
        if not isinstance(list_node, yaml.SequenceNode) or not list_node.value:
            problems.add(list_node, axis_path, f"expected a non-empty list of {axis} values; got {describe(list_node)}")
            axes.append((axis, []))
            continue
        values: list[Any] = []
        # By value and by short name: each value is looked up once (a list search per value was quadratic).
        index_of_value: dict[Any, int] = {}
        index_of_short: dict[str, int] = {}
        for index, item in enumerate(list_node.value):
            item_path = f"{axis_path}[{index}]"
            value = _read(axis, item, item_path, problems)
            if value is None:
                continue
            name = short(axis, value)
            if value in index_of_value:
                problems.add(
                    item, item_path, f"expected each value once; {_shown(value)} is also {axis}[{index_of_value[value]}]"
                )
            elif name in index_of_short:
                problems.add(
                    item,
                    item_path,
                    f"expected values with distinct short names; {_shown(value)} and {axis}[{index_of_short[name]}] "
                    f"are both {shown(name)} in scenario names",
                )
            elif not name:
                problems.add(item, item_path, f"expected an image reference with a name after the last '/'; got {describe(item)}")
            else:
                values.append(value)
                index_of_value[value] = index
                index_of_short[name] = index
        axes.append((axis, values))
    return axes


def read_excludes(node: yaml.Node, key_path: str, axes: Axes, problems: Problems) -> list[Exclude]:
    path = f"{key_path}.exclude"
    expected = "a non-empty list of mappings of matrix axes to values"
    if not isinstance(node, yaml.SequenceNode) or not node.value:
        problems.add(node, path, f"expected {expected}; got {describe(node)}")
        return []
    axis_values = dict(axes)
    known = {axis: set(values) for axis, values in axes}
    excludes: list[Exclude] = []
    for index, item in enumerate(node.value):
        item_path = f"{path}[{index}]"
        keys = mapping(item, item_path, tuple(axis_values), (), problems)
        if keys is None:
            continue
        if isinstance(item, yaml.MappingNode) and not item.value:
            problems.add(item, item_path, "expected at least one matrix axis; got an empty mapping (it would exclude everything)")
            continue
        entry: dict[str, Any] = {}
        for axis, value_node in keys.items():
            value = _read(axis, value_node, f"{item_path}.{axis}", problems)
            if value is None:
                continue
            if value not in known[axis]:
                problems.add(
                    value_node,
                    f"{item_path}.{axis}",
                    f"expected one of the matrix's {axis} values ({_listed(axis_values[axis])}); got {describe(value_node)}",
                )
                continue
            entry[axis] = value
        excludes.append((entry, item))
    return excludes


def _excluded(combinations: list[dict[str, Any]], excludes: list[Exclude]) -> list[int | None]:
    """For each combination, the index of the first exclude entry that matches it (None: kept).

    Entries are grouped by the axes they name, each group a set of value tuples: a lookup per group and
    combination, not a comparison per entry and combination.
    """
    groups: dict[tuple[str, ...], dict[tuple[Any, ...], int]] = {}
    for index, (entry, _) in enumerate(excludes):
        group = groups.setdefault(tuple(sorted(entry)), {})
        group.setdefault(tuple(entry[axis] for axis in sorted(entry)), index)
    firsts: list[int | None] = []
    for combo in combinations:
        hits = [group.get(tuple(combo[axis] for axis in axes)) for axes, group in groups.items()]
        firsts.append(min((hit for hit in hits if hit is not None), default=None))
    return firsts


def expand(
    node: yaml.Node,
    key_path: str,
    fields: Mapping[str, yaml.Node],
    name: str,
    values: Mapping[str, Any],
    checks: tuple[CheckSpec, ...],
    axes: Axes,
    excludes: list[Exclude],
    defaults: Mapping[str, Any],
    problems: Problems,
) -> list[Scenario]:
    """One Scenario per combination left after the excludes; a combination that breaks a rule is a problem.

    A matrix of more than SCENARIOS_MAX combinations is refused before any is made; an exclude entry that
    removes no combination (all it matches, an earlier entry removed) is a problem: a typo, or dead text.
    """
    before = len(problems.lines)
    axis_names = [axis for axis, _ in axes]
    matrix_key = key_node(node, "matrix")
    scenarios: list[Scenario] = []
    reported: set[str] = set()
    too_long = False
    count = math.prod(len(values) for _, values in axes)
    if count > SCENARIOS_MAX:
        sizes = " x ".join(f"{len(values)} {axis}" for axis, values in axes)
        problems.add(
            matrix_key,
            f"{key_path}.matrix",
            f"expected at most {SCENARIOS_MAX} combinations (distval's bound on scenarios); got {sizes} = {count}",
        )
        return []
    combinations = [dict(zip(axis_names, combo, strict=True)) for combo in itertools.product(*(v for _, v in axes))]
    firsts = _excluded(combinations, excludes)
    kept = [combo for combo, first in zip(combinations, firsts, strict=True) if first is None]
    removing = set(firsts)
    for index, (_, entry_node) in enumerate(excludes):
        if index not in removing:
            problems.add(
                entry_node,
                f"{key_path}.exclude[{index}]",
                "expected an exclude entry that removes a combination; the entries before it removed every one it matches",
            )
    if not kept:
        problems.add(
            key_node(node, "exclude"),
            f"{key_path}.exclude",
            f"expected at least one combination left; the exclude entries remove all {len(combinations)}",
        )
    for combo in kept:
        expanded = ".".join([name] + [short(axis, combo[axis]) for axis in axis_names])
        kwargs, issues = resolve({**values, **combo}, defaults)
        reasons = [f"{found.key}: {found.message}" for found in issues if found.involved.intersection(axis_names)]
        if reasons:
            where = ", ".join(f"{axis}={combo[axis]}" for axis in axis_names)
            problems.add(
                matrix_key,
                f"{key_path}.matrix",
                f"combination {expanded} ({where}) is invalid: {'; '.join(reasons)}; exclude it or change the axes",
            )
        for found in issues:
            if found.involved.intersection(axis_names):
                continue
            if found.key not in reported:
                # The same for every combination: reported once, where the key is.
                reported.add(found.key)
                problems.add(fields.get(found.key, node), f"{key_path}.{found.key}", found.message)
        if NAME_PATTERN.fullmatch(expanded) is None and not too_long:
            too_long = True
            problems.add(
                fields["name"],
                f"{key_path}.name",
                f"expected expanded names of at most {NAME_MAX} characters; got {expanded!r} ({len(expanded)})",
            )
        if kwargs is not None:
            scenarios.append(
                Scenario(
                    name=expanded,
                    checks=checks,
                    expanded_from=name,
                    axes=tuple((axis, str(combo[axis])) for axis in axis_names),
                    **kwargs,
                )
            )
    return [] if len(problems.lines) > before else scenarios
