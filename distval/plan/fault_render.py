"""A scenario's fault plan for ``distval plan``: the faults in order, what each does and when, and each
helper container's exact docker-py creation arguments."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from distval.plan.model import ScenarioPlan


def fault_lines(sp: ScenarioPlan) -> list[str]:
    if sp.faults is None:
        return []
    lines = ["  faults (while the containers run):"]
    for step in sp.faults.steps:
        lines.append(f"    {step.describe()}")
        if step.needs_netem:
            lines.append("       (netem: the scenario is skipped with the measured reason where the kernel lacks sch_netem)")
    for helper in sp.faults.helpers:
        lines.append(f"    helper container {helper.name}, created and started once its node runs:")
        for key, value in helper.create_kwargs().items():
            if key in ("name", "detach"):
                continue
            text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
            lines.append(f"       {key}: {text}")
    expect = sp.scenario.expect or ()
    if not expect:
        lines.append("    expect: no rank fails")
    for e in expect:
        ranks = e.ranks if isinstance(e.ranks, str) else "ranks " + ", ".join(map(str, e.ranks))
        lines.append(
            f"    expect: {ranks} fail with {' or '.join(e.errors)} {e.within_s[0]:g}..{e.within_s[1]:g} s after the fault"
        )
    return lines


def fault_data(sp: ScenarioPlan) -> dict[str, Any]:
    if sp.faults is None:
        return {}
    return {
        "faults": [dataclasses.asdict(step) for step in sp.faults.steps],
        "fault_helpers": [h.create_kwargs() for h in sp.faults.helpers],
        "expect": [dataclasses.asdict(e) for e in sp.scenario.expect or ()],
    }
