"""A scenario's ``checks:`` list, read strictly against the catalog of checks and their arguments."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import yaml

from distval.checks.catalog import CATALOG, ArgSpec
from distval.config import values
from distval.config.argument_kinds import kind_of
from distval.config.model import CheckSpec
from distval.config.yaml_nodes import Problems, describe, mapping, typed


def _argument(spec: ArgSpec, node: yaml.Node, key_path: str, problems: Problems) -> Any:
    return kind_of(spec).reader(spec)(node, key_path, problems)


def _check(node: yaml.Node, key_path: str, problems: Problems) -> CheckSpec | None:
    known = ", ".join(CATALOG)
    if isinstance(node, yaml.ScalarNode):
        name = typed(node, key_path, problems, f"a check name ({known})", lambda v: v in CATALOG, CATALOG)
        return None if name is None else CheckSpec(name=name)
    fields = mapping(node, key_path, ("name", "args", "required"), ("name",), problems)
    if fields is None or "name" not in fields:
        return None
    name = typed(fields["name"], f"{key_path}.name", problems, f"a check name ({known})", lambda v: v in CATALOG, CATALOG)
    if name is None:
        return None
    required = False
    if "required" in fields:
        required = bool(values.boolean(fields["required"], f"{key_path}.required", problems))
    info = CATALOG[name]
    args: dict[str, Any] = {}
    if "args" in fields:
        arg_path = f"{key_path}.args"
        arg_nodes = mapping(fields["args"], arg_path, tuple(info.args), (), problems)
        for arg_name, arg_node in (arg_nodes or {}).items():
            value = _argument(info.args[arg_name], arg_node, f"{arg_path}.{arg_name}", problems)
            if value is not None:
                args[arg_name] = value
        for arg_name, arg_node in (arg_nodes or {}).items():
            needed = info.args[arg_name].needs
            if needed and args.get(needed) is False:
                problems.add(
                    arg_node, f"{arg_path}.{arg_name}", f"{arg_name} needs {needed}, but {needed} is false: drop one of them"
                )
    return CheckSpec(name=name, args=MappingProxyType(args), required=required)


def backend_issues(checks: tuple[CheckSpec, ...], backend: str) -> list[tuple[str, str]]:
    """(key path below the scenario, message) for each check argument given under a backend it means nothing with
    (ArgSpec.backends); known only once the scenario's backend is resolved (its own, a matrix's, or the top level's)."""
    issues = []
    for index, check in enumerate(checks):
        for arg_name in check.args:
            allowed = CATALOG[check.name].args[arg_name].backends
            if allowed and backend not in allowed:
                issues.append(
                    (
                        f"checks[{index}].args.{arg_name}",
                        f"expected {arg_name} only with backend {' or '.join(allowed)}; got backend {backend!r}: drop it "
                        "from this scenario",
                    )
                )
    return issues


def read_checks(node: yaml.Node, key_path: str, problems: Problems) -> tuple[CheckSpec, ...] | None:
    """The checks in the order listed; None (after a problem) if the list is not a non-empty list."""
    if not isinstance(node, yaml.SequenceNode) or not node.value:
        problems.add(node, key_path, f"expected a non-empty list of checks; got {describe(node)}")
        return None
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
