"""What the planner hands the Engine: networks and containers as plain data, and their exact docker-py arguments.

Both the planners (distval/plan/nodes.py fills these in) and distval/targets/docker/engine.py (which executes them) import this
module; the Engine imports nothing from the planner. ``create_kwargs()`` is the single translation to
docker-py, so ``distval plan`` can print exactly the arguments ``distval run`` passes to the Engine.
Strings may hold named placeholders (distval/plan/placeholders.py) that only the Engine can fill in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class NetworkPlan:
    name: str
    internal: bool
    labels: tuple[tuple[str, str], ...]
    # An IPv6 network's unique-local /64, chosen by the planner (None: IPv4 only, the Engine's pool).
    ipv6_subnet: str | None = None

    @property
    def ipv6(self) -> bool:
        return self.ipv6_subnet is not None

    def create_kwargs(self) -> dict[str, Any]:
        """docker-py ``networks.create(**kwargs)``, with the IPAM pool as the plain dict the Engine's API takes."""
        kwargs: dict[str, Any] = {
            "name": self.name,
            "driver": "bridge",
            "internal": self.internal,
            "labels": dict(self.labels),
            "check_duplicate": True,
        }
        if self.ipv6_subnet is not None:
            kwargs["enable_ipv6"] = True
            kwargs["ipam"] = {"Driver": "default", "Config": [{"Subnet": self.ipv6_subnet}]}
        return kwargs


@dataclass(frozen=True)
class Ulimit:
    name: str
    soft: int
    hard: int


@dataclass(frozen=True)
class ContainerOptions:
    """Resources and identity, passed to the Engine as they are (None or empty: the Engine's default)."""

    cpus: float | None = None
    memory: str | None = None
    shm_size: str | None = None
    user: str | None = None
    ulimits: tuple[Ulimit, ...] = ()
    # Host GPUs by device id, never by count: a count hands every container the same devices
    # (nvidia-container-toolkit#521), and NCCL refuses two ranks on one GPU.
    gpu_device_ids: tuple[str, ...] = ()
    # Restrictions beyond the Engine's defaults (the host probes': distval/targets/engines/plan.py); empty: none.
    cap_drop: tuple[str, ...] = ()
    security_opt: tuple[str, ...] = ()


@dataclass(frozen=True)
class FileCopy:
    """Something copied into the container before it starts (one archive, put at /)."""

    path: str  # absolute, in the container
    mode: int
    text: str | None = None  # a file's content; None: a directory (with the suite's files when suite is set)
    suite: bool = False  # the harness's distval_suite/ package: its *.py files go into this directory


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
    image: str = ""
    networks: tuple[str, ...] = ()  # the first is the one it is created on; the others are connected after
    options: ContainerOptions = ContainerOptions()
    files: tuple[FileCopy, ...] = ()
    results_dir: str = ""  # copied out after the container exits
    host: str = ""  # the Engine it runs on: a --hosts URL ("": the one Engine of a plain run)
    network_mode: str | None = None  # "host" across several hosts (then no networks and no hostname)

    def create_kwargs(self) -> dict[str, Any]:
        """docker-py ``containers.create(**kwargs)`` — create + start, never ``run()``, which pulls a missing image."""
        options = self.options
        kwargs: dict[str, Any] = {
            "image": self.image,
            "entrypoint": [self.argv[0]],
            "command": list(self.argv[1:]),
            "name": self.name,
            "hostname": self.hostname,
            "environment": dict(self.env),
            "labels": dict(self.labels),
            "working_dir": self.working_dir,
            "network": self.networks[0] if self.networks else None,
            "detach": True,
        }
        if self.network_mode is not None:
            # The Engine refuses a hostname with the host's network namespace ("conflicting options").
            del kwargs["network"], kwargs["hostname"]
            kwargs["network_mode"] = self.network_mode
        if options.cpus is not None:
            kwargs["nano_cpus"] = int(options.cpus * 1e9)
        if options.memory is not None:
            kwargs["mem_limit"] = options.memory
        if options.shm_size is not None:
            kwargs["shm_size"] = options.shm_size
        if options.user is not None:
            kwargs["user"] = options.user
        if options.ulimits:
            kwargs["ulimits"] = [{"Name": u.name, "Soft": u.soft, "Hard": u.hard} for u in options.ulimits]
        if options.gpu_device_ids:
            kwargs["device_requests"] = [
                {"Driver": "", "Count": 0, "DeviceIDs": list(options.gpu_device_ids), "Capabilities": [["gpu"]], "Options": {}}
            ]
        if options.cap_drop:
            kwargs["cap_drop"] = list(options.cap_drop)
        if options.security_opt:
            kwargs["security_opt"] = list(options.security_opt)
        return kwargs


@dataclass(frozen=True)
class HelperPlan:
    """A fault helper (distval/plan/faults.py): a container of the helper image in a victim's network namespace,
    idle until the runtime execs iptables or tc in it."""

    name: str
    target: str  # the victim's container name
    image: str
    labels: tuple[tuple[str, str], ...]

    def create_kwargs(self) -> dict[str, Any]:
        return {
            "image": self.image,
            "entrypoint": ["sleep"],
            "command": ["infinity"],
            "name": self.name,
            "network_mode": f"container:{self.target}",
            "cap_add": ["NET_ADMIN"],
            "labels": dict(self.labels),
            "detach": True,
        }
