"""YAML scenarios -> frozen dataclasses, strictly.

Unknown keys, wrong types, unknown checks and bad values are all collected (not just the first) and
reported one per line as ``FILE:LINE: KEY.PATH: expected ..., got ...``. Keys in YAML equal the field
names of the dataclasses below.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from harness.checks import CATALOG, ArgSpec
from harness.errors import ConfigError

TOPOLOGIES = ("in-container", "cross-container")
BACKENDS = ("gloo", "nccl", "mpi")
DEFAULT_TIMEOUT_S = 300.0
DEFAULT_COLLECTIVE_TIMEOUT_S = 60.0
DEFAULT_CHECK_TIMEOUT_S = 120.0
VERSION_PATTERN = re.compile(r"^\s*(==|!=|>=|<=|>|<)?\s*[0-9]+(\.[0-9]+)*\s*(,\s*(==|!=|>=|<=|>|<)?\s*[0-9]+(\.[0-9]+)*\s*)*$")
DEFAULT_PYTHON = "python3"
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")


@dataclass(frozen=True)
class CheckSpec:
    name: str
    args: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    # A required check that the image cannot run (skipped: "needs torch >= 2.14") fails instead.
    required: bool = False


@dataclass(frozen=True)
class Scenario:
    name: str
    topology: str
    world_size: int
    backend: str
    image: str | None
    timeout_s: float
    collective_timeout_s: float
    check_timeout_s: float
    python: str
    checks: tuple[CheckSpec, ...]


@dataclass(frozen=True)
class Config:
    path: str
    scenarios: tuple[Scenario, ...]


class _Problems:
    def __init__(self, path: str) -> None:
        self.path = path
        self.lines: list[str] = []

    def add(self, node: yaml.Node | None, key_path: str, message: str) -> None:
        line = f":{node.start_mark.line + 1}" if node is not None else ""
        where = f"{key_path}: " if key_path else ""
        self.lines.append(f"{self.path}{line}: {where}{message}")


def _describe(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    return repr(node.value) if node.value != "" else "nothing"


_INVALID = object()


def _scalar(node: yaml.Node) -> Any:
    """The Python value of a scalar node as the safe loader constructs it; _INVALID for a tag it refuses."""
    try:
        return yaml.constructor.SafeConstructor().construct_object(node, deep=True)
    except yaml.YAMLError:
        return _INVALID


def _mapping(
    node: yaml.Node,
    key_path: str,
    allowed: tuple[str, ...],
    required: tuple[str, ...],
    problems: _Problems,
) -> dict[str, yaml.Node] | None:
    if not isinstance(node, yaml.MappingNode):
        keys = f"with keys {', '.join(allowed)}" if allowed else "(empty: this takes no keys)"
        problems.add(node, key_path, f"expected a mapping {keys}; got {_describe(node)}")
        return None
    result: dict[str, yaml.Node] = {}
    for key_node, value_node in node.value:
        key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
        child = f"{key_path}.{key}" if key_path else str(key)
        if key is None or key not in allowed:
            expected = f"expected one of {', '.join(allowed)}" if allowed else "expected no keys here"
            problems.add(key_node, child, f"unknown key; {expected}")
        elif key in result:
            problems.add(key_node, child, "duplicate key")
        else:
            result[key] = value_node
    for key in required:
        if key not in result:
            problems.add(node, f"{key_path}.{key}" if key_path else key, "required key is missing")
    return result


def _typed(
    node: yaml.Node,
    key_path: str,
    problems: _Problems,
    expected: str,
    accept: Callable[[Any], bool],
) -> Any:
    value = _scalar(node) if isinstance(node, yaml.ScalarNode) else None
    if not isinstance(node, yaml.ScalarNode) or not accept(value):
        problems.add(node, key_path, f"expected {expected}; got {_describe(node)}")
        return None
    return value


def _positive_int(node: yaml.Node, key_path: str, problems: _Problems, minimum: int = 1) -> int | None:
    value: int | None = _typed(
        node,
        key_path,
        problems,
        f"an integer >= {minimum}",
        lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= minimum,
    )
    return value


def _positive_seconds(node: yaml.Node, key_path: str, problems: _Problems) -> float | None:
    value = _typed(
        node,
        key_path,
        problems,
        "a number of seconds > 0",
        lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0,
    )
    return None if value is None else float(value)


def _string(node: yaml.Node, key_path: str, problems: _Problems, expected: str = "a non-empty string") -> str | None:
    value: str | None = _typed(node, key_path, problems, expected, lambda v: isinstance(v, str) and v.strip() != "")
    return value


def _choice(node: yaml.Node, key_path: str, problems: _Problems, choices: tuple[str, ...]) -> str | None:
    value: str | None = _typed(node, key_path, problems, f"one of {', '.join(choices)}", lambda v: v in choices)
    return value


def _check(node: yaml.Node, key_path: str, problems: _Problems) -> CheckSpec | None:
    known = ", ".join(CATALOG)
    if isinstance(node, yaml.ScalarNode):
        name = _typed(node, key_path, problems, f"a check name ({known})", lambda v: v in CATALOG)
        return None if name is None else CheckSpec(name=name)
    fields = _mapping(node, key_path, ("name", "args", "required"), ("name",), problems)
    if fields is None or "name" not in fields:
        return None
    name = _typed(fields["name"], f"{key_path}.name", problems, f"a check name ({known})", lambda v: v in CATALOG)
    if name is None:
        return None
    required = False
    if "required" in fields:
        required = bool(
            _typed(fields["required"], f"{key_path}.required", problems, "true or false", lambda v: isinstance(v, bool))
        )
    info = CATALOG[name]
    args: dict[str, Any] = {}
    if "args" in fields:
        arg_path = f"{key_path}.args"
        arg_nodes = _mapping(fields["args"], arg_path, tuple(info.args), (), problems)
        for arg_name, arg_node in (arg_nodes or {}).items():
            value = _argument(info.args[arg_name], arg_node, f"{arg_path}.{arg_name}", problems)
            if value is not None:
                args[arg_name] = value
    return CheckSpec(name=name, args=MappingProxyType(args), required=required)


def _argument(spec: ArgSpec, node: yaml.Node, key_path: str, problems: _Problems) -> Any:
    if spec.kind == "int":
        return _positive_int(node, key_path, problems, spec.minimum)
    if spec.kind == "seconds":
        return _positive_seconds(node, key_path, problems)
    if spec.kind == "choice":
        return _choice(node, key_path, problems, spec.choices)
    if spec.kind == "version":
        # The text as written: YAML would read an unquoted 3.10 as the float 3.1.
        written = node.value if isinstance(node, yaml.ScalarNode) else None
        if not isinstance(written, str) or VERSION_PATTERN.match(written) is None:
            problems.add(node, key_path, f"expected a version requirement like '>=2.6,<2.7' or '2.15.0'; got {_describe(node)}")
            return None
        return written.strip()
    if not isinstance(node, yaml.SequenceNode):
        problems.add(node, key_path, f"expected a list of {', '.join(spec.choices)}; got {_describe(node)}")
        return None
    names = [_choice(item, f"{key_path}[{index}]", problems, spec.choices) for index, item in enumerate(node.value)]
    return None if None in names else tuple(names)


_SCENARIO_KEYS = (
    "name",
    "topology",
    "world_size",
    "backend",
    "image",
    "timeout_s",
    "collective_timeout_s",
    "check_timeout_s",
    "python",
    "checks",
)
_DEFAULT_KEYS = ("backend", "image", "timeout_s", "collective_timeout_s", "check_timeout_s", "python")


def _scenario(node: yaml.Node, key_path: str, defaults: dict[str, Any], problems: _Problems) -> Scenario | None:
    fields = _mapping(node, key_path, _SCENARIO_KEYS, ("topology", "world_size", "checks"), problems)
    if fields is None:
        return None
    before = len(problems.lines)
    topology = _choice(fields["topology"], f"{key_path}.topology", problems, TOPOLOGIES) if "topology" in fields else None
    world_size = _positive_int(fields["world_size"], f"{key_path}.world_size", problems) if "world_size" in fields else None
    values = dict(defaults)
    values.update(_common(fields, key_path, problems))
    name = None
    if "name" in fields:
        name = _typed(
            fields["name"],
            f"{key_path}.name",
            problems,
            "a name of letters, digits, '.', '_' or '-' (at most 40 characters)",
            lambda v: isinstance(v, str) and NAME_PATTERN.match(v) is not None,
        )
    checks: list[CheckSpec] = []
    if "checks" in fields:
        checks_node = fields["checks"]
        if not isinstance(checks_node, yaml.SequenceNode) or not checks_node.value:
            problems.add(checks_node, f"{key_path}.checks", f"expected a non-empty list of checks; got {_describe(checks_node)}")
        else:
            first_index: dict[str, int] = {}
            for index, check_node in enumerate(checks_node.value):
                spec = _check(check_node, f"{key_path}.checks[{index}]", problems)
                if spec is None:
                    continue
                # Results are keyed by check name: a second entry would overwrite the first's verdict.
                if spec.name in first_index:
                    problems.add(
                        check_node,
                        f"{key_path}.checks[{index}]",
                        f"expected each check once per scenario; {spec.name!r} is also checks[{first_index[spec.name]}]",
                    )
                first_index.setdefault(spec.name, index)
                checks.append(spec)
    if len(problems.lines) > before or topology is None or world_size is None:
        return None
    return Scenario(
        name=name or f"{topology}-{world_size}ranks",
        topology=topology,
        world_size=world_size,
        backend=values.get("backend", "gloo"),
        image=values.get("image"),
        timeout_s=values.get("timeout_s", DEFAULT_TIMEOUT_S),
        collective_timeout_s=values.get("collective_timeout_s", DEFAULT_COLLECTIVE_TIMEOUT_S),
        check_timeout_s=values.get("check_timeout_s", DEFAULT_CHECK_TIMEOUT_S),
        python=values.get("python", DEFAULT_PYTHON),
        checks=tuple(checks),
    )


def _common(fields: dict[str, yaml.Node], key_path: str, problems: _Problems) -> dict[str, Any]:
    """Keys allowed both at the top level (as defaults) and per scenario."""
    prefix = f"{key_path}." if key_path else ""
    parsed: dict[str, Any] = {}
    if "backend" in fields:
        parsed["backend"] = _choice(fields["backend"], f"{prefix}backend", problems, BACKENDS)
    if "image" in fields:
        parsed["image"] = _string(fields["image"], f"{prefix}image", problems, "an image reference (name:tag or id)")
    if "python" in fields:
        parsed["python"] = _string(fields["python"], f"{prefix}python", problems, "the image's Python interpreter")
    for key in ("timeout_s", "collective_timeout_s", "check_timeout_s"):
        if key in fields:
            parsed[key] = _positive_seconds(fields[key], f"{prefix}{key}", problems)
    return {key: value for key, value in parsed.items() if value is not None}


def parse_config(text: str, path: str) -> Config:
    """Parse a config's text; ``path`` is only used in messages. Raises ConfigError with every problem."""
    problems = _Problems(path)
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError([f"{path}{line}: not valid YAML: {reason}"]) from None
    if root is None:
        raise ConfigError([f"{path}: the file is empty; expected a mapping with a 'scenarios' list"])
    top = _mapping(root, "", ("version",) + _DEFAULT_KEYS + ("scenarios",), ("scenarios",), problems)
    scenarios: list[Scenario] = []
    if top is not None:
        if "version" in top:
            _typed(
                top["version"], "version", problems, "1 (the only config version)", lambda v: v == 1 and not isinstance(v, bool)
            )
        defaults = _common(top, "", problems)
        scenarios_node = top.get("scenarios")
        if scenarios_node is not None:
            if not isinstance(scenarios_node, yaml.SequenceNode) or not scenarios_node.value:
                problems.add(
                    scenarios_node, "scenarios", f"expected a non-empty list of scenarios; got {_describe(scenarios_node)}"
                )
            else:
                seen: dict[str, int] = {}
                for index, node in enumerate(scenarios_node.value):
                    scenario = _scenario(node, f"scenarios[{index}]", defaults, problems)
                    if scenario is None:
                        continue
                    if scenario.name in seen:
                        problems.add(
                            node,
                            f"scenarios[{index}].name",
                            f"expected a unique scenario name; {scenario.name!r} is also scenarios[{seen[scenario.name]}]",
                        )
                    seen.setdefault(scenario.name, index)
                    scenarios.append(scenario)
    if problems.lines:
        raise ConfigError(problems.lines)
    return Config(path=path, scenarios=tuple(scenarios))


def load_config(path: str | Path) -> Config:
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError([f"{name}: no such file; expected a YAML scenario file"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([f"{name}: cannot read the file: {exc}"]) from None
    return parse_config(text, name)
