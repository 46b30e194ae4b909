"""Node Engines without Docker: the container a node is (no --privileged, every capability but SYS_RESOURCE, the
cgroup tree, /var/lib/docker on an anonymous volume removed with it), the TLS node's dockerd, the certificates
made here, bad requests as one line, and how a node set is shown. Starting real ones:
tests/targets/engines/test_hosts_docker.py."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest

import distval.targets.engines.dind
from distval.config.engine_hosts import HostSpec, TlsFiles
from distval.errors import BadInput
from distval.plan.specs import NetworkPlan
from distval.targets.engines.dind import LABEL_NODES, NodeEngine, NodeSet, node_create_kwargs, start_nodes


def test_a_node_is_docker_in_docker_without_privileged() -> None:
    kwargs = node_create_kwargs("distval-nodes-x-0", "distval-nodes-x", "x", tls=False)
    assert "privileged" not in kwargs
    assert kwargs["cap_add"] == ["ALL"] and kwargs["cap_drop"] == ["SYS_RESOURCE"]
    assert kwargs["security_opt"] == ["seccomp=unconfined"]
    mounts = {m["Target"]: m for m in kwargs["mounts"]}
    assert mounts["/sys/fs/cgroup"]["Type"] == "bind" and not mounts["/sys/fs/cgroup"]["ReadOnly"]
    assert mounts["/var/lib/docker"]["Type"] == "volume" and "Source" not in mounts["/var/lib/docker"]  # anonymous
    assert kwargs["labels"] == {LABEL_NODES: "x"} and kwargs["network"] == "distval-nodes-x"
    command = kwargs["entrypoint"][-1]
    assert "--host=tcp://0.0.0.0:2375 --tls=false" in command and "--storage-driver=overlay2" in command


def test_the_tls_node_waits_for_its_certificates_and_verifies_clients() -> None:
    command = node_create_kwargs("n", "net", "x", tls=True)["entrypoint"][-1]
    assert "openssl" not in command  # made on this machine: the CA's key never enters a node
    assert command.startswith("while [ ! -e /etc/distval-tls/ready ]")
    assert "--host=tcp://0.0.0.0:2376 --tlsverify --tlscacert=ca.pem" in command and "2375" not in command


@pytest.mark.parametrize(
    ("count", "plain", "expected"),
    [
        (0, (), "expected 1..8 node Engines; got 0"),
        (9, (), "expected 1..8 node Engines; got 9"),
        (2, (2,), "--plain expects node indexes 0..1; got 2"),
    ],
)
def test_bad_node_requests_are_refused_before_docker_is_asked(count: int, plain: tuple[int, ...], expected: str) -> None:
    with pytest.raises(BadInput, match=expected):
        start_nodes(count, plain)


class NodeDocker:
    """The Engine start_nodes drives, recorded: networks, node containers, archives put in, and every client."""

    networks: list[NetworkPlan] = []
    created: list[dict[str, Any]] = []
    archives: dict[str, bytes] = {}
    clients: list[HostSpec | None] = []

    def __init__(self, run_id: str, host: HostSpec | None = None) -> None:
        NodeDocker.clients.append(host)
        self.client = self

    def close(self) -> None:
        pass

    def create_network(self, network: NetworkPlan) -> None:
        NodeDocker.networks.append(network)

    def create_raw(self, kwargs: dict[str, Any]) -> str:
        NodeDocker.created.append(kwargs)
        return str(kwargs["name"])

    def start(self, handle: str) -> None:
        pass

    def address(self, handle: str, network: str) -> str:
        return f"10.9.0.{int(handle.rsplit('-', 1)[1]) + 2}"

    def put_archive(self, handle: str, path: str, data: bytes) -> None:
        assert path == "/etc"
        NodeDocker.archives[handle] = data

    def remove_matching(self, labels: list[str]) -> tuple[int, int]:
        return 0, 0


@pytest.fixture
def node_docker(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> type[NodeDocker]:
    NodeDocker.networks, NodeDocker.created, NodeDocker.archives, NodeDocker.clients = [], [], {}, []
    monkeypatch.setattr(distval.targets.engines.dind, "Engine", NodeDocker)
    monkeypatch.setattr(distval.targets.engines.dind, "build_fixtures", lambda *args: None)
    monkeypatch.setattr(distval.targets.engines.dind, "cache_dir", lambda: tmp_path / "cache")
    return NodeDocker


def test_nodes_serve_tls_by_default_on_an_internal_network_with_private_keys(node_docker: Any, tmp_path: Path) -> None:
    node_set = start_nodes(2, set_id="ab12")
    (network,) = node_docker.networks
    assert network.internal  # nothing outside this machine reaches the node Engines, and they reach nothing
    assert [n.url for n in node_set.nodes] == ["https://10.9.0.2:2376", "https://10.9.0.3:2376"]
    assert all("--tlsverify" in kwargs["entrypoint"][-1] for kwargs in node_docker.created)
    tls = Path(node_set.tls_dir or "")
    assert tls == tmp_path / "cache" / "nodes" / "ab12" / "tls" and tls.stat().st_mode & 0o777 == 0o700
    files = node_set.nodes[0].host.tls
    assert files == node_set.nodes[1].host.tls == TlsFiles(str(tls / "ca.pem"), str(tls / "cert.pem"), str(tls / "key.pem"))
    modes = {p.name: p.stat().st_mode & 0o777 for p in tls.iterdir()}
    assert modes == {"ca.pem": 0o644, "ca-key.pem": 0o600, "cert.pem": 0o644, "key.pem": 0o600}
    # Every client distval made for the nodes (the readiness probes) went over TLS with the set's client files.
    assert [c.url for c in node_docker.clients if c] == [n.url for n in node_set.nodes]
    assert all(c.tls == files for c in node_docker.clients if c)
    for index, node in enumerate(node_set.nodes):
        with tarfile.open(fileobj=io.BytesIO(node_docker.archives[node.name])) as tar:
            members = {m.name: m for m in tar.getmembers()}
            assert set(members) == {
                f"distval-tls{suffix}" for suffix in ("", "/ca.pem", "/server.pem", "/server-key.pem", "/ready")
            }
            assert members["distval-tls/server-key.pem"].mode == 0o600 and members["distval-tls"].mode == 0o700
            assert tar.getnames()[-1] == "distval-tls/ready"  # last: dockerd starts only once the rest is there
            server = tar.extractfile("distval-tls/server.pem").read()  # type: ignore[union-attr]
        text = subprocess.run(["openssl", "x509", "-noout", "-text"], input=server, capture_output=True, check=True).stdout
        assert f"IP Address:10.9.0.{index + 2}".encode() in text and b"TLS Web Server Authentication" in text
        (tmp_path / "server.pem").write_bytes(server)
        verified = subprocess.run(["openssl", "verify", "-CAfile", files.ca, str(tmp_path / "server.pem")], capture_output=True)
        assert verified.returncode == 0, verified.stderr


def test_a_plain_node_is_asked_for_by_index(node_docker: Any) -> None:
    node_set = start_nodes(2, plain=[0])
    assert [n.url for n in node_set.nodes] == ["tcp://10.9.0.2:2375", "https://10.9.0.3:2376"]
    assert list(node_docker.archives) == [node_set.nodes[1].name] and node_set.nodes[0].host.tls is None
    assert start_nodes(1, plain=[0]).tls_dir is None  # no TLS node: no CA made


def test_a_key_file_is_never_written_through_a_link_or_into_a_shared_directory(tmp_path: Path) -> None:
    from distval.targets.engines.dind_tls import private_directory, write_file

    (tmp_path / "target").write_text("")
    os.symlink(tmp_path / "target", tmp_path / "key.pem")
    with pytest.raises(OSError):
        write_file(tmp_path / "key.pem", b"secret", 0o600)
    assert (tmp_path / "target").read_text() == ""
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    with pytest.raises(BadInput, match="is not a private directory"):
        private_directory(shared)


def test_a_node_set_prints_the_hosts_option_and_the_tls_files() -> None:
    files = TlsFiles("/c/ca.pem", "/c/cert.pem", "/c/key.pem")
    nodes = (NodeEngine("n0", HostSpec("tcp://10.1.0.2:2375")), NodeEngine("n1", HostSpec("https://10.1.0.3:2376", files)))
    text = NodeSet("ab12", "distval-nodes-ab12", nodes, "/c").describe()
    assert "--hosts tcp://10.1.0.2:2375,https://10.1.0.3:2376\n" in text
    assert "DOCKER_CERT_PATH=/c " in text and "  node 1: https://10.1.0.3:2376  (n1)\n" in text
    assert "  node 0: tcp://10.1.0.2:2375  (n0)  no TLS: any local user can drive it\n" in text
