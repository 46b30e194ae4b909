"""distval.targets.docker.engine without Docker: every docker-py or transport error, at every docker-py call of every Engine
method, leaves the Engine as distval's own error (EngineError; ImageMissing for a missing image), never as
docker-py's, requests' or urllib3's. A fake docker-py client is injected; it fails at its k-th call."""

from __future__ import annotations

import inspect
import io
import tarfile
from collections.abc import Callable, Iterator
from typing import Any

import docker.errors
import pytest
import requests
import urllib3.exceptions

import distval.targets.docker.engine
from distval.engine_protocol import GpuSupport, Resource
from distval.errors import EngineError, ImageMissing
from distval.labels import DISTVAL_LABELS, LABEL_MANAGED, LABEL_OWNER_HOST, LABEL_OWNER_PID, LABEL_OWNER_STARTED, LABEL_RUN
from distval.owner import Owner, current_owner
from distval.plan.specs import ContainerPlan, HelperPlan, NetworkPlan
from distval.targets.docker.engine import Engine

ERRORS: dict[str, Callable[[], BaseException]] = {
    "APIError": lambda: docker.errors.APIError("boom"),
    "NotFound": lambda: docker.errors.NotFound("boom"),
    "ImageNotFound": lambda: docker.errors.ImageNotFound("boom"),
    "DockerException": lambda: docker.errors.DockerException("boom"),
    "ConnectionError": lambda: requests.ConnectionError("boom"),
    "ReadTimeout": lambda: requests.ReadTimeout("boom"),
    "urllib3.ProtocolError": lambda: urllib3.exceptions.ProtocolError("boom"),
    "ConnectionResetError": lambda: ConnectionResetError(104, "boom"),
}


def results_archive() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo("results/rank-0.jsonl")
        info.size = 2
        archive.addfile(info, io.BytesIO(b"{}"))
    return buffer.getvalue()


class Calls:
    """The docker-py calls made so far; the ``fail_at``-th one (1-based; 0: none) raises ``error``."""

    def __init__(self, fail_at: int = 0, error: BaseException | None = None) -> None:
        self.fail_at, self.error, self.names = fail_at, error, []

    def __call__(self, name: str) -> None:
        self.names.append(name)
        if len(self.names) == self.fail_at:
            assert self.error is not None
            raise self.error


class FakeContainer:
    def __init__(self, calls: Calls, name: str = "c0") -> None:
        self.calls, self.name, self.id = calls, name, f"id-{name}"
        self.attrs: dict[str, Any] = {"Names": [f"/{name}"], "Labels": {LABEL_MANAGED: "true"}, "Created": 1_700_000_000}

    def reload(self) -> None:
        self.calls("container.reload")
        self.attrs = {
            "State": {"Status": "exited", "ExitCode": 0, "OOMKilled": False},
            "NetworkSettings": {"Networks": {"net": {"IPAddress": "10.0.0.2", "GlobalIPv6Address": "fd00::2"}}},
        }

    def start(self) -> None:
        self.calls("container.start")

    def kill(self) -> None:
        self.calls("container.kill")

    def pause(self) -> None:
        self.calls("container.pause")

    def unpause(self) -> None:
        self.calls("container.unpause")

    def wait(self, timeout: float | None = None) -> dict[str, int]:
        self.calls("container.wait")
        return {"StatusCode": 0}

    def logs(
        self, stdout: bool = True, stderr: bool = True, stream: bool = False, follow: bool | None = None, tail: int | str = "all"
    ) -> Any:
        self.calls("container.logs")
        return iter([b"2\n"]) if stream else b"2\n"  # docker-py: a generator of chunks when streamed

    def exec_run(self, cmd: list[str], stdout: bool = True, stderr: bool = True) -> Any:
        self.calls("container.exec_run")
        return docker.models.containers.ExecResult(0, b"")

    def put_archive(self, path: str, data: bytes) -> bool:
        self.calls("container.put_archive")
        return True

    def get_archive(self, path: str) -> tuple[Iterator[bytes], dict[str, Any]]:
        self.calls("container.get_archive")

        def stream() -> Iterator[bytes]:
            self.calls("archive stream")
            yield results_archive()

        return stream(), {}

    def remove(self, force: bool = False, v: bool = False) -> None:
        self.calls("container.remove")


class FakeNetwork:
    def __init__(self, calls: Calls, name: str = "net") -> None:
        self.calls, self.name, self.id = calls, name, f"id-{name}"
        self.attrs: dict[str, Any] = {
            "Name": name,
            "Labels": {LABEL_MANAGED: "true"},
            "Created": "2026-12-01T15:00:00.123456789Z",
            "IPAM": {"Config": [{"Subnet": "10.0.0.0/24"}]},
        }

    def connect(self, container: Any) -> None:
        self.calls("network.connect")

    def disconnect(self, container: Any) -> None:
        self.calls("network.disconnect")


class FakeImage:
    id, tags, labels = "sha256:ab", ["example/torch:test"], {"a": "b"}
    attrs = {"RepoDigests": ["example/torch@sha256:" + "0" * 64]}


class FakeContainers:
    def __init__(self, calls: Calls) -> None:
        self.calls, self.created = calls, []

    def create(self, *args: Any, **kwargs: Any) -> FakeContainer:
        self.calls("containers.create")
        self.created.append(kwargs)
        return FakeContainer(self.calls, kwargs.get("name", "c0"))

    def list(self, **kwargs: Any) -> list[FakeContainer]:
        self.calls("containers.list")
        return [FakeContainer(self.calls)]


class FakeNetworks:
    def __init__(self, calls: Calls) -> None:
        self.calls, self.created = calls, []

    def create(self, **kwargs: Any) -> FakeNetwork:
        self.calls("networks.create")
        self.created.append(kwargs)
        return FakeNetwork(self.calls, kwargs["name"])

    def get(self, name: str) -> FakeNetwork:
        self.calls("networks.get")
        return FakeNetwork(self.calls, name)

    def list(self, **kwargs: Any) -> list[FakeNetwork]:
        self.calls("networks.list")
        return [FakeNetwork(self.calls)]


class FakeImages:
    def __init__(self, calls: Calls) -> None:
        self.calls = calls

    def get(self, reference: str) -> FakeImage:
        self.calls("images.get")
        return FakeImage()


class FakeAPI:
    def __init__(self, calls: Calls) -> None:
        self.calls = calls

    def import_image_from_file(self, *args: Any, **kwargs: Any) -> str:
        self.calls("api.import_image_from_file")
        return "sha256:imported"

    def build(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        self.calls("api.build")

        def stream() -> Iterator[dict[str, Any]]:
            self.calls("build stream")
            yield {"stream": "Step 1/1"}
            yield {"aux": {"ID": "sha256:built"}}

        return stream()

    def inspect_container(self, container: str) -> dict[str, Any]:
        self.calls("api.inspect_container")
        return {"NetworkSettings": {"Networks": {"bridge": {}, "compose_default": {}}}}

    def remove_container(self, container: str, v: bool = False, force: bool = False) -> None:
        self.calls("api.remove_container")

    def wait(self, container: str, timeout: float | None = None, condition: str | None = None) -> dict[str, Any]:
        self.calls("api.wait")
        return {"StatusCode": 0}

    def get_image(self, reference: str, chunk_size: int = 0) -> Iterator[bytes]:
        self.calls("api.get_image")

        def stream() -> Iterator[bytes]:
            self.calls("save stream")
            yield b"tar"

        return stream()

    def load_image(self, data: Iterator[bytes]) -> Iterator[dict[str, Any]]:
        self.calls("api.load_image")

        def stream() -> Iterator[dict[str, Any]]:
            self.calls("load stream")
            yield {"stream": "Loaded image: example/torch:test"}

        return stream()

    def pull(self, repository: str, tag: str | None = None) -> None:
        self.calls("api.pull")

    def remove_network(self, network: str) -> None:
        self.calls("api.remove_network")

    def inspect_network(self, network: str) -> dict[str, Any]:
        self.calls("api.inspect_network")
        return {"Containers": {"ep-1": {"Name": "distval-r-s-n0"}}}

    def disconnect_container_from_network(self, container: str, net_id: str, force: bool = False) -> None:
        self.calls(f"api.disconnect {container} force={force}")


class FakeClient:
    """The part of docker.DockerClient the Engine uses."""

    def __init__(self, calls: Calls) -> None:
        self.calls = calls
        self.containers, self.networks = FakeContainers(calls), FakeNetworks(calls)
        self.images, self.api = FakeImages(calls), FakeAPI(calls)

    def ping(self) -> bool:
        return True  # not counted: construction is tested on its own

    def version(self) -> dict[str, str]:
        self.calls("version")
        return {"Version": "27.5.1", "ApiVersion": "1.47"}

    def info(self) -> dict[str, object]:
        self.calls("info")
        return {"OSType": "linux", "DockerRootDir": "/var/lib/docker", "Runtimes": {"runc": {}}}


NETWORK = NetworkPlan("net", True, (("distval.scenario", "s"),))
NETWORK6 = NetworkPlan("net6", True, (), ipv6_subnet="fd00:1::/64")
CONTAINER = ContainerPlan("c0", "c0", 0, (0,), ("python3", "-c", "pass"), (), (("distval.scenario", "s"),), "/", "img", ("net",))
RESOURCES = [
    Resource("network", "id-net", "net", {}, None),
    Resource("container", "id-c0", "c0", {}, None),
]

# Every public Engine method, called with arguments that make it succeed against the fake client.
HELPER = HelperPlan("h", "c0", "distval-fixtures/fault-helper:bookworm", (("distval.scenario", "s"),))
METHODS: dict[str, Callable[[Engine, FakeContainer], object]] = {
    "version": lambda e, c: e.version(),
    "describe": lambda e, c: e.describe(),
    "image": lambda e, c: e.image("example/torch:test"),
    "import_rootfs": lambda e, c: e.import_rootfs("/tmp/rootfs.tar", "repo", "tag", ["CMD x"]),
    "build": lambda e, c: e.build(b"tar", "repo:tag", {"a": "b"}, lambda line: None),
    "create_network": lambda e, c: (e.create_network(NETWORK), e.create_network(NETWORK6)),
    "network_subnets": lambda e, c: e.network_subnets("net"),
    "bridge_interface": lambda e, c: e.bridge_interface(),
    "connect": lambda e, c: e.connect("net", c),
    "address": lambda e, c: (e.address(c, "net"), e.address(c, "net", ipv6=True)),
    "create_container": lambda e, c: e.create_container(CONTAINER),
    "put_archive": lambda e, c: e.put_archive(c, "/", b"tar"),
    "start": lambda e, c: e.start(c),
    "state": lambda e, c: e.state(c),
    "kill": lambda e, c: e.kill(c),
    "wait_stopped": lambda e, c: e.wait_stopped(c, 1.0),
    "wait_removed": lambda e, c: e.wait_removed("id-c0", 1.0),
    "logs": lambda e, c: e.logs(c),
    "read_files": lambda e, c: e.read_files(c, "/distval/results"),
    "exec_run": lambda e, c: e.exec_run(c, ["true"]),
    "run_beside": lambda e, c: e.run_beside(c, ["10", "all"], 5.0),
    "pause": lambda e, c: e.pause(c),
    "unpause": lambda e, c: e.unpause(c),
    "disconnect": lambda e, c: e.disconnect("net", c),
    "create_helper": lambda e, c: e.create_helper(HELPER),
    "gpu_support": lambda e, c: e.gpu_support("example/torch:test", "python3"),
    "remove_labelled": lambda e, c: e.remove_labelled("distval.scenario=s"),
    "remove_matching": lambda e, c: e.remove_matching(["distval.run=r"]),
    "list_managed": lambda e, c: e.list_managed(["distval.run=r"]),
    "remove_resources": lambda e, c: e.remove_resources(RESOURCES),
    "start_reaper": lambda e, c: (
        e.start_reaper("img", ["python3", "-c", "pass"], "r-reaper", {"A": "b"}, "/var/run/docker.sock", 7390, "127.0.0.1", "c0"),
        e.start_reaper(
            "img", ["python3", "-c", "pass"], "r-reaper", {"A": "b"}, "/var/run/docker.sock", 7390, "127.0.0.1", host_network=True
        ),
    ),
    "save_image": lambda e, c: list(e.save_image("example/torch:test")),
    "load_image": lambda e, c: e.load_image(iter([b"tar"])),
    "pull_digest": lambda e, c: e.pull_digest("example/torch@sha256:" + "0" * 64),
    "image_of_container": lambda e, c: e.image_of_container("c0" * 32),
    "create_raw": lambda e, c: e.create_raw({"name": "n0", "image": "img", "labels": {"a": "b"}}),
}
REMOVALS = {"api.remove_container", "api.remove_network"}


def call(method: str, calls: Calls) -> object:
    engine = Engine("r", client=FakeClient(calls))
    return METHODS[method](engine, FakeContainer(calls))


def test_every_public_engine_method_is_covered() -> None:
    public = {name for name, _ in inspect.getmembers(Engine, inspect.isfunction) if not name.startswith("_")}
    assert public == set(METHODS)


@pytest.mark.parametrize("method", sorted(METHODS))
def test_each_method_succeeds_against_the_fake_client(method: str) -> None:
    calls = Calls()
    call(method, calls)
    assert calls.names  # it asked docker-py something: the failures below are at real call sites


@pytest.mark.parametrize("error", sorted(ERRORS))
@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_docker_py_error_at_every_call_becomes_distvals_own(method: str, error: str) -> None:
    happy = Calls()
    call(method, happy)
    for k, name in enumerate(happy.names, start=1):
        calls = Calls(k, ERRORS[error]())
        missing_image = error == "ImageNotFound"
        if method == "image" and name == "images.get" and missing_image:
            assert call(method, calls) is None, "a missing image is an answer, not an error"
            continue
        if method == "wait_stopped" and name == "container.wait" and error in ("ReadTimeout", "ConnectionError"):
            assert call(method, calls) is True, "the wait's timeout is answered by the state (exited here)"
            continue
        if method == "wait_removed" and error in ("ReadTimeout", "ConnectionError", "NotFound", "ImageNotFound"):
            # The wait's timeout is an answer (not removed yet); a container gone already is removed.
            assert call(method, calls) is (error in ("NotFound", "ImageNotFound")), error
            continue
        if method == "bridge_interface" and error in ("NotFound", "ImageNotFound"):
            assert call(method, calls) is None, "an Engine without a default bridge has no bridge interface"
            continue
        if name in REMOVALS and error in ("NotFound", "ImageNotFound"):
            call(method, calls)  # already gone: nothing to remove, and no error
            continue
        if name == "api.inspect_container" and error in ("NotFound", "ImageNotFound"):
            call(method, calls)  # distval's container is not one of this Engine's: the reaper joins nothing
            continue
        with pytest.raises(EngineError) as caught:
            call(method, calls)
        where = f"{method}, docker-py call {k} ({name}) raising {error}"
        assert type(caught.value) is (ImageMissing if missing_image else EngineError), where
        assert "boom" in str(caught.value), where
        assert caught.value.__cause__ is None and caught.value.__suppress_context__, where  # raised "from None"


@pytest.mark.parametrize("error", sorted(ERRORS))
def test_an_unreachable_engine_is_an_engine_error(error: str) -> None:
    client = FakeClient(Calls())

    def refuse() -> bool:
        raise ERRORS[error]()

    client.ping = refuse  # type: ignore[method-assign]
    with pytest.raises(EngineError, match="cannot reach the Docker Engine at .*boom"):
        Engine("r", client=client)


def test_a_garbled_archive_is_an_engine_error() -> None:
    calls = Calls()
    container = FakeContainer(calls)
    container.get_archive = lambda path: (iter([b"not a tar archive" * 64]), {})  # type: ignore[method-assign]
    with pytest.raises(EngineError, match="no readable archive"):
        Engine("r", client=FakeClient(calls)).read_files(container, "/distval/results")


def test_kill_of_a_container_that_already_exited_is_no_error() -> None:
    calls = Calls()
    container = FakeContainer(calls)

    def conflict() -> None:
        response = requests.Response()
        response.status_code = 409
        raise docker.errors.APIError("conflict", response=response)

    container.kill = conflict  # type: ignore[method-assign]
    Engine("r", client=FakeClient(calls)).kill(container)


def test_an_engine_without_gpu_runtime_is_zero_gpus_not_an_error() -> None:
    calls = Calls()
    client = FakeClient(calls)

    def refuse(*args: Any, **kwargs: Any) -> FakeContainer:
        raise docker.errors.APIError('could not select device driver "" with capabilities: [[gpu]]')

    client.containers.create = refuse  # type: ignore[method-assign]
    support = Engine("r", client=client).gpu_support("example/torch:test", "python3")
    assert support.count == 0 and "cannot give GPUs" in support.reason
    assert support == GpuSupport(0, support.reason)


# --- labels -----------------------------------------------------------------------------------------


def test_every_created_resource_carries_the_run_and_its_owner() -> None:
    calls = Calls()
    client = FakeClient(calls)
    engine = Engine("r1", client=client)
    engine.create_network(NETWORK)
    engine.create_container(CONTAINER)
    engine.gpu_support("example/torch:test", "python3")
    me = current_owner()
    expected = {
        LABEL_MANAGED: "true",
        LABEL_RUN: "r1",
        LABEL_OWNER_HOST: me.host,
        LABEL_OWNER_PID: str(me.pid),
        LABEL_OWNER_STARTED: me.started,
    }
    for kwargs in client.networks.created + client.containers.created:
        assert {k: kwargs["labels"].get(k) for k in expected} == expected, kwargs["name"]
    assert len(client.containers.created) == 2  # the scenario's container and the GPU probe


def test_the_caller_cannot_override_the_run_or_owner_labels() -> None:
    client = FakeClient(Calls())
    other = Owner("elsewhere", 1, "boot:1")
    engine = Engine("r1", client=client, owner=other)
    forged = ContainerPlan(
        "c1", "c1", 0, (0,), ("true",), (), ((LABEL_RUN, "x"), (LABEL_OWNER_PID, "7"), (LABEL_MANAGED, "no")), "/", "img"
    )
    engine.create_container(forged)
    labels = client.containers.created[0]["labels"]
    assert (labels[LABEL_RUN], labels[LABEL_MANAGED]) == ("r1", "true")
    assert (labels[LABEL_OWNER_HOST], labels[LABEL_OWNER_PID], labels[LABEL_OWNER_STARTED]) == ("elsewhere", "1", "boot:1")


def test_list_managed_reads_names_labels_and_creation_times() -> None:
    found = Engine("r", client=FakeClient(Calls())).list_managed()
    assert [(r.kind, r.id, r.name, r.created) for r in found] == [
        ("container", "id-c0", "c0", 1_700_000_000.0),
        ("network", "id-net", "net", 1_796_137_200.123456),
    ]


ACTIVE_ENDPOINTS = "error while removing network: network distval-r-s id 3f2a has active endpoints"


def test_a_network_still_releasing_its_endpoints_is_removed_once_the_engine_let_go(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(distval.targets.docker.engine, "ACTIVE_ENDPOINTS_RETRY_S", 0.01)
    calls = Calls()
    client = FakeClient(calls)
    refusals = [docker.errors.APIError(ACTIVE_ENDPOINTS), docker.errors.APIError(ACTIVE_ENDPOINTS)]

    def remove_network(network: str) -> None:
        calls("api.remove_network")
        if refusals:
            raise refusals.pop()

    client.api.remove_network = remove_network  # type: ignore[method-assign]
    assert Engine("r", client=client).remove_resources(RESOURCES) == (1, 1)
    assert calls.names.count("api.remove_network") == 3
    # Each refusal forced the endpoint the network still listed off it (a removed container's stale endpoint).
    assert calls.names.count("api.disconnect distval-r-s-n0 force=True") == 2


def test_a_stale_endpoint_is_forced_off_only_when_the_engine_refuses_the_removal(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = Calls()
    assert Engine("r", client=FakeClient(calls)).remove_resources(RESOURCES) == (1, 1)
    assert not [name for name in calls.names if "disconnect" in name or "inspect_network" in name]


def test_a_network_that_keeps_its_endpoints_is_an_engine_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(distval.targets.docker.engine, "ACTIVE_ENDPOINTS_RETRY_S", 0.01)
    monkeypatch.setattr(distval.targets.docker.engine, "ACTIVE_ENDPOINTS_WAIT_S", 0.05)
    calls = Calls()
    client = FakeClient(calls)

    def remove_network(network: str) -> None:
        calls("api.remove_network")
        raise docker.errors.APIError(ACTIVE_ENDPOINTS)

    client.api.remove_network = remove_network  # type: ignore[method-assign]
    with pytest.raises(EngineError, match="remove network net: .*has active endpoints"):
        Engine("r", client=client).remove_resources(RESOURCES)
    assert calls.names.count("api.remove_network") >= 2


def test_every_label_distval_reads_gets_a_value_from_distval_never_from_the_image() -> None:
    """An image's LABELs reach its containers unless the create call gives the same key: distval gives every
    label it reads (an image with `LABEL distval.role=reaper` would otherwise exempt its ranks from the
    reaper)."""
    labels = Engine("r", client=FakeClient([]))._labels({"distval.scenario": "good"})
    assert set(DISTVAL_LABELS) <= set(labels)
    assert labels["distval.role"] == "" and labels["distval.scenario"] == "good" and labels["distval.run"] == "r"
    assert Engine("r", client=FakeClient([]))._labels({"distval.role": "reaper"})["distval.role"] == "reaper"


def test_an_unreachable_engine_says_the_os_error_in_words_not_the_chains_repr() -> None:
    client = FakeClient(Calls())

    def refuse() -> bool:
        # docker-py's shape: requests' ConnectionError(urllib3's ProtocolError("Connection aborted.", FileNotFoundError)).
        aborted = urllib3.exceptions.ProtocolError("Connection aborted.", FileNotFoundError(2, "No such file or directory"))
        inner = requests.exceptions.ConnectionError(aborted)
        raise docker.errors.DockerException(f"Error while fetching server API version: {inner}") from inner

    client.ping = refuse  # type: ignore[method-assign]
    with pytest.raises(EngineError) as caught:
        Engine("r", client=client)
    assert "No such file or directory (errno 2)" in str(caught.value)
    assert "FileNotFoundError" not in str(caught.value) and "Connection aborted" not in str(caught.value)
