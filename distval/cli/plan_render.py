"""The plan for people (``distval plan``) and for programs (``distval plan --format json``).

Both show the one ScenarioPlan the runtime executes: its steps in order, each container's exact
docker-py creation arguments and files, and the placeholders the runtime fills in, with what fills them.
The text form is golden-tested, so keep it deterministic.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from distval.comparing.reference import DEFAULT_CONFIRM_PAIRS, DEFAULT_PAIRS
from distval.escape import terminal_text
from distval.images.helper_base import DEFAULT, HelperBase, planned_builds
from distval.plan.fault_render import fault_data, fault_lines
from distval.plan.model import (
    CreateContainer,
    CreateNetwork,
    LearnSubnets,
    ProbeHost,
    RunPlan,
    ScenarioPlan,
    StartContainer,
    Step,
)
from distval.plan.placeholders import PLACEHOLDERS, placeholders_in
from distval.plan.selection import NO_CHECK_SELECTED
from distval.targets.kind import PlanShown, TargetKind
from distval.targets.registry import default_kind


def describe_step(plan: ScenarioPlan, step: Step) -> str:
    text = _describe_step(plan, step)
    if step.host:  # across several hosts: where it runs
        text += f"  [on host {plan.hosts.index(step.host)}: {step.host}]"
    return text


def _describe_step(plan: ScenarioPlan, step: Step) -> str:
    if isinstance(step, ProbeHost):
        learns = "{node0_ip}, {master_port}, {c10d_port} and " if step.first else ""
        return f"probe the host with {step.container}: learn {learns}{{socket_ifname}} of this host"
    if isinstance(step, CreateNetwork):
        network = plan.network_named(step.network)
        ipv6 = f", ipv6 {network.ipv6_subnet}" if network.ipv6_subnet else ""
        return f"create network {network.name} (internal={str(network.internal).lower()}{ipv6})"
    if isinstance(step, LearnSubnets):
        return f"learn {{subnets}}: the subnets of {step.network}"
    if isinstance(step, CreateContainer):
        c = plan.container(step.container)
        return f"create container {c.name} (node {c.node_rank}, ranks {', '.join(map(str, c.ranks))})"
    if isinstance(step, StartContainer):
        return f"start {step.container}"
    return f"learn {{node0_ip}}: the {'IPv6' if step.ipv6 else 'IPv4'} address of {step.container} on {step.network}"


def _shown(kind: TargetKind | None) -> PlanShown:
    """What the plan shows of its kind beyond the steps (the default kind's where none is named)."""
    return (kind or default_kind()).plan_shown


def reference_pairs(image: str) -> str:
    """What ``distval plan --reference`` says of the pairs (the plan shows each image's plan once): how many runs each
    scenario gets, and that confirmation pairs may follow (distval/comparing/reference.py)."""
    return (
        f"each scenario runs in {DEFAULT_PAIRS} pairs with {image} (distval run --pairs), who goes first alternating; "
        f"where a figure regressed after them, {DEFAULT_CONFIRM_PAIRS} confirmation pairs of that scenario follow "
        "(--confirm-pairs) and its figures are judged on every pair"
    )


def render_plan(
    plan: RunPlan,
    beside: bool = True,
    helpers: HelperBase = DEFAULT,
    kind: TargetKind | None = None,
    reference: str | None = None,
) -> str:
    """``kind``: the kind of target that planned it (shows what it adds to a plan); ``beside``: the target starts
    distval's helpers on a Docker Engine beside the ranks (its reaper among them),
    and builds distval's own images there FROM ``helpers``' base where the Engine lacks them (--helper-base);
    ``reference``: --reference's image, whose plans ``plan`` holds after the candidate's."""
    lines = [f"run {plan.run_id} from {plan.config_path}: {len(plan.scenarios)} scenario(s)"]
    if plan.unselected:  # planned, not run: each is reported skipped
        lines[0] += f"; not run, {NO_CHECK_SELECTED}: {', '.join(sp.scenario.name for sp in plan.unselected)}"
    lines += [f"selection: {note}" for note in plan.selection_notes]
    lines += [f"reference: {reference_pairs(reference)}"] if reference else []
    shown = _shown(kind)
    lines += (_beside_lines(shown) + _helper_lines(plan, helpers)) if beside else []
    for sp in plan.scenarios:
        s = sp.scenario
        lines.append("")
        lines.append(f"scenario {sp.suite_name}")
        lines.append(f"  image: {sp.image}")
        lines.append(f"  backend: {s.backend}; deadline: {s.timeout_s:g} s; collective timeout: {s.collective_timeout_s:g} s")
        lines.append(f"  checks: {', '.join(c.name + (' (required)' if c.required else '') for c in s.checks)}")
        for index, url in enumerate(sp.hosts):
            nodes = [str(c.node_rank) for c in sp.containers if c.host == url]
            lines.append(f"  host {index}: {url} (node{'s' if len(nodes) != 1 else ''} {', '.join(nodes) or 'none'})")
        lines += shown.scenario_lines(sp)
        if sp.gpus_needed:
            lines.append(f"  GPUs: {sp.gpus_needed} (skipped with the reason where the Engine cannot give them)")
        used = sorted(placeholders_in([c for c in sp.containers + sp.probes]))
        for name in used:
            lines.append(f"  placeholder {{{name}}}: {PLACEHOLDERS[name]}")
        lines.append("  steps:")
        for number, step in enumerate(sp.steps, start=1):
            lines.append(f"    {number}. {describe_step(sp, step)}")
            if isinstance(step, CreateContainer | ProbeHost):
                lines += _container_lines(sp, step.container)
        lines += fault_lines(sp)
    # Config values are refused with control characters at load; this keeps any other text (a config path,
    # an image's name) from reaching the reviewer's terminal as escape sequences either.
    return terminal_text("\n".join(lines)) + "\n"


# The order a reader wants: what runs, then where, then the rest alphabetically.
_FIRST_KEYS = ("image", "entrypoint", "command", "hostname", "network", "working_dir", "environment", "labels")


def _container_lines(sp: ScenarioPlan, name: str) -> list[str]:
    c = sp.container(name)
    kwargs = c.create_kwargs()
    lines = []
    for key in [k for k in _FIRST_KEYS if k in kwargs] + sorted(k for k in kwargs if k not in _FIRST_KEYS):
        value = kwargs[key]
        if key in ("name", "detach"):
            continue  # the step names it; always detached
        if key in ("environment", "labels"):
            text = " ".join(f"{k}={v}" for k, v in value.items())
        elif key in ("entrypoint", "command"):
            text = " ".join(value)
        elif isinstance(value, str):
            text = value
        else:
            text = json.dumps(value, sort_keys=True)
        lines.append(f"       {key}: {text}")
    for network in c.networks[1:]:
        lines.append(f"       then connect to: {network}")
    for copy in c.files:
        if copy.suite:
            lines.append(f"       copy in: distval_suite/*.py -> {copy.path}/")
        elif copy.text is None:
            lines.append(f"       copy in: directory {copy.path} (mode {copy.mode:o})")
        else:
            lines.append(f"       copy in: {copy.path} (mode {copy.mode:o}): {copy.text}")
    if c.results_dir:  # a host probe has none: it prints its answer
        lines.append(f"       results out: {c.results_dir}/rank-<rank>.jsonl")
    return lines


def _privileges_text(privileges: dict[str, Any]) -> str:
    words = {
        "cap_drop": lambda v: f"cap_drop {','.join(v)}",
        "cap_add": lambda v: f"cap_add {','.join(v)}",
        "read_only": lambda v: f"read-only root file system: {str(v).lower()}",
        "security_opt": lambda v: f"security_opt {','.join(v)}",
        "mem_limit": lambda v: f"memory: {v}",
        "device_requests": lambda v: f"GPUs: {v}",
        "pids_limit": lambda v: f"processes: {v}",
    }
    return "; ".join(words[key](value) if key in words else f"{key}: {value}" for key, value in privileges.items())


def _beside_lines(shown: PlanShown) -> list[str]:
    lines: list[str] = []
    for each in shown.beside():
        lines += [
            "",
            f"beside the ranks: {each['role']} {each['name']}, {each['when']}",
            f"  image: {each['image']} ({each['image_origin']})",
            f"  entrypoint: {' '.join(each['entrypoint'])}",
        ]
        if each.get("command"):
            lines.append(f"  command: {' '.join(each['command'])}")
        lines.append(f"  user: {each['user']}")
        lines.append(f"  privileges: {_privileges_text(each['privileges'])}")
        if each.get("pid_mode"):
            lines.append(f"  pid namespace: {each['pid_mode']}")
        mounts = [f"{m['source']} -> {m['target']} ({m['mode']})" for m in each["mounts"]]
        lines.append(f"  mounts: {'; '.join(mounts) or 'none'}")
        lines.append(f"  network: {each['network']}")
        environment = ", ".join(each["environment"])
        # The image under test keeps its own ENV; distval's images have only theirs.
        added = " (added to the image's ENV)" if each["image_origin"].startswith("the image under test") else " (nothing else)"
        lines.append(f"  environment: {environment + added if environment else 'nothing added to the image ENV'}")
    return lines


def _helper_lines(plan: RunPlan, helpers: HelperBase) -> list[str]:
    lines = ["", f"distval's own images, where the Engine lacks them: {helpers.describe()}"]
    for each in planned_builds(helpers, [sp.image for sp in plan.scenarios]):
        on = f"{each['root']}, under it, " if each["root"] != each["image"] else ""
        lines.append(f"  {each['image']}: {on}FROM {each['from']}")
    return lines


def _helper_images(plan: RunPlan, helpers: HelperBase) -> dict[str, Any]:
    return {**helpers.as_data(), "images": planned_builds(helpers, [sp.image for sp in plan.scenarios])}


def plan_as_data(
    plan: RunPlan,
    beside: bool = True,
    helpers: HelperBase = DEFAULT,
    kind: TargetKind | None = None,
    reference: str | None = None,
) -> dict[str, Any]:
    """The plan as JSON-able data: what ``--format json`` prints (``beside`` and ``reference``: as ``render_plan``'s;
    without ``beside`` [] and no helper images)."""
    shown = _shown(kind)
    return {
        "run_id": plan.run_id,
        "config": plan.config_path,
        "beside": shown.beside() if beside else [],
        "helper_images": _helper_images(plan, helpers) if beside else None,
        "placeholders": dict(PLACEHOLDERS),
        "scenarios": [
            {
                "name": sp.scenario.name,
                "suite_name": sp.suite_name,
                "image": sp.image,
                "deadline_s": sp.deadline_s,
                "networks": [n.create_kwargs() for n in sp.networks],
                **({"hosts": list(sp.hosts)} if sp.hosts else {}),
                **shown.scenario_data(sp),
                # Across hosts: the probes' exact creation arguments (the image under test, host networking).
                **({"probes": [p.create_kwargs() for p in sp.probes]} if sp.probes else {}),
                "containers": [
                    {
                        "node_rank": c.node_rank,
                        "ranks": list(c.ranks),
                        "create": c.create_kwargs(),
                        "connect": list(c.networks[1:]),
                        "files": [dataclasses.asdict(f) for f in c.files],
                        "results_dir": c.results_dir,
                        **({"host": c.host} if c.host else {}),
                    }
                    for c in sp.containers
                ],
                "steps": [{"step": type(step).__name__, **dataclasses.asdict(step)} for step in sp.steps],
                **fault_data(sp),
            }
            for sp in plan.scenarios
        ],
        # Only where a check selection (--check, --skip-check, -k) was given: what it left out or kept.
        **(
            {"not_run": [{"name": sp.scenario.name, "reason": NO_CHECK_SELECTED} for sp in plan.unselected]}
            if plan.unselected
            else {}
        ),
        **({"selection_notes": list(plan.selection_notes)} if plan.selection_notes else {}),
        # Only with --reference: distval run's pairs at its defaults, and that confirmation pairs may follow.
        **(
            {
                "reference": {
                    "image": reference,
                    "pairs": DEFAULT_PAIRS,
                    "confirm_pairs": DEFAULT_CONFIRM_PAIRS,
                    "note": reference_pairs(reference),
                }
            }
            if reference
            else {}
        ),
    }
