"""The one module that talks to the Docker Engine (through docker-py, never the docker CLI).

Every container and network it creates carries ``distval.managed=true`` and ``distval.run=<run id>``,
whatever the caller passed, and every docker-py or transport error leaves here as an EngineError. Files
go in with put_archive and come out with get_archive, never through bind mounts of host paths (those
resolve on the daemon's host and break with a remote DOCKER_HOST).
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import docker
import docker.errors
import docker.types
import requests

from harness.docker_spec import ContainerPlan, NetworkPlan
from harness.engine_protocol import ContainerState, GpuSupport, ImageInfo
from harness.errors import EngineError, ImageMissing
from harness.labels import LABEL_MANAGED, LABEL_RUN

T = TypeVar("T")
API_TIMEOUT_S = 120


__all__ = ["ContainerState", "Engine", "EngineError", "GpuSupport", "ImageInfo", "ImageMissing"]
# The answer of an Engine with no GPU runtime to a device request (moby's daemon/devices.go).
NO_GPU_DRIVER = "could not select device driver"
GPU_PROBE_TIMEOUT_S = 60


def _where() -> str:
    return os.environ.get("DOCKER_HOST") or "the default socket /var/run/docker.sock"


class Engine:
    """The real Engine; implements harness.engine_protocol.EngineAPI."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        try:
            self.client = docker.from_env(timeout=API_TIMEOUT_S)
            self.client.ping()
        except (docker.errors.DockerException, requests.RequestException) as exc:
            raise EngineError(f"cannot reach the Docker Engine at {_where()}: {exc}") from None
        self._gpu_lock = threading.Lock()
        self._gpu_support: dict[str, GpuSupport] = {}

    def _call(self, what: str, function: Callable[[], T]) -> T:
        try:
            return function()
        except docker.errors.ImageNotFound as exc:
            raise ImageMissing(f"{what}: {exc.explanation or exc}") from None
        except docker.errors.APIError as exc:
            raise EngineError(f"{what}: {exc.explanation or exc}") from None
        except (docker.errors.DockerException, requests.RequestException) as exc:
            raise EngineError(f"{what}: {exc}") from None

    def _labels(self, labels: Mapping[str, str]) -> dict[str, str]:
        merged = dict(labels)
        merged[LABEL_MANAGED] = "true"
        merged[LABEL_RUN] = self.run_id
        return merged

    # -- engine and images --------------------------------------------------------------------
    def version(self) -> str:
        info = self._call("ask the Engine's version", self.client.version)
        return str(info.get("Version", "unknown"))

    def image(self, reference: str) -> ImageInfo | None:
        try:
            image = self.client.images.get(reference)
        except docker.errors.ImageNotFound:
            return None
        except (docker.errors.DockerException, requests.RequestException) as exc:
            raise EngineError(f"inspect image {reference}: {exc}") from None
        return ImageInfo(id=image.id, tags=tuple(image.tags), labels=dict(image.labels or {}))

    def import_rootfs(self, tar_path: str, repository: str, tag: str, changes: list[str]) -> str:
        """docker import of a root filesystem tarball; ``changes`` are Dockerfile lines (LABEL, ENV, CMD)."""
        result = self._call(
            f"import {tar_path} as {repository}:{tag}",
            lambda: self.client.api.import_image_from_file(tar_path, repository=repository, tag=tag, changes=changes),
        )
        return str(result)

    def build(
        self,
        context: bytes,
        tag: str,
        labels: Mapping[str, str],
        log: Callable[[str], None],
        buildargs: Mapping[str, str] | None = None,
    ) -> str:
        """Build from an in-memory context (a tar holding a Dockerfile) with the legacy builder.

        pull=False and no network: FROM names a local image, and nothing is ever pulled.
        """

        def run() -> str:
            stream = self.client.api.build(
                fileobj=io.BytesIO(context),
                custom_context=True,
                tag=tag,
                labels=dict(labels),
                pull=False,
                rm=True,
                forcerm=True,
                network_mode="none",
                buildargs=dict(buildargs or {}),
                decode=True,
            )
            image_id = ""
            for chunk in stream:
                if "error" in chunk:
                    raise EngineError(f"build {tag}: {chunk['error'].strip()}")
                text = str(chunk.get("stream", "")).strip()
                if text:
                    log(text)
                aux = chunk.get("aux")
                if isinstance(aux, dict) and "ID" in aux:
                    image_id = str(aux["ID"])
            return image_id

        return self._call(f"build {tag}", run)

    # -- networks and containers ------------------------------------------------------------------
    def create_network(self, network: NetworkPlan) -> None:
        kwargs = network.create_kwargs()
        kwargs["labels"] = self._labels(kwargs["labels"])
        if "ipam" in kwargs:
            pool = kwargs["ipam"]["Config"][0]
            kwargs["ipam"] = docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(subnet=pool["Subnet"])])
        self._call(f"create network {network.name}", lambda: self.client.networks.create(**kwargs))

    def network_subnets(self, name: str) -> list[str]:
        network = self._call(f"inspect network {name}", lambda: self.client.networks.get(name))
        configs = (network.attrs.get("IPAM") or {}).get("Config") or []
        return [str(c["Subnet"]) for c in configs if c.get("Subnet")]

    def connect(self, network: str, container: Any) -> None:
        self._call(f"connect {container.name} to {network}", lambda: self.client.networks.get(network).connect(container))

    def address(self, container: Any, network: str, ipv6: bool = False) -> str:
        """The container's address on ``network`` (it is assigned when the container starts)."""
        for _ in range(50):
            self._call(f"inspect {container.name}", container.reload)
            settings = container.attrs.get("NetworkSettings", {}).get("Networks", {}).get(network, {})
            address = settings.get("GlobalIPv6Address" if ipv6 else "IPAddress")
            if address:
                return str(address)
            time.sleep(0.1)
        raise EngineError(f"{container.name} has no {'IPv6' if ipv6 else 'IPv4'} address on {network}")

    def create_container(self, container: ContainerPlan) -> Any:
        """Create exactly what the plan says (its resolved ``create_kwargs``), plus the run's labels."""
        kwargs = container.create_kwargs()
        kwargs["labels"] = self._labels(kwargs["labels"])
        return self._call(f"create container {container.name}", lambda: self.client.containers.create(**kwargs))

    def put_archive(self, container: Any, path: str, data: bytes) -> None:
        ok = self._call(f"copy files into {container.name}", lambda: container.put_archive(path, data))
        if not ok:
            raise EngineError(f"copy files into {container.name}: the Engine refused the archive")

    def start(self, container: Any) -> None:
        self._call(f"start {container.name}", container.start)

    def state(self, container: Any) -> ContainerState:
        self._call(f"inspect {container.name}", container.reload)
        state = container.attrs.get("State", {})
        exit_code = state.get("ExitCode") if state.get("Status") == "exited" else None
        return ContainerState(status=str(state.get("Status")), exit_code=exit_code, oom_killed=bool(state.get("OOMKilled")))

    def kill(self, container: Any) -> None:
        try:
            container.kill()
        except docker.errors.APIError as exc:
            if exc.status_code != 409:  # 409: it exited on its own meanwhile
                raise EngineError(f"kill {container.name}: {exc.explanation or exc}") from None
        except (docker.errors.DockerException, requests.RequestException) as exc:
            raise EngineError(f"kill {container.name}: {exc}") from None

    def logs(self, container: Any) -> tuple[str, str]:
        out = self._call(f"read logs of {container.name}", lambda: container.logs(stdout=True, stderr=False))
        err = self._call(f"read logs of {container.name}", lambda: container.logs(stdout=False, stderr=True))
        return out.decode("utf-8", "replace"), err.decode("utf-8", "replace")

    def read_files(self, container: Any, path: str) -> dict[str, bytes]:
        """Regular files under ``path`` in the container (running or exited), by base name."""

        def fetch() -> bytes:
            stream, _stat = container.get_archive(path)
            return b"".join(stream)

        data = self._call(f"copy {path} out of {container.name}", fetch)
        files: dict[str, bytes] = {}
        with tarfile.open(fileobj=io.BytesIO(data)) as archive:
            for member in archive.getmembers():
                if member.isfile():
                    handle = archive.extractfile(member)
                    if handle is not None:
                        files[os.path.basename(member.name)] = handle.read()
        return files

    # -- GPUs ---------------------------------------------------------------------------------------
    def gpu_support(self, image: str) -> GpuSupport:
        """How many GPUs this Engine can give a container of ``image``, measured once per image and run:
        a short probe container asks for all GPUs (count -1) and counts the NVIDIA devices it sees. An
        Engine without a GPU runtime refuses the request ("could not select device driver ...")."""
        with self._gpu_lock:
            if image not in self._gpu_support:
                self._gpu_support[image] = self._probe_gpus(image)
            return self._gpu_support[image]

    def _probe_gpus(self, image: str) -> GpuSupport:
        count_devices = "import glob; print(len(glob.glob('/dev/nvidia[0-9]*')))"
        name = f"distval-{self.run_id}-gpu-probe-{hashlib.sha256(image.encode()).hexdigest()[:8]}"
        try:
            container = self.client.containers.create(
                image,
                entrypoint=["python3", "-c", count_devices],
                name=name,
                labels=self._labels({}),
                network_mode="none",
                device_requests=[docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])],
                detach=True,
            )
            try:
                container.start()
                container.wait(timeout=GPU_PROBE_TIMEOUT_S)
                output = container.logs(stdout=True, stderr=False).decode("utf-8", "replace").strip()
            finally:
                container.remove(force=True, v=True)
        except docker.errors.APIError as exc:
            text = str(exc.explanation or exc)
            if NO_GPU_DRIVER in text:
                return GpuSupport(0, f"this Docker Engine cannot give GPUs to containers ({text})")
            raise EngineError(f"probe the Engine's GPUs with {image}: {text}") from None
        except (docker.errors.DockerException, requests.RequestException) as exc:
            raise EngineError(f"probe the Engine's GPUs with {image}: {exc}") from None
        if not output.isdigit():
            return GpuSupport(0, f"the GPU probe in {image} printed {output[:200]!r}, not a device count")
        count = int(output)
        reason = "" if count else "the Engine accepted the GPU request but the container saw no /dev/nvidia* device"
        return GpuSupport(count, reason)

    # -- cleanup ----------------------------------------------------------------------------------
    def remove_labelled(self, extra_label: str | None = None) -> tuple[int, int]:
        """Remove every container and network of this run (optionally narrowed by one more label)."""
        return self.remove_matching([f"{LABEL_RUN}={self.run_id}"] + ([extra_label] if extra_label else []))

    def remove_matching(self, labels: list[str]) -> tuple[int, int]:
        """Remove the containers (with their anonymous volumes) and networks carrying all these labels."""
        filters = {"label": [f"{LABEL_MANAGED}=true", *labels]}
        removed_containers = 0
        for container in self._list(lambda: self.client.containers.list(all=True, filters=filters)):
            try:
                container.remove(force=True, v=True)
                removed_containers += 1
            except docker.errors.NotFound:
                pass
        removed_networks = 0
        for network in self._list(lambda: self.client.networks.list(filters=filters)):
            try:
                network.remove()
                removed_networks += 1
            except docker.errors.NotFound:
                pass
        return removed_containers, removed_networks

    def _list(self, function: Callable[[], list[Any]]) -> Iterator[Any]:
        yield from self._call("list this run's containers and networks", function)
