"""The scenarios an export writes (``distval export kubernetes`` and ``distval export slurm``), and why the others
are not exported, said on stderr."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from distval.config import Config
from distval.errors import SelectionError
from distval.plan.selection import NO_CHECK_SELECTED, Selection
from distval.session.selection import filtered, running, select


def exported_scenarios(config: Config, patterns: Sequence[str] | None, selection: Selection) -> Config:
    """--filter's scenarios, less those the check selection left no check, each of those said on stderr with the
    selection's notes; SelectionError when none is left (exporting nothing is no success)."""
    selected = select(config, patterns, selection)
    for name in sorted(selected.unselected & {s.name for s in filtered(config, patterns).scenarios}):
        print(f"distval: not exported: {name}: {NO_CHECK_SELECTED}", file=sys.stderr)
    for note in selected.kept:
        print(f"distval: {note}", file=sys.stderr)
    chosen = running(selected, patterns)
    if not chosen.scenarios:
        raise SelectionError(f"nothing to export: the check selection leaves no scenario of {config.path} a check")
    return chosen
