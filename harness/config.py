"""YAML scenarios -> frozen dataclasses, strictly.

Unknown keys, wrong types, unknown checks and bad values are all collected (not just the first) and
reported one per line as ``FILE:LINE: KEY.PATH: expected ..., got ...``. Keys in YAML equal the field
names of the dataclasses below.

A scenario entry with ``matrix:`` (axes -> lists of values) and optional ``exclude:`` expands into one
Scenario per combination, in a stable order, named ``<name>.<value>.<value>...``.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from harness.catalog import CATALOG, ArgSpec
from harness.errors import ConfigError

TOPOLOGIES = ("in-container", "cross-container")
BACKENDS = ("gloo", "nccl", "mpi")
DEFAULT_TIMEOUT_S = 300.0
DEFAULT_COLLECTIVE_TIMEOUT_S = 60.0
DEFAULT_CHECK_TIMEOUT_S = 120.0
VERSION_PATTERN = re.compile(r"^\s*(==|!=|>=|<=|>|<)?\s*[0-9]+(\.[0-9]+)*\s*(,\s*(==|!=|>=|<=|>|<)?\s*[0-9]+(\.[0-9]+)*\s*)*$")
DEFAULT_PYTHON = "python3"
NAME_MAX = 80
NAME_PATTERN = re.compile(rf"^[A-Za-z0-9][A-Za-z0-9_.-]{{0,{NAME_MAX - 1}}}$")
# static: --nnodes --node_rank --master_addr --master_port; c10d: --rdzv_backend=c10d, no node rank;
# env and tcp: no launcher, one process per container (init_method env:// or tcp://).
RENDEZVOUS = ("static", "c10d", "env", "tcp")
NO_LAUNCHER_RENDEZVOUS = ("env", "tcp")
# How the other nodes address node 0: its DNS name, or its IP address learned at run time.
MASTER_ADDRS = ("name", "ip")
SIZE_PATTERN = re.compile(r"^[0-9]+[bkmg]?$", re.IGNORECASE)
ENV_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
USER_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?$")
# Variables the harness or the launcher set in the containers: a scenario's env must not shadow them.
RESERVED_ENV = ("RANK", "LOCAL_RANK", "GROUP_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
RESERVED_ENV_PREFIX = "DISTVAL_"
MATRIX_AXES = ("image", "topology", "rendezvous", "master_addr", "backend", "world_size", "nodes", "nproc_per_node")


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
    # The layout: one container per node, nproc_per_node processes in each; world_size is their product.
    # 0 (the default, for code that builds a Scenario itself): derived from topology and world_size as
    # the YAML does -- in-container 1 x world_size, cross-container world_size x 1.
    nodes: int = 0
    nproc_per_node: int = 0
    rendezvous: str = "static"  # one of RENDEZVOUS; always "static" (--standalone) in-container
    master_addr: str = "name"  # one of MASTER_ADDRS; always "name" in-container
    egress: bool = False  # False: the scenario's network is internal
    extra_networks: int = 0  # more networks, created per scenario, that every container is attached to
    ipv6: bool = False
    cpus: float | None = None  # None: the Engine's default (no limit)
    memory: str | None = None  # a Docker size as written, lower-cased: "512m", "2g"
    shm_size: str | None = None  # same format as memory
    env: tuple[tuple[str, str], ...] = ()  # extra environment, sorted by name
    user: str | None = None  # "1000:1000", "nobody"
    working_dir: str | None = None  # an absolute path in the container; None: the harness's own
    expanded_from: str | None = None  # the matrix entry's name; None for a plain scenario
    axes: tuple[tuple[str, str], ...] = ()  # the matrix combination: (axis, value as str), in axis order

    def __post_init__(self) -> None:
        nodes, nproc = self.nodes, self.nproc_per_node
        if nodes == 0 and nproc == 0:
            nodes, nproc = (1, self.world_size) if self.topology == "in-container" else (self.world_size, 1)
        elif nodes == 0 and nproc > 0 and self.world_size % nproc == 0:
            nodes = self.world_size // nproc
        elif nproc == 0 and nodes > 0 and self.world_size % nodes == 0:
            nproc = self.world_size // nodes
        if nodes < 1 or nproc < 1 or nodes * nproc != self.world_size:
            raise ValueError(
                f"scenario {self.name!r}: world_size {self.world_size} is not nodes x nproc_per_node = {nodes} x {nproc}"
            )
        object.__setattr__(self, "nodes", nodes)
        object.__setattr__(self, "nproc_per_node", nproc)


@dataclass(frozen=True)
class Config:
    path: str
    scenarios: tuple[Scenario, ...]


class _Problems:
    def __init__(self, path: str) -> None:
        self.path = path
        self.lines: list[str] = []
        self._numbers: list[int] = []

    def add(self, node: yaml.Node | None, key_path: str, message: str) -> None:
        line = f":{node.start_mark.line + 1}" if node is not None else ""
        where = f"{key_path}: " if key_path else ""
        self.lines.append(f"{self.path}{line}: {where}{message}")
        self._numbers.append(node.start_mark.line if node is not None else -1)

    def in_file_order(self) -> list[str]:
        """The problems by line (stable: those on one line in the order found)."""
        order = sorted(range(len(self.lines)), key=lambda i: self._numbers[i])
        return [self.lines[i] for i in order]


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


def _positive_number(node: yaml.Node, key_path: str, problems: _Problems, what: str) -> float | None:
    value = _typed(
        node,
        key_path,
        problems,
        f"a number of {what} > 0",
        lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0,
    )
    return None if value is None else float(value)


def _positive_seconds(node: yaml.Node, key_path: str, problems: _Problems) -> float | None:
    return _positive_number(node, key_path, problems, "seconds")


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


def _bool(node: yaml.Node, key_path: str, problems: _Problems) -> bool | None:
    value: bool | None = _typed(node, key_path, problems, "true or false", lambda v: isinstance(v, bool))
    return value


def _cpus(node: yaml.Node, key_path: str, problems: _Problems) -> float | None:
    return _positive_number(node, key_path, problems, "CPUs")


def _written(node: yaml.Node) -> str | None:
    """A scalar's text as written, None for a null, an unknown tag or a collection.

    As written, because YAML 1.1 reads an unquoted 1000:50 as the sexagesimal integer 60050 and 1.10 as 1.1.
    """
    if not isinstance(node, yaml.ScalarNode):
        return None
    value = _scalar(node)
    return None if value is None or value is _INVALID else str(node.value)


def _size(node: yaml.Node, key_path: str, problems: _Problems) -> str | None:
    text = _written(node)
    if text is None or SIZE_PATTERN.fullmatch(text) is None or int(text.rstrip("bkmgBKMG")) == 0:
        problems.add(
            node, key_path, f"expected a Docker size > 0 like 512m or 2g (digits, then b, k, m or g); got {_describe(node)}"
        )
        return None
    return text.lower()


def _user(node: yaml.Node, key_path: str, problems: _Problems) -> str | None:
    text = _written(node)
    if text is None or USER_PATTERN.fullmatch(text) is None:
        problems.add(node, key_path, f"expected a user: name, uid, name:group or uid:gid; got {_describe(node)}")
        return None
    return text


def _working_dir(node: yaml.Node, key_path: str, problems: _Problems) -> str | None:
    text = _written(node)
    if text is None or not text.startswith("/") or any(c in text for c in "\x00\r\n"):
        problems.add(node, key_path, f"expected an absolute path in the container (starting with '/'); got {_describe(node)}")
        return None
    return text


def _env(node: yaml.Node, key_path: str, problems: _Problems) -> dict[str, str] | None:
    if not isinstance(node, yaml.MappingNode):
        problems.add(node, key_path, f"expected a mapping of environment variable names to values; got {_describe(node)}")
        return None
    result: dict[str, str] = {}
    seen: set[str] = set()
    for key_node, value_node in node.value:
        key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
        child = f"{key_path}.{key}"
        if key is None or ENV_NAME_PATTERN.fullmatch(key) is None:
            problems.add(
                key_node,
                child,
                "expected an environment variable name (letters, digits and '_', not starting with a digit); "
                f"got {_describe(key_node)}",
            )
            continue
        if key in seen:
            problems.add(key_node, child, "duplicate key")
            continue
        seen.add(key)
        if key in RESERVED_ENV or key.startswith(RESERVED_ENV_PREFIX):
            problems.add(
                key_node,
                child,
                f"expected a variable the harness does not set ({', '.join(RESERVED_ENV)} and {RESERVED_ENV_PREFIX}* "
                f"are its own); got {key!r}",
            )
            continue
        text = _written(value_node)
        if text is None:
            problems.add(
                value_node,
                child,
                f"expected a value: a string, a number or true/false ('' for an empty one); got {_describe(value_node)}",
            )
            continue
        result[key] = text
    return result


_Parser = Callable[[yaml.Node, str, _Problems], Any]

# The parser of every scenario key that holds a value (name, checks, matrix and exclude have their own).
_PARSERS: dict[str, _Parser] = {
    "topology": lambda n, k, p: _choice(n, k, p, TOPOLOGIES),
    "world_size": _positive_int,
    "nodes": _positive_int,
    "nproc_per_node": _positive_int,
    "rendezvous": lambda n, k, p: _choice(n, k, p, RENDEZVOUS),
    "master_addr": lambda n, k, p: _choice(n, k, p, MASTER_ADDRS),
    "backend": lambda n, k, p: _choice(n, k, p, BACKENDS),
    "image": lambda n, k, p: _string(n, k, p, "an image reference (name:tag or id)"),
    "timeout_s": _positive_seconds,
    "collective_timeout_s": _positive_seconds,
    "check_timeout_s": _positive_seconds,
    "python": lambda n, k, p: _string(n, k, p, "the image's Python interpreter"),
    "egress": _bool,
    "extra_networks": lambda n, k, p: _positive_int(n, k, p, 0),
    "ipv6": _bool,
    "cpus": _cpus,
    "memory": _size,
    "shm_size": _size,
    "env": _env,
    "user": _user,
    "working_dir": _working_dir,
}

_SCENARIO_KEYS = (
    "name",
    "topology",
    "world_size",
    "nodes",
    "nproc_per_node",
    "rendezvous",
    "master_addr",
    "backend",
    "image",
    "timeout_s",
    "collective_timeout_s",
    "check_timeout_s",
    "python",
    "egress",
    "extra_networks",
    "ipv6",
    "cpus",
    "memory",
    "shm_size",
    "env",
    "user",
    "working_dir",
    "checks",
    "matrix",
    "exclude",
)
# Keys the top level may set as defaults for every scenario. rendezvous and master_addr defaults apply
# to cross-container scenarios only: in-container always runs --standalone.
_DEFAULT_KEYS = (
    "backend",
    "image",
    "timeout_s",
    "collective_timeout_s",
    "check_timeout_s",
    "python",
    "rendezvous",
    "master_addr",
    "egress",
    "ipv6",
    "cpus",
    "memory",
    "shm_size",
    "env",
    "user",
    "working_dir",
)
_VALUE_KEYS = tuple(key for key in _SCENARIO_KEYS if key in _PARSERS)
_NAME_EXPECTED = f"a name of letters, digits, '.', '_' or '-' (at most {NAME_MAX} characters)"


def _values(fields: dict[str, yaml.Node], keys: tuple[str, ...], key_path: str, problems: _Problems) -> dict[str, Any]:
    """The valid values of ``keys`` present in ``fields``; a problem for each invalid one."""
    prefix = f"{key_path}." if key_path else ""
    parsed = {key: _PARSERS[key](node, f"{prefix}{key}", problems) for key, node in fields.items() if key in keys}
    return {key: value for key, value in parsed.items() if value is not None}


def _key_node(node: yaml.Node, key: str) -> yaml.Node:
    """The key's own node in a mapping (its line), or the mapping when the key is absent."""
    if isinstance(node, yaml.MappingNode):
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
                return key_node
    return node


def _checks(node: yaml.Node, key_path: str, problems: _Problems) -> tuple[CheckSpec, ...]:
    if not isinstance(node, yaml.SequenceNode) or not node.value:
        problems.add(node, key_path, f"expected a non-empty list of checks; got {_describe(node)}")
        return ()
    checks: list[CheckSpec] = []
    first_index: dict[str, int] = {}
    for index, check_node in enumerate(node.value):
        spec = _check(check_node, f"{key_path}[{index}]", problems)
        if spec is None:
            continue
        # Results are keyed by check name: a second entry would overwrite the first's verdict.
        if spec.name in first_index:
            problems.add(
                check_node,
                f"{key_path}[{index}]",
                f"expected each check once per scenario; {spec.name!r} is also checks[{first_index[spec.name]}]",
            )
        first_index.setdefault(spec.name, index)
        checks.append(spec)
    return tuple(checks)


# --- the matrix -----------------------------------------------------------------------------------

_Axes = list[tuple[str, list[Any]]]


def _short(axis: str, value: Any) -> str:
    """An axis value as it appears in expanded scenario names."""
    if axis == "image":
        return re.sub(r"[^A-Za-z0-9_.-]", "-", str(value).rsplit("/", 1)[-1])
    if axis == "topology":
        return {"in-container": "in", "cross-container": "cross"}[value]
    prefix = {"nodes": "n", "nproc_per_node": "p", "world_size": "w"}.get(axis, "")
    return f"{prefix}{value}"


def _matrix(node: yaml.Node, key_path: str, fields: dict[str, yaml.Node], problems: _Problems) -> _Axes | None:
    """The axes in the order written, each with its valid values in the order written; None if not a mapping."""
    path = f"{key_path}.matrix"
    axis_nodes = _mapping(node, path, MATRIX_AXES, (), problems)
    if axis_nodes is None:
        return None
    if not axis_nodes and isinstance(node, yaml.MappingNode) and not node.value:
        problems.add(
            node, path, f"expected a mapping of axes ({', '.join(MATRIX_AXES)}) to lists of values; got an empty mapping"
        )
    axes: _Axes = []
    for axis, list_node in axis_nodes.items():
        axis_path = f"{path}.{axis}"
        if axis in fields:
            problems.add(
                fields[axis], f"{key_path}.{axis}", f"expected either a key or a matrix axis; {axis} is also matrix.{axis}"
            )
        if not isinstance(list_node, yaml.SequenceNode) or not list_node.value:
            problems.add(list_node, axis_path, f"expected a non-empty list of {axis} values; got {_describe(list_node)}")
            axes.append((axis, []))
            continue
        values: list[Any] = []
        index_of_value: list[tuple[Any, int]] = []
        index_of_short: dict[str, int] = {}
        for index, item in enumerate(list_node.value):
            item_path = f"{axis_path}[{index}]"
            value = _PARSERS[axis](item, item_path, problems)
            if value is None:
                continue
            short = _short(axis, value)
            same = [earlier for known, earlier in index_of_value if known == value]
            if same:
                problems.add(item, item_path, f"expected each value once; {value!r} is also {axis}[{same[0]}]")
            elif short in index_of_short:
                problems.add(
                    item,
                    item_path,
                    f"expected values with distinct short names; {value!r} and {axis}[{index_of_short[short]}] "
                    f"are both {short!r} in scenario names",
                )
            elif not short:
                problems.add(
                    item, item_path, f"expected an image reference with a name after the last '/'; got {_describe(item)}"
                )
            else:
                values.append(value)
                index_of_value.append((value, index))
                index_of_short[short] = index
        axes.append((axis, values))
    return axes


def _excludes(node: yaml.Node, key_path: str, axes: _Axes, problems: _Problems) -> list[dict[str, Any]]:
    path = f"{key_path}.exclude"
    expected = "a non-empty list of mappings of matrix axes to values"
    if not isinstance(node, yaml.SequenceNode) or not node.value:
        problems.add(node, path, f"expected {expected}; got {_describe(node)}")
        return []
    axis_values = dict(axes)
    excludes: list[dict[str, Any]] = []
    for index, item in enumerate(node.value):
        item_path = f"{path}[{index}]"
        keys = _mapping(item, item_path, tuple(axis_values), (), problems)
        if keys is None:
            continue
        if isinstance(item, yaml.MappingNode) and not item.value:
            problems.add(item, item_path, "expected at least one matrix axis; got an empty mapping (it would exclude everything)")
            continue
        entry: dict[str, Any] = {}
        for axis, value_node in keys.items():
            value = _PARSERS[axis](value_node, f"{item_path}.{axis}", problems)
            if value is None:
                continue
            if value not in axis_values[axis]:
                listed = ", ".join(str(v) for v in axis_values[axis])
                problems.add(
                    value_node,
                    f"{item_path}.{axis}",
                    f"expected one of the matrix's {axis} values ({listed}); got {_describe(value_node)}",
                )
                continue
            entry[axis] = value
        excludes.append(entry)
    return excludes


# --- layout and rendezvous: the rules between keys ------------------------------------------------


@dataclass(frozen=True)
class _Issue:
    """A rule between keys broken: reported at ``key``; ``involved`` says which keys (or axes) caused it."""

    key: str
    message: str
    involved: frozenset[str]


def _resolve(values: dict[str, Any], defaults: dict[str, Any]) -> tuple[dict[str, Any] | None, list[_Issue]]:
    """Scenario's fields (all but name, checks and the matrix's) from a scenario's keys and the defaults."""
    issues: list[_Issue] = []

    def issue(key: str, message: str, *involved: str) -> None:
        issues.append(_Issue(key, message, frozenset(("topology", key, *involved))))

    topology: str = values["topology"]
    world_size: int | None = values.get("world_size")
    nodes: int | None = values.get("nodes")
    nproc: int | None = values.get("nproc_per_node")
    if topology == "in-container":
        if nodes is not None and nodes != 1:
            issue("nodes", f"expected 1 for in-container (one container; cross-container runs one per node); got {nodes}")
        elif world_size is None and nproc is None:
            issue("nodes", "expected world_size or nproc_per_node with it (in-container: the processes in its one container)")
        if world_size is not None and nproc is not None and world_size != nproc:
            issue(
                "world_size",
                f"expected world_size = nodes x nproc_per_node = {nproc}; got {world_size}",
                "nodes",
                "nproc_per_node",
            )
        nodes, nproc = 1, nproc if nproc is not None else world_size
        if values.get("rendezvous", "static") != "static":
            issue(
                "rendezvous",
                f"expected static for in-container (it runs the launcher with --standalone); got {values['rendezvous']!r}",
            )
        if values.get("master_addr") == "ip":
            issue("master_addr", "expected name for in-container (no other node addresses node 0); got 'ip'")
        rendezvous, master_addr = "static", "name"
    else:
        if nodes is not None:
            nproc = 1 if nproc is None else nproc
            if world_size is not None and world_size != nodes * nproc:
                issue(
                    "world_size",
                    f"expected world_size = nodes x nproc_per_node = {nodes * nproc}; got {world_size}",
                    "nodes",
                    "nproc_per_node",
                )
        elif world_size is not None:
            if nproc is None:
                nodes, nproc = world_size, 1
            elif world_size % nproc:
                issue(
                    "world_size",
                    f"expected world_size = nodes x nproc_per_node, a multiple of nproc_per_node = {nproc}; got {world_size}",
                    "nproc_per_node",
                )
            else:
                nodes = world_size // nproc
        else:
            issue("nproc_per_node", "expected nodes or world_size with it (cross-container: one container per node)", "nodes")
        rendezvous = values.get("rendezvous", defaults.get("rendezvous", "static"))
        master_addr = values.get("master_addr", defaults.get("master_addr", "name"))
        if rendezvous in NO_LAUNCHER_RENDEZVOUS and nproc is not None and nproc != 1:
            if "rendezvous" in values:
                issue(
                    "rendezvous",
                    f"expected static or c10d with nproc_per_node = {nproc} (env and tcp run one process per container, "
                    f"no launcher); got {rendezvous!r}",
                    "nproc_per_node",
                )
            else:
                issue(
                    "nproc_per_node",
                    f"expected 1 with rendezvous {rendezvous} (one process per container, no launcher); got {nproc}",
                    "rendezvous",
                )
    if issues or nodes is None or nproc is None:
        return None, issues

    def pick(key: str, default: Any) -> Any:
        return values[key] if key in values else defaults.get(key, default)

    env = {**defaults.get("env", {}), **values.get("env", {})}
    return {
        "topology": topology,
        "world_size": nodes * nproc,
        "backend": pick("backend", "gloo"),
        "image": pick("image", None),
        "timeout_s": pick("timeout_s", DEFAULT_TIMEOUT_S),
        "collective_timeout_s": pick("collective_timeout_s", DEFAULT_COLLECTIVE_TIMEOUT_S),
        "check_timeout_s": pick("check_timeout_s", DEFAULT_CHECK_TIMEOUT_S),
        "python": pick("python", DEFAULT_PYTHON),
        "nodes": nodes,
        "nproc_per_node": nproc,
        "rendezvous": rendezvous,
        "master_addr": master_addr,
        "egress": pick("egress", False),
        "extra_networks": values.get("extra_networks", 0),
        "ipv6": pick("ipv6", False),
        "cpus": pick("cpus", None),
        "memory": pick("memory", None),
        "shm_size": pick("shm_size", None),
        "env": tuple(sorted(env.items())),
        "user": pick("user", None),
        "working_dir": pick("working_dir", None),
    }, []


# --- a scenario entry: one scenario, or a matrix of them ------------------------------------------


def _entry(node: yaml.Node, key_path: str, defaults: dict[str, Any], problems: _Problems) -> list[Scenario]:
    fields = _mapping(node, key_path, _SCENARIO_KEYS, (), problems)
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
    for key, alternatives in (
        ("topology", ("topology",)),
        ("world_size", ("world_size", "nodes", "nproc_per_node")),
        ("checks", ("checks",)),
    ):
        if (key == "checks" or written_axes is not None) and not present.intersection(alternatives):
            problems.add(node, f"{key_path}.{key}", "required key is missing")
    if matrix_node is not None and "name" not in fields:
        problems.add(node, f"{key_path}.name", "required key is missing (a matrix's scenarios are named <name>.<value>...)")
    name: str | None = None
    if "name" in fields:
        name = _typed(
            fields["name"],
            f"{key_path}.name",
            problems,
            _NAME_EXPECTED,
            lambda v: isinstance(v, str) and NAME_PATTERN.fullmatch(v) is not None,
        )
    values = _values(fields, _VALUE_KEYS, key_path, problems)
    checks = _checks(fields["checks"], f"{key_path}.checks", problems) if "checks" in fields else ()
    axes = _matrix(matrix_node, key_path, fields, problems) if matrix_node is not None else None
    excludes: list[dict[str, Any]] = []
    if "exclude" in fields:
        if matrix_node is None:
            problems.add(
                fields["exclude"], f"{key_path}.exclude", "expected exclude only with a matrix (it removes combinations)"
            )
        elif axes is not None:
            excludes = _excludes(fields["exclude"], key_path, axes, problems)
    if len(problems.lines) > before:
        return []

    if axes is None:
        kwargs, issues = _resolve(values, defaults)
        for found in issues:
            problems.add(fields.get(found.key, node), f"{key_path}.{found.key}", found.message)
        if kwargs is None:
            return []
        return [Scenario(name=name or f"{kwargs['topology']}-{kwargs['world_size']}ranks", checks=checks, **kwargs)]

    assert name is not None
    axis_names = [axis for axis, _ in axes]
    matrix_key = _key_node(node, "matrix")
    scenarios: list[Scenario] = []
    reported: set[str] = set()
    too_long = False
    combinations = [dict(zip(axis_names, combo, strict=True)) for combo in itertools.product(*(v for _, v in axes))]
    kept = [c for c in combinations if not any(all(c[a] == v for a, v in ex.items()) for ex in excludes)]
    if not kept:
        problems.add(
            _key_node(node, "exclude"),
            f"{key_path}.exclude",
            f"expected at least one combination left; the exclude entries remove all {len(combinations)}",
        )
    for combo in kept:
        expanded = ".".join([name] + [_short(axis, combo[axis]) for axis in axis_names])
        kwargs, issues = _resolve({**values, **combo}, defaults)
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
        defaults = _values(top, _DEFAULT_KEYS, "", problems)
        scenarios_node = top.get("scenarios")
        if scenarios_node is not None:
            if not isinstance(scenarios_node, yaml.SequenceNode) or not scenarios_node.value:
                problems.add(
                    scenarios_node, "scenarios", f"expected a non-empty list of scenarios; got {_describe(scenarios_node)}"
                )
            else:
                # Scenario names and matrix names share one namespace: `distval plan` groups by the latter.
                seen: dict[str, int] = {}
                for index, node in enumerate(scenarios_node.value):
                    entry = _entry(node, f"scenarios[{index}]", defaults, problems)
                    names = [s.name for s in entry]
                    if entry and entry[0].expanded_from is not None:
                        names.insert(0, entry[0].expanded_from)
                    for name in names:
                        if name in seen:
                            problems.add(
                                node,
                                f"scenarios[{index}].name",
                                f"expected a unique scenario name; {name!r} is also scenarios[{seen[name]}]",
                            )
                        seen.setdefault(name, index)
                    scenarios.extend(entry)
    if problems.lines:
        raise ConfigError(problems.in_file_order())
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
