"""The reaper's logic without Docker: where distval looks for it, and the reaper program's protocol over real
sockets on the loopback (harness/reaper_daemon.py, loaded from its file: it runs in the reaper's
image, not as part of the harness package). The Engine side is tests/test_reaper_docker.py."""

from __future__ import annotations

import hashlib
import importlib.util
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

import harness.reaper
from harness.cleanup import RunDecision
from harness.engine_protocol import Resource
from harness.errors import EngineError, Interrupted
from harness.reaper import REAPER_PORT, Reaper, ReaperLaunch, addresses, engine_socket_path, own_container

GRACE_S = 1.0  # reconnecting within it takes a few ms; room for a loaded machine


def test_the_socket_the_reaper_mounts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    assert engine_socket_path() == "/var/run/docker.sock"
    monkeypatch.setenv("DOCKER_HOST", "unix:///run/user/1000/docker.sock")
    assert engine_socket_path() == "/run/user/1000/docker.sock"
    monkeypatch.setenv("DOCKER_HOST", "tcp://build-7:2375")
    assert engine_socket_path() == "/var/run/docker.sock"


def test_where_distval_looks_for_its_reaper(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    assert addresses(32768, ["172.17.0.5", "172.20.0.3"]) == [
        ("127.0.0.1", 32768),
        ("172.17.0.5", REAPER_PORT),
        ("172.20.0.3", REAPER_PORT),
    ]
    assert addresses(None, ["172.17.0.5"]) == [("172.17.0.5", REAPER_PORT)]
    monkeypatch.setenv("DOCKER_HOST", "tcp://build-7:2375")
    # A remote Engine's bridge addresses mean nothing here (the same one may be a local run's reaper).
    assert addresses(32768, ["172.17.0.2"]) == [("build-7", 32768)]
    monkeypatch.setenv("DOCKER_HOST", "ssh://ci@build-8")
    assert addresses(32768, []) == [("build-8", 32768)]


def daemon() -> ModuleType:
    spec = importlib.util.spec_from_file_location("reaper_daemon", Path(harness.reaper.__file__).with_name("reaper_daemon.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Serving:
    """The reaper program's serve loop on a loopback port, in a thread; ``ended`` says how it ended and when."""

    def __init__(self, first_s: float = 30.0, secret_sha256: str = hashlib.sha256(b"s3cret").hexdigest(), port: int = 0) -> None:
        self.server = socket.create_server(("127.0.0.1", port))
        self.port = self.server.getsockname()[1]
        self.reaper = daemon().Reaper("run1", secret_sha256, GRACE_S, first_s)
        self.ended: tuple[str, float] | None = None
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        how = self.reaper.serve(self.server)
        self.ended = (how, time.monotonic())

    def send(self, line: bytes) -> tuple[socket.socket, str]:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        sock.sendall(line)
        return sock, sock.makefile().readline().strip()


@pytest.fixture
def serving() -> Iterator[Serving]:
    running = Serving()
    yield running
    running.server.close()


@pytest.mark.parametrize(
    "line",
    [b"HELLO run1 wrong\n", b"HELLO run2 s3cret\n", b"HELLO run1\n", b"HELLO run1 s3cret extra\n", b"x" * 300],
    ids=["wrong-secret", "wrong-run", "no-secret", "extra-word", "too-long"],
)
def test_a_wrong_hello_is_refused_and_holds_nothing(serving: Serving, line: bytes) -> None:
    sock, answer = serving.send(line)
    assert answer.startswith("DENIED "), answer
    try:
        rest = sock.recv(1)
    except ConnectionResetError:  # closed with the rest of a long line unread: the kernel resets instead
        rest = b""
    assert rest == b"", "expected the reaper to close a refused connection"
    assert serving.reaper.holders == {}


def test_held_until_the_connection_drops_then_reaps_after_the_grace(serving: Serving) -> None:
    sock, answer = serving.send(b"HELLO run1 s3cret\n")
    assert answer == "OK"
    sock.sendall(b"PING\n")
    assert sock.makefile().readline().strip() == "PONG"
    time.sleep(GRACE_S * 2)
    assert serving.ended is None, "expected the reaper to wait while its connection is held"
    dropped = time.monotonic()
    sock.close()
    serving.thread.join(timeout=10)
    assert serving.ended is not None and serving.ended[0] == "reap"
    assert GRACE_S <= serving.ended[1] - dropped < GRACE_S + 3, serving.ended[1] - dropped


def test_a_connection_back_within_the_grace_keeps_it_held(serving: Serving) -> None:
    first, answer = serving.send(b"HELLO run1 s3cret\n")
    assert answer == "OK"
    first.close()
    time.sleep(GRACE_S / 10)
    second, answer = serving.send(b"HELLO run1 s3cret\n")
    assert answer == "OK"
    time.sleep(GRACE_S * 2)
    assert serving.ended is None, "expected a connection back within the grace period to hold the reaper"
    second.sendall(b"DISARM\n")
    assert second.makefile().readline().strip() == "BYE"
    serving.thread.join(timeout=10)
    assert serving.ended is not None and serving.ended[0] == "disarm"


def test_nobody_connects_then_it_reaps_after_the_first_connection_window() -> None:
    started = time.monotonic()  # before the reaper starts its clock
    running = Serving(first_s=1.0)
    running.thread.join(timeout=10)
    assert running.ended is not None and running.ended[0] == "reap"
    assert 1.0 <= running.ended[1] - started < 3.0
    running.server.close()


def test_cleanup_names_a_runs_reaper_among_its_containers() -> None:
    labels = {"distval.run": "k1"}
    network = Resource("network", "n", "distval-k1-s", labels, None)
    container = Resource("container", "c", "distval-k1-s-n0", labels, None)
    reaper = Resource("container", "r", "distval-k1-reaper", {**labels, "distval.role": "reaper"}, None)
    assert (
        RunDecision("k1", (network, container, reaper), True, "").counts()
        == "2 container(s) (its reaper among them), 1 network(s)"
    )
    assert RunDecision("k1", (network, container), True, "").counts() == "1 container(s), 1 network(s)"


class Refusing:
    """An Engine whose reaper cannot start, raising ``error``; records what it was asked to remove."""

    run_id = "r1"

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.removed: list[list[str]] = []

    def bridge_interface(self) -> str | None:
        return None

    def start_reaper(self, *args: object, **kwargs: object) -> tuple[str, int | None, str | None]:
        raise self.error

    def remove_matching(self, labels: list[str]) -> tuple[int, int]:
        self.removed.append(labels)
        return 0, 0


def test_a_reaper_that_cannot_start_is_one_line_and_removed() -> None:
    engine = Refusing(EngineError("start the reaper distval-r1-reaper: port is already allocated"))
    lines: list[str] = []
    assert Reaper.start(engine, lines.append, "example/torch:test", "python3") is None  # type: ignore[arg-type]
    assert lines == [
        "no reaper for run r1 (start the reaper distval-r1-reaper: port is already allocated): if distval is killed, "
        "`distval cleanup --run-id r1` removes its containers and networks"
    ]
    assert engine.removed == [["distval.run=r1", "distval.role=reaper"]]


def test_an_interrupt_while_the_reaper_starts_stops_the_run() -> None:
    engine = Refusing(Interrupted("interrupted by SIGTERM"))
    lines: list[str] = []
    with pytest.raises(Interrupted):
        Reaper.start(engine, lines.append, "example/torch:test", "python3")  # type: ignore[arg-type]
    assert lines == [] and engine.removed == [["distval.run=r1", "distval.role=reaper"]]


def test_distval_finds_the_container_it_runs_in_from_its_mounts(tmp_path: Path) -> None:
    container = "db0be114df3b7b70e01b6d95ecf57fb67e7e794c45a693399f5355534cca340d"
    inside = tmp_path / "inside"
    inside.write_text(
        "22 27 0:21 / /proc rw,relatime - proc proc rw\n"
        f"611 590 254:0 /var/lib/docker/containers/{container}/hostname /etc/hostname rw - ext4 /dev/vda rw\n"
    )
    host = tmp_path / "host"
    host.write_text("22 27 0:21 / /proc rw,relatime - proc proc rw\n24 27 0:6 / /dev rw - devtmpfs devtmpfs rw\n")
    assert own_container(str(inside)) == container
    assert own_container(str(host)) is None
    assert own_container(str(tmp_path / "missing")) is None


class Launching:
    """An Engine whose start_reaper serves the reaper program on a loopback port (or, with ``listen`` False,
    publishes a port where nothing listens); records removals and waits for removal."""

    run_id = "run1"

    def __init__(self, listen: bool = True) -> None:
        self.listen = listen
        self.serving: Serving | None = None
        self.removed: list[list[str]] = []
        self.waited: list[str] = []

    def bridge_interface(self) -> str | None:
        return None  # the reaper gets a network of its own: its port, published, is on the loopback

    def start_reaper(
        self, image: str, entrypoint: list[str], name: str, environment: dict[str, str], *rest: object, **kwargs: object
    ) -> tuple[str, int, list[str]]:
        if not self.listen:
            closed = socket.create_server(("127.0.0.1", 0))
            port = closed.getsockname()[1]
            closed.close()
            return "cid-1", port, []
        self.serving = Serving(secret_sha256=environment["DISTVAL_REAPER_SECRET_SHA256"])
        return "cid-1", self.serving.port, []

    def remove_matching(self, labels: list[str]) -> tuple[int, int]:
        self.removed.append(labels)
        return 0, 0

    def wait_removed(self, container_id: str, timeout_s: float) -> bool:
        self.waited.append(container_id)
        return True


def settle(reaper: Reaper) -> None:
    assert reaper._settled.wait(20), "the reaper's thread neither connected nor gave up"


def test_the_reaper_is_held_from_its_thread_and_disarmed_at_the_end() -> None:
    engine = Launching()
    lines: list[str] = []
    held: list[str] = []
    reaper = Reaper.start(engine, lines.append, "example/torch:test", "python3", held=held.append)  # type: ignore[arg-type]
    assert reaper is not None
    settle(reaper)
    assert engine.serving is not None
    assert held == [f"reaper distval-run1-reaper holds run run1 (at 127.0.0.1:{engine.serving.port})"] and lines == []
    reaper.disarm()
    deadline = time.monotonic() + 10
    while engine.serving.ended is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert engine.serving.ended is not None and engine.serving.ended[0] == "disarm"
    assert engine.waited == ["cid-1"] and engine.removed == []  # it exited on its own: nothing to remove


def test_a_reaper_that_cannot_be_reached_is_one_line_from_its_thread_and_removed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(harness.reaper, "CONNECT_WINDOW_S", 0.5)
    engine = Launching(listen=False)
    lines: list[str] = []
    started = time.monotonic()
    reaper = Reaper.start(engine, lines.append, "example/torch:test", "python3")  # type: ignore[arg-type]
    assert reaper is not None and time.monotonic() - started < 0.5, "the run waits only for the reaper's container"
    settle(reaper)
    assert len(lines) == 1 and lines[0].startswith("no reaper for run run1 (cannot reach the reaper (127.0.0.1:"), lines
    assert lines[0].endswith("`distval cleanup --run-id run1` removes its containers and networks"), lines
    # Removed before its first-connection window closes: it would otherwise reap the running run.
    assert engine.removed == [["distval.run=run1", "distval.role=reaper"]]


def test_another_runs_reaper_at_an_address_does_not_stop_distval_from_reaching_its_own() -> None:
    """A reaper that answers DENIED (another run's, at an address of this run's list) is passed over."""
    other = Serving(secret_sha256="0" * 64)  # no HELLO of this run matches its secret
    own = Serving()  # the secret s3cret's
    where = [("127.0.0.1", other.port), ("127.0.0.1", own.port)]
    reaper = Reaper(Launching(), "distval-run1-reaper", "s3cret", where, lambda line: None)  # type: ignore[arg-type]
    try:
        reaper._connect(5.0)
        assert reaper.address == ("127.0.0.1", own.port)
    finally:
        if reaper._sock is not None:
            reaper._sock.close()
        other.server.close()
        own.server.close()


def test_a_run_that_ends_while_the_reaper_is_being_reached_removes_it_without_a_line() -> None:
    engine = Launching(listen=False)  # CONNECT_WINDOW_S (15 s) would keep trying
    lines: list[str] = []
    reaper = Reaper.start(engine, lines.append, "example/torch:test", "python3")  # type: ignore[arg-type]
    assert reaper is not None
    started = time.monotonic()
    reaper.disarm()
    assert time.monotonic() - started < 5, "disarm waits for one connection attempt at most"
    assert lines == [] and ["distval.run=run1", "distval.role=reaper"] in engine.removed


class InHostNetwork(Launching):
    """A local Engine whose bridge interface is one of this namespace's (``lo`` stands for docker0): the reaper
    runs in the host's network, serving at the port distval chose. ``refuse_host``: the Engine refuses the
    host's network at create (user namespaces), then the reaper gets a network of its own."""

    def __init__(self, refuse_host: bool = False, interface: str = "lo") -> None:
        super().__init__()
        self.refuse_host = refuse_host
        self.interface = interface
        self.asked: list[bool] = []  # host_network of each start_reaper

    def bridge_interface(self) -> str | None:
        return self.interface

    def start_reaper(
        self, image: str, entrypoint: list[str], name: str, environment: dict[str, str], *rest: object, **kwargs: object
    ) -> tuple[str, int, list[str]]:
        host_network = bool(kwargs.get("host_network"))
        self.asked.append(host_network)
        if host_network and self.refuse_host:
            raise EngineError(
                "start the reaper distval-run1-reaper: Cannot share the host's network namespace when user namespaces are enabled"
            )
        if not host_network:
            return super().start_reaper(image, entrypoint, name, environment)
        assert environment["DISTVAL_REAPER_BIND"] == "127.0.0.1"
        port = int(environment["DISTVAL_REAPER_PORT"])
        self.serving = Serving(secret_sha256=environment["DISTVAL_REAPER_SECRET_SHA256"], port=port)
        return "cid-1", port, []


def test_a_local_engines_reaper_runs_in_the_host_network_at_a_loopback_port_distval_chose(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr(harness.reaper, "own_container", lambda: None)
    engine = InHostNetwork()
    held: list[str] = []
    lines: list[str] = []
    reaper = Reaper.start(engine, lines.append, "example/torch:test", "python3", held=held.append)  # type: ignore[arg-type]
    assert reaper is not None
    settle(reaper)
    assert engine.asked == [True] and engine.serving is not None
    assert held == [f"reaper distval-run1-reaper holds run run1 (at 127.0.0.1:{engine.serving.port})"] and lines == []
    reaper.disarm()


def test_an_engine_that_refuses_the_host_network_gets_a_reaper_with_a_network_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr(harness.reaper, "own_container", lambda: None)
    engine = InHostNetwork(refuse_host=True)
    lines: list[str] = []
    reaper = Reaper.start(engine, lines.append, "example/torch:test", "python3")  # type: ignore[arg-type]
    assert reaper is not None
    settle(reaper)
    assert engine.asked == [True, False] and lines == []
    # The refused one was removed before the second was started.
    assert engine.removed[0] == ["distval.run=run1", "distval.role=reaper"]
    reaper.disarm()


@pytest.mark.parametrize(
    ("docker_host", "in_container", "interface", "expected"),
    [
        (None, False, "lo", True),  # a local Engine whose bridge is in this namespace
        (None, False, "docker-nowhere0", False),  # rootless Docker, Docker Desktop: the bridge is elsewhere
        (None, True, "lo", False),  # distval in a container: its loopback is not the host's
        ("tcp://build-7:2375", False, "lo", False),  # a remote Engine
        ("unix:///run/user/1000/docker.sock", False, "lo", True),
    ],
)
def test_where_the_reaper_may_share_distvals_network(
    monkeypatch: pytest.MonkeyPatch, docker_host: str | None, in_container: bool, interface: str, expected: bool
) -> None:
    if docker_host is None:
        monkeypatch.delenv("DOCKER_HOST", raising=False)
    else:
        monkeypatch.setenv("DOCKER_HOST", docker_host)
    engine = InHostNetwork(interface=interface)
    joined = "c" * 64 if in_container else None
    assert harness.reaper._shares_this_network(engine, None, joined) is expected  # type: ignore[arg-type]


def test_the_launch_waits_for_the_reaper_container_to_exist_and_then_to_run() -> None:
    """``created`` returns once the container exists, ``ready`` once it runs: what the run creates and starts
    waits for each (harness/runtime.py before_start)."""
    may_start = threading.Event()
    steps: list[str] = []

    def start(created: Callable[[], None]) -> Reaper | None:
        steps.append("create")
        created()
        may_start.wait(10)
        steps.append("started")
        return None

    launch = ReaperLaunch(start, lambda line: steps.append(line), "run1")
    launch.created()
    assert steps == ["create"]
    may_start.set()
    assert launch.ready() is None and steps == ["create", "started"]


def test_a_launch_whose_start_fails_unexpectedly_is_one_line_and_no_reaper() -> None:
    def start(created: Callable[[], None]) -> Reaper | None:
        raise ValueError("a bug")

    lines: list[str] = []
    launch = ReaperLaunch(start, lines.append, "run1")
    launch.created()  # returns: the start ended without a container
    assert launch.ready() is None
    assert lines == [
        "no reaper for run run1 (ValueError: a bug): if distval is killed, `distval cleanup --run-id run1` removes "
        "its containers and networks"
    ]
