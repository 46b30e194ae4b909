"""Readers of single values: each takes a node, its key path and the problems, and returns the value or
None after adding one problem that says what was expected and what was seen.

Factories (``integer(1)``, ``choice(...)``) return readers, so that the key table in keys.py can name
a key's reader in one expression.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import yaml

from harness.config.yaml_nodes import Problems, describe, typed, written
from suite.versions import readable

Reader = Callable[[yaml.Node, str, Problems], Any]

# The shape of a requirement, for the JSON Schema; suite.versions.readable is the exact rule (a ``.*``
# prefix pattern takes only == or !=), shared with the suite that evaluates it inside the image.
VERSION_PATTERN = re.compile(
    r"^\s*(==|!=|>=|<=|>|<)?\s*[0-9]+(\.[0-9]+)*(\.\*)?\s*(,\s*(==|!=|>=|<=|>|<)?\s*[0-9]+(\.[0-9]+)*(\.\*)?\s*)*$"
)
SIZE_PATTERN = re.compile(r"^[0-9]+[bkmg]?$", re.IGNORECASE)
ENV_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
USER_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?$")
# Variables the harness or the launcher set in the containers: a scenario's env must not shadow them.
RESERVED_ENV = ("RANK", "LOCAL_RANK", "GROUP_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
RESERVED_ENV_PREFIX = "DISTVAL_"


def integer(minimum: int) -> Reader:
    def read(node: yaml.Node, key_path: str, problems: Problems) -> int | None:
        value: int | None = typed(
            node,
            key_path,
            problems,
            f"an integer >= {minimum}",
            lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= minimum,
        )
        return value

    return read


def number(what: str) -> Reader:
    """A finite number > 0 of ``what`` (seconds, CPUs), as a float."""

    def read(node: yaml.Node, key_path: str, problems: Problems) -> float | None:
        value = typed(
            node,
            key_path,
            problems,
            f"a number of {what} > 0",
            lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0,
        )
        return None if value is None else float(value)

    return read


seconds = number("seconds")


def string(expected: str) -> Reader:
    """A string with something other than blanks in it; ``expected`` says what it names."""

    def read(node: yaml.Node, key_path: str, problems: Problems) -> str | None:
        value: str | None = typed(node, key_path, problems, expected, lambda v: isinstance(v, str) and v.strip() != "")
        return value

    return read


def choice(choices: tuple[str, ...]) -> Reader:
    def read(node: yaml.Node, key_path: str, problems: Problems) -> str | None:
        value: str | None = typed(node, key_path, problems, f"one of {', '.join(choices)}", lambda v: v in choices)
        return value

    return read


def boolean(node: yaml.Node, key_path: str, problems: Problems) -> bool | None:
    value: bool | None = typed(node, key_path, problems, "true or false", lambda v: isinstance(v, bool))
    return value


def version(node: yaml.Node, key_path: str, problems: Problems) -> str | None:
    """A version requirement, as written: YAML would read an unquoted 3.10 as the float 3.1."""
    text = node.value if isinstance(node, yaml.ScalarNode) else None
    if not isinstance(text, str) or VERSION_PATTERN.match(text) is None or not readable(text):
        problems.add(
            node, key_path, f"expected a version requirement like '>=2.6,<2.7', '2.15.0' or '13.*'; got {describe(node)}"
        )
        return None
    return text.strip()


def size(node: yaml.Node, key_path: str, problems: Problems) -> str | None:
    """A Docker size > 0 as written, lower-cased: "512m", "2g"."""
    text = written(node)
    if text is None or SIZE_PATTERN.fullmatch(text) is None or int(text.rstrip("bkmgBKMG")) == 0:
        problems.add(
            node, key_path, f"expected a Docker size > 0 like 512m or 2g (digits, then b, k, m or g); got {describe(node)}"
        )
        return None
    return text.lower()


def user(node: yaml.Node, key_path: str, problems: Problems) -> str | None:
    text = written(node)
    if text is None or USER_PATTERN.fullmatch(text) is None:
        problems.add(node, key_path, f"expected a user: name, uid, name:group or uid:gid; got {describe(node)}")
        return None
    return text


def working_dir(node: yaml.Node, key_path: str, problems: Problems) -> str | None:
    text = written(node)
    if text is None or not text.startswith("/") or any(c in text for c in "\x00\r\n"):
        problems.add(node, key_path, f"expected an absolute path in the container (starting with '/'); got {describe(node)}")
        return None
    return text


def env(node: yaml.Node, key_path: str, problems: Problems) -> dict[str, str] | None:
    """Extra environment variables: names the harness does not set, values as written."""
    if not isinstance(node, yaml.MappingNode):
        problems.add(node, key_path, f"expected a mapping of environment variable names to values; got {describe(node)}")
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
                f"got {describe(key_node)}",
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
        text = written(value_node)
        if text is None:
            problems.add(
                value_node,
                child,
                f"expected a value: a string, a number or true/false ('' for an empty one); got {describe(value_node)}",
            )
            continue
        result[key] = text
    return result
