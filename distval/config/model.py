"""What a config is once read: frozen Config, Scenario and CheckSpec, the types every other module uses."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from distval.config.faults import Expectation, FaultSpec
from distval.config.layout import complete_layout


@dataclass(frozen=True)
class CheckSpec:
    name: str
    args: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    # A required check that the image cannot run (skipped: "needs torch >= 2.14") fails instead.
    required: bool = False


@dataclass(frozen=True)
class Scenario:
    name: str
    topology: str
    world_size: int
    backend: str
    image: str | None
    timeout_s: float
    collective_timeout_s: float
    check_timeout_s: float
    python: str
    checks: tuple[CheckSpec, ...]
    # The layout: one container per node, nproc_per_node processes in each; world_size is their product.
    # 0 (the default, for code that builds a Scenario itself): derived from topology and world_size as
    # the YAML does -- in-container 1 x world_size, cross-container world_size x 1.
    nodes: int = 0
    nproc_per_node: int = 0
    rendezvous: str = "static"  # one of RENDEZVOUS; always "static" (--standalone) in-container
    master_addr: str = "name"  # one of MASTER_ADDRS; always "name" in-container
    egress: bool = False  # False: the scenario's network is internal
    extra_networks: int = 0  # more networks, created per scenario, that every container is attached to
    ipv6: bool = False
    cpus: float | None = None  # None: the Engine's default (no limit)
    memory: str | None = None  # a Docker size as written, lower-cased: "512m", "2g"
    shm_size: str | None = None  # same format as memory
    env: tuple[tuple[str, str], ...] = ()  # extra environment, sorted by name
    user: str | None = None  # "1000:1000", "nobody"
    working_dir: str | None = None  # an absolute path in the container; None: the harness's own
    # Where the ranks' tensors live and the GPUs each node's container gets. These defaults are for code
    # that builds a Scenario itself; the YAML derives them from the backend (devices.py).
    device: str = "cpu"  # one of DEVICES
    gpus_per_node: int = 0
    # Diagnosis and elastic restarts: TORCH_DISTRIBUTED_DEBUG (off, info, detail), torchrun's --max_restarts,
    # the c10d rendezvous timeouts in whole seconds (None: torch's), and whether the workers share the
    # agent's store (False: TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1).
    distributed_debug: str = "off"
    max_restarts: int = 0
    rdzv_join_timeout_s: int = 60
    rdzv_last_call_timeout_s: int | None = None
    rdzv_close_timeout_s: int | None = None
    rdzv_read_timeout_s: int | None = None
    share_rdzv_store: bool = True
    # Docker Engine URLs to place the nodes on (distval/targets/engines/hosts.py); empty: the one Engine of DOCKER_HOST.
    hosts: tuple[str, ...] = ()
    placement: tuple[int, ...] = ()  # the host index of each node; empty: in order
    advertise_addr: str | None = None  # host 0's address as the other hosts reach it; None: probed
    expanded_from: str | None = None  # the matrix entry's name; None for a plain scenario
    axes: tuple[tuple[str, str], ...] = ()  # the matrix combination: (axis, value as str), in axis order
    # What the harness does to nodes while the checks run, and how the ranks must react (config/faults.py).
    faults: tuple[FaultSpec, ...] = ()
    expect: tuple[Expectation, ...] | None = None

    def __post_init__(self) -> None:
        # Results are keyed by check name: a check listed twice would let one verdict overwrite the other.
        for name, count in Counter(check.name for check in self.checks).items():
            if count > 1:
                raise ValueError(f"scenario {self.name!r}: expected each check once; {name!r} is listed {count} times")
        # Code may give one of nodes and nproc_per_node (0: not given); the other follows from world_size.
        done = complete_layout(self.topology, self.world_size, self.nodes or None, self.nproc_per_node or None)
        nodes, nproc = done if isinstance(done, tuple) else (self.nodes, self.nproc_per_node)
        if nodes < 1 or nproc < 1 or nodes * nproc != self.world_size:
            raise ValueError(
                f"scenario {self.name!r}: world_size {self.world_size} is not nodes x nproc_per_node = {nodes} x {nproc}"
            )
        object.__setattr__(self, "nodes", nodes)
        object.__setattr__(self, "nproc_per_node", nproc)


@dataclass(frozen=True)
class Config:
    path: str
    scenarios: tuple[Scenario, ...]
    # sha256 of the file's bytes as read: the JSON report and an attestation name the config by its content.
    sha256: str = ""
