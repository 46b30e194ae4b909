"""Node Engines: separate Docker Engines in containers on this machine (Docker-in-Docker), to run and test
distval across several hosts where only one Engine exists (``distval nodes up N`` / ``distval nodes down``).

Each node runs its own ``dockerd`` from the node fixture image (distval/images/recipes.py, NODE_ENGINE) on an
internal user-defined network of its own set (this machine reaches it; the nodes reach nothing outside it: images
come through the API). By default every node serves ``https://<node ip>:2376`` with ``--tlsverify``: one CA per
set, made on this machine with a client certificate and each node's server certificate (distval/targets/engines/dind_tls.py),
the client's files in ``cache_dir()/nodes/<set>/tls`` (mode 0700, keys 0600). A node listed in ``plain`` serves
``tcp://<node ip>:2375`` without TLS instead (to test tcp:// URLs): any local user who reaches the node network can
drive that Engine, so it is an explicit choice. dockerd listens on 0.0.0.0 inside the node, whose only
interfaces are loopback and the node network. ``--privileged`` fails on
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

from distval.config.engine_hosts import HostSpec
from distval.errors import BadInput, EngineError
from distval.image_names import NODE_ENGINE
from distval.images import build_fixtures, cache_dir
from distval.plan.specs import NetworkPlan
from distval.targets.docker.engine import Engine
from distval.targets.engines.dind_tls import NODE_TLS_DIR, READY_FILE, make_ca, server_archive

LABEL_NODES = "distval.nodes"  # the node set a node container or network belongs to
PLAIN_PORT = 2375
TLS_PORT = 2376
NODES_MAX = 8
READY_TIMEOUT_S = 90.0  # dockerd starts in about 1 s here
Progress = Callable[[str], None]

_DOCKERD = "exec dockerd --host=unix:///var/run/docker.sock --storage-driver=overlay2"
# A TLS node waits for its certificates (put in by start_nodes once its address is known), then serves TLS only.
_TLS_SCRIPT = f"""while [ ! -e {NODE_TLS_DIR}/{READY_FILE} ]; do sleep 0.1; done
cd {NODE_TLS_DIR}
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
        lines += [
            f"  node {i}: {node.url}  ({node.name}){'' if node.host.tls else '  no TLS: any local user can drive it'}"
            for i, node in enumerate(self.nodes)
        ]
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
    count: int, plain: Sequence[int] = (), progress: Progress = lambda line: None, set_id: str | None = None
) -> NodeSet:
    """Start ``count`` node Engines, over TLS but those at the indexes in ``plain``, and wait until each answers.
    On any failure everything of the set is removed before the error leaves."""
    if not 1 <= count <= NODES_MAX:
        raise BadInput(f"nodes: expected 1..{NODES_MAX} node Engines; got {count}")
    wrong = [i for i in plain if not 0 <= i < count]
    if wrong:
        raise BadInput(f"nodes: --plain expects node indexes 0..{count - 1}; got {wrong[0]}")
    set_id = set_id or secrets.token_hex(3)
    engine = Engine(f"nodes-{set_id}")
    build_fixtures(engine, [NODE_ENGINE], progress)
    network = f"distval-nodes-{set_id}"
    started = time.monotonic()
    try:
        labels = ((LABEL_NODES, set_id),)
        engine.create_network(NetworkPlan(name=network, internal=True, labels=labels))
        ca = make_ca(_tls_dir(set_id)) if len(set(plain)) < count else None
        handles = []
        for index in range(count):
            name = f"{network}-{index}"
            handle = engine.create_raw(node_create_kwargs(name, network, set_id, index not in plain))
            engine.start(handle)
            handles.append((name, handle, ca if index not in plain else None))
        nodes = []
        for name, handle, node_ca in handles:
            address = engine.address(handle, network)
            files = None
            if node_ca is not None:  # its certificate names the address it just got; its dockerd waits for it
                engine.put_archive(handle, "/etc", server_archive(node_ca, name, address))
                files = node_ca.client
            url = f"https://{address}:{TLS_PORT}" if files else f"tcp://{address}:{PLAIN_PORT}"
            node = NodeEngine(name, HostSpec(url, files))
            wait_ready(node, started)
            progress(f"node {name} answers at {url} ({time.monotonic() - started:.1f} s after the first start)")
            nodes.append(node)
        return NodeSet(set_id, network, tuple(nodes), str(ca.directory) if ca else None)
    except BaseException:
        engine.remove_matching([f"{LABEL_NODES}={set_id}"])
        shutil.rmtree(cache_dir() / "nodes" / set_id, ignore_errors=True)
        raise


def stop_nodes(set_id: str | None = None) -> tuple[int, int]:
    """Remove the node set ``set_id`` (None: every node set), its volumes and its local TLS files."""
    engine = Engine("nodes-down")
    removed = engine.remove_matching([f"{LABEL_NODES}={set_id}" if set_id else LABEL_NODES])
    shutil.rmtree(cache_dir() / "nodes" / set_id if set_id else cache_dir() / "nodes", ignore_errors=True)
    return removed


def _tls_dir(set_id: str) -> Path:
    return cache_dir() / "nodes" / set_id / "tls"


def wait_ready(node: NodeEngine, started: float) -> None:
    while True:
        try:
            Engine("nodes-probe", host=node.host).client.close()
            return
        except EngineError as exc:
            if time.monotonic() - started > READY_TIMEOUT_S:
                raise EngineError(f"node {node.name} did not answer at {node.url} within {READY_TIMEOUT_S:g} s: {exc}") from None
        time.sleep(0.3)
