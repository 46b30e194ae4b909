"""Scenario -> a plan of local processes (host mode): the same scenario as distval/plan/model.py plans for
containers, run with a local Python's torch and no Docker.

Every node is one local process group: one ``torch.distributed.run --standalone`` in-container, N
launchers (or N plain processes for the env/tcp forms) cross-container, all rendezvousing over
127.0.0.1. The command lines, environment and suite spec come from plan.py's builders, so host mode
runs exactly what a container would, with these differences, all visible in the plan:

- node 0 is 127.0.0.1; its ports are the placeholders ``{master_port}`` and ``{c10d_port}``, chosen
  free when the scenario starts (distval/targets/local/runtime.py), so two host-mode runs at once never collide;
- c10d: ``--rdzv_conf=is_host=1`` on node 0 and ``is_host=0`` on the others. Without it every local
  agent decides it hosts the store (torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py
  ``_create_tcp_store``: with no ``is_host`` it asks ``_matches_machine_hostname``, which is true for
  any loopback address), the first to bind wins and the others fall back to clients: whichever node
  starts first hosts it, not node 0;
- ``{subnets}`` is 127.0.0.0/8, so the suite picks the loopback interface for GLOO_SOCKET_IFNAME;
- each node has its own directory under ``root_dir`` with the suite, its spec.json and a results
  directory (the same FileCopy entries a container gets, written to disk), and PYTHONPATH names it;
- GPUs: CUDA_VISIBLE_DEVICES is the node's device ids (empty for a CPU scenario: a container without
  a device request sees no GPU either).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from distval.config import Scenario
from distval.plan.model import (
    LABEL_MANAGED,
    LABEL_NODE,
    LABEL_RUN,
    LABEL_SCENARIO,
    SUBNETS,
    CreateContainer,
    ScenarioPlan,
    StartContainer,
    Step,
    _command,
    _env,
    _slug,
    _spec,
)
from distval.plan.placeholders import placeholder
from distval.plan.specs import ContainerOptions, ContainerPlan, FileCopy

MODE = "host"
LOOPBACK = "127.0.0.1"
LOOPBACK_SUBNETS = "127.0.0.0/8"  # what {subnets} resolves to in host mode
MASTER_PORT = placeholder("master_port")
C10D_PORT = placeholder("c10d_port")


def plan_host_scenario(
    scenario: Scenario,
    run_id: str,
    python: str,
    root_dir: str,
    slug: str | None = None,
    visible_devices: Sequence[str] | None = None,
) -> ScenarioPlan:
    """``python``: the local interpreter (an absolute path); ``root_dir``: where the nodes' directories
    go; ``visible_devices``: the host's CUDA_VISIBLE_DEVICES as a list, when set (the plan's device
    ids index into it, as torch's device numbers would)."""
    slug = slug or _slug(scenario.name)
    base = f"distval-{run_id}-{slug}"
    labels = ((LABEL_MANAGED, "true"), (LABEL_RUN, run_id), (LABEL_SCENARIO, scenario.name))
    cross = scenario.topology == "cross-container"
    c10d = cross and scenario.rendezvous == "c10d"
    gpus = scenario.gpus_per_node
    containers = []
    for node_rank in range(scenario.nodes if cross else 1):
        name = f"{base}-n{node_rank}"
        node_dir = f"{root_dir.rstrip('/')}/{name}"
        spec_path, results_dir = f"{node_dir}/spec.json", f"{node_dir}/results"
        first = node_rank * scenario.nproc_per_node if cross else 0
        ranks = tuple(range(first, first + (scenario.nproc_per_node if cross else scenario.world_size)))
        device_ids = tuple(str(i) for i in range(node_rank * gpus, (node_rank + 1) * gpus))
        if visible_devices is not None:
            device_ids = tuple(visible_devices[int(i)] if int(i) < len(visible_devices) else i for i in device_ids)
        env = _env(scenario, run_id, node_rank, LOOPBACK, MASTER_PORT, pythonpath=node_dir, results_dir=results_dir)
        env += (("CUDA_VISIBLE_DEVICES", ",".join(device_ids)),)
        argv = _command(
            scenario,
            python,
            node_rank,
            LOOPBACK,
            LOOPBACK,
            f"{run_id}-{slug}",
            spec_path,
            MASTER_PORT,
            C10D_PORT,
            rdzv_conf=f"is_host={int(node_rank == 0)}" if c10d else None,
        )
        files = (
            FileCopy(node_dir, 0o700),
            FileCopy(f"{node_dir}/distval_suite", 0o700, suite=True),
            FileCopy(results_dir, 0o700),
            FileCopy(spec_path, 0o600, text=_spec(scenario, LOOPBACK, MASTER_PORT, results_dir, SUBNETS)),
        )
        containers.append(
            ContainerPlan(
                name=name,
                hostname="localhost",
                node_rank=node_rank,
                ranks=ranks,
                argv=argv,
                env=env,
                labels=labels + ((LABEL_NODE, str(node_rank)),),
                working_dir=node_dir,
                image=python,
                options=ContainerOptions(gpu_device_ids=device_ids),
                files=files,
                results_dir=results_dir,
            )
        )
    # Node 0 last, as in containers: every rendezvous form must cope with nodes that arrive first.
    steps: list[Step] = [CreateContainer(c.name) for c in containers]
    steps += [StartContainer(c.name) for c in reversed(containers)]
    return ScenarioPlan(
        scenario=scenario,
        run_id=run_id,
        slug=slug,
        image=python,
        networks=(),
        containers=tuple(containers),
        steps=tuple(steps),
        mode=MODE,
        root_dir=root_dir,
    )


def visible_devices_from_env(environ: dict[str, str] | None = None) -> list[str] | None:
    value = (os.environ if environ is None else environ).get("CUDA_VISIBLE_DEVICES")
    return None if value is None else [d.strip() for d in value.split(",") if d.strip()]
