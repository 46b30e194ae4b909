"""Which transport NCCL chose between each pair of ranks, read from its ``NCCL_DEBUG=INFO`` output.

NCCL logs one line per channel and connection when a communicator connects its rings and trees:

    host:1234:1290 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read
    host:1234:1290 [0] NCCL INFO Channel 09 : 6[6] -> 7[7] via SHM/direct/direct
    host:1234:1290 [7] NCCL INFO Channel 03/0 : 15[7] -> 6[6] [send] via NET/Socket/3
    host:1234:1290 [6] NCCL INFO Channel 03 : 7[b2000] -> 14[b1000] [receive] via NET/IB/0/GDRDMA

(rank[device or bus id], then the transport and its details). Ranks in separate containers fall back
to sockets unless IPC and the host hash are shared (NVIDIA/nccl#945), which users want to see. Pure
functions over text: no Docker, no NCCL.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_CONNECTION = re.compile(
    r"NCCL INFO Channel (?P<channel>\d+(?:/\d+)?)\s*:\s*"
    r"(?P<source>\d+)\[(?P<source_device>[0-9A-Fa-f]+)\]\s*->\s*(?P<target>\d+)\[(?P<target_device>[0-9A-Fa-f]+)\]"
    r"(?:\s*\[(?P<direction>send|receive)\])?\s+via\s+(?P<via>\S.*?)\s*$"
)


@dataclass(frozen=True)
class Connection:
    """One ``Channel ... via ...`` line."""

    channel: str  # "00/0" (channel/connection index) or "09" (older NCCL)
    source: int  # global rank
    target: int
    source_device: str  # CUDA device index or PCI bus id, as NCCL printed it
    target_device: str
    direction: str  # "send" or "receive" for network connections, else ""
    via: str  # as printed: "P2P/IPC/read", "SHM/direct/direct", "NET/Socket/3", "NET/IB/0/GDRDMA"

    @property
    def transport(self) -> str:
        return transport_name(self.via)


def transport_name(via: str) -> str:
    """The transport without its details: P2P/IPC/read -> P2P, SHM/direct/direct -> SHM,
    NET/Socket/3 -> NET/Socket, NET/IB/0/GDRDMA -> NET/IB, NET/IBext_v8/1 -> NET/IBext_v8."""
    parts = via.split()[0].split("/")
    if parts[0] == "NET" and len(parts) > 1:
        return "NET/" + parts[1]
    return parts[0]


def parse_connections(text: str) -> list[Connection]:
    """Every connection line in ``text`` (one rank's log or several), in order; other lines are ignored,
    whatever prefix a launcher or logger put before NCCL's own."""
    found: list[Connection] = []
    for line in text.splitlines():
        match = _CONNECTION.search(line)
        if match is None:
            continue
        found.append(
            Connection(
                channel=match["channel"],
                source=int(match["source"]),
                target=int(match["target"]),
                source_device=match["source_device"],
                target_device=match["target_device"],
                direction=match["direction"] or "",
                via=match["via"],
            )
        )
    return found


def transports_between(logs: Iterable[str]) -> dict[tuple[int, int], tuple[str, ...]]:
    """For each pair of ranks (lower rank first) that NCCL connected, the transports it used between
    them in either direction, sorted: ``{(0, 1): ("P2P",), (1, 2): ("NET/Socket",)}``."""
    pairs: dict[tuple[int, int], set[str]] = {}
    for text in logs:
        for connection in parse_connections(text):
            if connection.source == connection.target:
                continue
            key = (min(connection.source, connection.target), max(connection.source, connection.target))
            pairs.setdefault(key, set()).add(connection.transport)
    return {key: tuple(sorted(pairs[key])) for key in sorted(pairs)}


def describe(pairs: dict[tuple[int, int], tuple[str, ...]]) -> str:
    """One line for a report: ``0-1 P2P; 1-2 NET/Socket``, or why there is nothing to say."""
    if not pairs:
        return "no NCCL connection lines found (NCCL_DEBUG=INFO not set, or no communicator connected)"
    return "; ".join(f"{a}-{b} {'+'.join(transports)}" for (a, b), transports in pairs.items())
