"""Strict reading of YAML nodes, and the collection of every problem found in a file.

The loader works on composed nodes, not on loaded values, because a node knows its line (for the
``FILE:LINE: KEY.PATH: expected ..., got ...`` messages) and its text as written (YAML 1.1 would read an
unquoted ``1000:50`` as the integer 60050 and ``3.10`` as 3.1).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml


class Problems:
    """Every problem found in one file, each one line: ``FILE:LINE: KEY.PATH: message``."""

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


def describe(node: yaml.Node) -> str:
    """What a node is, for the ``got ...`` half of a message."""
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    return repr(node.value) if node.value != "" else "nothing"


INVALID = object()


def scalar(node: yaml.Node) -> Any:
    """The Python value of a scalar node as the safe loader constructs it; INVALID for a tag it refuses."""
    try:
        return yaml.constructor.SafeConstructor().construct_object(node, deep=True)
    except yaml.YAMLError:
        return INVALID


def written(node: yaml.Node) -> str | None:
    """A scalar's text as written, None for a null, an unknown tag or a collection.

    As written, because YAML 1.1 reads an unquoted 1000:50 as the sexagesimal integer 60050 and 1.10 as 1.1.
    """
    if not isinstance(node, yaml.ScalarNode):
        return None
    value = scalar(node)
    return None if value is None or value is INVALID else str(node.value)


def mapping(
    node: yaml.Node,
    key_path: str,
    allowed: tuple[str, ...],
    required: tuple[str, ...],
    problems: Problems,
) -> dict[str, yaml.Node] | None:
    """A mapping's value nodes by key; unknown, duplicate and missing keys are problems. None: not a mapping."""
    if not isinstance(node, yaml.MappingNode):
        keys = f"with keys {', '.join(allowed)}" if allowed else "(empty: this takes no keys)"
        problems.add(node, key_path, f"expected a mapping {keys}; got {describe(node)}")
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


def typed(
    node: yaml.Node,
    key_path: str,
    problems: Problems,
    expected: str,
    accept: Callable[[Any], bool],
) -> Any:
    """A scalar's value if ``accept`` takes it; else a problem and None."""
    value = scalar(node) if isinstance(node, yaml.ScalarNode) else None
    if not isinstance(node, yaml.ScalarNode) or not accept(value):
        problems.add(node, key_path, f"expected {expected}; got {describe(node)}")
        return None
    return value


def key_node(node: yaml.Node, key: str) -> yaml.Node:
    """The key's own node in a mapping (its line), or the mapping when the key is absent."""
    if isinstance(node, yaml.MappingNode):
        for key_scalar, _ in node.value:
            if isinstance(key_scalar, yaml.ScalarNode) and key_scalar.value == key:
                return key_scalar
    return node
