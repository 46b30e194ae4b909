"""Strict reading of YAML nodes, and the collection of every problem found in a file.

The loader works on composed nodes, not on loaded values, because a node knows its line (for the
``FILE:LINE: KEY.PATH: expected ..., got ...`` messages) and its text as written (YAML 1.1 would read an
unquoted ``1000:50`` as the integer 60050 and ``3.10`` as 3.1).
"""

from __future__ import annotations

import difflib
import re
import weakref
from collections.abc import Callable, Iterable
from typing import Any

import yaml

# Echoed values are cut to this many characters (a 10 MB value must not make a 10 MB message).
SHOWN_MAX = 100
EXTENSION_PREFIX = "x-"
# Problems shown of one file, at most; then one line with the count of the rest.
PROBLEMS_SHOWN = 100
_LINE_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")


def shown(text: str) -> str:
    """``text`` quoted for a message, on one line, cut to SHOWN_MAX characters (saying how long it was)."""
    if len(text) <= SHOWN_MAX:
        return repr(text)
    return f"{text[:SHOWN_MAX]!r}... ({len(text)} characters)"


def file_label(path: str) -> str:
    """A file's name for the ``FILE:LINE:`` of a message: as given, quoted when it would break the line."""
    return path if path.isprintable() and len(path) <= 4 * SHOWN_MAX else shown(path)


def _plain(key: str) -> bool:
    """A key shown as is in a key path; any other (blanks, control characters, brackets, very long) is quoted."""
    return 0 < len(key) <= SHOWN_MAX and key.isprintable() and not any(c.isspace() or c in "[]'\"" for c in key)


def child_path(key_path: str, key: str | None) -> str:
    """The key path of ``key`` in the mapping at ``key_path`` (None: a key that is not a scalar)."""
    if key is None:
        part = "[<a non-scalar key>]"
    elif _plain(key):
        part = key
    else:
        part = f"[{shown(key)}]"
    if not key_path or part.startswith("["):
        return f"{key_path}{part}"
    return f"{key_path}.{part}"


def index_path(key_path: str, index: int) -> str:
    return f"{key_path}[{index}]"


def line_of(text: str, position: int) -> int:
    """The 1-based line of ``position`` in ``text``, counting line breaks as YAML does."""
    return len(_LINE_BREAK.findall(text, 0, position)) + 1


class Problems:
    """Every problem found in one file, each one line: ``FILE:LINE: KEY.PATH: message``."""

    def __init__(self, path: str) -> None:
        self.path = file_label(path)
        self.lines: list[str] = []
        self._numbers: list[int] = []
        self._general: dict[int, int] = {}  # id(node) -> index in lines of its add_general problem

    def add(self, node: yaml.Node | None, key_path: str, message: str) -> None:
        line = f":{node.start_mark.line + 1}" if node is not None else ""
        where = f"{key_path}: " if key_path else ""
        text = f"{self.path}{line}: {where}{message}"
        index = self._general.pop(id(node), None) if node is not None else None
        if index is not None:  # the key's own reader says it more precisely: one problem per value
            self.lines[index] = text
            return
        self.lines.append(text)
        self._numbers.append(node.start_mark.line if node is not None else -1)

    def add_general(self, node: yaml.Node, key_path: str, message: str) -> None:
        """A problem of any text in the file (found as it is composed), which a later ``add`` for the same
        node (its key's reader) replaces."""
        self.add(node, key_path, message)
        self._general[id(node)] = len(self.lines) - 1

    def in_file_order(self) -> list[str]:
        """The problems by line (stable: those on one line in the order found); past PROBLEMS_SHOWN, one line
        that says how many more there are (aliases can make a small file hold a million problems)."""
        order = sorted(range(len(self.lines)), key=lambda i: self._numbers[i])
        shown_lines = [self.lines[i] for i in order[:PROBLEMS_SHOWN]]
        if len(order) > PROBLEMS_SHOWN:
            shown_lines.append(f"{self.path}: {len(order) - PROBLEMS_SHOWN} more problems (the first {PROBLEMS_SHOWN} are shown)")
        return shown_lines


def describe(node: yaml.Node) -> str:
    """What a node is, for the ``got ...`` half of a message; a value YAML cannot read says why."""
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    text = shown(node.value) if node.value != "" else "nothing"
    if scalar(node) is INVALID and node in _TOO_BIG:
        return f"{text} ({TOO_BIG})"
    if scalar(node) is INVALID:
        tag = str(node.tag)
        if tag.startswith(_YAML_TAG):
            return f"{text} (not a valid YAML !!{tag[len(_YAML_TAG) :]})"
        return f"{text} (tag {shown(tag)} is not one the YAML safe loader knows)"
    return text


INVALID = object()
_YAML_TAG = "tag:yaml.org,2002:"


# An integer's text, at most: int() and PyYAML's sexagesimal reading (1:0:0:...) cost more than linear time in
# the digits. And an integer's size, at most: a float() of a 400-digit integer overflows (every number key
# compares as a float). Both far above any value distval takes (a googol of ranks is still refused by its bound).
INTEGER_CHARS_MAX = 200
INTEGER_BITS_MAX = 512
TOO_BIG = f"an integer of more than {INTEGER_CHARS_MAX} characters or above 2**{INTEGER_BITS_MAX}: far past any bound"
_INT_TAG = "tag:yaml.org,2002:int"
# A node's value, constructed once: an alias hands the same node to every reader again, and constructing it
# on each read made a file of aliases to one long value cost (aliases x value length).
_VALUES: weakref.WeakKeyDictionary[yaml.Node, Any] = weakref.WeakKeyDictionary()
_TOO_BIG: weakref.WeakSet[yaml.Node] = weakref.WeakSet()


def scalar(node: yaml.Node) -> Any:
    """The Python value of a scalar node as the safe loader constructs it; INVALID for a tag it refuses or a
    value its tag does not allow (PyYAML's constructors raise ValueError, KeyError, ... on those, not YAMLError:
    ``2024-02-30``, ``!!int abc``, ``!!bool maybe``), and for an integer past INTEGER_CHARS_MAX or INTEGER_BITS_MAX."""
    try:
        return _VALUES[node]
    except KeyError:
        pass
    value: Any = INVALID
    if node.tag != _INT_TAG or len(str(node.value)) <= INTEGER_CHARS_MAX:
        try:
            value = yaml.constructor.SafeConstructor().construct_object(node, deep=True)
        except Exception:  # untrusted text: any constructor failure means "not a valid value of its tag"
            value = INVALID
    if node.tag == _INT_TAG and (value is INVALID or value.bit_length() > INTEGER_BITS_MAX):
        if value is not INVALID or len(str(node.value)) > INTEGER_CHARS_MAX:
            _TOO_BIG.add(node)
        value = INVALID
    _VALUES[node] = value
    return value


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
    extensions: bool = False,
) -> dict[str, yaml.Node] | None:
    """A mapping's value nodes by key; unknown, duplicate and missing keys are problems. None: not a mapping.

    ``extensions``: keys starting with ``x-`` are the user's own and are skipped (as in Compose files): the
    place for anchors that merge keys (``<<: *defaults``) take from.
    """
    if not isinstance(node, yaml.MappingNode):
        keys = f"with keys {', '.join(allowed)}" if allowed else "(empty: this takes no keys)"
        problems.add(node, key_path, f"expected a mapping {keys}; got {describe(node)}")
        return None
    result: dict[str, yaml.Node] = {}
    for key_node, value_node in node.value:
        key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
        child = child_path(key_path, key)
        if extensions and key is not None and key.startswith(EXTENSION_PREFIX) and isinstance(scalar(key_node), str):
            continue
        if key is None or key not in allowed or not isinstance(scalar(key_node), str):
            expected = f"expected one of {', '.join(allowed)}" if allowed else "expected no keys here"
            problems.add(key_node, child, f"unknown key; {expected}{did_you_mean(key, allowed)}")
        elif key in result:
            problems.add(key_node, child, "duplicate key")
        else:
            result[key] = value_node
    for key in required:
        if key not in result:
            problems.add(node, child_path(key_path, key), "required key is missing")
    return result


def did_you_mean(given: object, choices: Iterable[str]) -> str:
    """'; did you mean 'large_mib'?' for a string close to one of ``choices`` (a misspelt key or name), else ''.
    difflib's ratio at 0.75 takes one slip in a short word (wold_size, allreduce, large_mb) and nothing far."""
    if not isinstance(given, str):
        return ""
    close = difflib.get_close_matches(given, list(choices), n=1, cutoff=0.75)
    return f"; did you mean {close[0]!r}?" if close else ""


def typed(
    node: yaml.Node,
    key_path: str,
    problems: Problems,
    expected: str,
    accept: Callable[[Any], bool],
    choices: Iterable[str] = (),
) -> Any:
    """A scalar's value if ``accept`` takes it; else a problem (with the closest of ``choices``, if any is
    close) and None."""
    value = scalar(node) if isinstance(node, yaml.ScalarNode) else None
    if not isinstance(node, yaml.ScalarNode) or not accept(value):
        problems.add(node, key_path, f"expected {expected}; got {describe(node)}{did_you_mean(value, choices)}")
        return None
    return value


def key_node(node: yaml.Node, key: str) -> yaml.Node:
    """The key's own node in a mapping (its line), or the mapping when the key is absent."""
    if isinstance(node, yaml.MappingNode):
        for key_scalar, _ in node.value:
            if isinstance(key_scalar, yaml.ScalarNode) and key_scalar.value == key:
                return key_scalar
    return node
