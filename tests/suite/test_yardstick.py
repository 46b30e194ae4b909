"""The bandwidth check's yardstick (distval_suite/yardstick.py) on the host: ranks as threads on loopback, the
rendezvous store as a dictionary. It measures a positive throughput in both directions of every ring link, ends
with a YardstickError (never a hang) when a peer never connects or stops answering, and closes every socket."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from distval_suite import bandwidth_figures, yardstick
from distval_suite.yardstick import YardstickError, count_for, efficiency, measure, nominal_link, ring_links

SIZES = (4096, 65536, 1048576)


class FakeStore:
    """The rendezvous store's exchange: every rank's value for a label, in rank order, once all have shared it."""

    def __init__(self, world: int, timeout_s: float = 30.0) -> None:
        self.world = world
        self.timeout_s = timeout_s
        self.values: dict[str, dict[int, Any]] = {}
        self.changed = threading.Condition()

    def exchange(self, rank: int) -> yardstick.Exchange:
        def run(label: str, value: Any) -> list[Any]:
            with self.changed:
                self.values.setdefault(label, {})[rank] = value
                self.changed.notify_all()
                if not self.changed.wait_for(lambda: len(self.values[label]) == self.world, self.timeout_s):
                    raise RuntimeError(f"not every rank shared {label!r}")
                return [self.values[label][r] for r in range(self.world)]

        return run


def run_ranks(world: int, **kwargs: Any) -> list[Any]:
    """measure() on ``world`` threads; each rank's result or the exception it raised."""
    store = FakeStore(world)
    outcomes: list[Any] = [None] * world

    def rank_main(rank: int) -> None:
        try:
            outcomes[rank] = measure(store.exchange(rank), rank, world, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the test looks at what each rank raised
            outcomes[rank] = exc

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(world)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
        assert not thread.is_alive(), "a rank hung"
    return outcomes


def open_sockets() -> int:
    """This process's open sockets (a leaked socket shows here, whatever object still holds it)."""
    found = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            found += os.readlink(f"/proc/self/fd/{name}").startswith("socket:")
        except OSError:
            continue
    return found


QUICK = {"sizes": SIZES, "warmup": 1, "iterations": 3, "min_time_s": 0.02, "timeout_s": 10.0}


@pytest.mark.parametrize("world", [2, 3])
def test_every_ring_link_is_measured_both_ways_on_loopback(world: int) -> None:
    before = open_sockets()
    outcomes = run_ranks(world, **QUICK)
    assert not [o for o in outcomes if isinstance(o, Exception)], outcomes
    # Every rank reaches the same result (it comes from the store), but for its own time.
    assert all({**o, "seconds": 0} == {**outcomes[0], "seconds": 0} for o in outcomes)
    result = outcomes[0]
    assert result["path"] == "loopback"
    directions = {(p["from"], p["to"]) for p in result["pairs"]}
    expected = {(a, b) for a, b in ring_links(world)} | {(b, a) for a, b in ring_links(world)}
    assert directions == expected
    for pair in result["pairs"]:
        assert all(g > 0 for g in pair["tcp_gbps"])
        assert all(n >= 3 for n in pair["iterations"])
        assert all(best >= median for best, median in zip(pair["best_tcp_gbps"], pair["tcp_gbps"], strict=True))
    assert [f["size"] for f in result["sizes"]] == list(SIZES)
    for figure in result["sizes"]:
        slowest = min(p["tcp_gbps"][SIZES.index(figure["size"])] for p in result["pairs"])
        assert figure["tcp_gbps"] == slowest > 0
        sender, receiver = map(int, figure["slowest"].split("->"))
        assert (sender, receiver) in expected
    # At least the iterations asked for. How many more min_time_s adds depends on how long each message took (more
    # than 3 in 20 ms on a quiet loopback, exactly 3 at a load of 45): count_for's own test below says how many.
    assert result["sizes"][0]["iterations"] >= 3
    assert open_sockets() == before


def test_one_rank_has_no_link_to_measure() -> None:
    assert ring_links(1) == [] and ring_links(2) == [(0, 1)] and ring_links(3) == [(0, 1), (1, 2), (2, 0)]
    assert measure(FakeStore(1).exchange(0), 0, 1, **QUICK)["sizes"] == []


def test_a_peer_that_never_connects_ends_in_an_error_within_the_timeout() -> None:
    """Rank 1 waits for rank 0, which shared its endpoint and then never connected: rank 1's accept times out
    and the failure is what the ranks agree on (rank 0 shares it had nothing to measure)."""
    store = FakeStore(2)
    before = open_sockets()
    outcome: dict[str, Any] = {}

    def rank1() -> None:
        started = time.monotonic()
        try:
            measure(store.exchange(1), 1, 2, **{**QUICK, "timeout_s": 1.0})
        except YardstickError as exc:
            outcome["error"] = str(exc)
        outcome["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=rank1)
    thread.start()
    silent = store.exchange(0)
    silent("yardstick/endpoints", {"namespace": "elsewhere", "address": "127.0.0.1", "port": 9})
    silent("yardstick/results", {"sent": {}, "counts": {}, "bests": {}, "problem": None})
    thread.join(30)
    assert not thread.is_alive()
    assert "rank 0 never connected within 1 s" in outcome["error"], outcome
    # Ended by the 1 s timeout (not sooner); that it ended at all is the join above (no bound on the wall clock's
    # side: on a loaded machine the thread may wait for a core past any margin).
    assert outcome["seconds"] >= 1.0
    assert open_sockets() == before


def test_a_peer_that_accepts_and_never_answers_ends_in_an_error() -> None:
    """Rank 0 connects to a listener that accepts the connection (the kernel's backlog) and never reads: its first
    message's acknowledgement never comes, and the socket's timeout ends it."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    store = FakeStore(2)
    before = open_sockets()
    outcome: dict[str, Any] = {}

    def rank0() -> None:
        try:
            measure(store.exchange(0), 0, 2, **{**QUICK, "timeout_s": 1.0})
        except YardstickError as exc:
            outcome["error"] = str(exc)

    thread = threading.Thread(target=rank0)
    thread.start()
    mute = store.exchange(1)
    try:
        mute("yardstick/endpoints", {"namespace": "elsewhere", "address": "127.0.0.1", "port": listener.getsockname()[1]})
        mute("yardstick/results", {"sent": {}, "counts": {}, "bests": {}, "problem": None})
        thread.join(30)
    finally:
        listener.close()
    assert not thread.is_alive()
    assert outcome["error"] == "rank 0: rank 1 did not answer within 1 s"
    assert open_sockets() == before - 1  # all of the yardstick's are closed; only this test's listener was open


def test_a_failure_on_one_rank_is_every_ranks_error() -> None:
    """Rank 0 shares that its link failed: rank 1, which measured nothing wrong, raises it too, so the ranks agree."""
    store = FakeStore(2)
    peer = store.exchange(0)
    outcome: dict[str, Any] = {}

    def rank1() -> None:
        try:
            measure(store.exchange(1), 1, 2, **{**QUICK, "timeout_s": 1.0})
        except YardstickError as exc:
            outcome["error"] = str(exc)

    thread = threading.Thread(target=rank1)
    thread.start()
    peer("yardstick/endpoints", {"namespace": "elsewhere", "address": "127.0.0.1", "port": 9})
    peer("yardstick/results", {"sent": {}, "counts": {}, "bests": {}, "problem": "could not connect"})
    thread.join(30)
    assert "rank 0: could not connect" in outcome["error"] and "rank 1: rank 0 never connected" in outcome["error"]


def test_the_count_follows_the_sweeps_rule() -> None:
    assert count_for([0.001] * 3, 3, 0.1, 1000) == 100
    assert count_for([0.5] * 3, 3, 0.1, 1000) == 3
    assert count_for([1e-7] * 3, 3, 0.1, 1000) == 1000
    assert count_for([0.001] * 3, 3, 0.0, 1000) == 3


def test_efficiency_is_busbw_over_tcp_rounded() -> None:
    assert efficiency(0.5, 2.0) == 0.25
    assert efficiency(1.0, 3.0) == 0.3333
    assert efficiency(1.0, 0.0) is None
    assert efficiency(float("nan"), 1.0) is None


def _figures(busbw: dict[int, float]) -> list[dict[str, Any]]:
    """Figures of all_reduce on 2 ranks whose busbw is ``busbw`` per size (time from it: bytes / busbw)."""
    sizes = sorted(busbw)
    seconds = [size / busbw[size] / 1e9 for size in sizes]
    return bandwidth_figures.figures("all_reduce", sizes, seconds, 2, seconds, [5] * len(sizes))


def test_each_figure_gets_its_sizes_raw_tcp_and_its_efficiency() -> None:
    found = _figures({4096: 0.1, 1048576: 1.5})
    bandwidth_figures.add_efficiency(found, {4096: (0.4, 0.5), 1048576: (2.0, 3.0)})
    assert [(f["label"], f["tcp_gbps"], f["efficiency"]) for f in found] == [("4KiB", 0.4, 0.25), ("1MiB", 2.0, 0.75)]
    # The best figures (here the same seconds as the median) against the best raw TCP.
    assert [(f["best_tcp_gbps"], f["best_efficiency"]) for f in found] == [(0.5, 0.2), (3.0, 0.5)]
    assert bandwidth_figures.efficiency_range(found) == ", 0.25-0.75 of raw TCP"
    # Without a yardstick (turned off, or it failed) a figure has neither key, and the message says nothing of it.
    bare = _figures({4096: 0.1})
    bandwidth_figures.add_efficiency(bare, {})
    assert "tcp_gbps" not in bare[0] and "efficiency" not in bare[0]
    assert bandwidth_figures.efficiency_range(bare) == ""


def test_min_efficiency_fails_a_figure_below_it_with_expected_and_seen() -> None:
    found = _figures({4096: 0.1, 1048576: 1.5})
    bandwidth_figures.add_efficiency(found, {4096: (0.4, 0.4), 1048576: (2.0, 2.0)})
    sizes = [4096, 1048576]
    everywhere = bandwidth_figures.thresholds({"min_efficiency": 0.5}, sizes, "min_efficiency")
    assert everywhere == {4096: 0.5, 1048576: 0.5}
    assert bandwidth_figures.below("all_reduce", found, {}, everywhere) == (
        "expected all_reduce efficiency (busbw / raw TCP) >= min_efficiency; "
        "at 4KiB: 0.250 < 0.5 (busbw 0.100 GB/s, raw TCP 0.400 GB/s)"
    )
    # Per size: only the sizes named are judged; a threshold both figures meet passes.
    assert bandwidth_figures.below("all_reduce", found, {}, {1048576: 0.7}) == ""
    assert "at 1MiB: 0.750 < 0.8" in bandwidth_figures.below("all_reduce", found, {}, {1048576: 0.8})
    # Both thresholds at once: both are said.
    both = bandwidth_figures.below("all_reduce", found, {4096: 1.0}, {4096: 0.5})
    assert both.startswith("expected all_reduce busbw >= min_busbw_gbps; at 4KiB: 0.100 GB/s < 1 GB/s")
    assert "; expected all_reduce efficiency" in both
    with pytest.raises(ValueError, match="min_efficiency names 64KiB, which the sweep does not measure"):
        bandwidth_figures.thresholds({"min_efficiency": {"65536": 0.5}}, sizes, "min_efficiency")


def test_the_nominal_link_speed_is_what_the_kernel_reports(tmp_path: Path) -> None:
    for name, text in (("eth0", "10000\n"), ("ib0", "-1\n"), ("bad", "fast")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "speed").write_text(text)
    assert nominal_link("eth0", str(tmp_path)) == {"interface": "eth0", "nominal_gbps": 1.25}
    assert nominal_link("ib0", str(tmp_path)) == {"interface": "ib0", "nominal_gbps": None}  # down or unknown
    assert nominal_link("bad", str(tmp_path)) == {"interface": "bad", "nominal_gbps": None}
    assert nominal_link("lo", str(tmp_path)) == {"interface": "lo", "nominal_gbps": None}  # no such file
    assert nominal_link(None, str(tmp_path)) == {"interface": None, "nominal_gbps": None}
