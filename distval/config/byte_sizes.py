"""Arguments of the ``bandwidth`` check: message sizes ("4KiB", "64MiB" or bytes), the busbw thresholds (one
number of GB/s, or size -> GB/s) and the efficiency thresholds (one fraction of raw TCP, or size -> fraction), read
strictly and given to the suite as plain numbers."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import yaml

from distval.config.yaml_nodes import Problems, describe, scalar, written

UNITS = {"": 1, "b": 1, "kib": 1024, "mib": 1024**2, "gib": 1024**3}
# At most 20 digits: int() of thousands of digits raises (Python caps it at 4300) or costs quadratic time.
BYTE_SIZE_PATTERN = re.compile(r"^\s*([0-9]{1,20})\s*(B|KiB|MiB|GiB)?\s*$", re.IGNORECASE)
# The largest message the sweep accepts: 1 GiB per rank is already past what a CI machine should move.
MAX_BYTES = 1024**3
SIZE_EXPECTED = "a message size > 0 and <= 1GiB: bytes, or a number with B, KiB, MiB or GiB (e.g. 4KiB, 64MiB)"


def byte_size_value(text: str) -> int | None:
    """'4KiB' -> 4096, '1048576' -> 1048576; None when it is not a size in range."""
    match = BYTE_SIZE_PATTERN.match(text)
    if match is None:
        return None
    value = int(match.group(1)) * UNITS[(match.group(2) or "").lower()]
    return value if 0 < value <= MAX_BYTES else None


def byte_size(node: yaml.Node, key_path: str, problems: Problems) -> int | None:
    text = written(node)
    value = None if text is None else byte_size_value(text)
    if value is None:
        problems.add(node, key_path, f"expected {SIZE_EXPECTED}; got {describe(node)}")
    return value


def byte_sizes(node: yaml.Node, key_path: str, problems: Problems) -> tuple[int, ...] | None:
    """A non-empty list of sizes, each once, in bytes, smallest first."""
    if not isinstance(node, yaml.SequenceNode) or not node.value:
        problems.add(node, key_path, f"expected a non-empty list of message sizes (e.g. [4KiB, 1MiB]); got {describe(node)}")
        return None
    sizes = [byte_size(item, f"{key_path}[{index}]", problems) for index, item in enumerate(node.value)]
    if None in sizes:
        return None
    return tuple(sorted({s for s in sizes if s is not None}))


def _gbps(node: yaml.Node, key_path: str, problems: Problems) -> float | None:
    value = scalar(node) if isinstance(node, yaml.ScalarNode) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        problems.add(node, key_path, f"expected a bandwidth in GB/s > 0; got {describe(node)}")
        return None
    return float(value)


# An efficiency (busbw / raw TCP) can pass 1 by noise, or where a collective's links beat one TCP stream, but a
# threshold above 1 would ask gloo to beat the raw sockets it runs on: no property of an image.
EFFICIENCY_MAX = 1.0


def _efficiency(node: yaml.Node, key_path: str, problems: Problems) -> float | None:
    value = scalar(node) if isinstance(node, yaml.ScalarNode) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= EFFICIENCY_MAX:
        expected = f"an efficiency (busbw / raw TCP) > 0 and <= {EFFICIENCY_MAX:g}"
        problems.add(node, key_path, f"expected {expected}; got {describe(node)}")
        return None
    return float(value)


Number = Callable[[yaml.Node, str, Problems], float | None]


def _per_size(what: str, number: Number) -> Callable[[yaml.Node, str, Problems], float | dict[str, float] | None]:
    """One ``number`` for every size, or a mapping size -> ``number`` (keys as bytes, for the suite's JSON spec)."""

    def read(node: yaml.Node, key_path: str, problems: Problems) -> float | dict[str, float] | None:
        if not isinstance(node, yaml.MappingNode):
            return number(node, key_path, problems)
        thresholds: dict[str, float] = {}
        ok = bool(node.value)
        if not ok:
            problems.add(node, key_path, f"expected {what} or a mapping size -> {what}; got an empty mapping")
        for key_node, value_node in node.value:
            size = byte_size(key_node, f"{key_path}.{key_node.value}", problems)
            found = number(value_node, f"{key_path}.{key_node.value}", problems)
            if size is None or found is None:
                ok = False
                continue
            thresholds[str(size)] = found
        return thresholds if ok else None

    return read


busbw_threshold = _per_size("a number of GB/s", _gbps)
efficiency_threshold = _per_size("an efficiency", _efficiency)


_SIZE_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "integer", "minimum": 1, "maximum": MAX_BYTES},
        {"type": "string", "pattern": r"^\s*[0-9]+\s*([Bb]|[KkMmGg][Ii][Bb])?\s*$"},
    ]
}
SIZES_SCHEMA: dict[str, Any] = {"type": "array", "minItems": 1, "items": _SIZE_SCHEMA}


def _per_size_schema(number: dict[str, Any]) -> dict[str, Any]:
    return {
        "anyOf": [
            number,
            {
                "type": "object",
                "minProperties": 1,
                "propertyNames": {"pattern": _SIZE_SCHEMA["anyOf"][1]["pattern"]},
                "additionalProperties": number,
            },
        ]
    }


BUSBW_SCHEMA: dict[str, Any] = _per_size_schema({"type": "number", "exclusiveMinimum": 0})
EFFICIENCY_SCHEMA: dict[str, Any] = _per_size_schema({"type": "number", "exclusiveMinimum": 0, "maximum": EFFICIENCY_MAX})
