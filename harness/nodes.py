"""Node Engines: separate Docker Engines in containers on this machine (Docker-in-Docker), to run and test
distval across several hosts where only one Engine exists (``distval nodes up N`` / ``distval nodes down``).

Each node runs its own ``dockerd`` from the node fixture image (harness/fixtures/recipes.py, NODE_ENGINE) on a
user-defined network of its own set, reachable at ``tcp://<node ip>:2375``; the nodes listed in ``tls`` serve
``https://<node ip>:2376`` instead, with a CA, a server and a client certificate made by openssl inside the
node when it starts (the client's are copied out to ``cache_dir()/nodes/<set>/tls``). ``--privileged`` fails on
hosts without CAP_SYS_RESOURCE ("unable to apply caps"), so a node gets every capability but that one, no
seccomp filter and the host's cgroup tree (inner containers fail on a read-only /sys/fs/cgroup). Its
/var/lib/docker is an anonymous volume on disk, removed with the node: the vfs storage driver (the only one
that works nested here) copies every layer in full, too much for tmpfs with several nodes.

Everything is labelled ``distval.managed=true``, ``distval.run=nodes-<set>``, ``distval.nodes=<set>`` and the
owner labels, so ``distval nodes down`` and ``distval cleanup`` remove it.
"""

from __future__ import annotations

import secrets
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.docker_spec import NetworkPlan
from harness.engine import Engine
from harness.errors import BadInput, EngineError
from harness.fixtures import NODE_ENGINE, build_fixtures, cache_dir
from harness.hosts import HostSpec, TlsFiles

LABEL_NODES = "distval.nodes"  # the node set a node container or network belongs to
PLAIN_PORT = 2375
TLS_PORT = 2376
NODES_MAX = 8
READY_TIMEOUT_S = 90.0  # dockerd starts in about 1 s here; TLS nodes make three RSA keys first
TLS_DIR = "/etc/distval-tls"  # in the node
Progress = Callable[[str], None]

_DOCKERD = "exec dockerd --host=unix:///var/run/docker.sock --storage-driver=overlay2"
# The TLS node's certificates, made inside it: its own address goes into the server certificate.
_TLS_SCRIPT = f"""set -e
mkdir -p {TLS_DIR}/client; cd {TLS_DIR}
addr=$(hostname -i | cut -d' ' -f1)
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca-key.pem -out ca.pem -days 7 -subj /CN=distval-node-ca 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout server-key.pem -out server.csr -subj "/CN=$(hostname)" 2>/dev/null
printf 'subjectAltName=IP:%s,DNS:%s,IP:127.0.0.1\\nextendedKeyUsage=serverAuth\\n' "$addr" "$(hostname)" > server.ext
sign="openssl x509 -req -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 7"
$sign -in server.csr -out server.pem -extfile server.ext 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout client/key.pem -out client.csr -subj /CN=distval-client 2>/dev/null
printf 'extendedKeyUsage=clientAuth\\n' > client.ext
$sign -in client.csr -out client/cert.pem -extfile client.ext 2>/dev/null
cp ca.pem client/ca.pem
{_DOCKERD} --host=tcp://0.0.0.0:{TLS_PORT} --tlsverify --tlscacert=ca.pem --tlscert=server.pem --tlskey=server-key.pem
"""


@dataclass(frozen=True)
class NodeEngine:
    name: str
    host: HostSpec

    @property
    def url(self) -> str:
        return self.host.url


@dataclass(frozen=True)
class NodeSet:
    set_id: str
    network: str
    nodes: tuple[NodeEngine, ...]
    tls_dir: str | None  # the TLS nodes' client files (DOCKER_CERT_PATH layout), when there are any

    def hosts_option(self) -> str:
        return ",".join(node.url for node in self.nodes)

    def describe(self) -> str:
        lines = [f"node set {self.set_id} on network {self.network}:"]
        lines += [f"  node {i}: {node.url}  ({node.name})" for i, node in enumerate(self.nodes)]
        lines.append(f"--hosts {self.hosts_option()}")
        if self.tls_dir is not None:
            lines.append(f"DOCKER_CERT_PATH={self.tls_dir}  (or --tls-ca/--tls-cert/--tls-key from there)")
        return "\n".join(lines) + "\n"


def node_create_kwargs(name: str, network: str, set_id: str, tls: bool) -> dict[str, Any]:
    """docker-py ``containers.create`` arguments of one node Engine (labels: Engine.create_raw adds distval's)."""
    command = _TLS_SCRIPT if tls else f"{_DOCKERD} --host=tcp://0.0.0.0:{PLAIN_PORT} --tls=false"
    return {
        "image": NODE_ENGINE,
        "name": name,
        "hostname": name,
        "entrypoint": ["/bin/sh", "-c", command],
        "command": [],
        "network": network,
        "labels": {LABEL_NODES: set_id},
        "cap_add": ["ALL"],
        "cap_drop": ["SYS_RESOURCE"],
        "security_opt": ["seccomp=unconfined"],
        "tmpfs": {"/run": ""},
        "mounts": [
            {"Target": "/sys/fs/cgroup", "Source": "/sys/fs/cgroup", "Type": "bind", "ReadOnly": False},
            {"Target": "/var/lib/docker", "Type": "volume", "ReadOnly": False},  # anonymous: removed with the node
        ],
        "detach": True,
    }


def start_nodes(
    count: int, tls: Sequence[int] = (), progress: Progress = lambda line: None, set_id: str | None = None
) -> NodeSet:
    """Start ``count`` node Engines (those at the indexes in ``tls`` over TLS) and wait until each answers.
    On any failure everything of the set is removed before the error leaves."""
    if not 1 <= count <= NODES_MAX:
        raise BadInput(f"nodes: expected 1..{NODES_MAX} node Engines; got {count}")
    wrong = [i for i in tls if not 0 <= i < count]
    if wrong:
        raise BadInput(f"nodes: --tls expects node indexes 0..{count - 1}; got {wrong[0]}")
    if len(set(tls)) > 1:
        raise BadInput("nodes: expected at most one TLS node (a run takes one set of TLS client files)")
    set_id = set_id or secrets.token_hex(3)
    engine = Engine(f"nodes-{set_id}")
    build_fixtures(engine, [NODE_ENGINE], progress)
    network = f"distval-nodes-{set_id}"
    started = time.monotonic()
    try:
        labels = ((LABEL_NODES, set_id),)
        engine.create_network(NetworkPlan(name=network, internal=False, labels=labels))
        handles = []
        for index in range(count):
            name = f"{network}-{index}"
            handle = engine.create_raw(node_create_kwargs(name, network, set_id, index in tls))
            engine.start(handle)
            handles.append((name, handle, index in tls))
        tls_dir = _tls_dir(set_id) if tls else None
        nodes = []
        for name, handle, secure in handles:
            address = engine.address(handle, network)
            files = _copy_tls_files(engine, handle, name, tls_dir, started) if secure and tls_dir else None
            url = f"https://{address}:{TLS_PORT}" if secure else f"tcp://{address}:{PLAIN_PORT}"
            node = NodeEngine(name, HostSpec(url, files))
            wait_ready(node, started)
            progress(f"node {name} answers at {url} ({time.monotonic() - started:.1f} s after the first start)")
            nodes.append(node)
        return NodeSet(set_id, network, tuple(nodes), str(tls_dir) if tls_dir else None)
    except BaseException:
        engine.remove_matching([f"{LABEL_NODES}={set_id}"])
        raise


def stop_nodes(set_id: str | None = None) -> tuple[int, int]:
    """Remove the node set ``set_id`` (None: every node set), its volumes and its local TLS files."""
    engine = Engine("nodes-down")
    removed = engine.remove_matching([f"{LABEL_NODES}={set_id}" if set_id else LABEL_NODES])
    shutil.rmtree(cache_dir() / "nodes" / set_id if set_id else cache_dir() / "nodes", ignore_errors=True)
    return removed


def _tls_dir(set_id: str) -> Path:
    return cache_dir() / "nodes" / set_id / "tls"


def _copy_tls_files(engine: Engine, handle: Any, name: str, target: Path, started: float) -> TlsFiles:
    """The client's CA, certificate and key, once the node has made them."""
    while True:
        try:
            files = engine.read_files(handle, f"{TLS_DIR}/client")
        except EngineError:
            files = {}
        if {"ca.pem", "cert.pem", "key.pem"} <= set(files):
            break
        if time.monotonic() - started > READY_TIMEOUT_S:
            raise EngineError(f"node {name} made no TLS certificates within {READY_TIMEOUT_S:g} s")
        time.sleep(0.5)
    target.mkdir(parents=True, exist_ok=True)
    for file_name in ("ca.pem", "cert.pem", "key.pem"):
        path = target / file_name
        path.write_bytes(files[file_name])
        path.chmod(0o600)
    return TlsFiles(str(target / "ca.pem"), str(target / "cert.pem"), str(target / "key.pem"))


def wait_ready(node: NodeEngine, started: float) -> None:
    while True:
        try:
            Engine("nodes-probe", host=node.host).client.close()
            return
        except EngineError as exc:
            if time.monotonic() - started > READY_TIMEOUT_S:
                raise EngineError(f"node {node.name} did not answer at {node.url} within {READY_TIMEOUT_S:g} s: {exc}") from None
        time.sleep(0.3)
