"""A scenario's ``faults:`` (what the harness does to a node while the checks run) and ``expect:`` (how the
ranks must react), read strictly: every problem names its key path, what was expected and what was seen.

Rules that need the rest of the scenario (the node exists, the trigger check is listed, cross-container
topology) are ``scenario_fault_issues``, which the loader applies to every scenario it built.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from distval.config import values
from distval.config.yaml_nodes import Problems, describe, mapping, typed

FAULT_KINDS = ("kill", "partition", "freeze", "slow", "oom", "kill-store")
ERROR_KINDS = ("timeout", "connection_closed", "killed", "oom")
RANK_GROUPS = ("survivors", "victims")
FAULTS_MAX = 4
# The keys each kind takes besides kind, node and after.
_KIND_KEYS: Mapping[str, tuple[str, ...]] = {
    "kill": ("rank",),
    "partition": ("peers", "heal_after_s"),
    "freeze": ("resume_after_s",),
    "slow": ("rate", "latency_ms", "loss_percent", "heal_after_s"),
    "oom": ("memory",),
    "kill-store": (),
}
_COMMON_KEYS = ("kind", "node", "after")
_RATE_PATTERN = r"^[1-9][0-9]*(bit|kbit|mbit|gbit)$"


@dataclass(frozen=True)
class Trigger:
    """The fault lands ``delay_s`` after the node's first rank wrote its record of ``check``."""

    check: str
    delay_s: float = 0.0


@dataclass(frozen=True)
class FaultSpec:
    kind: str  # one of FAULT_KINDS
    node: int | None  # the node it hits; None for kill-store (the node holding the rendezvous store)
    after: Trigger
    rank: int | None = None  # kill: only this worker process (a global rank), not the whole container
    peers: tuple[int, ...] = ()  # partition: drop traffic to these nodes only; empty: disconnect from the network
    heal_after_s: float | None = None  # partition: reconnect (or remove the rules); slow: remove the qdisc
    resume_after_s: float | None = None  # freeze: unpause this long after
    rate: str | None = None  # slow: tbf rate, e.g. 1mbit
    latency_ms: float | None = None  # slow: netem delay (skipped where the kernel lacks sch_netem)
    loss_percent: float | None = None  # slow: netem loss (the same)
    memory: str | None = None  # oom: the node's memory limit, which a check (allocate) exceeds


@dataclass(frozen=True)
class Expectation:
    """These ranks must fail with one of these kinds of error, within this window after the first fault."""

    ranks: str | tuple[int, ...]  # "survivors", "victims", or global ranks
    errors: tuple[str, ...]
    within_s: tuple[float, float]


def _read_after(node: yaml.Node, key_path: str, problems: Problems) -> Trigger | None:
    fields = mapping(node, key_path, ("check", "delay_s"), ("check",), problems)
    if fields is None or "check" not in fields:
        return None
    check = values.string("a check name")(fields["check"], f"{key_path}.check", problems)
    delay_s = 0.0
    if "delay_s" in fields:
        delay = typed(
            fields["delay_s"],
            f"{key_path}.delay_s",
            problems,
            "a number of seconds >= 0",
            lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= values.SECONDS_MAX,
        )
        if delay is None:
            return None
        delay_s = float(delay)
    return None if check is None else Trigger(check, delay_s)


def _read_ints(node: yaml.Node, key_path: str, problems: Problems, what: str) -> tuple[int, ...] | None:
    if not isinstance(node, yaml.SequenceNode) or not node.value:
        problems.add(node, key_path, f"expected a non-empty list of {what}; got {describe(node)}")
        return None
    read = values.integer(0)
    found = [read(item, f"{key_path}[{index}]", problems) for index, item in enumerate(node.value)]
    if None in found:
        return None
    return tuple(int(v) for v in found if v is not None)


def _percent(node: yaml.Node, key_path: str, problems: Problems) -> float | None:
    value = typed(
        node,
        key_path,
        problems,
        "a percentage > 0 and <= 100",
        lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= 100,
    )
    return None if value is None else float(value)


def _fault(node: yaml.Node, key_path: str, problems: Problems) -> FaultSpec | None:
    all_keys = _COMMON_KEYS + tuple(k for keys in _KIND_KEYS.values() for k in keys)
    fields = mapping(node, key_path, tuple(dict.fromkeys(all_keys)), ("kind", "after"), problems)
    if fields is None or "kind" not in fields:
        return None
    before = len(problems.lines)
    kind = values.choice(FAULT_KINDS)(fields["kind"], f"{key_path}.kind", problems)
    if kind is None:
        return None
    for key in fields:
        if key not in _COMMON_KEYS and key not in _KIND_KEYS[kind]:
            takes = ", ".join(_KIND_KEYS[kind]) or "nothing more"
            problems.add(fields[key], f"{key_path}.{key}", f"expected no {key} for a {kind} fault (it takes {takes})")
    if kind == "kill-store":
        if "node" in fields:
            problems.add(fields["node"], f"{key_path}.node", "expected no node: kill-store hits the node holding the store")
        node_index = None
    elif "node" not in fields:
        problems.add(node, f"{key_path}.node", "required key is missing")
        node_index = None
    else:
        node_index = values.integer(0)(fields["node"], f"{key_path}.node", problems)
    after = _read_after(fields["after"], f"{key_path}.after", problems) if "after" in fields else None
    spec: dict[str, Any] = {}
    if "rank" in fields:
        spec["rank"] = values.integer(0)(fields["rank"], f"{key_path}.rank", problems)
    if "peers" in fields:
        spec["peers"] = _read_ints(fields["peers"], f"{key_path}.peers", problems, "node numbers")
    for key in ("heal_after_s", "resume_after_s"):
        if key in fields:
            spec[key] = values.seconds(fields[key], f"{key_path}.{key}", problems)
    if "rate" in fields:
        spec["rate"] = typed(
            fields["rate"],
            f"{key_path}.rate",
            problems,
            "a tc rate like 1mbit (bit, kbit, mbit or gbit)",
            lambda v: isinstance(v, str) and re.fullmatch(_RATE_PATTERN, v) is not None,
        )
    if "latency_ms" in fields:
        spec["latency_ms"] = values.number("milliseconds", 60_000.0)(fields["latency_ms"], f"{key_path}.latency_ms", problems)
    if "loss_percent" in fields:
        spec["loss_percent"] = _percent(fields["loss_percent"], f"{key_path}.loss_percent", problems)
    if "memory" in fields:
        spec["memory"] = values.size(fields["memory"], f"{key_path}.memory", problems)
    if kind == "slow" and not {"rate", "latency_ms", "loss_percent"} & set(fields):
        problems.add(node, f"{key_path}.rate", "required key is missing (slow needs rate, latency_ms or loss_percent)")
    if kind == "oom" and "memory" not in fields:
        problems.add(node, f"{key_path}.memory", "required key is missing (the node's memory limit)")
    if len(problems.lines) > before or after is None:
        return None
    return FaultSpec(kind=kind, node=node_index, after=after, **spec)


def read_faults(node: yaml.Node, key_path: str, problems: Problems) -> tuple[FaultSpec, ...] | None:
    if not isinstance(node, yaml.SequenceNode) or not node.value or len(node.value) > FAULTS_MAX:
        problems.add(node, key_path, f"expected a list of 1 to {FAULTS_MAX} faults; got {describe(node)}")
        return None
    faults = [_fault(item, f"{key_path}[{index}]", problems) for index, item in enumerate(node.value)]
    if None in faults:
        return None
    return tuple(f for f in faults if f is not None)


def _window(node: yaml.Node, key_path: str, problems: Problems) -> tuple[float, float] | None:
    expected = "[lo, hi]: two numbers of seconds with 0 <= lo <= hi"
    if not isinstance(node, yaml.SequenceNode) or len(node.value) != 2:
        problems.add(node, key_path, f"expected {expected}; got {describe(node)}")
        return None
    bounds = [
        typed(
            item,
            f"{key_path}[{index}]",
            problems,
            "a number of seconds >= 0",
            lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= values.SECONDS_MAX,
        )
        for index, item in enumerate(node.value)
    ]
    if None in bounds:
        return None
    lo, hi = float(bounds[0]), float(bounds[1])
    if lo > hi:
        problems.add(node, key_path, f"expected {expected}; got [{lo:g}, {hi:g}]")
        return None
    return lo, hi


def _expectation(node: yaml.Node, key_path: str, problems: Problems) -> Expectation | None:
    fields = mapping(node, key_path, ("ranks", "error", "within_s"), ("ranks", "error", "within_s"), problems)
    if fields is None or len(fields) < 3:
        return None
    ranks: str | tuple[int, ...] | None
    if isinstance(fields["ranks"], yaml.SequenceNode):
        ranks = _read_ints(fields["ranks"], f"{key_path}.ranks", problems, "ranks")
    else:
        ranks = typed(
            fields["ranks"],
            f"{key_path}.ranks",
            problems,
            f"{' or '.join(RANK_GROUPS)}, or a list of ranks",
            lambda v: v in RANK_GROUPS,
        )
    error_node = fields["error"]
    read_kind = values.choice(ERROR_KINDS)
    if isinstance(error_node, yaml.SequenceNode) and error_node.value:
        kinds = [read_kind(item, f"{key_path}.error[{i}]", problems) for i, item in enumerate(error_node.value)]
        errors = None if None in kinds else tuple(str(k) for k in kinds)
    else:
        one = read_kind(error_node, f"{key_path}.error", problems)
        errors = None if one is None else (one,)
    window = _window(fields["within_s"], f"{key_path}.within_s", problems)
    if ranks is None or errors is None or window is None:
        return None
    return Expectation(ranks=ranks, errors=errors, within_s=window)


def read_expect(node: yaml.Node, key_path: str, problems: Problems) -> tuple[Expectation, ...] | None:
    if not isinstance(node, yaml.SequenceNode):
        problems.add(
            node, key_path, f"expected a list of {{ranks, error, within_s}} (empty: no rank may fail); got {describe(node)}"
        )
        return None
    found = [_expectation(item, f"{key_path}[{index}]", problems) for index, item in enumerate(node.value)]
    if None in found:
        return None
    return tuple(e for e in found if e is not None)


def scenario_fault_issues(scenario: Any) -> list[tuple[str, str]]:
    """(key path below the scenario, message) for each rule between faults, expect and the rest of the scenario."""
    faults: tuple[FaultSpec, ...] = scenario.faults
    issues: list[tuple[str, str]] = []
    if scenario.expect is not None and not faults:
        issues.append(("expect", "expected expect only with faults (it judges how the ranks react to them)"))
    if not faults:
        return issues
    if scenario.topology != "cross-container" or scenario.nodes < 2:
        issues.append(
            (
                "faults",
                "expected faults only in a cross-container scenario of 2 or more nodes; "
                f"got {scenario.topology} with {scenario.nodes} node(s)",
            )
        )
        return issues
    if scenario.expect is None:
        issues.append(("expect", "required key is missing (a fault scenario states how the ranks must react)"))
    checks = [c.name for c in scenario.checks]
    for index, fault in enumerate(faults):
        path = f"faults[{index}]"
        if fault.node is not None and fault.node >= scenario.nodes:
            issues.append((f"{path}.node", f"expected a node of the scenario (0..{scenario.nodes - 1}); got {fault.node}"))
        elif fault.rank is not None:
            ranks = (
                range(fault.node * scenario.nproc_per_node, (fault.node + 1) * scenario.nproc_per_node)
                if fault.node is not None
                else range(0)
            )
            if fault.rank not in ranks:
                issues.append(
                    (f"{path}.rank", f"expected a rank of node {fault.node} ({', '.join(map(str, ranks))}); got {fault.rank}")
                )
        for peer in fault.peers:
            if peer >= scenario.nodes or peer == fault.node:
                issues.append(
                    (
                        f"{path}.peers",
                        f"expected other nodes of the scenario (0..{scenario.nodes - 1}, not {fault.node}); got {peer}",
                    )
                )
        if fault.after.check not in checks:
            issues.append(
                (f"{path}.after.check", f"expected a check the scenario lists ({', '.join(checks)}); got {fault.after.check!r}")
            )
    for index, expectation in enumerate(scenario.expect or ()):
        if isinstance(expectation.ranks, tuple):
            for rank in expectation.ranks:
                if rank >= scenario.world_size:
                    issues.append(
                        (f"expect[{index}].ranks", f"expected ranks of the scenario (0..{scenario.world_size - 1}); got {rank}")
                    )
    return issues


_SECONDS_SCHEMA = {"type": "number", "minimum": 0, "maximum": values.SECONDS_MAX}
_POSITIVE_SECONDS = {"type": "number", "exclusiveMinimum": 0, "maximum": values.SECONDS_MAX}


def schema_of_faults() -> dict[str, Any]:
    """The JSON Schema of ``faults:``: one form per kind, each with only the keys that kind takes."""
    after = {
        "type": "object",
        "required": ["check"],
        "additionalProperties": False,
        "properties": {"check": {"type": "string"}, "delay_s": _SECONDS_SCHEMA},
    }
    key_schemas: dict[str, Any] = {
        "rank": {"type": "integer", "minimum": 0},
        "peers": {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0}},
        "heal_after_s": _POSITIVE_SECONDS,
        "resume_after_s": _POSITIVE_SECONDS,
        "rate": {"type": "string", "pattern": _RATE_PATTERN},
        "latency_ms": {"type": "number", "exclusiveMinimum": 0, "maximum": 60000},
        "loss_percent": {"type": "number", "exclusiveMinimum": 0, "maximum": 100},
        "memory": {"anyOf": [{"type": "string", "pattern": "^[0-9]*[1-9][0-9]*[bkmgBKMG]?$"}, {"type": "integer", "minimum": 1}]},
    }
    forms = []
    for kind, keys in _KIND_KEYS.items():
        properties: dict[str, Any] = {"kind": {"const": kind}, "after": after}
        required = ["kind", "after"]
        if kind != "kill-store":
            properties["node"] = {"type": "integer", "minimum": 0}
            required.append("node")
        properties.update({key: key_schemas[key] for key in keys})
        form: dict[str, Any] = {"type": "object", "required": required, "additionalProperties": False, "properties": properties}
        if kind == "oom":
            form["required"] = [*required, "memory"]
        if kind == "slow":
            form["anyOf"] = [{"required": [key]} for key in keys if key != "heal_after_s"]
        forms.append(form)
    return {"type": "array", "minItems": 1, "maxItems": FAULTS_MAX, "items": {"oneOf": forms}}


def schema_of_expect() -> dict[str, Any]:
    kinds = {"type": "string", "enum": list(ERROR_KINDS)}
    return {
        "type": "array",
        "items": {
            "type": "object",
            "required": ["ranks", "error", "within_s"],
            "additionalProperties": False,
            "properties": {
                "ranks": {
                    "anyOf": [
                        {"type": "string", "enum": list(RANK_GROUPS)},
                        {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0}},
                    ]
                },
                "error": {"anyOf": [kinds, {"type": "array", "minItems": 1, "items": kinds}]},
                "within_s": {"type": "array", "minItems": 2, "maxItems": 2, "items": _SECONDS_SCHEMA},
            },
        },
    }
