"""The ``bandwidth`` check: how fast the collectives are, per operation and message size, with every
result still checked against a known answer.

For each operation (all_reduce, all_gather, broadcast, reduce_scatter, all_to_all) and each size of
the sweep (default 4 KiB ... 64 MiB, powers of 4), ``warmup`` untimed calls, then at least
``iterations`` timed calls, back to back, each started right after a barrier and stopped when the
operation returned (after a CUDA synchronize on CUDA); then more timed calls until they add up to
``min_time_s`` (at most MAX_ITERATIONS in all), as many on every rank (they agree through the store on
the count, from the slowest rank's median of the first ones). A small message takes a fraction of a
millisecond: five calls of it are a sample of the machine's scheduling at one instant, whose median moved
0.3-2x between two runs of one image on a shared 2-core VM; 50 calls moved it 0.6-1.4x
(docs/measurements.md, "Noise"). The figure of a size is the median time of one rank's iterations; the ranks agree
through the rendezvous store on the slowest rank's median, since a collective is as slow as its slowest
rank. Sizes and bandwidths follow nccl-tests (PERFORMANCE.md):

- size: the bytes of the whole buffer of one rank, as nccl-tests counts them: all_reduce and broadcast
  the tensor; all_gather the gathered output (each rank contributes size/n); reduce_scatter the input
  (each rank receives size/n); all_to_all what each rank sends;
- algbw = size / time;
- busbw = algbw x 2(n-1)/n for all_reduce, (n-1)/n for all_gather, reduce_scatter and all_to_all, 1
  for broadcast.

Every call's result is compared with its known answer (values that change with the iteration, so a
stale buffer shows): wrong data fails the operation's testcase. An operation is skipped only when
distval_suite/support.py says this backend and torch version may lack it and a capability probe (one call on one
element, before any timed call) raised on every rank; any other exception is an error.
``min_busbw_gbps`` (one number, or size -> number) fails an operation whose busbw at a size is below it,
with the numbers in the message.

Before the operations, with gloo, the yardstick (distval_suite/yardstick.py, testcase ``bandwidth.yardstick``):
the raw TCP throughput between ring neighbours at every size of the sweep, in the same containers and over the
same path. Each figure then has ``tcp_gbps`` and ``efficiency`` = busbw / tcp_gbps (and their ``best_`` pair),
which mean the same on any machine; ``min_efficiency`` fails a figure below it. ``yardstick: false`` skips it.
NCCL's yardstick is the transport it picked (its INFO lines, read by the harness), not TCP.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
import torch.distributed as dist

from distval_suite import bandwidth_figures
from distval_suite.bandwidth_figures import ELEMENT_BYTES, size_label
from distval_suite.core import Context, check
from distval_suite.devices import backend_family
from distval_suite.records import ERROR, FAILED, PASSED, SKIPPED
from distval_suite.support import ABSENT, MUST, probe_verdict, support
from distval_suite.yardstick import YardstickError, measure, nominal_link

KIB = 1024
DEFAULT_SIZES = tuple(4 * KIB * 4**i for i in range(8))  # 4 KiB, 16 KiB, ..., 64 MiB
# Measured on 2 CPU cores with gloo (docs/measurements.md, "The bandwidth check"): the default sweep takes a
# few seconds per scenario with these.
DEFAULT_ITERATIONS = 5
DEFAULT_WARMUP = 1
DEFAULT_MIN_TIME_S = 0.1  # timed calls per figure add up to at least this (docs/measurements.md, "Noise")
MAX_ITERATIONS = 1000  # however short a call: a bound on the calls of one figure
OPERATIONS = ("all_reduce", "all_gather", "broadcast", "reduce_scatter", "all_to_all")


# One operation at one size, its buffers allocated once: (rank, world, numel of one rank's part, device)
# -> (fill the inputs for iteration i, the call to time, the check of its result for iteration i: None when right).
Prepared = Tuple[Callable[[int], None], Callable[[], Any], Callable[[int], Optional[str]]]
Preparer = Callable[[int, int, int, torch.device], Prepared]


def _first_wrong(label: str, tensor: torch.Tensor, value: float) -> Optional[str]:
    if bool(torch.all(tensor == value)):
        return None
    wrong = (tensor != value).nonzero().flatten()
    first = int(wrong[0])
    return "%s: element %d: expected %s, got %s (%d of %d elements wrong)" % (
        label,
        first,
        value,
        tensor[first].item(),
        int(wrong.numel()),
        tensor.numel(),
    )


def _all_reduce(rank: int, world: int, part: int, device: torch.device) -> Prepared:
    # Each rank gives rank+1+i: the sum is world*(world+1)/2 + world*i in every element.
    tensor = torch.empty((part * world,), dtype=torch.float32, device=device)

    def verify(i: int) -> Optional[str]:
        return _first_wrong("all_reduce(SUM) iteration %d" % i, tensor, world * (world + 1) / 2.0 + world * i)

    def fill(i: int) -> None:
        tensor.fill_(float(rank + 1 + i))

    return (fill, lambda: dist.all_reduce(tensor), verify)


def _broadcast(rank: int, world: int, part: int, device: torch.device) -> Prepared:
    root = world - 1  # not rank 0, so an implementation that ignores the root shows
    tensor = torch.empty((part * world,), dtype=torch.float32, device=device)

    def verify(i: int) -> Optional[str]:
        return _first_wrong("broadcast from rank %d iteration %d" % (root, i), tensor, float(100 + i))

    def fill(i: int) -> None:
        tensor.fill_(float(100 + i) if rank == root else -1.0)

    return (fill, lambda: dist.broadcast(tensor, src=root), verify)


def _all_gather(rank: int, world: int, part: int, device: torch.device) -> Prepared:
    source = torch.empty((part,), dtype=torch.float32, device=device)
    outputs = [torch.empty((part,), dtype=torch.float32, device=device) for _ in range(world)]

    def fill(i: int) -> None:
        source.fill_(float(rank + 1 + i))
        for tensor in outputs:
            tensor.fill_(-1.0)

    def verify(i: int) -> Optional[str]:
        for r, tensor in enumerate(outputs):
            problem = _first_wrong("all_gather slot of rank %d iteration %d" % (r, i), tensor, float(r + 1 + i))
            if problem:
                return problem
        return None

    return (fill, lambda: dist.all_gather(outputs, source), verify)


def _reduce_scatter(rank: int, world: int, part: int, device: torch.device) -> Prepared:
    # Part j of every rank's input is rank+1+j+i: rank r receives world*(world+1)/2 + world*(r+i).
    inputs = [torch.empty((part,), dtype=torch.float32, device=device) for _ in range(world)]
    output = torch.empty((part,), dtype=torch.float32, device=device)

    def fill(i: int) -> None:
        for j, tensor in enumerate(inputs):
            tensor.fill_(float(rank + 1 + j + i))
        output.fill_(-1.0)

    def verify(i: int) -> Optional[str]:
        expected = world * (world + 1) / 2.0 + world * (rank + i)
        return _first_wrong("reduce_scatter(SUM) iteration %d" % i, output, expected)

    return (fill, lambda: dist.reduce_scatter(output, inputs), verify)


def _all_to_all(rank: int, world: int, part: int, device: torch.device) -> Prepared:
    # all_to_all_single: part j of rank r's input goes to rank j, so part s of rank r's output is s*world+r+1+i.
    source = torch.empty((part * world,), dtype=torch.float32, device=device)
    output = torch.empty((part * world,), dtype=torch.float32, device=device)

    def fill(i: int) -> None:
        for j in range(world):
            source[j * part : (j + 1) * part].fill_(float(rank * world + j + 1 + i))
        output.fill_(-1.0)

    def verify(i: int) -> Optional[str]:
        for s in range(world):
            label = "all_to_all part from rank %d iteration %d" % (s, i)
            problem = _first_wrong(label, output[s * part : (s + 1) * part], float(s * world + rank + 1 + i))
            if problem:
                return problem
        return None

    return (fill, lambda: dist.all_to_all_single(output, source), verify)


PREPARERS: Dict[str, Preparer] = {
    "all_reduce": _all_reduce,
    "all_gather": _all_gather,
    "broadcast": _broadcast,
    "reduce_scatter": _reduce_scatter,
    "all_to_all": _all_to_all,
}


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _probe(ctx: Context, operation: str) -> Tuple[str, str]:
    """distval_suite/support.py's verdict for ``operation`` here: ("run", "") when it must work (no probe) or its
    capability probe (one call on one element per rank, before any timed call) returned on every rank;
    ("skip", why) when the version gate says it is absent (no call), or the table says it may be missing
    and the probe raised on every rank; ("error", why)
    when the ranks disagree. What the probe raised is reported, never read."""
    kind, reason = support(backend_family(ctx.backend), operation, "float32", torch.__version__)
    if kind == MUST:
        return "run", ""
    if kind == ABSENT:
        return "skip", reason
    ctx.step(operation, "capability probe")
    fill, run, _ = PREPARERS[operation](dist.get_rank(), dist.get_world_size(), 1, ctx.device)
    outcome: Optional[str] = None
    try:
        fill(0)
        run()
        _synchronize(ctx.device)
    except Exception as exc:  # noqa: BLE001 - the probe's result, whatever it raised
        outcome = "%s: %s" % (type(exc).__name__, str(exc).strip().splitlines()[0][:300] if str(exc).strip() else "")
    everyone = ctx.exchange("bandwidth/%s/probe" % operation, outcome)
    verdict, text = probe_verdict(dict(enumerate(everyone)))
    return verdict, "%s; %s" % (reason, text)


def _measure(
    ctx: Context, operation: str, size: int, warmup: int, iterations: int, min_time_s: float
) -> Tuple[List[float], Optional[str]]:
    """(this rank's timed seconds, the first wrong answer). An exception is the check's error: whether the
    operation exists here was settled by _probe before the first call."""
    rank, world, device = dist.get_rank(), dist.get_world_size(), ctx.device
    part = max(1, size // (ELEMENT_BYTES * world))
    times: List[float] = []
    problem: Optional[str] = None
    fill, run, verify = PREPARERS[operation](rank, world, part, device)
    total = warmup + iterations  # min_time_s may add calls once these ran
    it = 0
    while it < total:
        fill(it)
        _synchronize(device)
        dist.barrier()
        started = time.perf_counter()
        run()
        _synchronize(device)
        elapsed = time.perf_counter() - started
        if it >= warmup:
            times.append(elapsed)
        if problem is None:
            problem = verify(it)
        it += 1
        if it == warmup + iterations and min_time_s > 0:
            total = warmup + _agreed_count(ctx, operation, size, times, iterations, min_time_s)
    return times, problem


def _agreed_count(ctx: Context, operation: str, size: int, times: List[float], iterations: int, min_time_s: float) -> int:
    """The timed calls of a figure in all: enough to add up to ``min_time_s`` at the slowest rank's median
    call so far, at least ``iterations``, at most MAX_ITERATIONS. Agreed through the store, so that every
    rank calls the collective as often (one more call on one rank would wait for its peers forever)."""
    medians = ctx.exchange("bandwidth/%s/%s/count" % (operation, size_label(size)), statistics.median(times))
    slowest = max(float(m) for m in medians)
    wanted = int(math.ceil(min_time_s / slowest)) if slowest > 0 else MAX_ITERATIONS
    return max(iterations, min(MAX_ITERATIONS, wanted))


def _sizes(args: Dict[str, Any]) -> List[int]:
    return sorted({int(s) for s in args.get("sizes") or DEFAULT_SIZES})


def _yardstick(ctx: Context, sizes: List[int], warmup: int, iterations: int, min_time_s: float) -> Dict[int, Tuple[float, float]]:
    """Measure the raw TCP throughput between ring neighbours (distval_suite/yardstick.py) and report it as the
    testcase ``bandwidth.yardstick``; size -> (median GB/s, best GB/s), empty when it could not be measured (its
    testcase says why)."""
    world = dist.get_world_size()
    ctx.step("yardstick")
    started = time.monotonic()
    if world < 2:
        ctx.report("yardstick", SKIPPED, "one rank: no link between ranks to measure", time.monotonic() - started)
        return {}
    try:
        # Each socket operation gets the collectives' timeout; the whole measurement at most half of the check's
        # time, so that the sweep itself still has the rest.
        result = measure(
            ctx.exchange,
            dist.get_rank(),
            world,
            sizes,
            warmup,
            iterations,
            min_time_s,
            timeout_s=ctx.collective_timeout_s,
            interface=ctx.gloo_interface,
            max_iterations=MAX_ITERATIONS,
            limit_s=ctx.check_timeout_s / 2,
        )
    except YardstickError as exc:
        ctx.report(
            "yardstick",
            ERROR,
            "the raw TCP throughput between ranks could not be measured: %s; no efficiency is given" % exc,
            time.monotonic() - started,
        )
        return {}
    for figure in result["sizes"]:
        figure["label"] = size_label(figure["size"])
    figures = result["sizes"]
    ctx.report(
        "yardstick",
        PASSED,
        "raw TCP between ring neighbours over %s, the slowest of %d directions: %s (median per size; a message "
        "timed until its acknowledgement)"
        % (result["path"], len(result["pairs"]), ", ".join("%.3f GB/s at %s" % (f["tcp_gbps"], f["label"]) for f in figures)),
        time.monotonic() - started,
        {"path": result["path"], "tcp": figures, "pairs": result["pairs"], "world_size": world},
    )
    return {int(f["size"]): (float(f["tcp_gbps"]), float(f["best_tcp_gbps"])) for f in figures}


@check("bandwidth")
def check_bandwidth(ctx: Context, args: Dict[str, Any]) -> None:
    ctx.process_group()
    sizes = _sizes(args)
    iterations = int(args.get("iterations", DEFAULT_ITERATIONS))
    warmup = int(args.get("warmup", DEFAULT_WARMUP))
    min_time_s = float(args.get("min_time_s", DEFAULT_MIN_TIME_S))
    operations = list(args.get("ops") or OPERATIONS)
    thresholds = bandwidth_figures.thresholds(args, sizes)
    efficiency_thresholds = bandwidth_figures.thresholds(args, sizes, "min_efficiency")
    use_yardstick = bool(args.get("yardstick", True))
    if efficiency_thresholds and not use_yardstick:
        raise ValueError("min_efficiency needs the yardstick (busbw / raw TCP), but yardstick is false")
    world = dist.get_world_size()
    nccl = backend_family(ctx.backend) == "nccl"
    if efficiency_thresholds and nccl:
        raise ValueError("min_efficiency is busbw / raw TCP, a gloo yardstick; NCCL's is the transport it picked")
    # NCCL's yardstick is the transport it picked (its INFO lines: the scenario's nccl_transports) and the link's
    # nominal speed below, not TCP: NVLink or InfiniBand against a socket would be no efficiency at all.
    tcp = _yardstick(ctx, sizes, warmup, iterations, min_time_s) if use_yardstick and not nccl else {}
    link = nominal_link(ctx.socket_interfaces.get("NCCL_SOCKET_IFNAME" if nccl else "GLOO_SOCKET_IFNAME"))
    for operation in operations:
        ctx.step(operation)
        started = time.monotonic()
        medians: List[float] = []
        bests: List[float] = []
        counts: List[int] = []  # timed calls per size: the same on every rank
        samples: List[List[float]] = []  # per size, this rank's iteration times (bandwidth_figures.SAMPLES_MAX)
        problem: Optional[str] = None
        verdict, why = _probe(ctx, operation)
        if verdict == "skip":
            ctx.report(operation, SKIPPED, "not supported by this image: %s" % why, time.monotonic() - started)
            continue
        if verdict == "error":
            ctx.report(operation, ERROR, why, time.monotonic() - started)
            continue
        for size in sizes:
            ctx.step(operation, size_label(size))
            times, wrong = _measure(ctx, operation, size, warmup, iterations, min_time_s)
            medians.append(statistics.median(times))
            bests.append(min(times))
            counts.append(len(times))
            samples.append(bandwidth_figures.bounded(times))
            problem = problem or (wrong and "%s: %s" % (size_label(size), wrong))
        # The ranks agree through the store (not another collective) on the slowest median and on what was wrong.
        everyone = ctx.exchange(
            "bandwidth/%s" % operation, {"medians": medians, "bests": bests, "problem": problem, "samples": samples}
        )
        duration_s = time.monotonic() - started
        slowest = [max(e["medians"][i] for e in everyone) for i in range(len(sizes))]
        slowest_best = [max(e["bests"][i] for e in everyone) for i in range(len(sizes))]
        figures = bandwidth_figures.figures(operation, sizes, slowest, world, slowest_best, counts)
        bandwidth_figures.add_efficiency(figures, tcp)
        bandwidth_figures.add_samples(figures, [e["samples"] for e in everyone])
        sample = bandwidth_figures.sample(iterations, min_time_s, counts)
        details: Dict[str, Any] = {
            "operation": operation,
            "world_size": world,
            "iterations": iterations,
            "min_time_s": min_time_s,
            "warmup": warmup,
            "statistic": "median of %s per rank; the slowest rank's median" % sample,
            "device": str(ctx.device),
            "figures": figures,
            # The interface the backend's sockets use and its nominal speed where the machine reports it.
            "link": link,
        }
        wrong_ranks = ["rank %d: %s" % (r, e["problem"]) for r, e in enumerate(everyone) if e["problem"]]
        if wrong_ranks:
            ctx.report(
                operation,
                FAILED,
                "%s gave wrong data while measuring its bandwidth: %s" % (operation, "; ".join(wrong_ranks)),
                duration_s,
                details,
            )
            continue
        unjudged = [f["label"] for f in figures if f["size"] in efficiency_thresholds and "efficiency" not in f]
        if unjudged:
            ctx.report(
                operation,
                ERROR,
                "min_efficiency cannot be judged at %s: the raw TCP yardstick was not measured (see bandwidth.yardstick)"
                % ", ".join(unjudged),
                duration_s,
                details,
            )
            continue
        below = bandwidth_figures.below(operation, figures, thresholds, efficiency_thresholds)
        if below:
            ctx.report(operation, FAILED, below + " (median of %s, slowest of %d ranks)" % (sample, world), duration_s, details)
            continue
        peak = max(figures, key=lambda f: f["busbw_gbps"])
        ctx.report(
            operation,
            PASSED,
            "%s over %d ranks, %s..%s: busbw up to %.3f GB/s (at %s)%s, every result right (median of %s)"
            % (
                operation,
                world,
                figures[0]["label"],
                figures[-1]["label"],
                peak["busbw_gbps"],
                peak["label"],
                bandwidth_figures.efficiency_range(figures),
                sample,
            ),
            duration_s,
            details,
        )
    if not ctx.reported:
        ctx.report("ops", ERROR, "no operation measured (ops is empty)")
