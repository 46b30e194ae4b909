"""A scenario file -> Config: the file's top level and its scenario entries, every problem collected.

Unknown keys, wrong types, unknown checks and bad values are all collected (not just the first) and
reported one per line as ``FILE:LINE: KEY.PATH: expected ..., got ...``, in file order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from distval.bounded_read import FileRefused, read_regular_file
from distval.config.budget import Budget
from distval.config.check_list import backend_issues
from distval.config.compose import compose
from distval.config.devices import resolve_devices
from distval.config.faults import scenario_fault_issues
from distval.config.keys import BY_NAME, DEFAULT_KEYS, KEYS, MATRIX_AXES, SCENARIO_KEYS, SCENARIOS_MAX, VALUE_KEYS
from distval.config.matrix import Exclude, expand, read_axes, read_excludes
from distval.config.model import Config, Scenario
from distval.config.resolve import resolve
from distval.config.yaml_nodes import Problems, describe, file_label, mapping, typed
from distval.errors import ConfigError

# The file's own keys around the defaults: version first, the scenarios last.
TOP_KEYS = ("version", *DEFAULT_KEYS, "scenarios")
CONFIG_VERSION = 1
# Keys a scenario must give (or its matrix, as an axis): each with the keys that satisfy it.
_REQUIRED = (
    ("topology", ("topology",)),
    ("world_size", ("world_size", "nodes", "nproc_per_node")),
    ("checks", ("checks",)),
)


def _values(fields: Mapping[str, yaml.Node], keys: tuple[str, ...], key_path: str, problems: Problems) -> dict[str, Any]:
    """The valid values of ``keys`` present in ``fields``; a problem for each invalid one."""
    prefix = f"{key_path}." if key_path else ""
    parsed = {}
    for key, node in fields.items():
        read = BY_NAME[key].read if key in keys else None
        if read is not None:
            parsed[key] = read(node, f"{prefix}{key}", problems)
    return {key: value for key, value in parsed.items() if value is not None}


def _entry(node: yaml.Node, key_path: str, defaults: dict[str, Any], problems: Problems) -> list[Scenario]:
    """A scenario entry: one scenario, or a matrix of them."""
    fields = mapping(node, key_path, SCENARIO_KEYS, (), problems)
    if fields is None:
        return []
    before = len(problems.lines)
    matrix_node = fields.get("matrix")
    # The axes as written, to know which required keys the matrix provides (None: the matrix is unreadable).
    written_axes: set[str] | None = set()
    if isinstance(matrix_node, yaml.MappingNode):
        written_axes = {k.value for k, _ in matrix_node.value if isinstance(k, yaml.ScalarNode) and k.value in MATRIX_AXES}
    elif matrix_node is not None:
        written_axes = None
    present = set(fields) | (written_axes or set())
    for key, alternatives in _REQUIRED:
        if (key == "checks" or written_axes is not None) and not present.intersection(alternatives):
            problems.add(node, f"{key_path}.{key}", "required key is missing")
    if matrix_node is not None and "name" not in fields:
        problems.add(node, f"{key_path}.name", "required key is missing (a matrix's scenarios are named <name>.<value>...)")
    # In this order, so that problems on one line (a flow mapping) come out as they always have.
    name: str | None = _values(fields, ("name",), key_path, problems).get("name")
    values = _values(fields, VALUE_KEYS, key_path, problems)
    checks = _values(fields, ("checks",), key_path, problems).get("checks", ())
    axes = read_axes(matrix_node, key_path, fields, problems) if matrix_node is not None else None
    excludes: list[Exclude] = []
    if "exclude" in fields:
        if matrix_node is None:
            problems.add(
                fields["exclude"], f"{key_path}.exclude", "expected exclude only with a matrix (it removes combinations)"
            )
        elif axes is not None:
            excludes = read_excludes(fields["exclude"], key_path, axes, problems)
    if len(problems.lines) > before:
        return []
    if axes is not None:
        assert name is not None
        expanded = expand(node, key_path, fields, name, values, checks, axes, excludes, defaults, problems)
        return _faults_checked(node, fields, key_path, expanded, problems)
    kwargs, issues = resolve(values, defaults)
    for found in issues:
        problems.add(fields.get(found.key, node), f"{key_path}.{found.key}", found.message)
    if kwargs is None:
        return []
    return _faults_checked(
        node,
        fields,
        key_path,
        [Scenario(name=name or f"{kwargs['topology']}-{kwargs['world_size']}ranks", checks=checks, **kwargs)],
        problems,
    )


def _faults_checked(
    node: yaml.Node, fields: Mapping[str, yaml.Node], key_path: str, scenarios: list[Scenario], problems: Problems
) -> list[Scenario]:
    """The scenarios, after the rules between their faults, expect and the rest (config/faults.py) and between their
    check arguments and their backend (config/check_list.py)."""
    before = len(problems.lines)
    for scenario in scenarios:
        for sub_path, message in [*scenario_fault_issues(scenario), *backend_issues(scenario.checks, scenario.backend)]:
            at = fields.get(sub_path.split("[")[0].split(".")[0], node)
            problems.add(at, f"{key_path}.{sub_path}", message if not scenario.axes else f"{message} (in {scenario.name})")
    return scenarios if len(problems.lines) == before else []


def _scenarios(node: yaml.Node, defaults: dict[str, Any], problems: Problems) -> list[Scenario]:
    if not isinstance(node, yaml.SequenceNode) or not node.value:
        problems.add(node, "scenarios", f"expected a non-empty list of scenarios; got {describe(node)}")
        return []
    scenarios: list[Scenario] = []
    # Scenario names and matrix names share one namespace: `distval plan` groups by the latter.
    seen: dict[str, int] = {}
    budget = Budget()
    for index, entry_node in enumerate(node.value):
        if len(scenarios) > SCENARIOS_MAX:
            # Each entry adds at most SCENARIOS_MAX (a bigger matrix is refused): the rest is not expanded.
            problems.add(
                entry_node,
                f"scenarios[{index}]",
                f"expected at most {SCENARIOS_MAX} scenarios in a file (distval's bound); the entries before this one "
                f"already expand to {len(scenarios)}",
            )
            break
        entry = _entry(entry_node, f"scenarios[{index}]", defaults, problems)
        names = [s.name for s in entry]
        if entry and entry[0].expanded_from is not None:
            names.insert(0, entry[0].expanded_from)
        for name in names:
            if name in seen:
                problems.add(
                    entry_node,
                    f"scenarios[{index}].name",
                    f"expected a unique scenario name; {name!r} is also scenarios[{seen[name]}]",
                )
            seen.setdefault(name, index)
        scenarios.extend(entry)
        budget.add(entry)
        exceeded = budget.problem()
        if exceeded is not None:
            problems.add(entry_node, f"scenarios[{index}]", exceeded)
            break
    return scenarios


def parse_config(text: str, path: str) -> Config:
    """Parse a config's text; ``path`` is only used in messages. Raises ConfigError with every problem."""
    problems = Problems(path)
    root = compose(text, problems)
    if root is None:
        raise ConfigError([f"{problems.path}: the file is empty; expected a mapping with a 'scenarios' list"])
    top = mapping(root, "", TOP_KEYS, ("scenarios",), problems, extensions=True)
    scenarios: list[Scenario] = []
    if top is not None:
        if "version" in top:
            typed(
                top["version"],
                "version",
                problems,
                f"{CONFIG_VERSION} (the only config version)",
                lambda v: v == CONFIG_VERSION and not isinstance(v, bool),
            )
        defaults = _values(top, DEFAULT_KEYS, "", problems)
        # Rules between the top level's own keys (nccl with device cpu) are its problems, once.
        _, issues = resolve_devices(defaults, {key.name: key.default for key in KEYS}, None)
        for found in issues:
            problems.add(top.get(found.key, root), found.key, found.message)
        if "scenarios" in top:
            scenarios = _scenarios(top["scenarios"], defaults, problems)
    if problems.lines:
        raise ConfigError(problems.in_file_order())
    digest = hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()  # the file's bytes, as read
    return Config(path=path, scenarios=tuple(scenarios), sha256=digest)


# A scenario file is a few KiB; this bounds what a wrong path (a log, /dev/zero) can make distval read.
FILE_MAX_BYTES = 64 * 2**20


def read_yaml_text(path: str | Path, expected: str, max_bytes: int | None = None) -> str:
    """The text of a YAML file distval reads (``expected``: what it should be, "a YAML scenario file"); a missing,
    unreadable or not regular file is one ConfigError line."""
    name = file_label(str(path))
    try:
        data = read_regular_file(path, FILE_MAX_BYTES if max_bytes is None else max_bytes)
    except FileRefused as exc:
        if exc.missing:
            raise ConfigError([f"{name}: no such file; expected {expected}"]) from None
        if exc.found is not None:
            raise ConfigError([f"{name}: expected {expected}; {exc.found}"]) from None
        raise ConfigError([f"{name}: cannot read the file: {exc}"]) from None
    # Bytes that are not UTF-8 become lone surrogates, which the YAML reader refuses with their line and key path.
    return data.decode("utf-8", "surrogateescape")


def load_config(path: str | Path) -> Config:
    return parse_config(read_yaml_text(path, "a YAML scenario file"), str(path))
