"""The one module that talks to the Docker Engine (through docker-py, never the docker CLI).

Every container and network it creates carries ``distval.managed=true``, ``distval.run=<run id>`` and its
owner (``distval.owner.host``, ``.pid``, ``.started``: distval/owner.py), whatever the caller passed, all
added in ``_labels``; and every docker-py or transport error leaves here as an EngineError (``_call`` and
``_mapped``), never as docker-py's or requests' own exception. Files
go in with put_archive and come out with get_archive, never through bind mounts of host paths (those
resolve on the daemon's host and break with a remote DOCKER_HOST).
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import tarfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

import requests
import urllib3.exceptions

import docker
import docker.errors
import docker.types
from distval.bounded_read import CONTAINER_LOG_MAX_BYTES, RESULTS_MAX_BYTES, FileRefused, end_of, joined_within, kept_end
from distval.config.engine_hosts import HostSpec
from distval.engine_protocol import ContainerState, EngineFacts, ExecResult, GpuSupport, ImageInfo, Resource
from distval.errors import EngineError, EngineUnreachable, ImageMissing
from distval.escape import terminal_line
from distval.labels import DISTVAL_LABELS, LABEL_MANAGED, LABEL_ROLE, LABEL_RUN
from distval.owner import Owner, current_owner
from distval.plan.specs import ContainerPlan, HelperPlan, NetworkPlan
from distval.tarball import regular_files
from distval.targets.docker import beside as beside_container
from distval.targets.docker import gpu_probe as gpu_probe_container
from distval.targets.docker import reaper_container
from distval.targets.docker.engine_advice import os_error_in, what_to_do

T = TypeVar("T")
API_TIMEOUT_S = 120
MIN_API_VERSION = "1.24"  # docker-py 7's oldest; only a placeholder until the Engine is asked


__all__ = ["ContainerState", "Engine", "EngineError", "GpuSupport", "ImageInfo", "ImageMissing", "Resource"]
# What docker-py and its transport raise: its own errors, requests' (wrapping urllib3's), urllib3's when a
# stream is read directly, and socket errors (OSError) from its unix-socket and SSH adapters.
TRANSPORT_ERRORS = (docker.errors.DockerException, requests.RequestException, urllib3.exceptions.HTTPError, OSError)
# The answer of an Engine with no GPU runtime to a device request (moby's daemon/devices.go).
# How docker-py's wait(timeout=) ends when the timeout passes (docker-py#2964).
WAIT_TIMEOUTS = (requests.ReadTimeout, requests.ConnectionError)
# How long a network removal waits for the Engine to release its endpoints: after a SIGKILLed distval in the
# harness image, the network it shared with its reaper still had one 10 s on (removable minutes later).
ACTIVE_ENDPOINTS_WAIT_S = 30.0
ACTIVE_ENDPOINTS_RETRY_S = 0.2
NO_GPU_DRIVER = "could not select device driver"
GPU_PROBE_TIMEOUT_S = 60


def _where(host: HostSpec | None = None) -> str:
    if host is not None:
        return host.url
    return os.environ.get("DOCKER_HOST") or "the default socket /var/run/docker.sock"


def _client_for(host: HostSpec) -> Any:
    """A docker-py client for one Engine URL (unix://, tcp:// with or without TLS, ssh://)."""
    tls: Any = False
    if host.tls is not None:
        tls = docker.tls.TLSConfig(client_cert=(host.tls.cert, host.tls.key), ca_cert=host.tls.ca, verify=host.tls.ca)
    if host.tls is None:
        return docker.DockerClient(base_url=host.url, tls=False, timeout=API_TIMEOUT_S, use_ssh_client=host.use_ssh_client)
    # requests lets REQUESTS_CA_BUNDLE/CURL_CA_BUNDLE replace the session's CA file (psf/requests#3829): with
    # them set (as on many CI images) the Engine's own CA is ignored and every call fails verification. So the
    # client is made without asking the API version (the first call), told not to read the environment, and
    # then asks it as docker-py's own "auto" does.
    client = docker.DockerClient(base_url=host.url, tls=tls, timeout=API_TIMEOUT_S, version=MIN_API_VERSION)
    client.api.trust_env = False
    client.api._version = client.api._retrieve_server_version()
    return client


class Engine:
    """The real Engine; implements distval.engine_protocol.EngineAPI."""

    # It can hold the run's reaper (start_reaper): a run on it starts one (distval/targets/docker/engine_run.py).
    holds_reaper = True

    def __init__(self, run_id: str, client: Any = None, owner: Owner | None = None, host: HostSpec | None = None) -> None:
        """``client``: a docker-py DockerClient (default: from ``host``, else from the environment); ``owner``:
        the process the resources are labelled with (default: this one); ``host``: one Engine of --hosts."""
        self.run_id = run_id
        self.owner = owner or current_owner()
        self.where = _where(host)
        try:
            if client is None:
                client = _client_for(host) if host is not None else docker.from_env(timeout=API_TIMEOUT_S)
            self.client = client
            self.client.ping()
        except TRANSPORT_ERRORS as exc:
            found = f"cannot reach the Docker Engine at {self.where}: {_unreachable_text(exc)}"
            raise EngineUnreachable(found, what_to_do(exc, self.where)) from None
        self._gpu_lock = threading.Lock()
        self._gpu_support: dict[tuple[str, str], GpuSupport] = {}  # by (image, python)

    def _call(self, what: str, function: Callable[[], T]) -> T:
        try:
            return function()
        except TRANSPORT_ERRORS as exc:
            raise _mapped(what, exc) from None

    def _labels(self, labels: Mapping[str, str]) -> dict[str, str]:
        """The one place labels are given: every label distval reads (empty unless given: none comes from the
        image), the caller's, then distval's own, which nothing overrides."""
        merged = dict.fromkeys(DISTVAL_LABELS, "")
        merged.update(labels)
        merged.update(self.owner.labels())
        merged[LABEL_MANAGED] = "true"
        merged[LABEL_RUN] = self.run_id
        return merged

    # -- engine and images --------------------------------------------------------------------
    def version(self) -> str:
        info = self._call("ask the Engine's version", self.client.version)
        return str(info.get("Version", "unknown"))

    def describe(self) -> EngineFacts:
        """``docker version`` and ``docker info`` of this Engine, as distval doctor reports them."""
        version = self._call("ask the Engine's version", self.client.version)
        info = self._call("ask the Engine's settings", self.client.info)
        return engine_facts(version, info)

    def image(self, reference: str) -> ImageInfo | None:
        try:
            image = self.client.images.get(reference)
        except docker.errors.ImageNotFound:
            return None
        except TRANSPORT_ERRORS as exc:
            raise _mapped(f"inspect image {reference}", exc) from None
        digests = tuple(str(d) for d in image.attrs.get("RepoDigests") or ())
        return ImageInfo(id=image.id, tags=tuple(image.tags), labels=dict(image.labels or {}), repo_digests=digests)

    def save_image(self, reference: str) -> Iterator[bytes]:
        """``docker save`` of one image as a stream of chunks (nothing is held in memory whole)."""
        what = f"save image {reference} from {self.where}"
        stream = self._call(what, lambda: self.client.api.get_image(reference, chunk_size=2**20))
        try:
            yield from stream
        except TRANSPORT_ERRORS as exc:
            raise _mapped(what, exc) from None

    def load_image(self, chunks: Iterable[bytes]) -> list[str]:
        """``docker load`` from a stream of chunks; the references the Engine says it loaded."""
        what = f"load an image into {self.where}"

        def run() -> list[str]:
            loaded: list[str] = []
            for event in self.client.api.load_image(chunks):
                if "error" in event:
                    raise EngineError(f"{what}: {str(event['error']).strip()}")
                text = str(event.get("stream", "")).strip()
                if text.startswith("Loaded image"):
                    loaded.append(text.split(":", 1)[1].strip())
            return loaded

        return self._call(what, run)

    def pull_digest(self, reference: str) -> None:
        """Pull ``name@sha256:...`` (the only pull distval makes: by digest, so every host gets the same bytes)."""
        name, _, digest = reference.partition("@")
        self._call(f"pull {reference} into {self.where}", lambda: self.client.api.pull(name, tag=digest))

    def create_raw(self, kwargs: Mapping[str, Any]) -> Any:
        """Create a container from docker-py arguments built elsewhere (distval/targets/engines/dind.py), with the run's
        labels."""
        arguments = dict(kwargs)
        arguments["labels"] = self._labels(arguments.get("labels") or {})
        return self._call(f"create container {arguments.get('name')}", lambda: self.client.containers.create(**arguments))

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

    def bridge_interface(self) -> str | None:
        """The host interface of the Engine's default ``bridge`` network (``docker0``), None where it has none."""
        try:
            network = self.client.networks.get("bridge")
        except docker.errors.NotFound:
            return None
        except TRANSPORT_ERRORS as exc:
            raise _mapped("inspect network bridge", exc) from None
        return str((network.attrs.get("Options") or {}).get("com.docker.network.bridge.name") or "docker0")

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

    def wait_stopped(self, container: Any, timeout_s: float) -> bool:
        """Block on the Engine's wait API until the container is no longer running (True) or ``timeout_s``
        has passed (False). docker-py's timeout is only the HTTP read timeout (docker-py#2964) and ends as
        ReadTimeout or ConnectionError: either way the container's state decides, so a lost connection
        becomes a state() answer or that call's EngineError, never a verdict."""
        try:
            container.wait(timeout=max(timeout_s, 0.001))
        except WAIT_TIMEOUTS:
            return self.state(container).status not in ("created", "running", "restarting")
        except TRANSPORT_ERRORS as exc:
            raise _mapped(f"wait for {container.name}", exc) from None
        return True

    def wait_removed(self, container_id: str, timeout_s: float) -> bool:
        """Block on the Engine's wait API until the container is removed (True; also when it is gone already)
        or ``timeout_s`` has passed (False): an auto-removed container's end, seen at once instead of polled."""
        try:
            self.client.api.wait(container_id, timeout=max(timeout_s, 0.001), condition="removed")
        except docker.errors.NotFound:
            return True
        except WAIT_TIMEOUTS:
            return False
        except TRANSPORT_ERRORS as exc:
            raise _mapped(f"wait for {container_id[:12]} to be removed", exc) from None
        return True

    def kill(self, container: Any) -> None:
        try:
            container.kill()
        except TRANSPORT_ERRORS as exc:
            if isinstance(exc, docker.errors.APIError) and exc.status_code == 409:
                return  # it exited on its own meanwhile
            raise _mapped(f"kill {container.name}", exc) from None

    def logs(self, container: Any) -> tuple[str, str]:
        def end(stdout: bool) -> str:
            # Streamed, keeping the end: the log is the image's output, of any size (follow=False: docker-py
            # follows a streamed log unless told not to).
            stream = container.logs(stdout=stdout, stderr=not stdout, stream=True, follow=False)
            return kept_end(*end_of(stream, CONTAINER_LOG_MAX_BYTES))

        out = self._call(f"read logs of {container.name}", lambda: end(True))
        err = self._call(f"read logs of {container.name}", lambda: end(False))
        return out, err

    def read_files(self, container: Any, path: str) -> dict[str, bytes]:
        """Regular files under ``path`` in the container (running or exited), by base name."""

        def fetch() -> bytes:
            stream, _stat = container.get_archive(path)
            return joined_within(stream, RESULTS_MAX_BYTES)  # the image writes them: bounded before joined

        try:
            data = self._call(f"copy {path} out of {container.name}", fetch)
        except FileRefused as exc:
            raise EngineError(f"copy {path} out of {container.name}: {exc}") from None
        try:
            return regular_files(data)
        except tarfile.TarError as exc:
            raise EngineError(f"copy {path} out of {container.name}: the Engine sent no readable archive ({exc})") from None

    def exec_run(self, container: Any, argv: Sequence[str]) -> ExecResult:
        """Run ``argv`` in the running container as its user; ``container.kill`` reaches only PID 1 (the
        launcher), so signals for the worker processes go through this."""
        result = self._call(f"exec in {container.name}", lambda: container.exec_run(list(argv), stdout=True, stderr=True))
        output = result.output.decode("utf-8", "replace") if isinstance(result.output, bytes) else str(result.output or "")
        return ExecResult(exit_code=result.exit_code, output=output)

    # -- the reaper -------------------------------------------------------------------------------
    def start_reaper(
        self,
        image: str,
        entrypoint: list[str],
        name: str,
        environment: Mapping[str, str],
        socket_path: str,
        port: int,
        bind_address: str,
        join: str | None = None,
        created: Callable[[], None] | None = None,
        host_network: bool = False,
    ) -> tuple[str, int | None, list[str]]:
        """Create and start the run's reaper (distval/targets/docker/reaper.py) as ``entrypoint`` in ``image`` (distval's reaper
        image; distval/targets/docker/reaper_container.py says what the container is), as root (the socket's owner): the
        Engine's socket mounted, ``port`` published on ``bind_address`` at a port the Engine picks, removed by
        the Engine once it exits, nothing else allowed.
        ``join``: the id of a container distval runs in; the reaper joins its networks, so distval reaches it
        there. ``created``: called once the container exists, before it starts. ``host_network``: in the
        Engine's host's network instead, listening at ``port`` there, nothing published (distval on that host:
        no network of its own to set up and tear down, about 0.2 s of every run). Returns (container id, the
        published port, or ``port`` in the host's network, its addresses on its networks)."""

        def networks_of(container_id: str) -> list[str]:
            try:
                attrs = self.client.api.inspect_container(container_id)
            except docker.errors.NotFound:
                return []  # not a container of this Engine (distval in a container of another one)
            names = ((attrs.get("NetworkSettings") or {}).get("Networks") or {}).keys()
            return [n for n in names if n not in ("bridge", "host", "none")]

        network: dict[str, Any] = {"network_mode": "host"} if host_network else {"ports": {f"{port}/tcp": (bind_address, None)}}

        def run() -> tuple[str, int | None, list[str]]:
            container = self.client.containers.create(
                image,
                entrypoint=entrypoint,
                command=[],
                name=name,
                labels=self._labels({LABEL_ROLE: "reaper"}),
                # Exactly the reaper's variables: nothing of distval's environment (PYTHONPATH, LD_PRELOAD).
                environment=dict(environment),
                volumes={socket_path: {"bind": reaper_container.SOCKET_INSIDE, "mode": "rw"}},
                detach=True,
                **reaper_container.SETTINGS,
                **network,
            )
            if created is not None:
                created()
            for joined in networks_of(join) if join and not host_network else []:
                self.client.networks.get(joined).connect(container)
            container.start()
            if host_network:
                return str(container.id), port, []
            container.reload()
            settings = container.attrs.get("NetworkSettings") or {}
            bindings = (settings.get("Ports") or {}).get(f"{port}/tcp") or []
            host_port = next((int(b["HostPort"]) for b in bindings if b.get("HostPort")), None)
            addresses = [str(n["IPAddress"]) for n in (settings.get("Networks") or {}).values() if n.get("IPAddress")]
            return str(container.id), host_port, addresses

        return self._call(f"start the reaper {name}", run)

    # -- faults -----------------------------------------------------------------------------------
    def pause(self, container: Any) -> None:
        """Freeze every process of the container (the cgroup freezer): a fault, not a stop."""
        self._call(f"pause {container.name}", container.pause)

    def unpause(self, container: Any) -> None:
        self._call(f"unpause {container.name}", container.unpause)

    def disconnect(self, network: str, container: Any) -> None:
        self._call(f"disconnect {container.name} from {network}", lambda: self.client.networks.get(network).disconnect(container))

    def create_helper(self, helper: HelperPlan) -> Any:
        """Create a fault helper (distval/plan/faults.py) with exactly its planned arguments, plus the run's labels."""
        kwargs = helper.create_kwargs()
        kwargs["labels"] = self._labels(kwargs["labels"])
        return self._call(f"create container {helper.name}", lambda: self.client.containers.create(**kwargs))

    def run_beside(self, container: Any, arguments: Sequence[str], timeout_s: float) -> ExecResult:
        """Run the worker script with ``arguments`` in the beside-helper: a short-lived container of distval's
        own image sharing ``container``'s PID namespace, exactly as distval/targets/docker/beside.py declares it
        (never the image under test); its output and exit code, then it is removed. A paused container runs
        no exec, but a process beside it can still signal its processes (delivered when they thaw)."""

        def run() -> ExecResult:
            kwargs = beside_container.create_kwargs(
                f"{container.name}-beside-{os.urandom(3).hex()}", str(container.id), list(arguments)
            )
            rank_labels = dict(((container.attrs or {}).get("Config") or {}).get("Labels") or {})
            kwargs["labels"] = self._labels(beside_container.labels_of(rank_labels))
            beside = self.client.containers.create(**kwargs)
            try:
                beside.start()
                status = beside.wait(timeout=timeout_s)
                output = beside.logs(stdout=True, stderr=True).decode("utf-8", "replace")
                return ExecResult(exit_code=status.get("StatusCode"), output=output)
            finally:
                beside.remove(force=True, v=True)

        return self._call(f"run beside {container.name}", run)

    # -- GPUs ---------------------------------------------------------------------------------------
    def gpu_support(self, image: str, python: str) -> GpuSupport:
        """How many GPUs this Engine can give a container of ``image``, measured once per image and run:
        a short probe container asks for all GPUs (count -1) and counts the NVIDIA devices it sees. An
        Engine without a GPU runtime refuses the request ("could not select device driver ...")."""
        with self._gpu_lock:
            if (image, python) not in self._gpu_support:
                self._gpu_support[image, python] = self._probe_gpus(image, python)
            return self._gpu_support[image, python]

    def _probe_gpus(self, image: str, python: str) -> GpuSupport:
        name = f"distval-{self.run_id}-gpu-probe-{hashlib.sha256(image.encode()).hexdigest()[:8]}"
        try:
            # Exactly as distval/targets/docker/gpu_probe.py declares it (the plan shows the same).
            kwargs = gpu_probe_container.create_kwargs(image, python, name)
            container = self.client.containers.create(**kwargs, labels=self._labels({}))
            try:
                container.start()
                container.wait(timeout=GPU_PROBE_TIMEOUT_S)
                # The image's python prints the count: its last line only, never all an image could print.
                output = container.logs(stdout=True, stderr=False, tail=1).decode("utf-8", "replace").strip()
            finally:
                container.remove(force=True, v=True)
        except TRANSPORT_ERRORS as exc:
            text = _text(exc)
            if isinstance(exc, docker.errors.APIError) and NO_GPU_DRIVER in text:
                return GpuSupport(0, f"this Docker Engine cannot give GPUs to containers ({text})")
            raise _mapped(f"probe the Engine's GPUs with {image}", exc) from None
        # ASCII digits, a few of them: str.isdigit() holds for "²" and for 5,000 digits, which int() refuses.
        if not (output.isascii() and output.isdigit() and len(output) <= 6):
            return GpuSupport(0, f"the GPU probe in {image} printed {terminal_line(output[:200])!r}, not a device count")
        count = int(output)
        reason = "" if count else "the Engine accepted the GPU request but the container saw no /dev/nvidia* device"
        return GpuSupport(count, reason)

    # -- cleanup ----------------------------------------------------------------------------------
    def remove_labelled(self, extra_label: str | None = None) -> tuple[int, int]:
        """Remove every container and network of this run (optionally narrowed by one more label)."""
        return self.remove_matching([f"{LABEL_RUN}={self.run_id}"] + ([extra_label] if extra_label else []))

    def remove_matching(self, labels: list[str]) -> tuple[int, int]:
        """Remove the containers (with their anonymous volumes) and networks carrying all these labels."""
        return self.remove_resources(self.list_managed(labels))

    def list_managed(self, labels: list[str] | None = None) -> list[Resource]:
        """Every container and network labelled distval.managed=true (and with all of ``labels``), containers first."""
        filters = {"label": [f"{LABEL_MANAGED}=true", *(labels or [])]}
        what = "list distval's containers and networks"
        containers = self._call(what, lambda: self.client.containers.list(all=True, sparse=True, filters=filters))
        networks = self._call(what, lambda: self.client.networks.list(filters=filters))
        found = []
        for kind, handle in [("container", c) for c in containers] + [("network", n) for n in networks]:
            attrs = handle.attrs or {}
            names = attrs.get("Names") or [attrs.get("Name") or handle.id]
            name = str(names[0]).lstrip("/")
            found.append(Resource(kind, str(handle.id), name, dict(attrs.get("Labels") or {}), _created(attrs.get("Created"))))
        return found

    def remove_resources(self, resources: list[Resource]) -> tuple[int, int]:
        """Remove these containers (with their anonymous volumes), then these networks; one already gone is
        not counted. Returns (containers removed, networks removed)."""
        removed = {"container": 0, "network": 0}
        for resource in sorted(resources, key=lambda r: r.kind != "container"):
            try:
                if resource.kind == "container":
                    self.client.api.remove_container(resource.id, v=True, force=True)
                else:
                    self._remove_network(resource.id)
            except docker.errors.NotFound:
                continue  # already gone (another cleanup, or the Engine's own)
            except docker.errors.APIError as exc:
                if exc.status_code == 409 and "already in progress" in _text(exc):
                    continue  # being removed (a reaper that exited: AutoRemove)
                raise _mapped(f"remove {resource.kind} {resource.name}", exc) from None
            except TRANSPORT_ERRORS as exc:
                raise _mapped(f"remove {resource.kind} {resource.name}", exc) from None
            removed[resource.kind] += 1
        return removed["container"], removed["network"]

    def _remove_network(self, network_id: str) -> None:
        """Remove a network, waiting out "has active endpoints": the Engine may still be releasing the
        endpoint of a container it just removed (seen once in a 2.15 run's final cleanup, which then
        failed and left the JSON report empty). Each refusal force-disconnects the endpoints the network still
        lists: at a load average of 13 a removed container's endpoint outlived the 30 s wait and the run's final
        cleanup, and the network was left behind (the Engine drops such a stale endpoint only when asked, as
        `docker network disconnect -f` does: moby#17217)."""
        until = time.monotonic() + ACTIVE_ENDPOINTS_WAIT_S
        while True:
            try:
                self.client.api.remove_network(network_id)
                return
            except docker.errors.APIError as exc:
                if "active endpoints" not in _text(exc) or time.monotonic() >= until:
                    raise
            self._disconnect_endpoints(network_id)
            time.sleep(ACTIVE_ENDPOINTS_RETRY_S)

    def _disconnect_endpoints(self, network_id: str) -> None:
        """Force every endpoint off a network being removed: its containers are already removed (containers go
        first), so what is left is the Engine's stale record of one. An endpoint that goes meanwhile is fine."""
        try:
            attached = (self.client.api.inspect_network(network_id) or {}).get("Containers") or {}
        except docker.errors.APIError:
            return  # gone meanwhile, or not answering: the next removal attempt says which
        for endpoint_id, endpoint in attached.items():
            name = (endpoint or {}).get("Name") or endpoint_id
            try:
                self.client.api.disconnect_container_from_network(name, network_id, force=True)
            except docker.errors.APIError:
                continue  # released meanwhile; the removal that follows is the judge


def _string(value: object) -> str:
    return value if isinstance(value, str) else ""


def engine_facts(version: object, info: object) -> EngineFacts:
    """EngineFacts from the Engine's /version and /info answers: a value of another type than the API's is taken
    as not said."""
    version = version if isinstance(version, dict) else {}
    info = info if isinstance(info, dict) else {}
    runtimes = info.get("Runtimes")
    devices = info.get("DiscoveredDevices")
    return EngineFacts(
        version=_string(version.get("Version")),
        api_version=_string(version.get("ApiVersion")),
        os_type=_string(info.get("OSType") or version.get("Os")),
        root_dir=_string(info.get("DockerRootDir")),
        runtimes=tuple(sorted(str(name) for name in runtimes)) if isinstance(runtimes, dict) else (),
        cdi_devices=tuple(
            _string(device.get("ID"))
            for device in (devices if isinstance(devices, list) else [])
            if isinstance(device, dict) and device.get("Source") == "cdi" and _string(device.get("ID"))
        ),
    )


def _text(exc: BaseException) -> str:
    explanation = getattr(exc, "explanation", None)
    return str(explanation or exc) or type(exc).__name__


def _unreachable_text(exc: BaseException) -> str:
    """Why an Engine did not answer, in words: the OS error inside docker-py's chain ("No such file or directory",
    "Connection refused") rather than the chain's repr ("('Connection aborted.', FileNotFoundError(2, ...))")."""
    os_error = os_error_in(exc)
    if os_error is not None and os_error.strerror:
        return f"{os_error.strerror} (errno {os_error.errno})"
    return _text(exc)


def _mapped(what: str, exc: BaseException) -> EngineError:
    """distval's error for a docker-py or transport error: ImageMissing for a missing image, else EngineError."""
    error = ImageMissing if isinstance(exc, docker.errors.ImageNotFound) else EngineError
    return error(f"{what}: {_text(exc)}")


def _created(value: object) -> float | None:
    """The Engine's creation time: a Unix time (container lists) or RFC 3339 with nanoseconds (networks)."""
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str) or not value:
        return None
    text = re.sub(r"(\.\d{6})\d+", r"\1", value.replace("Z", "+00:00"))
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None
