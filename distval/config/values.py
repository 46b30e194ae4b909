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

from distval.config.yaml_nodes import Problems, child_path, describe, scalar, shown, typed, written
from distval_suite.versions import readable

Reader = Callable[[yaml.Node, str, Problems], Any]

# The shape of a requirement, for the JSON Schema; distval_suite.versions.readable is the exact rule (a ``.*``
# prefix pattern takes only == or !=), shared with the suite that evaluates it inside the image.
# No two blank runs meet (an optional operator brings its own): "1," and 16,000 blanks took 6 s with them.
VERSION_PATTERN = re.compile(
    r"^\s*(?:(?:==|!=|>=|<=|>|<)\s*)?[0-9]+(?:\.[0-9]+)*(?:\.\*)?\s*"
    r"(?:,\s*(?:(?:==|!=|>=|<=|>|<)\s*)?[0-9]+(?:\.[0-9]+)*(?:\.\*)?\s*)*$"
)
# At most 20 digits: int() of thousands of digits raises (Python caps it at 4300) or costs quadratic time.
SIZE_PATTERN = re.compile(r"^[0-9]{1,20}[bkmg]?$", re.IGNORECASE)
ENV_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
USER_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?$")
# Variables the harness or the launcher set in the containers: a scenario's env must not shadow them.
RESERVED_ENV = ("RANK", "LOCAL_RANK", "GROUP_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
RESERVED_ENV_PREFIX = "DISTVAL_"
# Characters no value that reaches a command line, an environment or a label may hold.
CONTROL = re.compile("[\x00-\x1f\x7f]")
# Characters no text in a config may hold at all (keys, values, extensions): C0 controls but tab, DEL, C1
# controls (0x9b is CSI), and the bidi overrides, isolates and marks. YAML's reader refuses most of them
# written raw, but its double-quoted escapes ("\e[2J", "\x9b", "\u202e") make any: printed in a plan, they
# would rewrite what a reviewer reads (a hidden env value, a working_dir shown as another).
TEXT_FORBIDDEN = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def text_problem(text: str) -> str | None:
    """Why ``text`` (any scalar of a config, as written) cannot be in a config; None when it can."""
    found = TEXT_FORBIDDEN.search(text)
    if found is None:
        return None
    return (
        f"expected text without control characters (C0 but tab, DEL, C1) or bidi overrides; "
        f"got {shown(text)} (U+{ord(found.group()):04X} at character {found.start() + 1})"
    )


# Docker's image reference grammar (github.com/distribution/reference, reference.go's comment):
#   reference := name [ ":" tag ] [ "@" digest ];  name := [domain '/'] path-component ['/' path-component]*
# where path components are lowercase, a domain is a host name or [IPv6] with an optional port, a tag
# is [A-Za-z0-9_][A-Za-z0-9_.-]{0,127} and a digest is algorithm:hex (32 hex digits or more). An image id
# (sha256:<hex>, or its short hex form) reads as a name with a tag, as the Engine accepts it.
_PATH_COMPONENT = "[a-z0-9]+(?:(?:__|[._]|-+)[a-z0-9]+)*"
_DOMAIN_COMPONENT = "(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
_TAG = "[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = "[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
IMAGE_PATTERN = re.compile(rf"^(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*(?::{_TAG})?(?:@{_DIGEST})?$")
IMAGE_NAME_MAX = 255  # Docker's limit on the name (domain and path) of a reference
IMAGE_MAX = 512  # the whole reference: name, tag (128) and a sha512 digest fit
IMAGE_EXPECTED = "an image reference like name:tag, registry/name:tag, name@sha256:<digest> or an image id"


def integer(minimum: int, maximum: int | None = None, bound: str = "") -> Reader:
    """An integer >= ``minimum`` (and <= ``maximum``: distval's stated upper bound, ``bound`` says why)."""

    def read(node: yaml.Node, key_path: str, problems: Problems) -> int | None:
        value: int | None = typed(
            node,
            key_path,
            problems,
            f"an integer >= {minimum}",
            lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= minimum,
        )
        if value is not None and maximum is not None and value > maximum:
            problems.add(node, key_path, f"expected an integer <= {maximum}{bound}; got {describe(node)}")
            return None
        return value

    return read


def number(what: str, maximum: float, bound: str = "") -> Reader:
    """A finite number > 0 and <= ``maximum`` of ``what`` (seconds, CPUs), as a float."""

    def read(node: yaml.Node, key_path: str, problems: Problems) -> float | None:
        value = typed(
            node,
            key_path,
            problems,
            f"a number of {what} > 0",
            lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0,
        )
        if value is not None and value > maximum:
            problems.add(node, key_path, f"expected a number of {what} <= {maximum:g}{bound}; got {describe(node)}")
            return None
        return None if value is None else float(value)

    return read


def fraction(node: yaml.Node, key_path: str, problems: Problems) -> float | None:
    """A number from 0 to 1 (a share of something), as a float."""
    value = typed(
        node,
        key_path,
        problems,
        "a number from 0 to 1",
        lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1,
    )
    return None if value is None else float(value)


SECONDS_MAX = 7 * 86400  # a week: a bound on every timeout (torch turns seconds into a timedelta)
CPUS_MAX = 1024
# Docker's least CPU limit (10^7 nano-CPUs): below it the Engine refuses the container, and a value under
# 1e-9 became nano_cpus 0, which the Engine reads as "no limit" -- the opposite of what was asked.
CPUS_MIN = 0.01
seconds = number("seconds", SECONDS_MAX, " (a week)")
_any_cpus = number("CPUs", CPUS_MAX)


def cpus(node: yaml.Node, key_path: str, problems: Problems) -> float | None:
    """CPUs per container, CPUS_MIN to CPUS_MAX."""
    value: float | None = _any_cpus(node, key_path, problems)
    if value is not None and value < CPUS_MIN:
        problems.add(node, key_path, f"expected a number of CPUs >= {CPUS_MIN} (Docker's least CPU limit); got {describe(node)}")
        return None
    return value


def string(expected: str) -> Reader:
    """A string with something other than blanks in it and no control characters; ``expected`` says what it names."""

    def read(node: yaml.Node, key_path: str, problems: Problems) -> str | None:
        value: str | None = typed(
            node,
            key_path,
            problems,
            f"{expected} (no control characters)",
            lambda v: isinstance(v, str) and v.strip() != "" and CONTROL.search(v) is None,
        )
        return value

    return read


def image_problem(text: str) -> str | None:
    """Why ``text`` is not an image reference by Docker's grammar; None when it is one."""
    if len(text) > IMAGE_MAX or IMAGE_PATTERN.fullmatch(text) is None:
        return f"expected {IMAGE_EXPECTED} (Docker's reference grammar: lowercase name, tag of letters, digits, '_', '.', '-')"
    name = text.split("@", 1)[0]
    if ":" in name.rsplit("/", 1)[-1]:
        name = name.rsplit(":", 1)[0]
    if len(name) > IMAGE_NAME_MAX:
        return f"expected {IMAGE_EXPECTED}, its name (before ':tag') at most {IMAGE_NAME_MAX} characters"
    return None


def image(node: yaml.Node, key_path: str, problems: Problems) -> str | None:
    """An image reference by Docker's grammar: a YAML string (an unquoted 2024-01-01 or 12345678 is not one)."""
    text = written(node) if isinstance(node, yaml.ScalarNode) and isinstance(scalar(node), str) else None
    why = image_problem(text) if text is not None else f"expected {IMAGE_EXPECTED}"
    if text is None or why is not None:
        problems.add(node, key_path, f"{why}; got {describe(node)}")
        return None
    return text


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
    unit = text[-1].lower() if text[-1].isalpha() else "b"
    if int(text.rstrip("bkmgBKMG")) * _UNIT_BYTES[unit] > SIZE_MAX_BYTES:
        problems.add(node, key_path, f"expected a Docker size <= {SIZE_MAX_BYTES // 2**30}g; got {describe(node)}")
        return None
    return text.lower()


_UNIT_BYTES = {"b": 1, "k": 2**10, "m": 2**20, "g": 2**30}
SIZE_MAX_BYTES = 2**44  # 16 TiB: far above any container, far below the Engine's int64


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
        child = child_path(key_path, key)
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
                f"are its own); got {shown(key)}",
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
        if "\x00" in text or "\n" in text or "\r" in text:
            problems.add(
                value_node,
                child,
                f"expected a value without NUL or line breaks (the Engine passes NAME=value strings); got {shown(text)}",
            )
            continue
        result[key] = text
    return result
