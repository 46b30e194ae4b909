"""distval.results.nccl_transport on NCCL_DEBUG=INFO output shaped like real logs (hosts, pids and bus ids
made up; the line formats are NCCL's, old and new: ``Channel 09 :`` and ``Channel 00/0 :``, device
indices and PCI bus ids, ``[send]``/``[receive]`` on network connections, launcher prefixes)."""

from __future__ import annotations

import pytest

from distval.results.nccl_transport import Connection, describe, parse_connections, transport_name, transports_between

# Two ranks in one container on two GPUs with peer access.
ONE_CONTAINER = """\
node-a:101:140 [0] NCCL INFO Bootstrap : Using eth0:172.18.0.2<0>
node-a:101:140 [0] NCCL INFO NET/Socket : Using [0]eth0:172.18.0.2<0>
node-a:101:140 [0] NCCL INFO Using network Socket
node-a:101:140 [0] NCCL INFO Channel 00/02 :    0   1
node-a:101:140 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read
node-a:102:141 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/IPC/read
node-a:101:140 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/IPC/read
node-a:102:141 [1] NCCL INFO Channel 01/0 : 1[1] -> 0[0] via P2P/IPC/read
node-a:101:140 [0] NCCL INFO Connected all rings
node-a:101:140 [0] NCCL INFO comm 0x55d0 rank 0 nranks 2 cudaDev 0 busId 18000 commId 0x5f2e - Init COMPLETE
"""

# Two containers on one host: no shared IPC namespace, so shared memory or sockets.
TWO_CONTAINERS_RANK0 = """\
[rank0]:rank0-host:55:90 [0] NCCL INFO Channel 00/0 : 1[1] -> 0[0] [receive] via NET/Socket/0
[rank0]:rank0-host:55:90 [0] NCCL INFO Channel 01/0 : 1[1] -> 0[0] [receive] via NET/Socket/0
[rank0]:rank0-host:55:90 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0
"""
TWO_CONTAINERS_RANK1 = """\
[rank1]:rank1-host:56:91 [1] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [receive] via NET/Socket/0
[rank1]:rank1-host:56:91 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] [send] via NET/Socket/0
"""

# An older NCCL on a multi-node job: bus ids, SHM inside a node, InfiniBand with GPUDirect between nodes.
OLDER_MULTI_NODE = """\
gpu-01:16194:18583 [3] NCCL INFO Channel 00 : 2[3e000] -> 3[3f000] via SHM/direct/direct
gpu-01:16194:18586 [3] NCCL INFO Channel 03 : 3[3f000] -> 4[1a000] [send] via NET/IB/0/GDRDMA
gpu-02:41626:45223 [0] NCCL INFO Channel 03 : 3[3f000] -> 4[1a000] [receive] via NET/IB/0/GDRDMA
gpu-02:41626:45219 [1] NCCL INFO Channel 02 : 5[1b000] -> 4[1a000] via P2P/direct pointer
2026-11-12 20:42:20,261 - INFO - gpu-02:41626:45219 [1] NCCL INFO Channel 04/1 : 5[1] -> 4[0] via P2P/CUMEM/read
gpu-02:41626:45219 [1] NCCL INFO Channel 05/0 : 5[1] -> 6[2] [send] via NET/IBext_v8/1/GDRDMA
"""


def test_a_line_becomes_a_connection() -> None:
    (connection,) = parse_connections("h:1:2 [7] NCCL INFO Channel 03/0 : 15[7] -> 6[6] [send] via NET/Socket/3\n")
    assert connection == Connection("03/0", 15, 6, "7", "6", "send", "NET/Socket/3")
    assert connection.transport == "NET/Socket"


@pytest.mark.parametrize(
    ("via", "name"),
    [
        ("P2P/IPC/read", "P2P"),
        ("P2P/IPC", "P2P"),
        ("P2P/direct pointer", "P2P"),
        ("P2P/CUMEM/read", "P2P"),
        ("SHM/direct/direct", "SHM"),
        ("NET/Socket/0", "NET/Socket"),
        ("NET/IB/0/GDRDMA", "NET/IB"),
        ("NET/IBext_v8/1/GDRDMA", "NET/IBext_v8"),
    ],
)
def test_transport_name(via: str, name: str) -> None:
    assert transport_name(via) == name


def test_one_container_with_peer_access_is_p2p() -> None:
    assert transports_between([ONE_CONTAINER]) == {(0, 1): ("P2P",)}
    assert describe(transports_between([ONE_CONTAINER])) == "0-1 P2P"


def test_separate_containers_show_sockets_from_either_rank_log() -> None:
    both = transports_between([TWO_CONTAINERS_RANK0, TWO_CONTAINERS_RANK1])
    assert both == {(0, 1): ("NET/Socket",)}
    assert transports_between([TWO_CONTAINERS_RANK1]) == both


def test_several_pairs_and_transports() -> None:
    pairs = transports_between([OLDER_MULTI_NODE])
    assert pairs == {(2, 3): ("SHM",), (3, 4): ("NET/IB",), (4, 5): ("P2P",), (5, 6): ("NET/IBext_v8",)}
    assert describe(pairs) == "2-3 SHM; 3-4 NET/IB; 4-5 P2P; 5-6 NET/IBext_v8"
    assert [c.direction for c in parse_connections(OLDER_MULTI_NODE)] == ["", "send", "receive", "", "", "send"]
    assert parse_connections(OLDER_MULTI_NODE)[0].source_device == "3e000"


def test_a_pair_with_two_transports_lists_both() -> None:
    text = ONE_CONTAINER + "node-a:101:140 [0] NCCL INFO Channel 02/0 : 0[0] -> 1[1] via SHM/direct/direct\n"
    assert transports_between([text]) == {(0, 1): ("P2P", "SHM")}


def test_lines_that_are_not_connections_give_nothing() -> None:
    text = (
        "node-a:101:140 [0] NCCL INFO Channel 00/02 :    0   1\n"
        "node-a:101:140 [0] NCCL INFO Connected all rings\n"
        "distval: rank 0 all_reduce passed ...\n"
        "node-a:101:140 [0] NCCL WARN Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read\n"  # only INFO lines count
    )
    assert parse_connections(text) == []
    assert transports_between([text]) == {}
    assert describe({}).startswith("no NCCL connection lines found")
