"""The one way distval reads JSON: ``loads``, which refuses what two readers could read two ways.

A JSON object with a key twice is read by Python's json as its last value and by other readers (jq's first
pass, Go's encoding/json, some signature tools) differently: a report or an envelope of ``{"status": "passed",
"status": "failed"}`` would say one thing to distval and another to whatever else reads it, so it is refused
(``DuplicateKey``, a ``ValueError``). JSON nested deeper than the parser's recursion allows is refused the same
way (``TooDeep``), never raised as a RecursionError. Both are ``json.JSONDecodeError``s, so each caller's existing
"not JSON" refusal (bad input, a rank's error) covers them, with its own words.

PyYAML's safe loader takes a mapping's last duplicate too; ``yaml_safe_load`` is its refusal for the YAML
files read outside the config loader (which reports duplicates itself, as config problems).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import yaml


class DuplicateKey(json.JSONDecodeError):
    """A JSON object with one key twice."""

    def __init__(self, key: str) -> None:
        ValueError.__init__(self, f"the key {json.dumps(key)[:80]} appears twice in one object")
        self.msg, self.doc, self.pos, self.lineno, self.colno = str(self), "", 0, 1, 1

    def __reduce__(self) -> tuple[Any, ...]:
        return (ValueError, (str(self),))


# Levels of nesting read: a report is a few, a rank's details at most records.DOCUMENT_MAX_DEPTH (64). Deeper JSON
# would make any later recursive walk of it (repr, a writer, a copy) hit Python's recursion limit far from here.
DEPTH_MAX = 100


class TooDeep(json.JSONDecodeError):
    """JSON nested past DEPTH_MAX levels (or the parser's recursion limit)."""

    def __init__(self) -> None:
        ValueError.__init__(self, f"nested more than {DEPTH_MAX} levels deep")
        self.msg, self.doc, self.pos, self.lineno, self.colno = str(self), "", 0, 1, 1

    def __reduce__(self) -> tuple[Any, ...]:
        return (ValueError, (str(self),))


def _unique(pairs: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise DuplicateKey(key)
        result[key] = value
    return result


def loads(text: str | bytes | bytearray) -> Any:
    """``json.loads(text)``, refusing a duplicate key (DuplicateKey) and nesting the parser cannot follow
    (TooDeep); any other fault is json's own JSONDecodeError (or a UnicodeDecodeError for bytes that are not
    UTF-8), all of them ValueErrors."""
    try:
        value = json.loads(text, object_pairs_hook=_unique)
    except RecursionError:
        raise TooDeep() from None
    _within_depth(value)
    return value


def _within_depth(value: Any) -> None:
    """TooDeep when ``value`` nests more than DEPTH_MAX lists and objects; walked without recursion."""
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict | list):
            if depth >= DEPTH_MAX:
                raise TooDeep()
            children = item.values() if isinstance(item, dict) else item
            pending.extend((child, depth + 1) for child in children if isinstance(child, dict | list))


class UniqueKeyLoader(yaml.SafeLoader):
    """yaml.SafeLoader refusing a mapping with one key twice (a yaml.constructor.ConstructorError, a YAMLError)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[object] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, str | int | float | bool) or key is None:
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"the key {key!r} appears twice in one mapping", key_node.start_mark
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


def yaml_safe_load(text: str) -> Any:
    """``yaml.safe_load(text)``, refusing a duplicate key in any mapping (a yaml.YAMLError)."""
    return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader
