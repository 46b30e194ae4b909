"""Checks of the image itself, before any process group: env, identity, cuda_build, bytecode, libraries, environment.

cuda_build gathers facts here with torch; distval_suite.cudabuild (torch-free) decides. bytecode surveys
torch's package directory with distval_suite.bytecode (torch-free). libraries judges what this rank mapped with
distval_suite.libraries, environment the image's variables with distval_suite.environment (both torch-free).
"""

from __future__ import annotations

import os
import platform
import socket
import sys
from typing import Any, Callable, Dict, List, Optional

import torch
import torch.distributed as dist

from distval_suite import bytecode, environment, libraries
from distval_suite.core import CheckFailed, CheckOutcome, Context, Skip, backend_unknown_reason, check
from distval_suite.cudabuild import (
    CUDA_PREFIXES,
    assess,
    cuda_requirements,
    cuda_version_text,
    cudnn_version_text,
    find_package,
    summary,
)
from distval_suite.devices import backend_family
from distval_suite.requirements import marker_environment, normalize
from distval_suite.survey import Survey
from distval_suite.versions import version_matches


def torch_package_dir() -> str:
    """torch's package directory: where the environment check reads the names torch's Python files read."""
    return str(os.path.dirname(os.path.abspath(torch.__file__)))


def _backend_availability() -> Dict[str, bool]:
    if not dist.is_available():
        return {"gloo": False, "nccl": False, "mpi": False}
    return {
        "gloo": bool(dist.is_gloo_available()),
        "nccl": bool(dist.is_nccl_available()),
        "mpi": bool(dist.is_mpi_available()),
    }


def image_facts() -> Dict[str, Any]:
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
    details = image_facts()
    if not details["distributed_available"]:
        raise CheckFailed("expected torch.distributed to be available; torch.distributed.is_available() is False", details)
    available = [name for name in ("gloo", "nccl", "mpi") if details["%s_available" % name]]
    family = backend_family(ctx.backend)
    unknown = backend_unknown_reason(ctx.backend)
    if unknown is not None:
        raise Skip(unknown)
    if family in ("gloo", "nccl", "mpi") and not details["%s_available" % family]:
        if family == "nccl" and details["cuda_version"] is None:
            # A CPU build has no NCCL by design: the scenario cannot run here, the image is not broken.
            raise Skip(
                "backend %r needs a CUDA build of torch; this is a CPU build (torch.version.cuda is None, "
                "torch.distributed.is_nccl_available() is False)" % ctx.backend
            )
        raise CheckFailed(
            "expected backend %r to be available; torch.distributed.is_%s_available() is False (available backends: %s)"
            % (ctx.backend, family, ", ".join(available) or "none"),
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
    facts = image_facts()
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


# -- cuda_build --------------------------------------------------------------------------------------
def _installed_versions() -> Dict[str, str]:
    """Installed distributions (normalized name -> version) of the CUDA libraries and meta-packages."""
    from importlib import metadata

    found: Dict[str, str] = {}
    for distribution in metadata.distributions():
        name = normalize(distribution.metadata["Name"] or "")
        if name.startswith(CUDA_PREFIXES):
            found[name] = distribution.version
    return found


def _call(facts: Dict[str, Any], key: str, function: Callable[[], Any]) -> Any:
    """``function()``, or None with ``<key>_error`` holding what it raised (measured, not assumed)."""
    try:
        return function()
    except Exception as exc:  # noqa: BLE001 - a failing probe is a fact to report
        facts[key + "_error"] = "%s: %s" % (
            type(exc).__name__,
            str(exc).strip().splitlines()[0][:300] if str(exc).strip() else "",
        )
        return None


def cuda_facts() -> Dict[str, Any]:
    """What the image says about its CUDA build; every probe that needs no GPU."""
    from importlib import metadata

    facts: Dict[str, Any] = {"torch_version": torch.__version__, "cuda_version": torch.version.cuda}
    facts["cuda_is_built"] = _call(facts, "cuda_is_built", lambda: bool(torch.backends.cuda.is_built()))
    if hasattr(torch._C, "_cuda_getCompiledVersion"):  # CUDA builds only
        code = _call(facts, "compiled_cuda", torch._C._cuda_getCompiledVersion)
        facts["compiled_cuda"] = cuda_version_text(int(code)) if code else None
    else:
        facts["compiled_cuda"] = None
        facts["compiled_cuda_error"] = "torch._C has no _cuda_getCompiledVersion (a CPU build's C library)"
    if torch.version.cuda is not None and facts["cuda_is_built"]:
        cudnn = getattr(torch._C, "_cudnn", None)
        compiled = _call(facts, "cudnn_compiled", cudnn.getCompileVersion) if cudnn is not None else None
        facts["cudnn_compiled"] = ".".join(str(n) for n in compiled) if compiled else None
        # version() loads the library and raises when it is incompatible with the compiled one.
        loaded = _call(facts, "cudnn", torch.backends.cudnn.version)
        facts["cudnn_loaded"] = cudnn_version_text(int(loaded)) if loaded else None
        nccl = _call(facts, "nccl", torch.cuda.nccl.version)
        facts["nccl_runtime"] = ".".join(str(n) for n in nccl[:3]) if nccl else None
        packages = _call(facts, "packages", _installed_versions) or {}
        facts["packages"] = packages
        facts["nccl_package"] = find_package(packages, "nvidia-nccl-")
        facts["cudnn_package"] = find_package(packages, "nvidia-cudnn-")
        try:
            facts["requirements"] = cuda_requirements(metadata.requires("torch"), _requires_of, _version_of, marker_environment())
        except Exception as exc:  # noqa: BLE001 - missing or unreadable metadata is reported, not raised
            facts["requirements_error"] = "cannot read torch's requirements: %s: %s" % (type(exc).__name__, exc)
    return facts


def _requires_of(name: str) -> Optional[List[str]]:
    from importlib import metadata

    try:
        return metadata.requires(name)
    except metadata.PackageNotFoundError:
        return None


def _version_of(name: str) -> Optional[str]:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


@check("cuda_build")
def check_cuda_build(ctx: Context, args: Dict[str, Any]) -> CheckOutcome:
    facts = cuda_facts()
    verdict = assess(facts, {"build": args.get("build"), "cuda": args.get("cuda")})
    details = dict(facts)
    details["requirements"] = [r._asdict() for r in facts.get("requirements") or []]
    if verdict.problems:
        raise CheckFailed("; ".join(verdict.problems), details)
    return "torch %s: %s" % (facts["torch_version"], summary(verdict)), details


# -- bytecode ----------------------------------------------------------------------------------------
@check("bytecode")
def check_bytecode(ctx: Context, args: Dict[str, Any]) -> CheckOutcome:
    # Every rank surveys its own container's files, as env and identity do: the containers of a
    # cross-container scenario may come from different copies of the image (one per node).
    max_stale_fraction = float(args.get("max_stale_fraction", 0.05))
    package_dir = os.path.dirname(os.path.abspath(torch.__file__))
    # torchrun and this process imported torch before the check: where Python could, it already wrote a
    # fresh .pyc for every stale module it imported; those written since the launch started count as
    # stale in the image.
    started_at = bytecode.launch_started_at()
    result = bytecode.survey(package_dir, started_at)
    unwritable = bytecode.unwritable_reason(package_dir)
    details = bytecode.details(result)
    details["writable"] = unwritable is None
    details["unwritable"] = unwritable
    details["launch_started_at"] = started_at
    problem = bytecode.verdict(result, "torch", max_stale_fraction, unwritable)
    if problem is not None:
        raise CheckFailed(problem, details)
    return bytecode.summary(result, "torch"), details


# -- libraries and environment -----------------------------------------------------------------------
MAX_FINDINGS_TEXT = 5  # findings spelt out in the message; every one is in the details


def _findings_message(texts: List[str]) -> str:
    more = len(texts) - MAX_FINDINGS_TEXT
    return "; ".join(texts[:MAX_FINDINGS_TEXT]) + ("; and %d more (details)" % more if more > 0 else "")


def _survey(ctx: Context) -> Survey:
    """The rank's survey of the image's files (distval_suite/survey.py), or, where none was started, one that
    reads everything when asked."""
    return ctx.survey if ctx.survey is not None else Survey("", (), ())


@check("libraries")
def check_libraries(ctx: Context, args: Dict[str, Any]) -> CheckOutcome:
    # Every rank judges its own process: what it mapped is what ran (a rank of another node may load another copy).
    owners = _survey(ctx).package_files(sys.path)
    found = libraries.describe(libraries.mapped_now(), owners)
    cannot = libraries.unjudged(found)
    findings = libraries.assess(found, owners, libraries.interpreter_dirs(), args.get("allow_dirs", []))
    by_database: Dict[str, int] = {}
    for library in found:
        kind = library.owner.split(":", 1)[0] if library.owner else "none"
        by_database[kind] = by_database.get(kind, 0) + 1
    details: Dict[str, Any] = {
        "mapped": [dict(lib._asdict()) for lib in found[: libraries.MAX_LISTED]],
        "mapped_count": len(found),
        "owners": by_database,
        "packaged_shared_objects": len(owners),
        "findings": [dict(f._asdict()) for f in findings],
    }
    if findings:
        raise CheckFailed(_findings_message([libraries.finding_text(f) for f in findings]), details)
    if cannot is not None:
        raise CheckFailed("cannot judge what this rank loaded: " + cannot, details)
    owned = ", ".join("%s %d" % (kind, count) for kind, count in sorted(by_database.items()) if kind != "none")
    return (
        "%d shared libraries mapped (owned: %s; the rest the running Python's or the system's), one copy each, "
        "each the packaged copy, none from outside the package trees" % (len(found), owned or "none"),
        details,
    )


@check("environment")
def check_environment(ctx: Context, args: Dict[str, Any]) -> CheckOutcome:
    lacking = ctx.spec.get("no_image_environment")
    if lacking:  # the target's declared reason (distval/targets/declarations.py): its ranks start from no image
        raise Skip(str(lacking))
    variables = environment.image_variables(environment.environ_of("/proc/1/environ"), ctx.spec.get("set_by_distval", []))
    survey = _survey(ctx)
    known, scanned = survey.names_in_libraries(libraries.mapped_now())
    known |= survey.python_names(torch_package_dir())
    findings = environment.assess(variables, known, args.get("harmful", environment.HARMFUL), args.get("allow", []))
    harmful_fails = args.get("harmful_verdict", "fail") == "fail"
    failing = [f for f in findings if f.kind == "misspelt" or (f.kind == "harmful" and harmful_fails)]
    notes = [f for f in findings if f not in failing]
    details: Dict[str, Any] = {
        "variables": [
            {
                "name": v.name,
                "value": v.value[: environment.MAX_VALUE],
                "source": v.source,
                "read_by_image": v.name in known,
            }
            for v in variables
            if environment.listed(v)
        ],
        "files": [environment.describe_file(v.value) for v in variables if v.name in environment.FILE_VARIABLES and v.value],
        "known_names": len(known),
        "libraries_read": scanned,
        "findings": [dict(f._asdict()) for f in findings],
    }
    if failing:
        raise CheckFailed(_findings_message([f.text for f in failing + notes]), details)
    cannot = environment.unread_libraries(scanned)
    if cannot is not None:
        raise CheckFailed("cannot judge the image's variables: " + cannot, details)
    message = (
        "the image sets %d variable(s) (%d listed: torch's, its backends', OpenMP's, CUDA's, the loader's), none misspelt%s; "
        % (
            len(variables),
            len(details["variables"]),
            "" if harmful_fails else ", harmful ones only warned",
        )
        + "%d names read by its libraries and torch" % len(known)
    )
    if notes:
        message += "; " + _findings_message([("warning: " if f.kind == "harmful" else "note: ") + f.text for f in notes])
    return message, details
