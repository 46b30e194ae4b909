"""The bandwidth check's figures as numbers, without torch (so that the host's tests run them): sizes and their
names, nccl-tests' bus factor, a figure per size from the slowest rank's median, its efficiency against the
raw TCP yardstick (distval_suite/yardstick.py), and the thresholds (min_busbw_gbps, min_efficiency) with the
message that says which figure is below which. distval_suite/bandwidth.py measures; this module judges."""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from distval_suite.yardstick import efficiency

ELEMENT_BYTES = 4  # float32
# Iteration times kept per figure, at most (evenly spaced over the iterations past it): enough for a rank test to
# see a 10 % shift at p < 0.002 with a few runs, and a bounded record (min_time_s can make thousands of calls).
SAMPLES_MAX = 100


def bounded(times: List[float]) -> List[float]:
    """``times`` as they are, or SAMPLES_MAX of them evenly spaced (the same indexes on every rank)."""
    if len(times) <= SAMPLES_MAX:
        return list(times)
    step = len(times) / SAMPLES_MAX
    return [times[int(i * step)] for i in range(SAMPLES_MAX)]


def add_samples(figures: List[Dict[str, Any]], per_rank: List[List[List[float]]]) -> None:
    """Each figure's samples: per iteration, the slowest rank's time in microseconds (a collective is as slow as its
    slowest rank; the ranks start each iteration together after a barrier), and each rank's median time, in rank
    order (``per_rank[rank][size index]``: that rank's bounded iteration times in seconds)."""
    for index, figure in enumerate(figures):
        runs = [rank[index] for rank in per_rank]
        count = min(len(r) for r in runs) if runs else 0
        figure["samples_us"] = [round(max(r[i] for r in runs) * 1e6, 3) for i in range(count)]
        figure["rank_time_us"] = [round(_median(r) * 1e6, 3) if r else 0.0 for r in runs]


def _median(values: List[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def size_label(size: int) -> str:
    """4096 -> '4KiB', 1048576 -> '1MiB', 1000 -> '1000B': names that fit a JUnit property."""
    for unit, factor in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= factor and size % factor == 0:
            return "%d%s" % (size // factor, unit)
    return "%dB" % size


def bus_factor(operation: str, world: int) -> float:
    """nccl-tests' busbw / algbw for this operation on ``world`` ranks."""
    if operation == "all_reduce":
        return 2.0 * (world - 1) / world
    if operation == "broadcast":
        return 1.0
    return (world - 1) / world


def thresholds(args: Dict[str, Any], sizes: List[int], name: str = "min_busbw_gbps") -> Dict[int, float]:
    """A threshold argument (min_busbw_gbps, min_efficiency) as size -> number: one number applies to every size."""
    given = args.get(name)
    if given is None:
        return {}
    if isinstance(given, dict):
        thresholds = {int(size): float(value) for size, value in given.items()}
        unmeasured = sorted(set(thresholds) - set(sizes))
        if unmeasured:
            raise ValueError(
                "%s names %s, which the sweep does not measure (sizes: %s)"
                % (name, ", ".join(map(size_label, unmeasured)), ", ".join(map(size_label, sizes)))
            )
        return thresholds
    return {size: float(given) for size in sizes}


def add_efficiency(figures: List[Dict[str, Any]], tcp: Dict[int, Tuple[float, float]]) -> None:
    """Each figure's raw TCP throughput at its size (size -> (median GB/s, best GB/s)) and its efficiency (busbw /
    raw TCP), where measured; and best_efficiency, the best busbw over the best raw TCP (the pair of numbers
    a shared machine's noise moves least)."""
    for figure in figures:
        median, best = tcp.get(figure["size"], (0.0, 0.0))
        ratio = efficiency(figure["busbw_gbps"], median)
        if ratio is None:
            continue
        figure["tcp_gbps"] = median
        figure["efficiency"] = ratio
        best_ratio = efficiency(figure["best_busbw_gbps"], best)
        if best_ratio is not None:
            figure["best_tcp_gbps"] = best
            figure["best_efficiency"] = best_ratio


def efficiency_range(figures: List[Dict[str, Any]]) -> str:
    """', 0.31-0.87 of raw TCP' (the lowest and highest efficiency of the sweep), or '' without a yardstick."""
    found = [f["efficiency"] for f in figures if "efficiency" in f]
    if not found:
        return ""
    return ", %.2f-%.2f of raw TCP" % (min(found), max(found))


def below(
    operation: str, figures: List[Dict[str, Any]], busbw_thresholds: Dict[int, float], efficiency_thresholds: Dict[int, float]
) -> str:
    """Why ``operation`` is too slow (its busbw under min_busbw_gbps, its efficiency under min_efficiency), with
    expected and seen per size; '' when it is not."""
    parts = []
    slow = [f for f in figures if f["size"] in busbw_thresholds and f["busbw_gbps"] < busbw_thresholds[f["size"]]]
    if slow:
        parts.append(
            "expected %s busbw >= min_busbw_gbps; %s"
            % (
                operation,
                "; ".join(
                    "at %s: %.3f GB/s < %g GB/s (time %.1f us, algbw %.3f GB/s)"
                    % (f["label"], f["busbw_gbps"], busbw_thresholds[f["size"]], f["time_us"], f["algbw_gbps"])
                    for f in slow
                ),
            )
        )
    weak = [f for f in figures if f["size"] in efficiency_thresholds and f["efficiency"] < efficiency_thresholds[f["size"]]]
    if weak:
        parts.append(
            "expected %s efficiency (busbw / raw TCP) >= min_efficiency; %s"
            % (
                operation,
                "; ".join(
                    "at %s: %.3f < %g (busbw %.3f GB/s, raw TCP %.3f GB/s)"
                    % (f["label"], f["efficiency"], efficiency_thresholds[f["size"]], f["busbw_gbps"], f["tcp_gbps"])
                    for f in weak
                ),
            )
        )
    return "; ".join(parts)


def sample(iterations: int, min_time_s: float, counts: List[int]) -> str:
    """What each median is of, e.g. '5-212 iterations (at least 5 and 0.1 s per size)'."""
    if min_time_s <= 0 or not counts:
        return "%d iterations" % iterations
    low, high = min(counts), max(counts)
    spread = "%d" % low if low == high else "%d-%d" % (low, high)
    return "%s iterations (at least %d and %g s per size)" % (spread, iterations, min_time_s)


def _gbps(value: float) -> float:
    """A GB/s figure as written: 6 decimals, and at least 4 significant digits below 0.001 GB/s, so that a real but
    slow call (a few bytes over a loaded machine) never reads as 0, which distval refuses as no measurement
    (distval/results/bandwidth.py busbw_problem)."""
    return round(value, 6) if value >= 1e-3 else float("%.4g" % value)


def figures(
    operation: str, sizes: List[int], seconds: List[float], world: int, best_seconds: List[float], counts: List[int]
) -> List[Dict[str, Any]]:
    """One figure per size from the slowest rank's median (``seconds``); ``best_busbw_gbps`` from the slowest
    rank's fastest iteration (``best_seconds``): what the image reached at best, which noise on a shared
    machine (it only ever slows a call down) moves far less than the median."""
    factor = bus_factor(operation, world)
    figures = []
    for index, size in enumerate(sizes):
        elapsed = seconds[index]
        measured = max(1, size // (ELEMENT_BYTES * world)) * ELEMENT_BYTES * world  # whole elements per rank
        algbw = measured / elapsed / 1e9 if elapsed > 0 else 0.0
        best = best_seconds[index]
        best_algbw = measured / best / 1e9 if best > 0 else 0.0
        figures.append(
            {
                "size": size,
                "label": size_label(size),
                "bytes": measured,
                "time_us": round(elapsed * 1e6, 3),
                "algbw_gbps": _gbps(algbw),
                "busbw_gbps": _gbps(algbw * factor),
                "best_time_us": round(best * 1e6, 3),
                "best_busbw_gbps": _gbps(best_algbw * factor),
                "iterations": counts[index],  # timed calls of this size, on every rank
            }
        )
    return figures
