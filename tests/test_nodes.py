"""Node Engines without Docker: the container a node is (no --privileged, every capability but SYS_RESOURCE, the
cgroup tree, /var/lib/docker on an anonymous volume removed with it), the TLS node's dockerd, bad requests as
one line, and how a node set is shown. Starting real ones: tests/test_hosts_docker.py."""

from __future__ import annotations

import pytest

from harness.errors import BadInput
from harness.hosts import HostSpec, TlsFiles
from harness.nodes import LABEL_NODES, NodeEngine, NodeSet, node_create_kwargs, start_nodes


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


def test_the_tls_node_makes_its_certificates_and_verifies_clients() -> None:
    command = node_create_kwargs("n", "net", "x", tls=True)["entrypoint"][-1]
    assert "openssl req -x509" in command and "subjectAltName=IP:%s" in command
    assert "--host=tcp://0.0.0.0:2376 --tlsverify --tlscacert=ca.pem" in command and "2375" not in command


@pytest.mark.parametrize(
    ("count", "tls", "expected"),
    [
        (0, (), "expected 1..8 node Engines; got 0"),
        (9, (), "expected 1..8 node Engines; got 9"),
        (2, (2,), "--tls expects node indexes 0..1; got 2"),
        (3, (0, 1), "at most one TLS node"),
    ],
)
def test_bad_node_requests_are_refused_before_docker_is_asked(count: int, tls: tuple[int, ...], expected: str) -> None:
    with pytest.raises(BadInput, match=expected):
        start_nodes(count, tls)


def test_a_node_set_prints_the_hosts_option_and_the_tls_files() -> None:
    files = TlsFiles("/c/ca.pem", "/c/cert.pem", "/c/key.pem")
    nodes = (NodeEngine("n0", HostSpec("tcp://10.1.0.2:2375")), NodeEngine("n1", HostSpec("https://10.1.0.3:2376", files)))
    text = NodeSet("ab12", "distval-nodes-ab12", nodes, "/c").describe()
    assert "--hosts tcp://10.1.0.2:2375,https://10.1.0.3:2376\n" in text
    assert "DOCKER_CERT_PATH=/c " in text and "  node 1: https://10.1.0.3:2376  (n1)\n" in text
