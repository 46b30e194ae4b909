"""A references file: per system (a machine or SKU label), per scenario, the busbw each bandwidth figure must reach and
the checks expected to fail there (``distval run --references FILE --system NAME``; docs/reports.md, "References per
machine"). Read with the scenario files' machinery: every problem is one line ``FILE:LINE: KEY.PATH: expected ...,
got ...``, and bad input exits 2.

    version: 1
    systems:
      ci-2core:                          # the label --system names
        bandwidth:                       # a scenario's name
          busbw:
            all_reduce:                  # an operation of the bandwidth check
              64KiB: {gbps: 0.52, tolerance: 0.25}   # fails below 0.52 x (1 - 0.25) GB/s
          expected_failures:
            fsdp2: "no FSDP2 on this torch's CPU build"
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import yaml

from distval.config.byte_sizes import SIZE_EXPECTED, byte_size_value
from distval.config.compose import compose
from distval.config.keys import NAME_EXPECTED, NAME_PATTERN
from distval.config.loader import read_yaml_text
from distval.config.values import text_problem
from distval.config.yaml_nodes import Problems, child_path, describe, file_label, mapping, typed, written
from distval.errors import ConfigError

REFERENCES_VERSION = 1
REFERENCES_CASE = "references"  # the testcase a scenario judged against them gets
# A figure's tolerance is a fraction below its reference: 1 or more would let 0 GB/s pass.
TOLERANCE_EXPECTED = "a tolerance from 0 up to (not including) 1: the fraction below gbps a figure may fall"
GBPS_MAX = 1e6  # far past any link: bounds what a typo (an extra six digits) makes a floor
GBPS_EXPECTED = f"a busbw in GB/s > 0 and <= {GBPS_MAX:g}"
OPERATION_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
OPERATION_EXPECTED = "an operation of the bandwidth check (lower-case letters, digits and '_', e.g. all_reduce)"
CHECK_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\[\]=,-]{0,199}$")
CHECK_EXPECTED = "a testcase name (a check, or <check>.<part>)"
REASON_MAX = 500
FILE_MAX_BYTES = 16 * 2**20
TOP_KEYS = ("version", "systems")
SCENARIO_KEYS = ("busbw", "expected_failures")
FIGURE_KEYS = ("gbps", "tolerance")


@dataclass(frozen=True)
class FigureReference:
    operation: str
    size: int  # bytes
    label: str  # the size as written
    gbps: float
    tolerance: float

    @property
    def floor(self) -> float:
        """The least busbw that passes: below it the figure fails."""
        return self.gbps * (1 - self.tolerance)


@dataclass(frozen=True)
class ScenarioReferences:
    busbw: tuple[FigureReference, ...] = ()
    expected_failures: Mapping[str, str] = field(default_factory=dict)  # testcase name -> why it fails on this system


@dataclass(frozen=True)
class References:
    path: str
    systems: Mapping[str, Mapping[str, ScenarioReferences]]  # system -> scenario name -> its references


def _named(
    node: yaml.Node, key_path: str, problems: Problems, what: str, expected_key: str, accept: Callable[[str], bool]
) -> Iterator[tuple[str, str, yaml.Node]]:
    """A mapping whose keys are names the user chose (systems, scenarios, operations, sizes): each (key, its key path,
    its value node); a key ``accept`` refuses, or given twice, is a problem."""
    if not isinstance(node, yaml.MappingNode):
        problems.add(node, key_path, f"expected a mapping of {what}; got {describe(node)}")
        return
    seen: set[str] = set()
    for key_node, value_node in node.value:
        key = written(key_node)  # as written: a size key 65536 is YAML's integer
        path = child_path(key_path, key)
        if key is None or not accept(key):
            problems.add(key_node, path, f"expected {expected_key} as the key; got {describe(key_node)}")
        elif key in seen:
            problems.add(key_node, path, "duplicate key")
        else:
            seen.add(key)
            yield key, path, value_node


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _operation(name: str) -> bool:
    return OPERATION_PATTERN.fullmatch(name) is not None


def _check(name: str) -> bool:
    return CHECK_PATTERN.fullmatch(name) is not None


def _system(name: str) -> bool:
    return NAME_PATTERN.fullmatch(name) is not None


def _figure(node: yaml.Node, key_path: str, operation: str, size_text: str, problems: Problems) -> FigureReference | None:
    fields = mapping(node, key_path, FIGURE_KEYS, FIGURE_KEYS, problems)
    if fields is None or set(fields) != set(FIGURE_KEYS):
        return None
    gbps = typed(fields["gbps"], f"{key_path}.gbps", problems, GBPS_EXPECTED, lambda v: _finite(v) and 0 < v <= GBPS_MAX)
    tolerance = typed(
        fields["tolerance"], f"{key_path}.tolerance", problems, TOLERANCE_EXPECTED, lambda v: _finite(v) and 0 <= v < 1
    )
    size = byte_size_value(size_text)
    if gbps is None or tolerance is None or size is None:
        return None
    return FigureReference(operation, size, size_text, float(gbps), float(tolerance))


def _scenario(node: yaml.Node, key_path: str, problems: Problems) -> ScenarioReferences | None:
    fields = mapping(node, key_path, SCENARIO_KEYS, (), problems)
    if fields is None:
        return None
    figures: list[FigureReference] = []
    sizes_seen: dict[tuple[str, int], str] = {}
    if "busbw" in fields:
        operations = _named(fields["busbw"], f"{key_path}.busbw", problems, "operations", OPERATION_EXPECTED, _operation)
        for operation, op_path, sizes in operations:
            for size_text, size_path, value in _named(
                sizes, op_path, problems, "message sizes", SIZE_EXPECTED, lambda k: byte_size_value(k) is not None
            ):
                found = _figure(value, size_path, operation, size_text, problems)
                if found is None:
                    continue
                twin = sizes_seen.get((operation, found.size))
                if twin is not None:
                    problems.add(value, size_path, f"expected each message size once; {size_text} is {twin} again")
                    continue
                sizes_seen[(operation, found.size)] = size_text
                figures.append(found)
    expected: dict[str, str] = {}
    if "expected_failures" in fields:
        path = f"{key_path}.expected_failures"
        for name, name_path, reason_node in _named(
            fields["expected_failures"], path, problems, "testcase names to reasons", CHECK_EXPECTED, _check
        ):
            reason = typed(
                reason_node,
                name_path,
                problems,
                f"why it fails on this system (text, 1..{REASON_MAX} characters)",
                lambda v: isinstance(v, str) and 0 < len(v) <= REASON_MAX and text_problem(v) is None,
            )
            if reason is not None:
                expected[name] = reason
    return ScenarioReferences(tuple(figures), MappingProxyType(expected))


def parse_references(text: str, path: str) -> References:
    """A references file's text -> References; ConfigError with every problem (``path`` only names the file)."""
    problems = Problems(path)
    root = compose(text, problems)
    if root is None:
        raise ConfigError([f"{problems.path}: the file is empty; expected a mapping with 'version' and 'systems'"])
    top = mapping(root, "", TOP_KEYS, TOP_KEYS, problems, extensions=True)
    systems: dict[str, dict[str, ScenarioReferences]] = {}
    if top is not None:
        if "version" in top:
            typed(
                top["version"],
                "version",
                problems,
                f"{REFERENCES_VERSION} (the only references version)",
                lambda v: v == REFERENCES_VERSION and not isinstance(v, bool),
            )
        if "systems" in top:
            for system, system_path, scenarios in _named(
                top["systems"], "systems", problems, "systems", f"a system label: {NAME_EXPECTED}", _system
            ):
                systems[system] = {}
                for scenario, scenario_path, value in _named(
                    scenarios, system_path, problems, "scenarios", f"a scenario name: {NAME_EXPECTED}", _scenario_name
                ):
                    found = _scenario(value, scenario_path, problems)
                    if found is not None:
                        systems[system][scenario] = found
    if problems.lines:
        raise ConfigError(problems.in_file_order())
    return References(path, MappingProxyType({k: MappingProxyType(v) for k, v in systems.items()}))


def _scenario_name(name: str) -> bool:
    # A matrix's scenarios are <name>.<value>...: longer than one name, same characters.
    return len(name) <= 400 and _system(name[:80]) and re.fullmatch(r"[A-Za-z0-9_.-]+", name) is not None


def load_references(path: str | Path) -> References:
    return parse_references(read_yaml_text(path, "a YAML references file", FILE_MAX_BYTES), str(path))


def system_problem(references: References, system: str) -> str | None:
    """Why ``--system`` cannot be judged against ``references`` (not in the file), or None."""
    if system in references.systems:
        return None
    known = ", ".join(sorted(references.systems)) or "none"
    return f"--system {system}: not in {file_label(references.path)} (its systems: {known})"
