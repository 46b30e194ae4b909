"""Scenario -> a plan of local processes (host mode): the same scenario as distval/targets/docker/plan.py plans for
containers, run with a local Python's torch and no Docker.

Every node is one local process group: one ``torch.distributed.run --standalone`` in-container, N
launchers (or N plain processes for the launcher-less forms) cross-container, all rendezvousing over
127.0.0.1. The command lines, environment and suite spec come from distval/plan/nodes.py, as for containers, so
host mode runs exactly what a container would, with these differences, all visible in the plan:

- node 0 is 127.0.0.1; its ports are the placeholders ``{master_port}`` and ``{c10d_port}``, chosen
  free when the scenario starts (distval/targets/local/runtime.py), so two host-mode runs at once never collide;
- the agents share one address, so c10d gets ``--rdzv_conf=is_host=1`` on node 0 and ``is_host=0`` on the others.
  Without it every local agent decides it hosts the store (torch/distributed/elastic/rendezvous/
  c10d_rendezvous_backend.py ``_create_tcp_store``: with no ``is_host`` it asks ``_matches_machine_hostname``,
  which is true for any loopback address), the first to bind wins and the others fall back to clients:
  whichever node starts first hosts it, not node 0;
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
from distval.plan.model import ScenarioPlan, scenario_slug
from distval.plan.nodes import SUBNETS, Address, FileModes, Site, build_nodes
from distval.plan.placeholders import placeholder
from distval.targets.capabilities import IMAGE_ENVIRONMENT
from distval.targets.declarations import LOCAL

MODE = "host"
SUITE_MARK = "[host]"  # after each testsuite's name
IMAGE_OPTIONS = ("--local", "--python")  # the reproduce command runs it again on the same Python
LOOPBACK = "127.0.0.1"
LOOPBACK_SUBNETS = "127.0.0.0/8"  # what {subnets} resolves to in host mode
MASTER_PORT = placeholder("master_port")
C10D_PORT = placeholder("c10d_port")
PORTS = {"master_port": MASTER_PORT, "c10d_port": C10D_PORT}
CANONICAL_ROOT = "/tmp/distval-host"  # the root the scenario hash plans under: no temp name reaches it
# The user's only: the nodes' directories are on the host's file system, not in a container of their own.
PROCESS_FILE_MODES = FileModes(root=0o700, suite=0o700, results=0o700, spec=0o600)


def plan_local_scenario(
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
    slug = slug or scenario_slug(scenario.name)
    site = Site(
        image=python,
        python=python,
        root=root_dir.rstrip("/"),
        ports=PORTS,
        subnets=SUBNETS,
        file_modes=PROCESS_FILE_MODES,
        reach=Address(LOOPBACK, LOOPBACK),
        per_node_root=True,
        pythonpath_always=True,
        hostname="localhost",
        visible_devices=tuple(visible_devices) if visible_devices is not None else None,
        devices_variable="CUDA_VISIBLE_DEVICES",
        limits=False,
        shared_address=True,
        no_image_environment=LOCAL.message(IMAGE_ENVIRONMENT, "the environment check"),
    )
    nodes = build_nodes(scenario, run_id, slug, site)
    return ScenarioPlan(
        scenario=scenario,
        run_id=run_id,
        slug=slug,
        image=python,
        networks=(),
        containers=nodes.containers,
        steps=nodes.steps,
        mode=MODE,
        suite_mark=SUITE_MARK,
        image_options=IMAGE_OPTIONS,
        root_dir=root_dir,
    )


def visible_devices_from_env(environ: dict[str, str] | None = None) -> list[str] | None:
    value = (os.environ if environ is None else environ).get("CUDA_VISIBLE_DEVICES")
    return None if value is None else [d.strip() for d in value.split(",") if d.strip()]
