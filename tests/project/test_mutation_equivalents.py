"""tools/mutation_pass.py excuses a surviving mutant only where ``EQUIVALENT`` names it, by module, line, column and
mutation. An edit of the module moves its mutants: a stale entry then excuses nothing, and the pass reports as a gap
what was known to be equivalent (or, worse, excuses another mutant that lands on the same place). Every entry must be
a mutant its module makes now, so that an edit to verdict code rewrites the entries with it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mutation_pass", ROOT / "tools" / "mutation_pass.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_every_equivalent_mutant_is_one_its_module_makes_now() -> None:
    tool = _tool()
    paths = sorted({key.split(":", 1)[0] for key in tool.EQUIVALENT})
    made = {mutant.key for path in paths for mutant in tool.mutants(path, sources=False)}
    stale = tool.stale_equivalents(paths, made)
    assert not stale, f"run: python tools/mutation_pass.py {' '.join(paths)}; and write these entries again: {stale}"


def test_an_entry_moved_by_an_edit_is_stale() -> None:
    tool = _tool()
    key = next(iter(tool.EQUIVALENT))
    path, rest = key.split(":", 1)
    line, col_and_mutation = rest.split(":", 1)
    moved = f"{path}:{int(line) + 1}:{col_and_mutation}"
    assert tool.stale_equivalents([path], {moved}) == [key]
    assert tool.stale_equivalents([path], {key}) == []
    assert tool.stale_equivalents(["distval/another.py"], set()) == []  # only the modules asked about
