"""The run's reaper, from distval's side: nothing is left behind when distval is killed with SIGKILL.

One reaper per ``distval run`` (not one shared by all runs; docs/how-a-run-works.md, "Nothing left behind, ever"): a container of
distval's reaper image (``REAPER_IMAGE``, a fixture built from Debian's python3 with distval/targets/docker/reaper_daemon.py
baked in, distval/images/recipes.py) running that program with its fixed entrypoint in isolated mode and
with no environment but the reaper's own variables, with the Engine's socket mounted, listening on a TCP
port: on the loopback of the host's network where distval shares that network (``_shares_this_network``: no
network of its own to set up and tear down), else in a network of its own with the port published. Never the
image under test: the reaper is root with the Engine's socket, and whatever that image's Python runs (a
planted hmac.py or sitecustomize, a python3 that is a script, LD_PRELOAD) would own the host (issue 19).
The run builds the reaper's image like a missing fixture (``distval fixtures build`` builds it too); where
the Engine does not hold the current one, the run refuses to start a reaper (one line) rather than use
anything else. distval connects to it, reads ``CHALLENGE <nonce>`` and answers
``HELLO <run id> <HMAC(key, nonce || run id)>`` (distval/targets/docker/reaper_daemon.py), then holds that connection for
the whole run. When
distval dies, however it dies, the kernel closes the connection; the reaper waits ``GRACE_S`` for it to come
back, then removes every container and network labelled with the run id and exits (the Engine removes it).
On a normal end (pass, fail, Ctrl-C, SIGTERM) distval sends ``DISARM <proof>`` on that connection first: the reaper exits without
removing anything, so what ``--keep-on-failure`` keeps stays.

The reaper's container is created before anything else of the run; it is started in a thread
(``ReaperLaunch``) while the first scenario is set up (its network created, its containers created and
their files copied in), and no container of the run starts before the reaper's runs: from then on a killed
distval is covered (the reaper reaps when nobody connected within ``FIRST_CONNECTION_S``, and what was
created before it ran is labelled with the run too). Connecting, which waits for the reaper's Python to
listen, goes on in the reaper's thread. Both overlaps are issue 13's: the start took about 0.25 s of every
run, the connection about 0.2 s. What a distval killed between the reaper's create and its start request
(one API call apart) leaves is never started, and carries its dead owner (distval/owner.py): ``distval
cleanup`` removes it.

Where the reaper cannot start or cannot be reached (no current reaper image in the Engine, an Engine that does
not let containers mount its socket, distval in a container on another network than the reaper), the run
goes on without one after one line on stderr; ``distval cleanup`` is then the way to remove what a killed
run left.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from distval.errors import DistvalError, Interrupted
from distval.image_names import REAPER_ENTRYPOINT, REAPER_IMAGE
from distval.images import is_current, recipe_hash
from distval.labels import LABEL_ROLE, LABEL_RUN
from distval.targets.docker.reaper_daemon import proof

if TYPE_CHECKING:
    from distval.targets.docker.engine import Engine

REAPER_PORT = 7390  # inside the reaper's container; published at a port the Engine picks
GRACE_S = 2.0  # a dropped connection may come back within this before the reaper removes everything
FIRST_CONNECTION_S = 60.0  # the reaper reaps if distval never connects (killed between start and connect)
CONNECT_WINDOW_S = 15.0  # how long distval tries to reach a reaper that was just started
CONNECT_TIMEOUT_S = 1.0
DISARM_TIMEOUT_S = 5.0
GONE_TIMEOUT_S = 10.0
DEFAULT_SOCKET = "/var/run/docker.sock"
# A container's own files (/etc/hostname, ...) are mounted from /var/lib/docker/containers/<id>/.
_CONTAINER_MOUNT = re.compile(r"/containers/([0-9a-f]{64})/")
Log = Callable[[str], None]


def daemon_command() -> list[str]:
    """The reaper's entrypoint: the program baked into its image, by Debian's Python's own path (not whatever
    ``python3`` PATH finds), isolated (-I) and without site (-S). Given explicitly, not left to the image."""
    return list(REAPER_ENTRYPOINT)


def engine_socket_path(url: str | None = None) -> str:
    """The Engine's socket on the Engine's host, which the reaper mounts: the path of a ``unix://`` URL (default:
    DOCKER_HOST), else the default one (also for tcp:// and ssh:// Engines, where distval cannot see the path)."""
    host = url if url is not None else os.environ.get("DOCKER_HOST", "")
    if host.startswith("unix://"):
        return host.removeprefix("unix://")
    return DEFAULT_SOCKET


def _remote_host(url: str | None = None) -> str | None:
    """The Engine's host name for a tcp://, https:// or ssh:// URL (default: DOCKER_HOST; its published ports
    are there), else None."""
    host = url if url is not None else os.environ.get("DOCKER_HOST", "")
    if host.startswith(("tcp://", "https://", "ssh://")):
        return urlparse(host).hostname
    return None


def own_container(mountinfo: str = "/proc/self/mountinfo") -> str | None:
    """The id of the container distval runs in (the harness image), from its mounts; None on a host."""
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as handle:
            found = _CONTAINER_MOUNT.search(handle.read())
    except OSError:
        return None
    return found.group(1) if found else None


def addresses(host_port: int | None, own_addresses: list[str], url: str | None = None) -> list[tuple[str, int]]:
    """Where distval may reach its reaper, most likely first: the published port on the Engine's host
    (a remote Engine's host, else the loopback: distval on the Engine's host), then the reaper's own addresses
    (distval in a container: on the default bridge, or on the networks of distval's container, which the
    reaper joined)."""
    found: list[tuple[str, int]] = []
    remote = _remote_host(url)
    if host_port is not None:
        found.append((remote or "127.0.0.1", host_port))
    if remote is None:
        # A remote Engine's bridge addresses are private to its host: here the same address (172.17.0.2) may be
        # another run's reaper on the local Engine, which answers DENIED (seen with two test runs at once).
        found += [(address, REAPER_PORT) for address in own_addresses]
    return found


class Reaper:
    """A started reaper that holds distval's connection; ``disarm`` at a normal end."""

    def __init__(
        self, engine: Engine, name: str, key: bytes, where: list[tuple[str, int]], log: Log, container_id: str | None = None
    ) -> None:
        self.engine = engine
        self.container_id = container_id  # the reaper's container, whose removal disarm waits for
        self.name = name
        self._key = key
        self._nonce: bytes | None = None  # the held connection's: DISARM's proof is bound to it
        self._where = where
        self._log = log
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._said_bye = threading.Event()
        self._disarming = False
        self._settled = threading.Event()  # the first connection is made, or given up
        self.address: tuple[str, int] | None = None

    @staticmethod
    def start(
        engine: Engine,
        log: Log,
        url: str | None = None,
        held: Log | None = None,
        created: Callable[[], None] | None = None,
    ) -> Reaper | None:
        """Start the run's reaper in REAPER_IMAGE (never another image); None (after one line through ``log``)
        when that image is not current in the Engine or its container cannot start. Returns once the container
        runs; the connection is made in the reaper's thread, which tells ``held`` where it holds the reaper, or
        ``log`` (and removes the reaper) when it cannot reach it. ``url``: the Engine's, across several hosts
        (default: DOCKER_HOST's). ``created``: called once the reaper's container exists, before it starts
        (``ReaperLaunch``)."""
        run_id = engine.run_id
        name = f"distval-{run_id}-reaper"
        if not _reaper_image_current(engine):
            log(
                _without_reaper(
                    run_id,
                    f"the Engine does not hold the current {REAPER_IMAGE} (recipe {recipe_hash(REAPER_IMAGE)}); "
                    f"`distval fixtures build {REAPER_IMAGE}` builds it. The reaper never runs in another image",
                )
            )
            return None
        key = secrets.token_bytes(32)
        bind = "0.0.0.0" if _remote_host(url) else "127.0.0.1"  # a remote Engine's loopback is out of reach
        environment = {
            "DISTVAL_REAPER_RUN": run_id,
            # Only the Engine's API shows a container's environment, and whoever can ask it owns the host anyway;
            # on the wire only proofs bound to a fresh nonce go (nothing sniffed can be replayed).
            "DISTVAL_REAPER_KEY": key.hex(),
            "DISTVAL_REAPER_GRACE_S": str(GRACE_S),
            "DISTVAL_REAPER_FIRST_S": str(FIRST_CONNECTION_S),
        }
        joined = own_container()
        problems: list[str] = []
        started: tuple[str, list[tuple[str, int]]] | None = None
        for host_network in (True, False) if _shares_this_network(engine, url, joined) else (False,):
            port = _free_loopback_port() if host_network else REAPER_PORT
            extra = {"DISTVAL_REAPER_PORT": str(port)} | ({"DISTVAL_REAPER_BIND": "127.0.0.1"} if host_network else {})
            exists = threading.Event()

            def on_create(exists: threading.Event = exists) -> None:
                exists.set()
                if created is not None:
                    created()

            try:
                container_id, host_port, own_addresses = engine.start_reaper(
                    REAPER_IMAGE,
                    daemon_command(),
                    name,
                    {**environment, **extra},
                    engine_socket_path(url),
                    port,
                    bind,
                    joined,
                    on_create,
                    host_network=host_network,
                )
            except Interrupted:  # Ctrl-C or SIGTERM while it started: the run stops, without a reaper
                remove_reaper(engine)
                raise
            except (DistvalError, OSError) as exc:
                remove_reaper(engine)
                if host_network and not exists.is_set():
                    # Refused in the host's network (an Engine with user namespaces): with a network of its own.
                    problems.append(f"in the host's network: {exc}")
                    continue
                problems.append(str(exc))
                break
            started = container_id, [("127.0.0.1", port)] if host_network else addresses(host_port, own_addresses, url)
            break
        if started is None:
            log(_without_reaper(run_id, "; ".join(problems)))
            return None
        container_id, where = started
        reaper = Reaper(engine, name, key, where, log, container_id)
        threading.Thread(target=reaper._hold, args=(held,), name="distval-reaper", daemon=True).start()
        return reaper

    def _hold(self, held: Log | None) -> None:
        """The reaper's thread: connect (within CONNECT_WINDOW_S, which is well inside the reaper's
        FIRST_CONNECTION_S), then hold the connection until DISARM."""
        try:
            self._connect(CONNECT_WINDOW_S)
        except OSError as exc:
            if not self._disarming:
                self._log(_without_reaper(self.engine.run_id, str(exc)))
            remove_reaper(self.engine)  # else it would reap the running run once its first window closes
            self._settled.set()
            return
        self._settled.set()
        if held is not None and self.address is not None:
            held(f"reaper {self.name} holds run {self.engine.run_id} (at {self.address[0]}:{self.address[1]})")
        self._watch()

    def _connect(self, window_s: float) -> None:
        """Connect and say HELLO, trying each address until the window closes; OSError with what was seen."""
        until = time.monotonic() + window_s
        problems: dict[str, str] = {}
        while True:
            for address in self._where:
                try:
                    sock = socket.create_connection(address, timeout=CONNECT_TIMEOUT_S)
                except OSError as exc:
                    problems[f"{address[0]}:{address[1]}"] = str(exc) or type(exc).__name__
                    continue
                try:
                    sock.settimeout(DISARM_TIMEOUT_S)
                    challenge = _read_line(sock)
                    nonce = _nonce(challenge)
                    if nonce is not None:
                        sock.sendall(f"HELLO {self.engine.run_id} {proof(self._key, nonce, self.engine.run_id)}\n".encode())
                        answer = _read_line(sock)
                    else:
                        answer = challenge
                except OSError as exc:
                    sock.close()
                    problems[f"{address[0]}:{address[1]}"] = f"no answer to HELLO: {exc}"
                    continue
                if nonce is None or answer != "OK":
                    sock.close()
                    # DENIED: a reaper, not this run's (another run's at the same address); else Docker's proxy,
                    # which accepts on the published port before the reaper listens, then hangs up. Either way
                    # another address, or this one a moment later, may still be this run's reaper.
                    said = f"answered {answer!r}" if answer else "connection closed before the reaper answered"
                    problems[f"{address[0]}:{address[1]}"] = said
                    continue
                sock.settimeout(None)
                with self._lock:
                    previous, self._sock, self.address, self._nonce = self._sock, sock, address, nonce
                if previous is not None:
                    previous.close()
                return
            if self._disarming:
                raise OSError("the run ended before the reaper answered")
            if time.monotonic() >= until or not self._where:
                tried = "; ".join(f"{a}: {p}" for a, p in problems.items()) or "it published no address"
                raise OSError(f"cannot reach the reaper ({tried})")
            time.sleep(0.2)

    def _watch(self) -> None:
        """Reads the connection: BYE after DISARM; anything else ending it means it broke (the reaper died, or a
        proxy dropped it): reconnect within the grace period, else say so once."""
        while True:
            with self._lock:
                sock = self._sock
            if sock is None:
                return
            try:
                line = _read_line(sock)
            except OSError:
                line = ""
            if line == "BYE":
                self._said_bye.set()
                return
            if self._disarming:
                return
            try:
                self._connect(GRACE_S / 2)
            except OSError as exc:
                self._log(
                    f"lost the reaper of run {self.engine.run_id} ({exc}): if distval is killed, "
                    f"`distval cleanup --run-id {self.engine.run_id}` removes its containers and networks"
                )
                return

    def disarm(self) -> None:
        """Tell the reaper to exit without removing anything (a normal end); if it cannot be told, remove it."""
        self._disarming = True
        # A connection still being made ends within one attempt (CONNECT_TIMEOUT_S per address).
        self._settled.wait(CONNECT_TIMEOUT_S * (len(self._where) + 1) + 1.0)
        with self._lock:
            sock, nonce = self._sock, self._nonce
        told = False
        if sock is not None and nonce is not None:
            try:
                sock.sendall(f"DISARM {proof(self._key, nonce, self.engine.run_id, b'DISARM')}\n".encode())
                told = self._said_bye.wait(DISARM_TIMEOUT_S)
            except OSError:
                told = False
            finally:
                sock.close()
        if not told:
            remove_reaper(self.engine)
        # The Engine removes it once it exited (AutoRemove): wait for that, so that distval leaves nothing.
        try:
            gone = self.container_id is not None and self.engine.wait_removed(self.container_id, GONE_TIMEOUT_S)
        except DistvalError:
            gone = False
        if not gone:
            remove_reaper(self.engine)


def _shares_this_network(engine: Engine, url: str | None, joined: str | None) -> bool:
    """Whether a container in the Engine's host's network is in distval's own network namespace, where it is
    reached at 127.0.0.1: a local Engine whose default bridge's interface (docker0) is one of this namespace's.
    Not for a remote Engine, nor distval in a container, rootless Docker (its bridge is in rootlesskit's
    namespace) or Docker Desktop (in its VM)."""
    if _remote_host(url) is not None or joined is not None or not hasattr(socket, "if_nameindex"):
        return False
    try:
        interface = engine.bridge_interface()
        names = {name for _, name in socket.if_nameindex()}
    except (DistvalError, OSError):
        return False
    return interface is not None and interface in names


def _free_loopback_port() -> int:
    """A port free on 127.0.0.1 now, for the reaper to listen at in the host's network. Another process may
    take it before the reaper binds it: the reaper then exits, and the run says it has no reaper."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ReaperLaunch:
    """The run's reaper, started in a thread beside the first scenario's setup. ``created`` returns once the
    reaper's container exists (or could not be created): the run creates nothing before. ``ready`` returns
    once it runs (or will not run): the run starts nothing before (distval/targets/docker/runtime.py)."""

    def __init__(self, start: Callable[[Callable[[], None]], Reaper | None], log: Log, run_id: str) -> None:
        """``start(created)``: ``Reaper.start`` with its ``created`` callback; ``log``: where a failure the
        start did not report itself (a bug) goes, as the one line of a run without a reaper."""
        self._created = threading.Event()
        self._done = threading.Event()
        self._reaper: Reaper | None = None
        self._log = log
        self._run_id = run_id
        threading.Thread(target=self._start, args=(start,), name="distval-reaper-start", daemon=True).start()

    def _start(self, start: Callable[[Callable[[], None]], Reaper | None]) -> None:
        try:
            self._reaper = start(self._created.set)
        except Exception as exc:  # in this thread nothing would see it: the run goes on without a reaper
            self._log(_without_reaper(self._run_id, f"{type(exc).__name__}: {exc}"))
        finally:
            self._created.set()
            self._done.set()

    def created(self) -> None:
        """Wait until the reaper's container exists, or its start ended without one."""
        self._created.wait()

    def ready(self) -> Reaper | None:
        """The started reaper, or None where it could not start; waits for its container to run."""
        self._done.wait()
        return self._reaper


def _reaper_image_current(engine: Engine) -> bool:
    """Whether the Engine holds REAPER_IMAGE built from this distval's recipe (its label names the recipe's hash,
    which covers reaper_daemon.py): an older or foreign image of that name is not run."""
    try:
        return is_current(engine, REAPER_IMAGE)
    except DistvalError:
        return False


def _nonce(challenge: str) -> bytes | None:
    """The nonce of a ``CHALLENGE <hex>`` line; None for anything else (Docker's proxy hanging up, not a reaper)."""
    words = challenge.split()
    if len(words) != 2 or words[0] != "CHALLENGE" or not re.fullmatch(r"[0-9a-f]{16,128}", words[1]):
        return None
    return words[1].encode("ascii")


def _without_reaper(run_id: str, why: str) -> str:
    return (
        f"no reaper for run {run_id} ({why}): if distval is killed, `distval cleanup --run-id {run_id}` "
        "removes its containers and networks"
    )


def _read_line(sock: socket.socket) -> str:
    data = b""
    while not data.endswith(b"\n") and len(data) < 256:
        chunk = sock.recv(1)
        if not chunk:
            break
        data += chunk
    return data.decode("ascii", "replace").strip()


def reaper_labels(engine: Engine) -> list[str]:
    return [f"{LABEL_RUN}={engine.run_id}", f"{LABEL_ROLE}=reaper"]


def remove_reaper(engine: Engine) -> None:
    """Remove the run's reaper container, if any (killing it first: it then reaps nothing)."""
    try:
        engine.remove_matching(reaper_labels(engine))
    except DistvalError:
        pass  # the run's own cleanup, or distval cleanup, removes it
