"""The reaper's logic without Docker: where distval looks for it, and the reaper program's protocol over real
sockets on the loopback (distval/targets/docker/reaper_daemon.py, loaded from its file: it runs in the reaper's
image, not as part of the harness package). The Engine side is tests/targets/docker/test_reaper_docker.py."""

from __future__ import annotations

import hmac
import importlib.util
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

import distval.images.build
import distval.targets.docker.reaper
from distval.cli.plan_render import plan_as_data, render_plan
from distval.config import load_config
from distval.engine_protocol import ImageInfo, Resource
from distval.errors import EngineError, Interrupted
from distval.images import FILES, FIXTURES, REAPER_ENTRYPOINT, REAPER_IMAGE, RECIPE_LABEL, recipe_hash
from distval.targets.docker import reaper_container
from distval.targets.docker.cleanup import RunDecision
from distval.targets.docker.reaper import REAPER_PORT, Reaper, ReaperLaunch, addresses, engine_socket_path, own_container
from distval.targets.engines.planning import plan_run
from tests.fake_clock import FakeClock
from tests.paths import ROOT

GRACE_S = 1.0  # on the serve loop's own clock (RoundClock), which only the tests move
KEY = b"k" * 32


def reaper_image(reference: str) -> ImageInfo | None:
    """The Engine's answer for the current reaper image (nothing else is in these stand-in Engines)."""
    if reference != REAPER_IMAGE:
        return None
    return ImageInfo("sha256:reaper", (REAPER_IMAGE,), {RECIPE_LABEL: recipe_hash(REAPER_IMAGE)})


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
    spec = importlib.util.spec_from_file_location(
        "reaper_daemon", Path(distval.targets.docker.reaper.__file__).with_name("reaper_daemon.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class RoundClock(FakeClock):
    """The reaper program's clock in these tests: it moves only when a test says so, and counts how often it is read
    (its serve loop reads it once a round), so that a test can wait until the loop has seen the time it set."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self.read = threading.Condition()

    def __call__(self) -> float:
        with self.read:
            self.reads += 1
            self.read.notify_all()
        return self.now

    def rounds(self, count: int = 2) -> None:
        """Wait until the serve loop has read the clock ``count`` more times: a whole round ran on the time now."""
        with self.read:
            until = self.reads + count
            assert self.read.wait_for(lambda: self.reads >= until, timeout=30), "the serve loop stopped reading its clock"


def until(condition: Callable[[], bool]) -> None:
    """Wait for a state of the serve loop's thread (a drop it has handled)."""
    for _ in range(3000):
        if condition():
            return
        time.sleep(0.01)
    raise AssertionError("the reaper never got there")


class Serving:
    """The reaper program's serve loop on a loopback port, in a thread; ``ended`` says how it ended and when. Its
    time is ``clock``'s: the program, baked into the reaper's image as it is, reads ``time.monotonic`` of its own
    module, which is this instance's alone (loaded from the file for each Serving), so no other test shares it."""

    def __init__(self, first_s: float = 30.0, key: bytes = KEY, port: int = 0) -> None:
        self.server = socket.create_server(("127.0.0.1", port))
        self.port = self.server.getsockname()[1]
        self.clock = RoundClock()
        program = daemon()
        program.time = SimpleNamespace(monotonic=self.clock, sleep=time.sleep)  # type: ignore[attr-defined]
        self.reaper = program.Reaper("run1", key, GRACE_S, first_s)
        self.ended: tuple[str, float] | None = None
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        how = self.reaper.serve(self.server)
        self.ended = (how, self.clock())

    def connect(self) -> tuple[socket.socket, bytes]:
        """A connection and the nonce of the reaper's challenge."""
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        challenge = readline(sock).split()
        assert len(challenge) == 2 and challenge[0] == "CHALLENGE", challenge
        return sock, challenge[1].encode()

    def send(self, line: bytes) -> tuple[socket.socket, str]:
        """``line`` as the answer to the challenge (``{proof}`` replaced by the right proof for run1)."""
        sock, nonce = self.connect()
        sock.sendall(line.replace(b"{proof}", proof(KEY, nonce, b"run1").encode()))
        return sock, readline(sock)

    def hello(self) -> tuple[socket.socket, bytes]:
        """An authenticated connection of run1 and its nonce."""
        sock, nonce = self.connect()
        sock.sendall(b"HELLO run1 " + proof(KEY, nonce, b"run1").encode() + b"\n")
        assert readline(sock) == "OK"
        return sock, nonce


def proof(key: bytes, nonce: bytes, run_id: bytes, what: bytes = b"") -> str:
    """Written out here, not imported from the daemon: the protocol as documented."""
    return hmac.new(key, nonce + run_id + what, "sha256").hexdigest()


def readline(sock: socket.socket) -> str:
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(1)
        if not chunk:
            break
        data += chunk
    return data.decode("ascii", "replace").strip()


def disarm_line(nonce: bytes) -> bytes:
    return b"DISARM " + proof(KEY, nonce, b"run1", b"DISARM").encode() + b"\n"


@pytest.fixture
def serving() -> Iterator[Serving]:
    running = Serving()
    yield running
    running.server.close()


@pytest.mark.parametrize(
    "line",
    [
        b"HELLO run1 wrong\n",
        b"HELLO run2 {proof}\n",
        b"HELLO run1\n",
        b"HELLO run1 {proof} extra\n",
        b"x" * 300,
        b"HELLO \xff x\n",
        b"HELLO run1 \xff\xfe\n",
        b"HELLO \xff\xff\xff\xff {proof}\n",
    ],
    ids=["wrong-proof", "wrong-run", "no-proof", "extra-word", "too-long", "non-ascii-run", "non-ascii-proof", "non-ascii-both"],
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
    # Still serving: the next connection is challenged and held.
    sock, _ = serving.hello()
    sock.close()
    assert serving.ended is None or serving.ended[0] == "reap", "the reaper must survive a hostile HELLO"


def test_a_sniffed_hello_cannot_be_replayed(serving: Serving) -> None:
    """What a sniffer on the published port saw (a nonce and its proof) holds nothing on a new connection."""
    first, nonce = serving.hello()
    seen = b"HELLO run1 " + proof(KEY, nonce, b"run1").encode() + b"\n"
    replayed, _ = serving.connect()
    replayed.sendall(seen)
    assert readline(replayed).startswith("DENIED"), "a replayed HELLO must be refused: every connection has its own nonce"
    assert len(serving.reaper.holders) == 1
    first.close()
    replayed.close()


def test_a_disarm_is_good_only_on_its_own_connection_with_its_own_proof(serving: Serving) -> None:
    """DISARM is bound to the authenticated connection's nonce: a bare DISARM, or one sniffed from another
    connection, neither disarms nor breaks anything."""
    first, first_nonce = serving.hello()
    second, second_nonce = serving.hello()
    second.sendall(b"DISARM\n" + disarm_line(first_nonce) + b"PING\n")
    assert readline(second) == "PONG", "expected DISARMs without this connection's proof to be ignored"
    stranger, _ = serving.connect()
    stranger.sendall(disarm_line(second_nonce))
    assert readline(stranger).startswith("DENIED")
    assert serving.ended is None
    second.sendall(disarm_line(second_nonce))
    assert readline(second) == "BYE"
    serving.thread.join(timeout=10)
    assert serving.ended is not None and serving.ended[0] == "disarm"
    first.close()
    second.close()
    stranger.close()


def test_idle_connections_cannot_exhaust_the_reaper(serving: Serving) -> None:
    """64 connections that never say HELLO: at most PENDING_MAX wait, the oldest dropped first; distval's own
    connection after them is still challenged and held."""
    limit = daemon().PENDING_MAX
    idle = [serving.connect()[0] for _ in range(64)]
    sock, _ = serving.hello()
    assert len(serving.reaper.pending) <= limit, len(serving.reaper.pending)
    dropped = 0
    for each in idle[: 64 - limit]:
        each.settimeout(5)
        try:
            rest = readline(each)
        except ConnectionResetError:
            rest = ""
        dropped += rest == "" or rest.startswith("DENIED")
    assert dropped == 64 - limit, "expected the oldest idle connections to be dropped"
    assert len(serving.reaper.holders) == 1
    for each in idle:
        each.close()
    sock.close()


def test_a_connection_that_resets_at_once_drops_only_itself(serving: Serving) -> None:
    for _ in range(5):
        sock = socket.create_connection(("127.0.0.1", serving.port), timeout=5)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        sock.close()  # a reset, not a FIN
    sock, _ = serving.hello()
    assert serving.ended is None
    sock.close()


def test_an_error_while_handling_a_connection_drops_it_and_not_the_reaper(
    serving: Serving, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever goes wrong inside one connection's handling (here, a bug stand-in) costs that connection only."""
    original = serving.reaper.accepted

    def broken(line: bytes, nonce: bytes) -> bool:
        if b"boom" in line:
            raise ValueError("a bug")
        return bool(original(line, nonce))

    monkeypatch.setattr(serving.reaper, "accepted", broken)
    sock, _ = serving.connect()
    sock.sendall(b"HELLO boom x\n")
    assert readline(sock) == "", "expected the connection to be dropped"
    held, _ = serving.hello()
    assert serving.ended is None
    held.close()


def test_held_until_the_connection_drops_then_reaps_after_the_grace(serving: Serving) -> None:
    sock, _ = serving.hello()
    sock.sendall(b"PING\n")
    assert readline(sock) == "PONG"
    serving.clock.advance(GRACE_S * 2)
    serving.clock.rounds()
    assert serving.ended is None, "expected the reaper to wait while its connection is held"
    sock.close()
    until(lambda: not serving.reaper.holders)
    dropped = serving.clock.now
    serving.clock.advance(GRACE_S * 0.9)
    serving.clock.rounds()
    assert serving.ended is None, "reaped within the grace"
    serving.clock.advance(GRACE_S * 0.1)
    serving.thread.join(timeout=30)
    assert serving.ended is not None and serving.ended[0] == "reap"
    assert serving.ended[1] - dropped == pytest.approx(GRACE_S)


def test_a_connection_back_within_the_grace_keeps_it_held(serving: Serving) -> None:
    first, _ = serving.hello()
    first.close()
    until(lambda: not serving.reaper.holders)
    serving.clock.advance(GRACE_S / 10)
    second, nonce = serving.hello()
    serving.clock.advance(GRACE_S * 2)
    serving.clock.rounds()
    assert serving.ended is None, "expected a connection back within the grace period to hold the reaper"
    second.sendall(disarm_line(nonce))
    assert readline(second) == "BYE"
    serving.thread.join(timeout=30)
    assert serving.ended is not None and serving.ended[0] == "disarm"


def test_nobody_connects_then_it_reaps_after_the_first_connection_window() -> None:
    running = Serving(first_s=1.0)
    started = running.clock.now  # the reaper's clock starts at its construction
    running.clock.advance(0.9)
    running.clock.rounds()
    assert running.ended is None, "reaped inside the first-connection window"
    running.clock.advance(0.1)
    running.thread.join(timeout=30)
    assert running.ended is not None and running.ended[0] == "reap"
    assert running.ended[1] - started == pytest.approx(1.0)
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

    def image(self, reference: str) -> ImageInfo | None:
        return reaper_image(reference)

    def start_reaper(self, *args: object, **kwargs: object) -> tuple[str, int | None, str | None]:
        raise self.error

    def remove_matching(self, labels: list[str]) -> tuple[int, int]:
        self.removed.append(labels)
        return 0, 0


def test_a_reaper_that_cannot_start_is_one_line_and_removed() -> None:
    engine = Refusing(EngineError("start the reaper distval-r1-reaper: port is already allocated"))
    lines: list[str] = []
    assert Reaper.start(engine, lines.append) is None  # type: ignore[arg-type]
    assert lines == [
        "no reaper for run r1 (start the reaper distval-r1-reaper: port is already allocated): if distval is killed, "
        "`distval cleanup --run-id r1` removes its containers and networks"
    ]
    assert engine.removed == [["distval.run=r1", "distval.role=reaper"]]


def test_an_interrupt_while_the_reaper_starts_stops_the_run() -> None:
    engine = Refusing(Interrupted("interrupted by SIGTERM"))
    lines: list[str] = []
    with pytest.raises(Interrupted):
        Reaper.start(engine, lines.append)  # type: ignore[arg-type]
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

    def image(self, reference: str) -> ImageInfo | None:
        return reaper_image(reference)

    def start_reaper(
        self, image: str, entrypoint: list[str], name: str, environment: dict[str, str], *rest: object, **kwargs: object
    ) -> tuple[str, int, list[str]]:
        if not self.listen:
            closed = socket.create_server(("127.0.0.1", 0))
            port = closed.getsockname()[1]
            closed.close()
            return "cid-1", port, []
        self.asked_image = image
        self.asked_entrypoint = entrypoint
        self.asked_environment = environment
        self.serving = Serving(key=bytes.fromhex(environment["DISTVAL_REAPER_KEY"]))
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
    reaper = Reaper.start(engine, lines.append, held=held.append)  # type: ignore[arg-type]
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
    monkeypatch.setattr(distval.targets.docker.reaper, "CONNECT_WINDOW_S", 2.0)
    engine = Launching(listen=False)
    lines: list[str] = []
    reaper = Reaper.start(engine, lines.append)  # type: ignore[arg-type]
    # The run waits only for the reaper's container: start returned while its thread still tries to connect (it gives
    # up once the window closes). An event, not a bound on how long start took.
    assert reaper is not None and not reaper._settled.is_set(), "the run waited for the reaper's connection"
    settle(reaper)
    assert len(lines) == 1 and lines[0].startswith("no reaper for run run1 (cannot reach the reaper (127.0.0.1:"), lines
    assert lines[0].endswith("`distval cleanup --run-id run1` removes its containers and networks"), lines
    # Removed before its first-connection window closes: it would otherwise reap the running run.
    assert engine.removed == [["distval.run=run1", "distval.role=reaper"]]


def test_another_runs_reaper_at_an_address_does_not_stop_distval_from_reaching_its_own() -> None:
    """A reaper that answers DENIED (another run's, at an address of this run's list) is passed over."""
    other = Serving(key=b"0" * 32)  # no HELLO of this run matches its key
    own = Serving()  # KEY's
    where = [("127.0.0.1", other.port), ("127.0.0.1", own.port)]
    reaper = Reaper(Launching(), "distval-run1-reaper", KEY, where, lambda line: None)  # type: ignore[arg-type]
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
    reaper = Reaper.start(engine, lines.append)  # type: ignore[arg-type]
    assert reaper is not None
    started = time.monotonic()
    reaper.disarm()
    # Waiting out the connection window would take CONNECT_WINDOW_S; one attempt takes a fraction of a second.
    assert time.monotonic() - started < distval.targets.docker.reaper.CONNECT_WINDOW_S, "disarm waited for the window"
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
        self.serving = Serving(key=bytes.fromhex(environment["DISTVAL_REAPER_KEY"]), port=port)
        return "cid-1", port, []


def test_a_local_engines_reaper_runs_in_the_host_network_at_a_loopback_port_distval_chose(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr(distval.targets.docker.reaper, "own_container", lambda: None)
    engine = InHostNetwork()
    held: list[str] = []
    lines: list[str] = []
    reaper = Reaper.start(engine, lines.append, held=held.append)  # type: ignore[arg-type]
    assert reaper is not None
    settle(reaper)
    assert engine.asked == [True] and engine.serving is not None
    assert held == [f"reaper distval-run1-reaper holds run run1 (at 127.0.0.1:{engine.serving.port})"] and lines == []
    reaper.disarm()


def test_an_engine_that_refuses_the_host_network_gets_a_reaper_with_a_network_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr(distval.targets.docker.reaper, "own_container", lambda: None)
    engine = InHostNetwork(refuse_host=True)
    lines: list[str] = []
    reaper = Reaper.start(engine, lines.append)  # type: ignore[arg-type]
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
    assert distval.targets.docker.reaper._shares_this_network(engine, None, joined) is expected  # type: ignore[arg-type]


def test_the_launch_waits_for_the_reaper_container_to_exist_and_then_to_run() -> None:
    """``created`` returns once the container exists, ``ready`` once it runs: what the run creates and starts
    waits for each (distval/targets/docker/runtime.py before_start)."""
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


def test_the_reaper_runs_in_distvals_reaper_image_never_the_image_under_test() -> None:
    """Reaper.start takes no image: it always asks for REAPER_IMAGE, with the fixed isolated entrypoint and
    nothing in its environment but the reaper's own variables (issue 19)."""
    engine = Launching()
    reaper = Reaper.start(engine, lambda line: None)  # type: ignore[arg-type]
    assert reaper is not None
    settle(reaper)
    assert engine.asked_image == REAPER_IMAGE == "distval-fixtures/reaper:bookworm"
    assert engine.asked_entrypoint == list(REAPER_ENTRYPOINT)
    assert engine.asked_entrypoint[:3] == ["/usr/bin/python3.11", "-I", "-S"]
    assert all(name.startswith("DISTVAL_REAPER_") for name in engine.asked_environment), engine.asked_environment
    reaper.disarm()


class Stale(Launching):
    """An Engine whose reaper image is absent, or built from another recipe (an older reaper_daemon.py)."""

    def __init__(self, labels: dict[str, str] | None) -> None:
        super().__init__()
        self.labels = labels
        self.started: list[str] = []

    def image(self, reference: str) -> ImageInfo | None:
        return None if self.labels is None else ImageInfo("sha256:x", (reference,), self.labels)

    def start_reaper(
        self, image: str, entrypoint: list[str], name: str, environment: dict[str, str], *rest: object, **kwargs: object
    ) -> tuple[str, int, list[str]]:
        self.started.append(image)
        return super().start_reaper(image, entrypoint, name, environment)


@pytest.mark.parametrize("labels", [None, {RECIPE_LABEL: "0" * 16}, {}], ids=["absent", "another-recipe", "no-label"])
def test_without_the_current_reaper_image_no_reaper_is_started_in_any_image(labels: dict[str, str] | None) -> None:
    engine = Stale(labels)
    lines: list[str] = []
    assert Reaper.start(engine, lines.append) is None  # type: ignore[arg-type]
    assert engine.started == [], "expected no reaper container at all"
    assert len(lines) == 1 and f"does not hold the current {REAPER_IMAGE}" in lines[0], lines
    assert f"`distval fixtures build {REAPER_IMAGE}`" in lines[0]


def test_the_reaper_image_bakes_in_the_program_so_its_recipe_covers_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    recipe = FIXTURES[REAPER_IMAGE].recipe
    assert "reaper_daemon.py" in getattr(recipe, "files", ())
    assert f"ENTRYPOINT {list(REAPER_ENTRYPOINT)!r}".replace("'", '"') in getattr(recipe, "dockerfile", "")
    program = Path(distval.targets.docker.reaper.__file__).with_name("reaper_daemon.py")
    assert (FILES / "reaper_daemon.py").read_bytes() == program.read_bytes(), "the image bakes in another program"
    before = recipe_hash(REAPER_IMAGE)
    moved = tmp_path / "files"
    shutil.copytree(FILES, moved)
    (moved / "reaper_daemon.py").write_bytes(program.read_bytes() + b"# changed\n")
    monkeypatch.setattr(distval.images.build, "FILES", moved)
    assert recipe_hash(REAPER_IMAGE) != before, "a change to the reaper's program must rebuild its image"


def test_the_plan_lists_the_reaper_with_its_image_user_privileges_mounts_and_network() -> None:
    """``distval plan`` (text and JSON) shows what runs beside the ranks, as the Engine creates it."""
    plan = plan_run(load_config(str(ROOT / "configs" / "default.yaml")), "r1", "example/torch:under-test", ())
    text = render_plan(plan)
    assert "beside the ranks: reaper distval-<run id>-reaper" in text
    assert f"  image: {REAPER_IMAGE} (" in text and "never the image under test" in text
    assert f"  entrypoint: {' '.join(REAPER_ENTRYPOINT)}\n" in text
    assert "  user: 0:0\n" in text and "cap_drop ALL" in text and "read-only root file system: true" in text
    assert "-> /var/run/docker.sock (rw)" in text and "  network: the host's network" in text
    (reaper,) = [each for each in plan_as_data(plan)["beside"] if each["image"] == REAPER_IMAGE and each.get("mounts")]
    assert reaper["image"] == REAPER_IMAGE != "example/torch:under-test"
    assert reaper["entrypoint"] == list(REAPER_ENTRYPOINT) and reaper["user"] == "0:0"
    assert reaper["privileges"] == {"cap_drop": ["ALL"], "read_only": True, "mem_limit": "64m"}
    assert [m["target"] for m in reaper["mounts"]] == ["/var/run/docker.sock"]
    # What the plan says is what the Engine is asked for (the same settings, one place).
    assert {key: reaper_container.SETTINGS[key] for key in ("user", "cap_drop", "read_only", "mem_limit")} == {
        "user": reaper["user"],
        **reaper["privileges"],
    }
