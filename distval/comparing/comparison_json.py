"""A ``comparison.Judgement`` -> one JSON object (``distval compare --format json``), for pipelines that gate on it:
both reports' identities, the tolerances, the verdict and the exit code, why nothing was compared (if so), and
every compared item with its status and numbers. The same judgement as the text and the Markdown.

Bumped ``schema_version`` on any change a consumer could trip on (a key renamed or removed, a status added)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from distval.comparing.comparison import STATUSES, Item, Judgement

COMPARISON_SCHEMA_VERSION = 1


def _identity(path: str, report: Mapping[str, Any]) -> dict[str, Any]:
    """Which report a side is: its path, run id, the images its scenarios ran and whether its run ended early."""
    scenarios = [s for s in report.get("scenarios", []) if isinstance(s, dict)]
    return {
        "path": path,
        "run_id": report.get("run_id"),
        "images": sorted({str(s.get("image")) for s in scenarios}),
        "scenarios": len(scenarios),
        "early_error": report.get("early_error"),
    }


def _item(item: Item) -> dict[str, Any]:
    return {
        "scenario": item.scenario,
        "kind": item.kind,
        "name": item.name,
        "status": item.status,
        "old": None if item.old is None else dict(item.old),
        "new": None if item.new is None else dict(item.new),
        "ratio": None if item.ratio is None else round(item.ratio, 4),
        "why": item.why,
    }


def comparison_json(judgement: Judgement) -> dict[str, Any]:
    comparison = judgement.comparison
    return {
        "schema_version": COMPARISON_SCHEMA_VERSION,
        "old": _identity(comparison.old_path, comparison.old),
        "new": _identity(comparison.new_path, comparison.new),
        "tolerances": dataclasses.asdict(comparison.tolerances),
        "verdict": judgement.verdict.name,
        "exit_code": judgement.exit_code,
        "nothing_compared": list(judgement.nothing_compared),
        "counts": {status: len(judgement.having(status)) for status in STATUSES},
        "scenarios": [
            {"name": s.comparison.name, "matched_by": s.comparison.matched_by, "items": [_item(i) for i in s.items]}
            for s in judgement.scenarios
        ],
    }


def render_comparison_json(judgement: Judgement) -> str:
    """The object as JSON text: ASCII only (json escapes every control character and more), no NaN or Infinity
    (read_report refused them; a ratio that is not finite is null): safe on a terminal, strict for a parser."""
    return json.dumps(comparison_json(judgement), indent=2, ensure_ascii=True, allow_nan=False) + "\n"
