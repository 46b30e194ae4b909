"""Scenario -> a Docker-free launch plan: every network, container, command line and file, as data.

``distval plan`` prints it (a dry run); runtime.py executes it and nothing else decides what to create.
Later topologies (fault injection, per-rank GPUs, host mode) add plan fields, not Docker calls.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from harness.config import Config, Scenario

DEFAULT_IMAGE = "distval-fixtures/torch:2.6-debian"
CONTAINER_ROOT = "/distval"
SPEC_PATH = f"{CONTAINER_ROOT}/spec.json"
RESULTS_DIR = f"{CONTAINER_ROOT}/results"
MASTER_PORT = 29500
LABEL_MANAGED = "distval.managed"
LABEL_RUN = "distval.run"
LABEL_SCENARIO = "distval.scenario"
LABEL_NODE = "distval.node"


@dataclass(frozen=True)
class NetworkPlan:
    name: str
    internal: bool
    labels: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ContainerPlan:
    name: str
    hostname: str
    node_rank: int
    ranks: tuple[int, ...]
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    labels: tuple[tuple[str, str], ...]
    working_dir: str


@dataclass(frozen=True)
class ScenarioPlan:
    scenario: Scenario
    image: str
    network: NetworkPlan
    containers: tuple[ContainerPlan, ...]
    suite_spec_json: str

    @property
    def suite_name(self) -> str:
        s = self.scenario
        return f"{s.name} ({s.topology}, {s.world_size} ranks)"


@dataclass(frozen=True)
class RunPlan:
    run_id: str
    config_path: str
    scenarios: tuple[ScenarioPlan, ...]


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:30] or "scenario"


def _launcher(scenario: Scenario, node_rank: int, master: str) -> tuple[str, ...]:
    # torch.distributed.run through the interpreter, not the torchrun script that some images lack.
    # Underscore spellings: torch 1.13's launcher knows only those; later ones accept both.
    argv = [scenario.python, "-m", "torch.distributed.run"]
    if scenario.topology == "in-container":
        argv += ["--standalone", "--nnodes=1", f"--nproc_per_node={scenario.world_size}"]
    else:
        argv += [
            f"--nnodes={scenario.world_size}",
            "--nproc_per_node=1",
            f"--node_rank={node_rank}",
            f"--master_addr={master}",
            f"--master_port={MASTER_PORT}",
        ]
    # No restarts: a failing rank must fail the scenario, not be retried into a pass.
    argv += ["--max_restarts=0", "-m", "suite.main", SPEC_PATH]
    return tuple(argv)


def plan_scenario(scenario: Scenario, run_id: str, image_override: str | None, slug: str | None = None) -> ScenarioPlan:
    image = image_override or scenario.image or DEFAULT_IMAGE
    base = f"distval-{run_id}-{slug or _slug(scenario.name)}"
    common_labels = ((LABEL_MANAGED, "true"), (LABEL_RUN, run_id), (LABEL_SCENARIO, scenario.name))
    node_count = 1 if scenario.topology == "in-container" else scenario.world_size
    master = f"{base}-n0"
    containers = []
    for node_rank in range(node_count):
        name = f"{base}-n{node_rank}"
        ranks = tuple(range(scenario.world_size)) if node_count == 1 else (node_rank,)
        containers.append(
            ContainerPlan(
                name=name,
                hostname=name,
                node_rank=node_rank,
                ranks=ranks,
                argv=_launcher(scenario, node_rank, master),
                env=(
                    ("PYTHONUNBUFFERED", "1"),
                    ("PYTHONDONTWRITEBYTECODE", "1"),
                    ("DISTVAL_RUN_ID", run_id),
                    ("DISTVAL_SCENARIO", scenario.name),
                    ("DISTVAL_NODE_RANK", str(node_rank)),
                ),
                labels=common_labels + ((LABEL_NODE, str(node_rank)),),
                working_dir=CONTAINER_ROOT,
            )
        )
    spec = {
        "scenario": scenario.name,
        "backend": scenario.backend,
        "collective_timeout_s": scenario.collective_timeout_s,
        "check_timeout_s": scenario.check_timeout_s,
        "world_size": scenario.world_size,
        "nproc_per_node": scenario.world_size // node_count,
        "results_dir": RESULTS_DIR,
        "checks": [{"name": c.name, "args": dict(c.args)} for c in scenario.checks],
    }
    return ScenarioPlan(
        scenario=scenario,
        image=image,
        # Internal: the image under test reaches nothing outside. One network per scenario, even
        # in-container, so that the hostname resolves (torchrun's workers dial the agent's store by it).
        network=NetworkPlan(name=base, internal=True, labels=common_labels),
        containers=tuple(containers),
        suite_spec_json=json.dumps(spec, indent=2, sort_keys=True),
    )


def plan_run(config: Config, run_id: str, image_override: str | None = None) -> RunPlan:
    # Names that differ only in case or punctuation ("a_b", "A.b") share a slug; number the later ones so
    # that container, host and network names stay unique within the run.
    slugs: list[str] = []
    for index, scenario in enumerate(config.scenarios):
        slug = _slug(scenario.name)
        slugs.append(slug if slug not in slugs else f"{slug[:26]}-{index}")
    return RunPlan(
        run_id=run_id,
        config_path=config.path,
        scenarios=tuple(plan_scenario(s, run_id, image_override, slug) for s, slug in zip(config.scenarios, slugs, strict=True)),
    )


def images_of(plan: RunPlan) -> list[str]:
    return sorted({s.image for s in plan.scenarios})


def render_plan(plan: RunPlan) -> str:
    """The plan as text for people; golden-tested, so keep it deterministic."""
    lines = [f"run {plan.run_id} from {plan.config_path}: {len(plan.scenarios)} scenario(s)"]
    for sp in plan.scenarios:
        s = sp.scenario
        lines.append("")
        lines.append(f"scenario {sp.suite_name}")
        lines.append(f"  image: {sp.image}")
        lines.append(f"  backend: {s.backend}; deadline: {s.timeout_s:g} s; collective timeout: {s.collective_timeout_s:g} s")
        lines.append(f"  checks: {', '.join(c.name + (' (required)' if c.required else '') for c in s.checks)}")
        lines.append(f"  network: {sp.network.name} (internal={str(sp.network.internal).lower()})")
        for c in sp.containers:
            lines.append(f"  container {c.name} (node {c.node_rank}, ranks {', '.join(map(str, c.ranks))})")
            lines.append(f"    hostname: {c.hostname}")
            lines.append(f"    command: {' '.join(c.argv)}")
            lines.append(f"    env: {' '.join(f'{k}={v}' for k, v in c.env)}")
            lines.append(f"    labels: {' '.join(f'{k}={v}' for k, v in c.labels)}")
            lines.append(f"    copy in: suite/ -> {CONTAINER_ROOT}/suite, spec -> {SPEC_PATH}")
            lines.append(f"    results out: {RESULTS_DIR}/rank-<rank>.jsonl")
    return "\n".join(lines) + "\n"
