"""Helpers shared by the config tests (tests/config/: test_config.py, test_matrix.py, test_schema.py): YAML text in
tests, exact line numbers, and the problems a bad file gives. A plain module, not a test module.
"""

from __future__ import annotations

import textwrap

import pytest

from distval.config import parse_config
from distval.errors import ConfigError

FILE = "scen.yaml"


def yaml_text(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def line_of(text: str, marker: str) -> int:
    """1-based number of the only line containing ``marker`` (so the expected line is exact, not guessed)."""
    hits = [number for number, line in enumerate(text.splitlines(), start=1) if marker in line]
    assert len(hits) == 1, f"marker {marker!r} must occur on exactly one line, found {hits}"
    return hits[0]


def problems_of(text: str, path: str = FILE) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, path)
    problems = caught.value.problems
    assert problems, "a ConfigError must carry at least one problem"
    for problem in problems:
        assert "\n" not in problem, f"a problem must be one line: {problem!r}"
        assert problem.startswith(f"{path}"), problem
    assert str(caught.value) == "\n".join(problems)
    return problems
