"""The one declaration of every kind of check argument (``ArgSpec.kind`` in distval/checks/catalog.py): for each, its
words for the docs (``distval checks``, docs/checks-reference.md), its JSON Schema fragment (distval/config/schema.py)
and its reader (distval/config/check_list.py). The three readings are derived from here, so they cannot drift apart;
tests/config/test_argument_kinds.py holds every kind the catalog uses to all three."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import yaml

from distval.checks.catalog import ArgSpec
from distval.config import byte_sizes, values
from distval.config.yaml_nodes import Problems, describe, scalar


@dataclass(frozen=True)
class ArgumentKind:
    """What one kind of argument takes, said three ways; each is given the argument's own spec (its minimum, its
    choices)."""

    words: Callable[[ArgSpec], str]
    schema: Callable[[ArgSpec], dict[str, Any]]
    reader: Callable[[ArgSpec], values.Reader]


def _names(spec: ArgSpec) -> values.Reader:
    """A list of some of the argument's choices."""
    read = values.choice(spec.choices)

    def read_list(node: yaml.Node, key_path: str, problems: Problems) -> tuple[str, ...] | None:
        if not isinstance(node, yaml.SequenceNode):
            problems.add(node, key_path, f"expected a list of {', '.join(spec.choices)}; got {describe(node)}")
            return None
        names = [read(item, f"{key_path}[{index}]", problems) for index, item in enumerate(node.value)]
        return None if None in names else tuple(names)

    return read_list


# Free-form lists: what each item must look like (a JSON Schema pattern, and the words for it).
PATH_PATTERN = r"^/[^\x00-\x1f]{0,4095}$"
VARIABLE_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,255}$"


def _strings(pattern: str, expected: str, expected_list: str) -> Callable[[ArgSpec], values.Reader]:
    """A list of strings, each matching ``pattern`` (what a YAML reader and the schema both check): ``expected`` says
    what an item is, ``expected_list`` what the list is."""
    compiled = re.compile(pattern)

    def reader(spec: ArgSpec) -> values.Reader:
        def read_list(node: yaml.Node, key_path: str, problems: Problems) -> tuple[str, ...] | None:
            if not isinstance(node, yaml.SequenceNode):
                problems.add(node, key_path, f"expected {expected_list}; got {describe(node)}")
                return None
            found: list[str | None] = []
            for index, item in enumerate(node.value):
                value = scalar(item) if isinstance(item, yaml.ScalarNode) else None
                if not isinstance(value, str) or compiled.fullmatch(value) is None:
                    problems.add(item, f"{key_path}[{index}]", f"expected {expected}; got {describe(item)}")
                    found.append(None)
                else:
                    found.append(value)
            return None if None in found else tuple(v for v in found if v is not None)

        return read_list

    return reader


KINDS: Mapping[str, ArgumentKind] = MappingProxyType(
    {
        "int": ArgumentKind(
            words=lambda spec: f"whole number >= {spec.minimum}",
            schema=lambda spec: {"type": "integer", "minimum": spec.minimum},
            reader=lambda spec: values.integer(spec.minimum),
        ),
        "seconds": ArgumentKind(
            words=lambda spec: "seconds > 0",
            schema=lambda spec: {"type": "number", "exclusiveMinimum": 0},
            reader=lambda spec: values.seconds,
        ),
        "fraction": ArgumentKind(
            words=lambda spec: "fraction 0..1",
            schema=lambda spec: {"type": "number", "minimum": 0, "maximum": 1},
            reader=lambda spec: values.fraction,
        ),
        "version": ArgumentKind(
            words=lambda spec: "version requirement",
            # An unquoted 2.15 is a number to YAML; the reader reads its text.
            schema=lambda spec: {
                "anyOf": [{"type": "string", "pattern": values.VERSION_PATTERN.pattern}, {"type": "number", "minimum": 0}]
            },
            reader=lambda spec: values.version,
        ),
        "choice": ArgumentKind(
            words=lambda spec: "one of " + ", ".join(spec.choices),
            schema=lambda spec: {"type": "string", "enum": list(spec.choices)},
            reader=lambda spec: values.choice(spec.choices),
        ),
        "names": ArgumentKind(
            words=lambda spec: "list of " + ", ".join(spec.choices),
            schema=lambda spec: {"type": "array", "items": {"type": "string", "enum": list(spec.choices)}},
            reader=_names,
        ),
        "paths": ArgumentKind(
            words=lambda spec: "list of absolute paths",
            schema=lambda spec: {"type": "array", "items": {"type": "string", "pattern": PATH_PATTERN}},
            reader=_strings(PATH_PATTERN, "an absolute path", "a list of absolute paths"),
        ),
        "variables": ArgumentKind(
            words=lambda spec: "list of environment variable names",
            schema=lambda spec: {"type": "array", "items": {"type": "string", "pattern": VARIABLE_PATTERN}},
            reader=_strings(
                VARIABLE_PATTERN, "an environment variable name (letters, digits, '_')", "a list of environment variable names"
            ),
        ),
        "sizes": ArgumentKind(
            words=lambda spec: "list of byte sizes",
            schema=lambda spec: dict(byte_sizes.SIZES_SCHEMA),
            reader=lambda spec: byte_sizes.byte_sizes,
        ),
        "busbw": ArgumentKind(
            words=lambda spec: "GB/s, or size -> GB/s",
            schema=lambda spec: dict(byte_sizes.BUSBW_SCHEMA),
            reader=lambda spec: byte_sizes.busbw_threshold,
        ),
        "efficiency": ArgumentKind(
            words=lambda spec: f"busbw / raw TCP, > 0 and <= {byte_sizes.EFFICIENCY_MAX:g}; or size -> that",
            schema=lambda spec: dict(byte_sizes.EFFICIENCY_SCHEMA),
            reader=lambda spec: byte_sizes.efficiency_threshold,
        ),
        "bool": ArgumentKind(
            words=lambda spec: "true or false",
            schema=lambda spec: {"type": "boolean"},
            reader=lambda spec: values.boolean,
        ),
    }
)


def kind_of(spec: ArgSpec) -> ArgumentKind:
    """The declaration of the spec's kind; a kind declared nowhere is a bug of the catalog's."""
    try:
        return KINDS[spec.kind]
    except KeyError:
        raise ValueError(f"argument kind {spec.kind!r} is not declared in distval/config/argument_kinds.py") from None
