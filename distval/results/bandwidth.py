"""The bandwidth check's figures as data: read from its testcases' details (distval_suite/bandwidth.py writes them),
named as JUnit properties, and put side by side across topologies of the same world size.

A figure is one operation at one message size: the slowest rank's median time of ``iterations`` timed
calls, algbw = bytes / time and busbw = algbw x nccl-tests' factor (2(n-1)/n for all_reduce, (n-1)/n
for all_gather, reduce_scatter and all_to_all, 1 for broadcast). ``best_busbw_gbps`` is the same from the
slowest rank's fastest iteration: what the image reached at best, which the noise of a shared machine
(it only ever slows a call down) moves far less than the median; None in reports older than it.

``tcp_gbps`` is the raw TCP throughput the ranks reached between ring neighbours at the same size
(distval_suite/yardstick.py, the testcase ``bandwidth.yardstick``), and ``efficiency`` busbw / tcp_gbps: a figure
that means the same on two machines; ``best_tcp_gbps`` and ``best_efficiency`` the same from the fastest
message and the fastest call. All None where the yardstick was off, failed, or the report predates it.
The image wrote them, so they are taken only when finite, in range and consistent with each other and busbw
(the record reader already refused what is not a finite number at all).

busbw itself is a measurement only when above 0 (``busbw_problem``): a call that moved its bytes in a finite time. The
one exception is a bus factor of 0 (one rank: all_reduce, all_gather, reduce_scatter and all_to_all move nothing over a
bus), where the suite rightly writes 0. The record reader refuses a record with any other busbw (distval/results/
records.py: its rank's testcase errors with the reason), and a figure read back from a report is dropped with it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from distval_suite.bandwidth_figures import SAMPLES_MAX, bus_factor

CHECK = "bandwidth"
PREFIX = f"{CHECK}."

# The yardstick's own testcase: its details hold the raw TCP figures, not a collective's.
YARDSTICK_CASE = f"{PREFIX}yardstick"


@dataclass(frozen=True)
class Figure:
    operation: str
    size: int  # the requested message size in bytes
    label: str  # "4KiB", "64MiB"
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    iterations: int  # timed iterations per rank, of which the median counts (per size: min_time_s adds some)
    world_size: int
    best_time_us: float | None = None
    best_busbw_gbps: float | None = None
    tcp_gbps: float | None = None
    efficiency: float | None = None
    best_tcp_gbps: float | None = None
    best_efficiency: float | None = None
    # Per timed iteration, the slowest rank's time (at most SAMPLES_MAX, evenly spaced), and each rank's median time,
    # in rank order: what a rank test and the straggler check read. None where the image wrote none or unusable ones.
    samples_us: tuple[float, ...] | None = None
    rank_time_us: tuple[float, ...] | None = None


# Above any link a container reaches today (a 3.2 Tb/s NIC is 400 GB/s; loopback measured here a few GB/s): a larger
# raw TCP figure is not a measurement.
TCP_GBPS_MAX = 10_000.0
# busbw / raw TCP: above 1 by noise at small sizes, or where a collective's links beat one TCP stream, but a
# hundredfold is not a measurement.
EFFICIENCY_MAX = 100.0


def yardstick_of(item: Mapping[str, object], busbw_gbps: float | None, prefix: str = "") -> tuple[float | None, float | None]:
    """(tcp_gbps, efficiency) of one figure as the image wrote them (``prefix`` "best_": best_tcp_gbps and
    best_efficiency against best_busbw_gbps), or (None, None) unless both are finite, in range, and the efficiency
    is busbw / tcp_gbps (to the suite's rounding: 4 decimals, with 1 % slack for the rounding of busbw and
    tcp_gbps themselves)."""
    tcp, ratio = _number_or_none(item.get(f"{prefix}tcp_gbps")), _number_or_none(item.get(f"{prefix}efficiency"))
    if tcp is None or ratio is None or busbw_gbps is None:
        return None, None
    if not all(math.isfinite(v) for v in (tcp, ratio, busbw_gbps)):
        return None, None
    if not (0 < tcp <= TCP_GBPS_MAX and 0 < ratio <= EFFICIENCY_MAX):
        return None, None
    if not math.isclose(ratio, busbw_gbps / tcp, rel_tol=0.01, abs_tol=1e-4):
        return None, None
    return tcp, ratio


BUSBW_KEYS = ("busbw_gbps", "best_busbw_gbps")


def busbw_problem(operation: str, world_size: int, figure: Mapping[str, object]) -> str | None:
    """Why a figure's busbw (or its best) as the image wrote it is no measurement: not a number, not finite, below 0,
    or 0 where the operation's bus factor on ``world_size`` ranks is not (bytes moved over the bus take no time);
    None when each is a measurement, or absent (``best_busbw_gbps`` predates some reports; a figure without
    ``busbw_gbps`` is no figure)."""
    for key in BUSBW_KEYS:
        if key not in figure or (key != "busbw_gbps" and figure[key] is None):
            continue
        value = _number_or_none(figure[key])
        if value is None or not math.isfinite(value) or value < 0:
            return f"{key} is {figure[key]!r}, not a finite number of 0 or more"
        if value == 0 and (world_size < 1 or bus_factor(operation, world_size) > 0):
            return f"{key} is {figure[key]!r}: {operation} over {world_size} ranks moves bytes, so 0 GB/s is no measurement"
    return None


def record_problem(case: str, details: Mapping[str, object]) -> str | None:
    """Why the details of a ``bandwidth.<operation>`` record (``case``) hold a figure that is no measurement
    (``busbw_problem``), named as the record reader names its other refusals (``details.figures[1].busbw_gbps ...``);
    None when every figure is one, or the record is no operation's."""
    figures = details.get("figures")
    if not case.startswith(PREFIX) or case == YARDSTICK_CASE or not isinstance(figures, list):
        return None
    operation, world = case[len(PREFIX) :], _int(details.get("world_size"))
    for index, item in enumerate(figures):
        if isinstance(item, Mapping):
            problem = busbw_problem(operation, world, item)
            if problem is not None:
                return f"details.figures[{index}].{problem}"
    return None


def figures_from_details(operation: str, details: Mapping[str, object]) -> tuple[Figure, ...]:
    """The figures of one ``bandwidth.<operation>`` testcase's details; () when it has none (skipped, crashed)."""
    raw = details.get("figures")
    if not isinstance(raw, list):
        return ()
    iterations = _int(details.get("iterations"))
    world = _int(details.get("world_size"))
    figures = []
    for item in raw:
        if not isinstance(item, dict) or busbw_problem(operation, world, item) is not None:
            continue
        try:
            busbw = float(item["busbw_gbps"])
            best_busbw = _float_or_none(item.get("best_busbw_gbps"))
            tcp, ratio = yardstick_of(item, busbw)
            best_tcp, best_ratio = yardstick_of(item, best_busbw, "best_") if ratio is not None else (None, None)
            figures.append(
                Figure(
                    operation=operation,
                    size=int(item["size"]),
                    label=str(item["label"]),
                    time_us=float(item["time_us"]),
                    algbw_gbps=float(item["algbw_gbps"]),
                    busbw_gbps=busbw,
                    iterations=_int(item.get("iterations", iterations)),  # per size since min_time_s
                    world_size=world,
                    best_time_us=_float_or_none(item.get("best_time_us")),
                    best_busbw_gbps=best_busbw,
                    tcp_gbps=tcp,
                    efficiency=ratio,
                    best_tcp_gbps=best_tcp,
                    best_efficiency=best_ratio,
                    samples_us=times_of(item.get("samples_us"), SAMPLES_MAX),
                    rank_time_us=times_of(item.get("rank_time_us"), world if world > 0 else 0),
                )
            )
        except (KeyError, TypeError, ValueError):
            continue
    return tuple(figures)


# A call no collective takes: the image wrote it, so anything past it is no measurement.
TIME_US_MAX = 3600e6


def times_of(value: object, at_most: int) -> tuple[float, ...] | None:
    """A list of 1..``at_most`` times in microseconds, each finite and in (0, TIME_US_MAX]; None otherwise (the image
    wrote them: an unusable list is no samples, never a crash or a figure judged on part of it)."""
    if not isinstance(value, list) or not 0 < len(value) <= at_most:
        return None
    # One pass, stopping at the first unusable value: a comparison reads every run's samples of every figure.
    found = []
    for item in value:
        if isinstance(item, bool) or not isinstance(item, (int, float)):
            return None
        try:
            number = float(item)
        except OverflowError:  # an integer too large for a float
            return None
        if not 0 < number <= TIME_US_MAX:  # NaN fails the comparison too
            return None
        found.append(number)
    return tuple(found)


def _number_or_none(value: object) -> float | None:
    """A JSON number as a float; None for anything else (a string, a bool, null)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _float_or_none(value: object) -> float | None:
    try:
        return float(value) if value is not None else None  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def figures_of(cases: Iterable[tuple[str, Mapping[str, object]]]) -> tuple[Figure, ...]:
    """Every figure of a scenario, from its testcases as (name, details), in report order."""
    found: list[Figure] = []
    for name, details in cases:
        if name.startswith(PREFIX) and name != YARDSTICK_CASE:
            found += figures_from_details(name[len(PREFIX) :], details)
    return tuple(found)


# An interface name as the kernel allows it (IFNAMSIZ: 15 characters); anything else from the image is not shown.
_INTERFACE = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")


def link_of(cases: Iterable[tuple[str, Mapping[str, object]]]) -> str | None:
    """The link the bandwidth check's sockets used, from its first operation's ``link`` detail: ``eth0, nominal
    1.25 GB/s`` (the speed /sys/class/net reports), ``eth0, no nominal speed reported``; None when no operation
    named one (the check did not run, a report from before it, or what the image wrote is not an interface name
    and a speed in range)."""
    for name, details in cases:
        if not name.startswith(PREFIX) or name == YARDSTICK_CASE:
            continue
        link = details.get("link")
        if not isinstance(link, Mapping):
            continue
        interface, nominal = link.get("interface"), _number_or_none(link.get("nominal_gbps"))
        if not isinstance(interface, str) or _INTERFACE.match(interface) is None:
            continue
        if nominal is not None and math.isfinite(nominal) and 0 < nominal <= TCP_GBPS_MAX:
            return f"{interface}, nominal {nominal:g} GB/s"
        return f"{interface}, no nominal speed reported"
    return None


def property_name(figure: Figure, quantity: str) -> str:
    """``bandwidth.all_reduce.1MiB.busbw_gbps``."""
    return f"{PREFIX}{figure.operation}.{figure.label}.{quantity}"


def figure_properties(figures: Iterable[Figure]) -> dict[str, str]:
    """JUnit properties: time, algbw and busbw of every figure, and the iterations the medians are of."""
    properties: dict[str, str] = {}
    counts: set[int] = set()
    for figure in figures:
        properties[property_name(figure, "time_us")] = f"{figure.time_us:.1f}"
        properties[property_name(figure, "algbw_gbps")] = f"{figure.algbw_gbps:.4f}"
        properties[property_name(figure, "busbw_gbps")] = f"{figure.busbw_gbps:.4f}"
        if figure.best_busbw_gbps is not None:
            properties[property_name(figure, "best_busbw_gbps")] = f"{figure.best_busbw_gbps:.4f}"
        if figure.tcp_gbps is not None and figure.efficiency is not None:
            properties[property_name(figure, "tcp_gbps")] = f"{figure.tcp_gbps:.4f}"
            properties[property_name(figure, "efficiency")] = f"{figure.efficiency:.4f}"
        if figure.best_efficiency is not None:
            properties[property_name(figure, "best_efficiency")] = f"{figure.best_efficiency:.4f}"
        properties[property_name(figure, "iterations")] = str(figure.iterations)
        counts.add(figure.iterations)
    if counts:
        properties[f"{PREFIX}iterations"] = count_range(counts)
    return properties


def count_range(counts: Iterable[int]) -> str:
    """Timed iterations of several figures: '5', or '5-212' where min_time_s added calls to the short ones."""
    found = sorted(set(counts))
    return "-" if not found else str(found[0]) if len(found) == 1 else f"{found[0]}-{found[-1]}"


@dataclass(frozen=True)
class TopologyRow:
    """One operation at one size, busbw in one container next to across containers, at one world size."""

    world_size: int
    operation: str
    size: int
    label: str
    in_container: str  # scenario names
    cross_container: str
    in_container_busbw_gbps: float
    cross_container_busbw_gbps: float

    @property
    def ratio(self) -> float:
        """cross / in: below 1 when crossing containers costs bandwidth."""
        return self.cross_container_busbw_gbps / self.in_container_busbw_gbps if self.in_container_busbw_gbps else 0.0


def topology_rows(scenarios: Iterable[tuple[str, str, int, tuple[Figure, ...]]]) -> list[TopologyRow]:
    """From (name, topology, world size, figures) of each scenario: for every world size that has both an
    in-container and a cross-container scenario with figures, the first of each, side by side per figure."""
    first: dict[tuple[str, int], tuple[str, tuple[Figure, ...]]] = {}
    for name, topology, world, figures in scenarios:
        if figures:
            first.setdefault((topology, world), (name, figures))
    rows: list[TopologyRow] = []
    for (topology, world), (in_name, in_figures) in first.items():
        if topology != "in-container" or ("cross-container", world) not in first:
            continue
        cross_name, cross_figures = first[("cross-container", world)]
        cross = {(f.operation, f.size): f for f in cross_figures}
        for figure in in_figures:
            other = cross.get((figure.operation, figure.size))
            if other is not None:
                rows.append(
                    TopologyRow(
                        world,
                        figure.operation,
                        figure.size,
                        figure.label,
                        in_name,
                        cross_name,
                        figure.busbw_gbps,
                        other.busbw_gbps,
                    )
                )
    return rows


def _int(value: object) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0
