"""docs/scenario-keys.md: every scenario key of config/keys.py's KEYS, with where it may appear, the values it takes
(read from its JSON Schema, the one the loader's schema is built from), its default and its one-line doc. Derived,
never written by hand: ``distval schema --format markdown`` prints it; tests/project/test_front_door.py keeps the
page current."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from distval.config.keys import KEYS, Key

# Where the generated page lives, relative to the repository (like distval/config/checks_reference.py's REFERENCE_PAGE).
KEYS_PAGE = "docs/scenario-keys.md"

# The keys whose schema distval/config/schema.py builds from more than one declaration (Key.schema is None).
_BUILT_ELSEWHERE = {
    "checks": "list of checks: a name, or `{name, args}` ([checks-reference.md](checks-reference.md))",
    "matrix": "mapping of axis key -> list of values (the axes: the keys marked *axis*)",
    "exclude": "list of mappings of axis key -> value: combinations the matrix leaves out",
}


def schema_words(schema: Mapping[str, Any]) -> str:
    """A JSON Schema fragment in words: 'one of a, b', 'integer 1..1024', 'number > 0 (at most 604800)'."""
    if "anyOf" in schema or "oneOf" in schema:
        return " or ".join(schema_words(each) for each in schema.get("anyOf", schema.get("oneOf", ())))
    kind = schema.get("type")
    if "enum" in schema:
        return "one of " + ", ".join(f"`{choice}`" for choice in schema["enum"])
    if kind == "integer" or kind == "number":
        low, high = schema.get("minimum"), schema.get("maximum")
        word = "integer" if kind == "integer" else "number"
        if "exclusiveMinimum" in schema:
            return f"{word} > {schema['exclusiveMinimum']}" + (f" (at most {high})" if high is not None else "")
        if low is not None and high is not None:
            return f"{word} {low}..{high}"
        return word + (f" >= {low}" if low is not None else "")
    if kind == "string":
        if "format" in schema:
            return f"{schema['format']} address (string)" if schema["format"].startswith("ipv") else schema["format"]
        if "pattern" in schema:
            return "string (pattern in the schema)"
        return "string"
    if kind == "boolean":
        return "true or false"
    if kind == "array":
        count = ""
        if "maxItems" in schema:
            count = f" ({schema.get('minItems', 0)}..{schema['maxItems']} items)"
        items = schema.get("items", {})
        if isinstance(items, Mapping) and (items.get("type") == "object" or "oneOf" in items):
            return "list of mappings" + count + " (fields in the schema)"
        return f"list of {schema_words(items)}{count}" if items else "list"
    if kind == "object":
        return "mapping of name -> value"
    return "see the schema"


def _where(key: Key) -> str:
    places = ["scenario"]
    if key.top is not None:
        places.append("top level")
    if key.axis is not None:
        places.append("axis")
    return ", ".join(places)


def _default(key: Key) -> str:
    value = key.default
    if isinstance(value, MappingProxyType | dict):
        return "{}" if not value else str(dict(value))
    if value is None or value == ():
        return "—"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    return f"`{value}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_keys_markdown() -> str:
    lines = [
        "# Scenario keys",
        "",
        "<!-- Generated from distval/config/keys.py by `distval schema --format markdown`; do not edit by hand. -->",
        "",
        "Every key a scenario file may use, in the order scenarios list them. *where*: in a scenario (always), at the "
        "top level as a default for every scenario (*top level*), as a matrix axis (*axis*). The values are the JSON "
        "Schema's (`distval schema`); the loader checks the rules between keys ([scenarios.md](scenarios.md)). "
        "A default of — means the key is unset unless given (its meaning when unset is in the description).",
        "",
        "| key | where | values | default | description |",
        "|---|---|---|---|---|",
    ]
    for key in KEYS:
        values = schema_words(key.schema) if key.schema is not None else _BUILT_ELSEWHERE[key.name]
        lines.append(f"| `{key.name}` | {_where(key)} | {_cell(values)} | {_cell(_default(key))} | {_cell(key.doc)} |")
    lines += ["", "Top-level only: `version` (optional; the only version is 1) and `scenarios` (the list of scenarios).", ""]
    return "\n".join(lines)
