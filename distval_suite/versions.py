"""Version requirements as scenarios state them (``>=2.6,<2.7``, ``2.6``, ``13.*``): torch-free.

The harness validates the same strings on the host (distval.config) and the suite evaluates them
inside the image, so this module imports only the standard library and is unit-tested on the host.
"""

from __future__ import annotations

import re
from typing import List, Tuple


def version_tuple(text: str) -> Tuple[int, ...]:
    """The leading numbers of a version: ``2.6.0+debian`` -> (2, 6, 0); ``1.13.0a0`` -> (1, 13, 0)."""
    numbers = []
    for part in text.split("+")[0].split("."):
        digits = re.match(r"\d+", part)
        if digits is None:
            break
        numbers.append(int(digits.group()))
    return tuple(numbers)


def version_matches(version: str, specifier: str) -> bool:
    """``specifier`` is a comma-separated list of comparisons: ``>=2.6,<2.7``, ``==2.15.0``, ``2.6``.

    A clause ending in ``.*`` (``13.*``, ``==12.*``, ``!=12.*``) compares only the numbers before it,
    as pip's prefix matching does: ``13.*`` accepts 13.0 and 13.2, not 130.
    """
    have = version_tuple(version)
    for operator, want in parse_specifier(specifier):
        if operator in ("==", "!="):
            equal = have[: len(want)] == want  # "==2.6" accepts 2.6.0 and 2.6.1
            if equal != (operator == "=="):
                return False
            continue
        padded = have + (0,) * max(0, len(want) - len(have))
        compare = {">=": padded >= want, "<=": padded <= want, ">": padded > want, "<": padded < want}
        if not compare[operator]:
            return False
    return True


def parse_specifier(specifier: str) -> List[Tuple[str, Tuple[int, ...]]]:
    """(operator, numbers) per clause; ValueError naming the first clause it cannot read."""
    clauses: List[Tuple[str, Tuple[int, ...]]] = []
    for clause in specifier.split(","):
        clause = clause.strip()
        match = re.match(r"^(==|!=|>=|<=|>|<)?\s*([0-9]+(?:\.[0-9]+)*)(\.\*)?$", clause)
        if match is None:
            raise ValueError("cannot read the version requirement %r" % clause)
        operator, wildcard = match.group(1) or "==", bool(match.group(3))
        if wildcard and operator not in ("==", "!="):
            raise ValueError("a .* pattern takes == or != only: %r" % clause)
        # A prefix pattern and a plain == compare the same way: only the numbers given.
        clauses.append((operator, version_tuple(match.group(2))))
    return clauses


def readable(specifier: str) -> bool:
    """Whether version_matches can read ``specifier``: distval.config can validate a scenario's version
    arguments with this, so the host accepts exactly what the suite evaluates (``13.*`` included)."""
    try:
        parse_specifier(specifier)
    except ValueError:
        return False
    return True
