"""What the harness learns on one Docker host before a scenario across several hosts: run in a short container
with host networking (``python3 -m distval_suite.host_probe TOWARD PORTS``), it prints one JSON line with

- ``address``: this host's source address on the route toward TOWARD (a name or an address: the other hosts'
  rendezvous point, or TOWARD itself when it is one of this host's addresses);
- ``interface``: the interface holding that address (GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME for this host);
- ``ports``: PORTS distinct TCP ports free on this host now (bound to port 0, then released), for the
  rendezvous.

Learned, not assumed: interface names differ between hosts. Standard library only, Python >= 3.9.
"""

import json
import socket
import sys
from typing import Dict, List

from distval_suite.network import ipv4_addresses


def source_address(toward: str) -> str:
    """The local address the kernel picks for traffic to ``toward`` (a UDP connect sends nothing)."""
    target = socket.getaddrinfo(toward, 9, socket.AF_INET, socket.SOCK_DGRAM)[0][4][0]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((target, 9))
        return str(probe.getsockname()[0])


def interface_of(address: str, addresses: Dict[str, str]) -> str:
    for name, value in sorted(addresses.items()):
        if value == address:
            return name
    return ""


def free_ports(count: int) -> List[int]:
    sockets = []
    try:
        for _ in range(count):
            server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            server.bind(("0.0.0.0", 0))
            sockets.append(server)
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for server in sockets:
            server.close()


def main(argv: List[str]) -> int:
    toward, count = argv[0], int(argv[1])
    address = source_address(toward)
    print(json.dumps({"address": address, "interface": interface_of(address, ipv4_addresses()), "ports": free_ports(count)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
