"""Package requirements as they appear in a wheel's metadata (``Requires-Dist``), read without pip.

The suite runs on whatever Python the image has, with no ``packaging`` module to rely on, so this is
the small part of PEP 508 and PEP 440 that torch's own requirements use:
``nvidia-nccl-cu13==2.27.7; platform_system == "Linux"``, ``cuda-toolkit[cublas,cudart]==13.0.2;
platform_system == "Linux"``, ``opt-einsum>=3.3; extra == "opt-einsum"``. Standard library only,
unit-tested on the host.
"""

from __future__ import annotations

import os
import platform
import re
import sys
from typing import Dict, List, NamedTuple, Optional, Tuple

from distval_suite.versions import version_matches


class Requirement(NamedTuple):
    name: str  # normalized (PEP 503): lower case, runs of -_. as one -
    extras: Tuple[str, ...]
    specifier: str  # "" when any version will do
    marker: str  # "" when it always applies
    text: str  # as written


_REQUIREMENT = re.compile(
    r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*"
    r"(?:\[(?P<extras>[^\]]*)\])?\s*"
    r"(?:\((?P<paren>[^)]*)\)|(?P<spec>[<>=!~][^;]*))?\s*"
    r"(?:;\s*(?P<marker>.*))?$"
)


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_requirement(text: str) -> Requirement:
    match = _REQUIREMENT.match(text)
    if match is None or "@" in text.split(";")[0]:
        raise ValueError("cannot read the requirement %r" % text)
    extras = tuple(normalize(e.strip()) for e in (match.group("extras") or "").split(",") if e.strip())
    specifier = (match.group("paren") or match.group("spec") or "").strip()
    return Requirement(normalize(match.group("name")), extras, specifier, (match.group("marker") or "").strip(), text)


def specifier_matches(version: str, specifier: str) -> bool:
    """PEP 440 clauses: ==, !=, <=, >=, <, > (with ``.*``), ``~=`` and ``===``."""
    for clause in (c.strip() for c in specifier.split(",") if c.strip()):
        if clause.startswith("==="):
            if version.strip() != clause[3:].strip():
                return False
        elif clause.startswith("~="):
            # ~=X.Y.Z means >=X.Y.Z and ==X.Y.*
            base = clause[2:].strip()
            prefix = ".".join(base.split(".")[:-1])
            if not version_matches(version, ">=%s" % base) or not version_matches(version, "==%s.*" % prefix):
                return False
        elif not version_matches(version, clause):
            return False
    return True


def marker_environment() -> Dict[str, str]:
    """PEP 508's marker variables for this interpreter and platform."""
    return {
        "os_name": os.name,
        "sys_platform": sys.platform,
        "platform_machine": platform.machine(),
        "platform_python_implementation": platform.python_implementation(),
        "platform_release": platform.release(),
        "platform_system": platform.system(),
        "platform_version": platform.version(),
        "python_version": "%d.%d" % sys.version_info[:2],
        "python_full_version": platform.python_version(),
        "implementation_name": sys.implementation.name,
        "implementation_version": "%d.%d.%d" % sys.implementation.version[:3],
    }


_TOKEN = re.compile(
    r"\s*(?:(?P<string>'[^']*'|\"[^\"]*\")|(?P<op>===|==|!=|<=|>=|~=|<|>|not\s+in\b|in\b)"
    r"|(?P<paren>[()])|(?P<bool>and\b|or\b)|(?P<name>[A-Za-z_][A-Za-z0-9_.]*))"
)
_VERSION_VARIABLES = {"python_version", "python_full_version", "implementation_version", "platform_release"}


def marker_holds(marker: str, environment: Dict[str, str], extras: Tuple[str, ...] = ()) -> bool:
    """Whether a PEP 508 marker holds in ``environment``; ``extra == "x"`` holds for the requested extras."""
    if not marker:
        return True
    tokens: List[Tuple[str, str]] = []
    position = 0
    text = marker.strip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise ValueError("cannot read the marker %r at %r" % (marker, text[position:]))
        kind = match.lastgroup or ""
        tokens.append((kind, re.sub(r"\s+", " ", match.group(kind))))
        position = match.end()
        while position < len(text) and text[position].isspace():
            position += 1
    result, end = _or(tokens, 0, environment, extras)
    if end != len(tokens):
        raise ValueError("cannot read the marker %r" % marker)
    return result


Tokens = List[Tuple[str, str]]


def _or(tokens: Tokens, index: int, environment: Dict[str, str], extras: Tuple[str, ...]) -> Tuple[bool, int]:
    value, index = _and(tokens, index, environment, extras)
    while index < len(tokens) and tokens[index] == ("bool", "or"):
        right, index = _and(tokens, index + 1, environment, extras)
        value = value or right
    return value, index


def _and(tokens: Tokens, index: int, environment: Dict[str, str], extras: Tuple[str, ...]) -> Tuple[bool, int]:
    value, index = _atom(tokens, index, environment, extras)
    while index < len(tokens) and tokens[index] == ("bool", "and"):
        right, index = _atom(tokens, index + 1, environment, extras)
        value = value and right
    return value, index


def _atom(tokens: Tokens, index: int, environment: Dict[str, str], extras: Tuple[str, ...]) -> Tuple[bool, int]:
    if index < len(tokens) and tokens[index] == ("paren", "("):
        value, index = _or(tokens, index + 1, environment, extras)
        if index >= len(tokens) or tokens[index] != ("paren", ")"):
            raise ValueError("unbalanced parentheses in a marker")
        return value, index + 1
    if index + 3 > len(tokens):
        raise ValueError("a marker comparison needs three parts")
    (left_kind, left), (op_kind, op), (right_kind, right) = tokens[index : index + 3]
    if op_kind != "op":
        raise ValueError("expected a comparison operator in a marker, got %r" % op)
    variable = left if left_kind == "name" else right if right_kind == "name" else None
    if variable == "extra":
        wanted = normalize((right if left_kind == "name" else left).strip("'\""))
        present = wanted in extras
        return (present if op == "==" else not present if op == "!=" else False), index + 3
    left_value = _value(left_kind, left, environment)
    right_value = _value(right_kind, right, environment)
    return _compare(left_value, op, right_value, variable in _VERSION_VARIABLES), index + 3


def _value(kind: str, token: str, environment: Dict[str, str]) -> str:
    if kind == "string":
        return token[1:-1]
    if kind == "name":
        if token not in environment:
            raise ValueError("unknown marker variable %r" % token)
        return environment[token]
    raise ValueError("expected a variable or a string in a marker, got %r" % token)


def _compare(left: str, op: str, right: str, as_version: bool) -> bool:
    if op == "in":
        return left in right
    if op == "not in":
        return left not in right
    if as_version and re.match(r"^[0-9]+(\.[0-9]+)*$", right) and re.match(r"^[0-9]", left):
        return specifier_matches(left, op + right)
    if op == "==" or op == "===":
        return left == right
    if op == "!=":
        return left != right
    return {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}.get(op, False)


def applicable(requirements: Optional[List[str]], environment: Dict[str, str], extras: Tuple[str, ...] = ()) -> List[Requirement]:
    """The requirements whose markers hold here (with these extras requested), parsed."""
    found: List[Requirement] = []
    for text in requirements or []:
        requirement = parse_requirement(text)
        if marker_holds(requirement.marker, environment, extras):
            found.append(requirement)
    return found
