"""docs/targets.md: every target and what it gives, derived from distval/targets/declarations.py (a test keeps the
page current: tests/targets/test_targets.py)."""

from __future__ import annotations

from distval.targets.capabilities import CAPABILITIES, RUN, WAYS
from distval.targets.declarations import TARGETS

TARGETS_PAGE = "docs/targets.md"
OPTION = {
    "docker": "(default)",
    "engines": "`--hosts URL,...`",
    "local": "`--local`",
    "kubernetes": "`distval export kubernetes`",
    "slurm": "`distval export slurm`, `--target slurm`",
}


def render_targets_page() -> str:
    lines = [
        "# Targets",
        "",
        "<!-- Generated from distval/targets/declarations.py by distval.targets.reference.render_targets_page();",
        "tests/targets/test_targets.py fails when it is not current. Do not edit by hand. -->",
        "",
        "A target is what runs a scenario's nodes. Every target plans the same scenario from the same declarations",
        "(`distval plan` shows the result), and declares what it cannot give. What a scenario or an option asks of a",
        "target that lacks it is **refused** before anything runs (exit code 2, one line naming the scenarios), or,",
        "where marked, the scenario is **skipped** with that reason (`--fail-on-skip` makes it fail). Nothing is",
        "dropped quietly.",
        "",
        "| target | chosen with | runs |",
        "|---|---|---|",
    ]
    lines += [f"| {t.name} | {t.chosen_with} | {t.runs} |" for t in TARGETS]
    lines += ["", "| asks for | asked by | " + " | ".join(t.name for t in TARGETS) + " |"]
    lines.append("|---|---|" + "---|" * len(TARGETS))
    for capability in CAPABILITIES:
        cells = []
        for target in TARGETS:
            lacking = target.lacks.get(capability.name)
            if lacking is None:
                cells.append("yes")
            elif capability.said_only:
                cells.append(f"no: {lacking.why}")  # nothing asks for it: what the target does instead
            else:
                cells.append(f"{'skipped' if lacking.skip else 'refused'}: {lacking.why}")
        lines.append(f"| {capability.what} | `{capability.asked_by}` | " + " | ".join(cells) + " |")
    for way in WAYS:  # how distval serves each target: a run of its own, or an export and a collect
        cells = ["yes" if t.serves(way) else ("refused" if way is RUN else "no") for t in TARGETS]
        lines.append(f"| {way.what} | `{way.command}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
