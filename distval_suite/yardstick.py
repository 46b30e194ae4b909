"""The bandwidth check's yardstick: the raw TCP throughput the ranks reach between each other, measured with plain
sockets in the same containers and over the same network as the collectives, so that a busbw figure can be read
as an efficiency (busbw / raw TCP) that means the same on a laptop and on a CI runner.

Standard library only (the suite's rule: distval_suite/ imports the standard library and torch; this module needs
no torch, so that it is unit-tested on the host with two threads on loopback).

What is measured. The links a ring collective uses: rank r to rank r+1 (mod n); with two ranks that is one
link. Each rank listens on an ephemeral port, and the ranks share where to reach them (network namespace,
address, port) through the rendezvous store (the caller's ``exchange``, the same one the bandwidth check agrees
on its counts with). Two ranks in one network namespace (one container) connect over loopback; others connect
to the address of the interface gloo uses (GLOO_SOCKET_IFNAME, which the suite sets from the scenario's
subnets), else to what the hostname resolves to, as gloo does. On each link, for each size of the sweep, both
directions in turn: the sender times each message from its first byte sent until a one-byte
acknowledgement came back (so its time covers delivery, as a collective's call does), ``warmup`` untimed
messages first, then at least ``iterations`` timed ones, and more until they add up to ``min_time_s`` (at
most ``max_iterations``): the bandwidth sweep's own rules. The figure of a direction is the median; the
figure of a size is the slowest direction of the slowest link, since a collective is as slow as its slowest
link.

Order. Rank r connects to r+1 and accepts r-1; even ranks measure their link to r+1 first, odd ranks their
link to r-1 first, so that neighbours wait for each other and never all for the next one (no cycle of
waits, for any n). Every socket operation has a timeout, and the whole measurement a deadline: a peer that
never connects or stops answering is a YardstickError, never a hang; every socket is closed on every path.
"""

from __future__ import annotations

import math
import os
import socket
import statistics
import struct
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from distval_suite.network import ipv4_addresses, ipv6_addresses

# One rank's value for every rank, in rank order (distval_suite.core.Context.exchange).
Exchange = Callable[[str, Any], List[Any]]

# Every message is a length, then that many bytes; length 0 ends a direction.
HEADER = struct.Struct("!Q")
# The connector's first message: a magic number and its rank, so that a stray connection is refused.
HELLO = struct.Struct("!8sQ")
MAGIC = b"distvalY"
ACK = b"\x06"
# A message larger than this from a peer is not one of ours (the sweep stops at 1 GiB).
MAX_MESSAGE = 1024**3
DEFAULT_MAX_ITERATIONS = 1000


class YardstickError(Exception):
    """The yardstick could not be measured: a peer never connected, stopped answering or broke the protocol."""


def ring_links(world: int) -> List[Tuple[int, int]]:
    """The links of a ring of ``world`` ranks as (connector, acceptor): (r, r+1 mod n); one link for two ranks."""
    if world < 2:
        return []
    if world == 2:
        return [(0, 1)]
    return [(r, (r + 1) % world) for r in range(world)]


def network_namespace() -> str:
    """This process's network namespace, as the kernel names it (``net:[4026531840]``), with the host's name: two
    ranks with the same value reach each other over loopback."""
    try:
        namespace = os.readlink("/proc/self/ns/net")
    except OSError:
        namespace = "pid %d" % os.getpid()  # unknown: never equal to a peer's, so the address is used
    return "%s %s" % (socket.gethostname(), namespace)


def advertised_address(interface: Optional[str]) -> str:
    """The address peers in other containers reach this rank by: the address of the interface gloo uses
    (GLOO_SOCKET_IFNAME), else what the hostname resolves to (gloo's own choice without it), else loopback."""
    if interface:
        # A link-local IPv6 address needs its scope to be reached: only a global one is of use here.
        routable = [a for a in ipv6_addresses().get(interface, []) if not a.lower().startswith("fe80")]
        found = ipv4_addresses().get(interface) or (routable[0] if routable else None)
        if found:
            return found
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def _family(address: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def _loopback(address: str) -> str:
    return "::1" if ":" in address else "127.0.0.1"


def count_for(times: Sequence[float], iterations: int, min_time_s: float, max_iterations: int) -> int:
    """The timed messages of a figure in all: enough to add up to ``min_time_s`` at the median so far, at least
    ``iterations``, at most ``max_iterations`` (distval_suite/bandwidth.py's rule; here the sender alone
    decides, and tells the receiver by ending the direction)."""
    if min_time_s <= 0 or not times:
        return iterations
    median = statistics.median(times)
    wanted = int(math.ceil(min_time_s / median)) if median > 0 else max_iterations
    return max(iterations, min(max_iterations, wanted))


class _Link:
    """One connected socket to a neighbour, with the buffers of the largest message."""

    def __init__(self, sock: socket.socket, peer: int, connector: bool, largest: int) -> None:
        self.sock = sock
        self.peer = peer
        self.connector = connector
        self.buffer = bytearray(max(largest, 1))

    def receive_exact(self, count: int) -> memoryview:
        view = memoryview(self.buffer)[:count]
        got = 0
        while got < count:
            # MSG_WAITALL on a blocking socket: the kernel fills the message in one call (as gloo's C++ read loop
            # does without the GIL), instead of one Python call per arriving segment.
            n = self.sock.recv_into(view[got:], count - got, socket.MSG_WAITALL)
            if n == 0:
                raise YardstickError("rank %d closed the connection" % self.peer)
            got += n
        return view

    def receive_small(self, count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            if not chunk:
                raise YardstickError("rank %d closed the connection" % self.peer)
            data += chunk
        return data

    def send_direction(
        self, size: int, warmup: int, iterations: int, min_time_s: float, max_iterations: int, deadline: float
    ) -> List[float]:
        """Send messages of ``size`` bytes back to back, each until its acknowledgement; the timed seconds."""
        payload = memoryview(self.buffer)[:size]
        header = HEADER.pack(size)
        times: List[float] = []
        total = warmup + iterations
        sent = 0
        while sent < total:
            _check_deadline(deadline, self.peer)
            started = time.perf_counter()
            self.sock.sendall(header)
            self.sock.sendall(payload)
            if self.receive_small(1) != ACK:
                raise YardstickError("rank %d answered a message with something other than its acknowledgement" % self.peer)
            elapsed = time.perf_counter() - started
            if sent >= warmup:
                times.append(elapsed)
            sent += 1
            if sent == warmup + iterations:
                total = warmup + count_for(times, iterations, min_time_s, max_iterations)
        self.sock.sendall(HEADER.pack(0))
        return times

    def receive_direction(self, deadline: float) -> int:
        """Receive and acknowledge messages until the sender ends the direction; the messages received."""
        received = 0
        while True:
            _check_deadline(deadline, self.peer)
            (size,) = HEADER.unpack(self.receive_small(HEADER.size))
            if size == 0:
                return received
            if size > min(MAX_MESSAGE, len(self.buffer)):
                raise YardstickError("rank %d announced a message of %d bytes, more than the sweep's largest" % (self.peer, size))
            self.receive_exact(size)
            self.sock.sendall(ACK)
            received += 1


def _check_deadline(deadline: float, peer: int) -> None:
    if time.monotonic() > deadline:
        raise YardstickError("the yardstick ran past its deadline while measuring the link with rank %d" % peer)


def _listen(family: socket.AddressFamily, timeout_s: float) -> socket.socket:
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Every address of the container: loopback for ranks beside this one, the scenario's network for the others.
        listener.bind(("::" if family == socket.AF_INET6 else "0.0.0.0", 0))
        listener.listen(8)
        listener.settimeout(timeout_s)
    except BaseException:
        listener.close()
        raise
    return listener


def _tune(sock: socket.socket, timeout_s: float) -> None:
    # gloo sets TCP_NODELAY on its sockets too: a small message goes out at once, not after the last ack.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    # A blocking socket whose timeout is the kernel's (SO_RCVTIMEO, SO_SNDTIMEO: a call that waits longer fails
    # with EAGAIN), not Python's settimeout: that one makes the socket non-blocking and polls before every call,
    # so a large message took one poll and one recv per arriving segment (two processes on this 2-core host's
    # loopback at load 8-10: 1.0-1.4 GB/s at 1-64 MiB that way, 1.6-2.0 with the kernel's timeout and MSG_WAITALL).
    sock.settimeout(None)
    seconds = int(timeout_s)
    timeval = struct.pack("ll", seconds, int((timeout_s - seconds) * 1e6))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)


def _connect(address: str, port: int, rank: int, peer: int, largest: int, timeout_s: float) -> _Link:
    sock = socket.socket(_family(address), socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout_s)  # Python's timeout for the connect alone; the kernel's for the messages (_tune)
        sock.connect((address, port))
        _tune(sock, timeout_s)
        sock.sendall(HELLO.pack(MAGIC, rank))
    except OSError as exc:  # refused, unreachable, timed out
        sock.close()
        raise YardstickError("could not connect to rank %d at %s port %d: %s" % (peer, address, port, _said(exc))) from exc
    except BaseException:
        sock.close()
        raise
    return _Link(sock, peer, True, largest)


def _accept(listener: socket.socket, peer: int, largest: int, timeout_s: float, deadline: float) -> _Link:
    """The connection of ``peer``; a connection that does not say it is that peer is closed and waited past."""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise YardstickError("rank %d never connected (waited until the yardstick's deadline)" % peer)
        listener.settimeout(min(timeout_s, remaining))
        try:
            sock, _ = listener.accept()
        except socket.timeout as exc:
            raise YardstickError("rank %d never connected within %g s" % (peer, min(timeout_s, remaining))) from exc
        try:
            _tune(sock, timeout_s)
            link = _Link(sock, peer, False, largest)
            magic, rank = HELLO.unpack(link.receive_small(HELLO.size))
        except (OSError, YardstickError):
            sock.close()
            continue
        except BaseException:
            sock.close()
            raise
        if magic == MAGIC and rank == peer:
            return link
        sock.close()


def _said(exc: BaseException) -> str:
    text = str(exc).strip()
    return "%s: %s" % (type(exc).__name__, text) if text else type(exc).__name__


def measure(
    exchange: Exchange,
    rank: int,
    world: int,
    sizes: Sequence[int],
    warmup: int,
    iterations: int,
    min_time_s: float,
    timeout_s: float,
    interface: Optional[str] = None,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
    limit_s: Optional[float] = None,
) -> Dict[str, Any]:
    """Measure the ring's links and return what every rank agrees on (JSON-able, the same on every rank):

    - ``sizes``: per size, ``tcp_gbps`` (the slowest direction of the slowest link: bytes / median time / 1e9),
      ``time_us`` (its median), ``slowest`` (``"0->1"``: sender -> receiver), ``iterations`` (its timed messages)
      and ``best_tcp_gbps`` (the lowest of every direction's fastest message);
    - ``pairs``: every direction's GB/s per size, as ``{"from", "to", "tcp_gbps": [...]}``;
    - ``path``: ``loopback`` when every link stays in one network namespace, else the addresses used;
    - ``seconds``: how long this rank measured.

    ``interface``: the network interface gloo uses here (GLOO_SOCKET_IFNAME), whose address the peers in other
    containers connect to. ``timeout_s`` bounds each socket operation (a connect, an accept, a message and its
    acknowledgement); ``limit_s`` (default: 4 x ``timeout_s``) the whole measurement. Raises YardstickError on
    every rank when a link could not be measured on any (each rank shares its outcome, a failure too).
    """
    started = time.monotonic()
    deadline = started + (limit_s if limit_s is not None else 4 * timeout_s)
    sizes = sorted({int(s) for s in sizes})
    links = ring_links(world)
    if not links or not sizes:
        return {"sizes": [], "pairs": [], "path": "none (one rank)", "seconds": 0.0}
    address = advertised_address(interface)
    listener = _listen(_family(address), timeout_s)
    opened: List[_Link] = []
    sent: Dict[int, List[float]] = {}  # peer -> median seconds per size, this rank sending
    counts: Dict[int, List[int]] = {}
    bests: Dict[int, List[float]] = {}  # peer -> fastest seconds per size, this rank sending
    problem: Optional[str] = None
    try:
        here = {"namespace": network_namespace(), "address": address, "port": listener.getsockname()[1]}
        everyone = exchange("yardstick/endpoints", here)
        try:
            for role, peer in _order(rank, links):
                if role == "connect":
                    theirs = everyone[peer]
                    same = theirs["namespace"] == here["namespace"]
                    target = _loopback(address) if same else str(theirs["address"])
                    link = _connect(target, int(theirs["port"]), rank, peer, sizes[-1], timeout_s)
                else:
                    link = _accept(listener, peer, sizes[-1], timeout_s, deadline)
                opened.append(link)
                sent[peer], bests[peer], counts[peer] = _measure_link(
                    link, sizes, warmup, iterations, min_time_s, max_iterations, deadline
                )
                link.sock.close()  # before the next link: a neighbour waiting on it sees the end at once
                link.buffer = bytearray()  # the largest message's buffer, not kept for the next link
        except YardstickError as exc:
            problem = str(exc)
        except (socket.timeout, BlockingIOError):  # BlockingIOError: SO_RCVTIMEO or SO_SNDTIMEO ran out
            problem = "rank %d did not answer within %g s" % (peer, timeout_s)
        except OSError as exc:  # a reset, a refused connection: the peer went away
            problem = "the link with rank %d failed: %s" % (peer, _said(exc))
    finally:
        for link in opened:
            link.sock.close()
        listener.close()
    seconds = time.monotonic() - started
    # Every rank shares its outcome, a failure too, so that all of them reach the same verdict at once instead
    # of waiting for a value that a failed rank would never share.
    shared = exchange(
        "yardstick/results",
        {
            "sent": {str(p): m for p, m in sent.items()},
            "counts": {str(p): c for p, c in counts.items()},
            "bests": {str(p): b for p, b in bests.items()},
            "problem": problem,
        },
    )
    problems = ["rank %d: %s" % (r, value["problem"]) for r, value in enumerate(shared) if value.get("problem")]
    if problems:
        raise YardstickError("; ".join(problems))
    same_namespace = len({e["namespace"] for e in everyone}) == 1
    path = (
        "loopback"
        if same_namespace
        else "%s, addresses %s"
        % (
            "interface %s" % interface if interface else "the hostname's address",
            ", ".join(str(e["address"]) for e in everyone),
        )
    )
    return summarize(sizes, shared, path, seconds)


def _order(rank: int, links: Sequence[Tuple[int, int]]) -> List[Tuple[str, int]]:
    """This rank's links in the order it measures them: even ranks their link to r+1 first, odd ranks their
    link to r-1 first (see the module's doc: no cycle of waits)."""
    order = [("connect", b) for a, b in links if a == rank] + [("accept", a) for a, b in links if b == rank]
    return list(reversed(order)) if rank % 2 == 1 else order


def _measure_link(
    link: _Link, sizes: Sequence[int], warmup: int, iterations: int, min_time_s: float, max_iterations: int, deadline: float
) -> Tuple[List[float], List[float], List[int]]:
    """Both directions of one link at every size (the connector sends first); this rank's median seconds,
    fastest seconds and timed messages per size as the sender."""
    medians: List[float] = []
    bests: List[float] = []
    numbers: List[int] = []
    for size in sizes:
        for sending in (link.connector, not link.connector):
            if sending:
                times = link.send_direction(size, warmup, iterations, min_time_s, max_iterations, deadline)
                medians.append(statistics.median(times))
                bests.append(min(times))
                numbers.append(len(times))
            else:
                link.receive_direction(deadline)
    return medians, bests, numbers


def summarize(sizes: Sequence[int], shared: Sequence[Dict[str, Any]], path: str, seconds: float) -> Dict[str, Any]:
    """Every rank's medians as sender -> the slowest direction per size and every direction's GB/s."""
    pairs: List[Dict[str, Any]] = []
    for sender, value in enumerate(shared):
        for receiver, medians in sorted(value["sent"].items(), key=lambda item: int(item[0])):
            counts = value["counts"][receiver]
            fastest = value["bests"][receiver]
            pairs.append(
                {
                    "from": sender,
                    "to": int(receiver),
                    "tcp_gbps": [_gbps(sizes[i], float(m)) for i, m in enumerate(medians)],
                    "time_us": [round(float(m) * 1e6, 3) for m in medians],
                    "iterations": [int(c) for c in counts],
                    "best_tcp_gbps": [_gbps(sizes[i], float(b)) for i, b in enumerate(fastest)],
                }
            )
    figures: List[Dict[str, Any]] = []
    for index, size in enumerate(sizes):
        slowest = min(pairs, key=lambda p: p["tcp_gbps"][index])
        figures.append(
            {
                "size": size,
                "tcp_gbps": slowest["tcp_gbps"][index],
                "time_us": slowest["time_us"][index],
                "slowest": "%d->%d" % (slowest["from"], slowest["to"]),
                "iterations": slowest["iterations"][index],
                # The slowest direction's fastest message: what the link reached at best, which a shared machine's
                # noise (it only ever slows a message down) moves far less than the median.
                "best_tcp_gbps": min(p["best_tcp_gbps"][index] for p in pairs),
            }
        )
    return {"sizes": figures, "pairs": pairs, "path": path, "seconds": round(seconds, 3)}


def _gbps(size: int, seconds: float) -> float:
    return round(size / seconds / 1e9, 6) if seconds > 0 else 0.0


def nominal_link(interface: Optional[str], sys_class_net: str = "/sys/class/net") -> Dict[str, Any]:
    """The interface the backend's sockets use and its nominal speed where the kernel reports one
    (``/sys/class/net/<if>/speed``, Mb/s): ``{"interface": "eth0", "nominal_gbps": 1.25}`` (GB/s, as busbw
    counts). Loopback, a down link or a driver that reports none (-1, or EINVAL on read): ``nominal_gbps`` None.
    A veth reports 10000 whatever it carries: a nominal speed names the link, it does not measure it."""
    if not interface:
        return {"interface": None, "nominal_gbps": None}
    speed: Optional[float] = None
    try:
        with open(os.path.join(sys_class_net, os.path.basename(interface), "speed"), encoding="ascii") as handle:
            megabits = int(handle.read(32).strip())
        if megabits > 0:
            speed = round(megabits / 8000.0, 6)  # Mb/s -> GB/s (10^9 bytes)
    except (OSError, ValueError):
        pass
    return {"interface": interface, "nominal_gbps": speed}


def efficiency(busbw_gbps: float, tcp_gbps: float) -> Optional[float]:
    """busbw / raw TCP at the same size, rounded to 4 decimals (a ratio: more digits are noise); None without a
    yardstick figure."""
    if not tcp_gbps > 0 or not math.isfinite(tcp_gbps) or not math.isfinite(busbw_gbps):
        return None
    return round(busbw_gbps / tcp_gbps, 4)
