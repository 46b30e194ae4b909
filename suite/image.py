"""Checks of the image itself, before any process group: env, identity, cuda_build."""

from __future__ import annotations

import platform
import socket
from typing import Any, Dict, List

import torch
import torch.distributed as dist

from suite.core import CheckFailed, CheckOutcome, Context, Skip, check
from suite.versions import version_matches


def _backend_availability() -> Dict[str, bool]:
    if not dist.is_available():
        return {"gloo": False, "nccl": False, "mpi": False}
    return {
        "gloo": bool(dist.is_gloo_available()),
        "nccl": bool(dist.is_nccl_available()),
        "mpi": bool(dist.is_mpi_available()),
    }


def _image_facts() -> Dict[str, Any]:
    backends = _backend_availability()
    return {
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


@check("env")
def check_env(ctx: Context, args: Dict[str, Any]) -> CheckOutcome:
    details = _image_facts()
    if not details["distributed_available"]:
        raise CheckFailed("expected torch.distributed to be available; torch.distributed.is_available() is False", details)
    available = [name for name in ("gloo", "nccl", "mpi") if details["%s_available" % name]]
    if ctx.backend in ("gloo", "nccl", "mpi") and not details["%s_available" % ctx.backend]:
        raise CheckFailed(
            "expected backend %r to be available; torch.distributed.is_%s_available() is False (available backends: %s)"
            % (ctx.backend, ctx.backend, ", ".join(available) or "none"),
            details,
        )
    summary = "torch %s, Python %s, backends %s, %d CUDA device(s)" % (
        details["torch_version"],
        details["python_version"],
        ", ".join(available) or "none",
        details["cuda_device_count"],
    )
    return summary, details


@check("identity")
def check_identity(ctx: Context, args: Dict[str, Any]) -> CheckOutcome:
    facts = _image_facts()
    problems: List[str] = []
    stated: List[str] = []
    if "torch" in args:
        stated.append("torch %s" % args["torch"])
        if not version_matches(facts["torch_version"], args["torch"]):
            problems.append("expected torch %s; image has %s" % (args["torch"], facts["torch_version"]))
    if "python" in args:
        stated.append("Python %s" % args["python"])
        if not version_matches(facts["python_version"], args["python"]):
            problems.append("expected Python %s; image has %s" % (args["python"], facts["python_version"]))
    if "build" in args:
        have = "cuda" if facts["cuda_version"] else "cpu"
        stated.append("a %s build" % args["build"])
        if have != args["build"]:
            problems.append(
                "expected a %s build of torch; image has a %s build (torch.version.cuda=%s)"
                % (args["build"], have, facts["cuda_version"])
            )
    for backend in args.get("backends", []):
        stated.append("backend %s" % backend)
        if not facts.get("%s_available" % backend):
            problems.append(
                "expected backend %s to be available; torch.distributed.is_%s_available() is False" % (backend, backend)
            )
    if not stated:
        raise Skip("the scenario states nothing about the image (args: torch, python, build, backends)")
    if problems:
        raise CheckFailed("; ".join(problems), facts)
    return "image is as stated: %s" % ", ".join(stated), facts
