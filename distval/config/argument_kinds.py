"""The one declaration of every kind of check argument (``ArgSpec.kind`` in distval/checks/catalog.py): for each, its
words for the docs (``distval checks``, docs/checks-reference.md), its JSON Schema fragment (distval/config/schema.py)
and its reader (distval/config/check_list.py). The three readings are derived from here, so they cannot drift apart;
tests/config/test_argument_kinds.py holds every kind the catalog uses to all three."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import yaml

from distval.checks.catalog import ArgSpec
from distval.config import byte_sizes, values
from distval.config.yaml_nodes import Problems, describe


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
    }
)


def kind_of(spec: ArgSpec) -> ArgumentKind:
    """The declaration of the spec's kind; a kind declared nowhere is a bug of the catalog's."""
    try:
        return KINDS[spec.kind]
    except KeyError:
        raise ValueError(f"argument kind {spec.kind!r} is not declared in distval/config/argument_kinds.py") from None
