"""Which network interface carries the scenario's network, found from inside the container.

A container on several networks must tell gloo and NCCL which interface to use (GLOO_SOCKET_IFNAME,
NCCL_SOCKET_IFNAME; a concrete name: gloo does not take NCCL's ``^lo`` exclusion syntax, aws-do-eks#51).
The harness knows the scenario network's subnets; the interface holding an address in one of them is
the answer, whatever Docker named it. Standard library only: unit-tested on the host.
"""

from __future__ import annotations

import fcntl
import ipaddress
import socket
import struct
from typing import Any, Callable, Dict, List, MutableMapping, Optional

SIOCGIFADDR = 0x8915


def ipv4_addresses() -> Dict[str, str]:
    """Interface name -> its IPv4 address, for every interface that has one."""
    found: Dict[str, str] = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        for _, name in socket.if_nameindex():
            try:
                packed = fcntl.ioctl(probe.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue
            found[name] = socket.inet_ntoa(packed[20:24])
    return found


def ipv6_addresses() -> Dict[str, List[str]]:
    """Interface name -> its IPv6 addresses (from /proc/net/if_inet6)."""
    found: Dict[str, List[str]] = {}
    try:
        with open("/proc/net/if_inet6", encoding="ascii") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return found
    for line in lines:
        fields = line.split()
        if len(fields) >= 6:
            address = str(ipaddress.IPv6Address(bytes.fromhex(fields[0])))
            found.setdefault(fields[5], []).append(address)
    return found


def interface_for(subnets: List[str]) -> Optional[str]:
    """The interface with an address in one of ``subnets`` (CIDR strings), or None."""
    networks = [ipaddress.ip_network(s, strict=False) for s in subnets]
    for name, address in sorted(ipv4_addresses().items()):
        if any(ipaddress.ip_address(address) in n for n in networks if n.version == 4):
            return name
    for name, addresses in sorted(ipv6_addresses().items()):
        if any(ipaddress.ip_address(a) in n for a in addresses for n in networks if n.version == 6):
            return name
    return None


# The variables naming the interface, one per library that opens its own sockets.
SOCKET_IFNAME_VARIABLES = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")


def parse_subnets(value: Any) -> List[str]:
    """The spec's ``subnets``: a list of CIDR strings, or one comma-separated string
    (``"172.18.0.0/16,fd12::/64"``); absent or empty means none."""
    if not value:
        return []
    items = value.split(",") if isinstance(value, str) else [str(item) for item in value]
    return [item.strip() for item in items if item.strip()]


def select_socket_interfaces(
    subnets: List[str],
    environ: MutableMapping[str, str],
    find: Callable[[List[str]], Optional[str]] = interface_for,
) -> Dict[str, str]:
    """Set GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME in ``environ`` to the interface on the scenario's
    network, each unless the image or the scenario already set it. Returns every variable's value in
    use (set before or now); a variable with no value is absent."""
    chosen: Dict[str, str] = {}
    found: Optional[str] = None
    looked = False
    for variable in SOCKET_IFNAME_VARIABLES:
        if environ.get(variable):
            chosen[variable] = environ[variable]
            continue
        if not subnets:
            continue
        if not looked:
            found, looked = find(subnets), True
        if found is not None:
            environ[variable] = found
            chosen[variable] = found
    return chosen
