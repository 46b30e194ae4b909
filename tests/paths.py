"""Where things are, for every test module whatever folder under tests/ it sits in: paths come from here, never
from a test module's own ``__file__`` (which moves when the module does)."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
GOLDEN = TESTS / "golden"
DATA = TESTS / "data"
SCHEMAS = TESTS / "schemas"
