"""The checks. Each one returns (message, details) on success and raises CheckFailed on a wrong answer.

Any other exception is recorded as the check's error. Checks receive a Context; the process group is
created on first use by a check that needs it, so ``env`` still reports when it cannot be created.
"""

from __future__ import annotations

import os
import platform
import socket
from datetime import timedelta
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
import torch.distributed as dist

CheckOutcome = Tuple[str, Dict[str, Any]]


class CheckFailed(Exception):
    """The check ran and saw a wrong answer; the message says what was expected and what was seen."""

    def __init__(self, message: str, details: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.details = details or {}


class ProcessGroupUnavailable(Exception):
    """init_process_group failed earlier; every later check that needs the group reports this."""


class Context:
    def __init__(self, spec: Dict[str, Any]) -> None:
        self.spec = spec
        self.backend: str = spec["backend"]
        self.collective_timeout_s: float = float(spec["collective_timeout_s"])
        self.rank = int(os.environ["RANK"])
        self.world_size = int(os.environ["WORLD_SIZE"])
        self._init_error: Optional[str] = None

    def process_group(self) -> None:
        """Create the default process group once; remember a failure and re-raise it for later checks."""
        if self._init_error is not None:
            raise ProcessGroupUnavailable(self._init_error)
        if dist.is_available() and dist.is_initialized():
            return
        try:
            if not dist.is_available():
                raise RuntimeError("torch.distributed is not available in this torch build")
            dist.init_process_group(
                backend=self.backend,
                timeout=timedelta(seconds=self.collective_timeout_s),
            )
        except Exception as exc:  # noqa: BLE001 - any init failure is reported, never raised past here
            self._init_error = "init_process_group(backend=%r) failed: %s: %s" % (
                self.backend,
                type(exc).__name__,
                exc,
            )
            raise ProcessGroupUnavailable(self._init_error) from exc


CheckFunction = Callable[[Context, Dict[str, Any]], CheckOutcome]
CHECKS: Dict[str, CheckFunction] = {}


def check(name: str) -> Callable[[CheckFunction], CheckFunction]:
    def register(function: CheckFunction) -> CheckFunction:
        CHECKS[name] = function
        return function

    return register


def _backend_availability() -> Dict[str, bool]:
    if not dist.is_available():
        return {"gloo": False, "nccl": False, "mpi": False}
    return {
        "gloo": bool(dist.is_gloo_available()),
        "nccl": bool(dist.is_nccl_available()),
        "mpi": bool(dist.is_mpi_available()),
    }


@check("env")
def check_env(ctx: Context, args: Dict[str, Any]) -> CheckOutcome:
    backends = _backend_availability()
    details: Dict[str, Any] = {
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "distributed_available": bool(dist.is_available()),
        "gloo_available": backends["gloo"],
        "nccl_available": backends["nccl"],
        "mpi_available": backends["mpi"],
        "cuda_version": torch.version.cuda,
        "cuda_device_count": int(torch.cuda.device_count()),
        "hostname": socket.gethostname(),
    }
    if not details["distributed_available"]:
        raise CheckFailed(
            "expected torch.distributed to be available; torch.distributed.is_available() is False",
            details,
        )
    if ctx.backend in backends and not backends[ctx.backend]:
        have = [name for name, ok in sorted(backends.items()) if ok]
        raise CheckFailed(
            "expected backend %r to be available; torch.distributed.is_%s_available() is False "
            "(available backends: %s)" % (ctx.backend, ctx.backend, ", ".join(have) or "none"),
            details,
        )
    summary = "torch %s, Python %s, backends %s, %d CUDA device(s)" % (
        details["torch_version"],
        details["python_version"],
        ", ".join(name for name, ok in sorted(backends.items()) if ok) or "none",
        details["cuda_device_count"],
    )
    return summary, details


@check("all_reduce")
def check_all_reduce(ctx: Context, args: Dict[str, Any]) -> CheckOutcome:
    ctx.process_group()
    numel = int(args.get("numel", 1))
    rank, world = dist.get_rank(), dist.get_world_size()
    tensor = torch.full((numel,), float(rank + 1), dtype=torch.float32)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    expected = world * (world + 1) / 2.0
    wrong = (tensor != expected).nonzero().flatten()
    details = {"numel": numel, "world_size": world, "expected": expected}
    if wrong.numel() > 0:
        first = int(wrong[0])
        seen: List[float] = sorted({float(v) for v in tensor[wrong[:8]].tolist()})
        details.update({"wrong_elements": int(wrong.numel()), "seen": seen})
        raise CheckFailed(
            "all_reduce(SUM) of rank+1 over %d ranks: expected %s in every element, got %s at "
            "element %d (%d of %d elements wrong)" % (world, expected, float(tensor[first]), first, int(wrong.numel()), numel),
            details,
        )
    return "all_reduce(SUM) over %d ranks gave %s in all %d elements" % (world, expected, numel), details
