"""What the runtime needs from a Docker Engine, as a Protocol: distval/targets/docker/engine.py implements it against the
real Engine, and the tests' fakes implement the same one, so that mypy keeps the fakes from drifting.

Containers are opaque handles: the runtime only passes back what ``create_container`` returned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from distval.plan.specs import ContainerPlan, HelperPlan, NetworkPlan

# The oldest Engine API versions distval's calls work with (docker-py refuses the arguments below them, with
# InvalidVersion): wait(condition="removed"), how a run waits out its reaper (Engine.wait_removed), needs 1.30
# (Docker 17.06); a GPU device request (every GPU scenario and the GPU probe: device_requests) needs 1.40 (Docker 19.03).
API_VERSION_NEEDED = (1, 30)
API_VERSION_GPUS = (1, 40)


@dataclass(frozen=True)
class ImageInfo:
    id: str
    tags: tuple[str, ...]
    labels: Mapping[str, str]
    repo_digests: tuple[str, ...] = ()  # name@sha256:... where the image came from a registry


@dataclass(frozen=True)
class ContainerState:
    status: str
    exit_code: int | None
    oom_killed: bool


@dataclass(frozen=True)
class ExecResult:
    """A command run inside a running container: its exit code (None: the Engine did not say) and its
    stdout and stderr together."""

    exit_code: int | None
    output: str


@dataclass(frozen=True)
class GpuSupport:
    """What the Engine can give containers: GPUs by device id, or the measured reason it cannot."""

    count: int
    reason: str  # why count is 0 (or how it was learned)


@dataclass(frozen=True)
class EngineFacts:
    """What an Engine says of itself (``docker version`` and ``docker info``), each value checked for its type:
    "" or () where the Engine did not say."""

    version: str  # the Engine's own version, e.g. 27.5.1
    api_version: str  # the newest API version it speaks, e.g. 1.47
    os_type: str  # linux, windows
    root_dir: str  # DockerRootDir: where it keeps images and containers, on its own machine
    runtimes: tuple[str, ...]  # runc, nvidia, ...
    cdi_devices: tuple[str, ...]  # CDI devices it discovered (API 1.50), e.g. nvidia.com/gpu=0


class EngineAPI(Protocol):
    run_id: str

    def version(self) -> str: ...

    def describe(self) -> EngineFacts: ...

    def image(self, reference: str) -> ImageInfo | None: ...

    def create_network(self, network: NetworkPlan) -> None: ...

    def network_subnets(self, name: str) -> list[str]: ...

    def create_container(self, container: ContainerPlan) -> Any: ...

    def connect(self, network: str, container: Any) -> None: ...

    def put_archive(self, container: Any, path: str, data: bytes) -> None: ...

    def start(self, container: Any) -> None: ...

    def address(self, container: Any, network: str, ipv6: bool = False) -> str: ...

    def state(self, container: Any) -> ContainerState: ...

    def wait_stopped(self, container: Any, timeout_s: float) -> bool: ...

    def kill(self, container: Any) -> None: ...

    def logs(self, container: Any) -> tuple[str, str]: ...

    def read_files(self, container: Any, path: str) -> dict[str, bytes]: ...

    def exec_run(self, container: Any, argv: Sequence[str]) -> ExecResult: ...

    def gpu_support(self, image: str, python: str) -> GpuSupport: ...

    # Faults (distval/targets/docker/faults.py): freeze, partition, and the helper container in a node's namespace.
    def pause(self, container: Any) -> None: ...

    def unpause(self, container: Any) -> None: ...

    def disconnect(self, network: str, container: Any) -> None: ...

    def create_helper(self, helper: HelperPlan) -> Any: ...

    def run_beside(self, container: Any, arguments: Sequence[str], timeout_s: float) -> ExecResult: ...

    def remove_labelled(self, extra_label: str | None = None) -> tuple[int, int]: ...


@dataclass(frozen=True)
class Resource:
    """A container or network distval created, as ``distval cleanup`` sees it."""

    kind: str  # "container" or "network"
    id: str
    name: str
    labels: Mapping[str, str]
    created: float | None  # seconds since the epoch, by the Engine's clock; None when it did not say
