"""RunSummary -> the JSON report: everything the JUnit file holds, as data (schema_version 1, docs/reports.md)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from distval import __version__
from distval.reports.common import (
    milliseconds,
    reproduce_command,
    suite_name,
    suite_properties,
    topology_rows_of,
    utc_iso,
)
from distval.reports.files import write_atomically
from distval.results.outcome import PASSED
from distval.results.scenario import RunSummary

SCHEMA_VERSION = 1


def _known(value: str | None) -> str | None:
    return None if value in (None, "", "unknown") else value


def json_report(summary: RunSummary) -> dict[str, Any]:
    """Everything the JUnit file holds, as data (schema_version 1, described in docs/reports.md)."""
    scenarios = []
    for scenario in summary.scenarios:
        s = scenario.plan.scenario
        properties = suite_properties(summary, scenario)
        scenarios.append(
            {
                "name": s.name,
                "suite_name": suite_name(summary, scenario),  # the JUnit testsuite's
                "topology": s.topology,
                "world_size": s.world_size,
                "backend": s.backend,
                "image": scenario.plan.image,
                "image_id": _known(properties.get("image_id")),
                "status": scenario.status,
                "duration_s": milliseconds(scenario.duration_s) / 1000,
                "started_at": utc_iso(scenario.started_at),
                "properties": properties,
                "reproduce": reproduce_command(summary, scenario) if scenario.status != PASSED else None,
                "cases": [
                    {
                        "name": c.name,
                        "status": c.status,
                        "message": c.message,
                        "duration_s": milliseconds(c.duration_s) / 1000,
                        "output": c.output,
                        "skipped_ranks": list(c.skipped_ranks),
                        "details": dict(c.details),  # the lowest reporting rank's (bandwidth: its figures)
                    }
                    for c in scenario.cases
                ],
                "bandwidth": [dataclasses.asdict(f) for f in scenario.figures],
                # Stacks before the deadline's kill, the flight recorder, the root cause, restarts (distval/results/diagnosis.py).
                "diagnosis": scenario.diagnosis.as_dict(),
                "logs": scenario.logs,
            }
        )
    early = None
    if summary.early_error is not None:
        early = {"kind": summary.early_error[0], "message": summary.early_error[1]}
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": summary.run_id,
        "distval_version": __version__,
        "exit_code": summary.exit_code,
        "early_error": early,
        "engine_version": summary.engine_version,
        "host": summary.host,
        "config": summary.config_path,
        "config_sha256": summary.config_sha256,
        # Some scenario ran distval's sample image for want of an image (its ``sample_image`` property says which).
        "sample_image": summary.image_note is not None,
        "scenarios": scenarios,
        # busbw in one container next to across containers, per world size, operation and size.
        "bandwidth_topologies": [{**dataclasses.asdict(row), "ratio": round(row.ratio, 4)} for row in topology_rows_of(summary)],
    }


def render_json(summary: RunSummary) -> str:
    # allow_nan=False: NaN and Infinity are not JSON, and no duration here is either.
    return json.dumps(json_report(summary), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def write_json(summary: RunSummary, path: str | Path) -> None:
    write_atomically(path, render_json(summary))
