"""The harness's catalog of suite checks: names and arguments, used to validate configs strictly.

distval_suite/ registers the implementations under the same names; tests/checks/test_catalog.py keeps the two in
step without importing torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class ArgSpec:
    # A kind declared in distval/config/argument_kinds.py (KINDS: its words, its JSON Schema, its reader): "int",
    # "seconds", "fraction" (0..1), "version", "choice", "names", "paths", "variables", "sizes" (message sizes),
    # "busbw" (GB/s thresholds), "efficiency" (busbw / raw TCP thresholds), "bool".
    kind: str
    description: str
    minimum: int = 0
    choices: tuple[str, ...] = ()
    # A "bool" argument of the same check that must not be false for this one to mean anything (min_efficiency
    # needs the yardstick): the loader refuses the pair (distval/config/check_list.py).
    needs: str = ""
    # The backends under which the argument means anything (min_efficiency: gloo, whose transport is the TCP the
    # yardstick measures; NCCL picks its own, NVLink or InfiniBand): the loader refuses it under another backend
    # (distval/config/check_list.py) instead of the check erroring on the GPU machine. Empty: every backend.
    backends: tuple[str, ...] = ()


@dataclass(frozen=True)
class CheckInfo:
    name: str
    description: str
    args: Mapping[str, ArgSpec]
    # The check compares what several ranks did (a collective, DDP, the shared store): with one rank it compares
    # nothing, so at world size 1 its pass validates nothing (distval/results/scenario.py reports it skipped).
    collective: bool = False
    # The oldest torch the check runs on: below it the suite skips it (distval_suite/core.py's require_torch, called with
    # the same numbers; tests/checks/test_catalog.py keeps the two equal). None: every torch the suite supports.
    torch_minimum: tuple[int, int] | None = None
    # The dtypes whose operations the check asks distval_suite/support.py's version table about (MAY_LACK): those a torch
    # version may lack are probed, or skipped without a call (tests/checks/test_catalog.py: the suite files that ask the
    # table register these checks). Empty: the check never asks it.
    probed_dtypes: tuple[str, ...] = ()
    # The time budget: the most seconds the check should take in one scenario of the default config (2 ranks, gloo,
    # CPU, its default arguments) on a quiet 2-core machine; benchmarks/bench_suite.py flags a check past it. Derived
    # from measurements: twice the largest quiet-machine median of the three fixtures (docs/measurements.md, "Time to
    # verdict"), rounded up to 0.1 s; a check too short to be listed there, twice its time in a rank's timeline at a load
    # of 28 (benchmarks/profile_suite.py, 2.6; at least 0.1 s), or for the checks outside the default config at a load of
    # 15-17 (its --timeline-only, the largest of the three fixtures). Where a check is why the suite misses its target (within
    # 1.5x the floor), its share of that target instead, which it does not meet yet (said at the check). None: the check's
    # own arguments set how long it runs (bandwidth's sizes and iterations, collective_loop's duration, allocate's MiB):
    # no fixed number could be its budget.
    budget_s: float | None = None


def _info(
    name: str,
    description: str,
    *,
    collective: bool = False,
    torch_minimum: tuple[int, int] | None = None,
    probed_dtypes: tuple[str, ...] = (),
    budget_s: float | None = None,
    **args: ArgSpec,
) -> CheckInfo:
    return CheckInfo(
        name=name,
        description=description,
        args=MappingProxyType(args),
        collective=collective,
        torch_minimum=torch_minimum,
        probed_dtypes=probed_dtypes,
        budget_s=budget_s,
    )


# The testcase that judges how the ranks reacted to a scenario's faults (distval/results/faults.py). Not a
# check of the catalog, but a verdict: a fault scenario whose checks were interrupted on purpose is validated
# by it, and by nothing else.
FAULTS_CASE = "faults"


def is_check(case_name: str) -> bool:
    """Whether a testcase is a catalog check's (``<check>`` or ``<check>.<part>``), not bookkeeping
    (``exit_status``, ``process_group``, ``results``, ``setup``, ``faults``)."""
    return case_name.split(".", 1)[0] in CATALOG


def is_collective(case_name: str) -> bool:
    """Whether a testcase belongs to a check that compares several ranks (see CheckInfo.collective)."""
    info = CATALOG.get(case_name.split(".", 1)[0])
    return info is not None and info.collective


CATALOG: Mapping[str, CheckInfo] = MappingProxyType(
    {
        info.name: info
        for info in (
            _info("env", "torch and Python versions, torch.distributed and backend availability, CUDA devices", budget_s=0.1),
            _info(
                "identity",
                "the image is what the scenario states (torch and Python versions, CPU or CUDA build, backends)",
                budget_s=0.1,
                torch=ArgSpec("version", "torch version requirement, e.g. '>=2.6,<2.7'"),
                python=ArgSpec("version", "Python version requirement, e.g. '>=3.11'"),
                build=ArgSpec("choice", "cpu or cuda build of torch", choices=("cpu", "cuda")),
                backends=ArgSpec("names", "backends that must be available", choices=("gloo", "nccl", "mpi")),
            ),
            _info(
                "cuda_build",
                "the CUDA build is real and consistent: torch.version.cuda, compiled CUDA, cuDNN compiled vs loaded, "
                "NCCL vs its wheel, torch's nvidia-* requirements installed (CUDA parts skipped on a CPU build)",
                budget_s=0.6,  # 0.30 s on 2.15 (its wheels' metadata), 0.12 on 1.13 (load 15-17)
                build=ArgSpec("choice", "cpu or cuda build of torch", choices=("cpu", "cuda")),
                cuda=ArgSpec("version", "CUDA version requirement, e.g. '13.*' or '>=12.8'"),
            ),
            _info(
                "bytecode",
                "torch's .pyc files match their sources (PEP 552 header: mtime and size, or source hash), so that "
                "no fresh container compiles torch's Python again on import",
                budget_s=4.7,  # 2.32 s on 2.15 (every torch .pyc header), 1.28 on 1.13, 1.01 on 2.6 (load 15-17)
                max_stale_fraction=ArgSpec(
                    "fraction", "fail when more than this fraction of torch's modules have a stale or missing .pyc (default 0.05)"
                ),
            ),
            _info(
                "libraries",
                "the shared libraries each rank mapped (/proc/self/maps) against the image's package databases (pip RECORD, "
                "dpkg, conda): one copy of each library, the packaged copy where a package ships it, none from outside "
                "the package trees",
                budget_s=0.5,  # the package databases are read beside the earlier checks (distval_suite/survey.py)
                allow_dirs=ArgSpec("paths", "directories a library may come from although no package owns a file there"),
            ),
            _info(
                "environment",
                "the variables the image bakes in (ENV, /etc/nccl.conf, ~/.nccl.conf) against the names its libraries "
                "and torch read: a misspelt one fails with the likely name, one that fixes NCCL's algorithm or topology "
                "is called out",
                budget_s=0.5,  # 1.3 s measured when it read everything itself; now beside the earlier checks
                harmful=ArgSpec(
                    "variables", "variables called out when the image sets them (default: NCCL's algorithm, topology ones)"
                ),
                allow=ArgSpec("variables", "variables the image may set whatever they are (no finding)"),
                harmful_verdict=ArgSpec(
                    "choice", "fail (default) or warn when the image sets a harmful variable", choices=("fail", "warn")
                ),
            ),
            _info(
                "launch",
                "the launcher's RANK/LOCAL_RANK/WORLD_SIZE/LOCAL_WORLD_SIZE/GROUP_RANK are consistent; every rank once",
                budget_s=2.1,  # it waits for the slowest rank to start: 1.02 s on 1.13
            ),
            _info(
                "all_reduce",
                "every rank contributes rank+1; every rank must see world*(world+1)/2",
                collective=True,
                budget_s=0.2,
                numel=ArgSpec("int", "number of float32 elements reduced", minimum=1),
            ),
            _info(
                "collectives",
                "every collective on every dtype training reduces (float16/bfloat16/float32/float64, int8/uint8/int32/int64, "
                "bool), in place, async, at an offset, non-contiguous, empty, small and large, against known answers (the "
                "variants: docs/collectives-coverage.md)",
                collective=True,
                # distval_suite/coverage.py's DTYPES (tests/project/test_coverage_page.py keeps them equal)
                probed_dtypes=("float32", "float64", "int64", "bfloat16", "float16", "int32", "int8", "uint8", "bool"),
                # Its share of the target, not a measurement: 8.0 s (one container) and 9.7 s (two) on 2.6 before its
                # coverage model, 3.5 s and 4.9 s after it at a load of 11.
                budget_s=1.5,
                repeat=ArgSpec("int", "run every collective this many times and report k of N failures", minimum=1),
                large_mib=ArgSpec(
                    "int", "the large size: this many MiB of float32 (default 16), as many elements in every dtype", minimum=1
                ),
            ),
            _info(
                "ddp_sync",
                "DistributedDataParallel: identical, changed parameters on every rank after one step",
                collective=True,
                # 1.13 s on 2.15: DDP's constructor imports torch._dynamo (1.2-1.7 s; once per rank, ddp_sampler reuses it).
                budget_s=2.5,
            ),
            _info(
                "ddp_training",
                "DistributedDataParallel as training uses it, several gradient buckets and steps against a reference: "
                "buckets, no_sync accumulation, find_unused_parameters, static_graph, the fp16 comm hook, Join with "
                "uneven inputs (one result per part)",
                collective=True,
                # configs/training.yaml's: its six parts took 1.13-1.50 s of CPU per rank (1.13, 2.6, 2.15; process_time,
                # load-independent), with DDP's own import paid earlier; 2x for the second rank on 2 cores.
                budget_s=3.0,
                steps=ArgSpec("int", "optimizer steps per part (default 4; Join's rank r takes r more)", minimum=3),
                parts=ArgSpec(
                    "names",
                    "the parts to run (default all)",
                    choices=("buckets", "no_sync", "find_unused", "static_graph", "comm_hook", "join"),
                ),
            ),
            _info(
                "ddp_sampler",
                "DistributedSampler + DDP: disjoint covering shards, the reference step's losses and weights "
                "(at 2 ranks the published ones)",
                collective=True,
                budget_s=0.3,
            ),
            _info(
                "store",
                "the rendezvous TCPStore: set/get/add/wait across ranks with known answers",
                collective=True,
                budget_s=0.2,
            ),
            _info(
                "timeout",
                "one rank arrives late; the others fail at the deadline with the backend's timeout error",
                collective=True,
                budget_s=1.5,  # the default config's deadline_s 0.5 + margin_s 1: a pass takes 0.51
                deadline_s=ArgSpec("seconds", "the collective timeout to set (default 2)"),
                margin_s=ArgSpec("seconds", "how late after the deadline the error may come (default 2)"),
            ),
            _info(
                "bandwidth",
                "collective bandwidth per operation and message size (time, algbw, busbw as nccl-tests defines them), "
                "every result checked against a known answer",
                collective=True,
                probed_dtypes=("float32",),  # distval_suite/bandwidth.py measures float32 only
                sizes=ArgSpec("sizes", "message sizes, e.g. [4KiB, 1MiB, 64MiB] (default 4KiB..64MiB, powers of 4)"),
                iterations=ArgSpec("int", "timed iterations per operation and size; the median counts (default 5)", minimum=1),
                min_time_s=ArgSpec(
                    "seconds",
                    "more timed iterations until they add up to this per operation and size, at most 1000 in all (default 0.1)",
                ),
                warmup=ArgSpec("int", "untimed iterations before them (default 1)", minimum=0),
                ops=ArgSpec(
                    "names",
                    "operations to measure (default all)",
                    choices=("all_reduce", "all_gather", "broadcast", "reduce_scatter", "all_to_all"),
                ),
                min_busbw_gbps=ArgSpec("busbw", "fail below this busbw in GB/s: one number, or size -> GB/s"),
                yardstick=ArgSpec(
                    "bool",
                    "measure the raw TCP throughput between ring neighbours first (testcase bandwidth.yardstick) and give "
                    "each figure its efficiency, busbw / raw TCP (default true; false saves its seconds)",
                ),
                min_efficiency=ArgSpec(
                    "efficiency",
                    "fail below this efficiency (busbw / raw TCP): one number, or size -> number; needs the yardstick",
                    needs="yardstick",
                    backends=("gloo",),
                ),
            ),
            _info(
                "reconfigure",
                "torch >= 2.14: a gloo group reconfigured twice keeps giving correct collectives",
                collective=True,
                budget_s=0.2,  # 0.06 s on 2.15 (load 15-17)
                torch_minimum=(2, 14),
            ),
            _info(
                "fsdp2",
                "torch >= 2.7: FSDP2 (fully_shard) trains a small model sharded over every rank; the losses and the "
                "parameters assembled from the shards equal a one-process reference (gradient averaged over every rank's batch)",
                collective=True,
                # 4.93 s on 2.15, most of it importing torch.distributed.tensor and torch._dynamo (load 15-17)
                budget_s=9.9,
                torch_minimum=(2, 7),
            ),
            _info(
                "dtensor",
                "torch >= 2.5: a known tensor on a DeviceMesh of every rank, moved between Shard(0), Shard(1), Replicate "
                "and Partial placements; every rank's local tensor is its known piece",
                collective=True,
                budget_s=1.0,  # configs/training.yaml's: 0.8-1.0 s on 2.15 once torch.distributed.tensor was imported
                torch_minimum=(2, 5),
            ),
            _info(
                "dcp",
                "torch >= 2.5: torch.distributed.checkpoint saves sharded DTensors on every rank and loads them back "
                "exactly, resharded on the same ranks and on one rank alone",
                collective=True,
                # 4.34 s on 2.6, where it is the first to import torch.distributed.checkpoint; 0.33 s on 2.15 after fsdp2
                # (load 15-17)
                budget_s=8.7,
                torch_minimum=(2, 5),
            ),
            _info(
                "collective_loop",
                "all_reduce with a known answer in a loop (the workload a fault lands in); records the error text at once",
                collective=True,
                duration_s=ArgSpec("seconds", "how long the loop runs (default 30)"),
                numel=ArgSpec("int", "float32 elements per all_reduce (default 1024)", minimum=1),
                timeout_s=ArgSpec(
                    "seconds", "the loop's group timeout: what a frozen or cut-off peer costs (default collective_timeout_s)"
                ),
            ),
            _info(
                "allocate",
                "one rank fills memory (the oom fault's check: the kernel's OOM killer must end it)",
                mib=ArgSpec("int", "MiB to fill (default 1024)", minimum=1),
                rank=ArgSpec("int", "the rank that fills it (default: every rank)"),
            ),
        )
    }
)
