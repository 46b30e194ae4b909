"""The verdict of ``cuda_build`` from facts gathered inside the image: standard library only.

distval_suite.image gathers the facts with torch and importlib.metadata; everything that decides pass or
fail lives here, so it is unit-tested on the host. The defects it is for are real releases: a
"CUDA" nightly that held a CPU build (pytorch#125879), cuDNN and NCCL libraries that disagree with
what torch was built against or requires (pytorch#122571, #150049).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

from distval_suite.requirements import Requirement, applicable, normalize, specifier_matches
from distval_suite.versions import version_matches, version_tuple

# torch's own requirements that are CUDA libraries (nvidia-nccl-cu13, nvidia-cudnn-cu13, ...), and the
# meta-packages that pull them in through extras (torch 2.15: cuda-toolkit[cublas,cudart,...]==13.2.2).
CUDA_PREFIXES = ("nvidia-", "cuda-")


def cuda_version_text(code: int) -> str:
    """CUDA's integer version (CUDA_VERSION, cudaRuntimeGetVersion): 13000 -> '13.0', 12080 -> '12.8'."""
    return "%d.%d" % (code // 1000, (code % 1000) // 10)


def cudnn_version_text(code: int) -> str:
    """cuDNN's integer version: 9 and later encode major*10000 + minor*100 + patch (92600 -> 9.26.0),
    earlier ones major*1000 + minor*100 + patch (8907 -> 8.9.7)."""
    if code >= 90000:
        return "%d.%d.%d" % (code // 10000, (code % 10000) // 100, code % 100)
    return "%d.%d.%d" % (code // 1000, (code % 1000) // 100, code % 100)


class RequirementCheck(NamedTuple):
    requirement: str  # as torch (or the meta-package) states it
    name: str
    installed: Optional[str]  # None: not installed
    satisfied: bool
    via: str  # "torch", or "cuda-toolkit[cublas]" for a requirement pulled in through extras


def cuda_requirements(
    torch_requires: Optional[List[str]],
    requires_of: Callable[[str], Optional[List[str]]],
    installed: Callable[[str], Optional[str]],
    environment: Dict[str, str],
) -> List[RequirementCheck]:
    """Every CUDA-library requirement of torch that applies on this platform, one level through the
    extras of a CUDA meta-package, against the installed versions."""
    checks: List[RequirementCheck] = []
    seen: Dict[Tuple[str, str], bool] = {}

    def add(requirement: Requirement, via: str) -> None:
        if (requirement.name, requirement.specifier) in seen:
            return
        seen[(requirement.name, requirement.specifier)] = True
        have = installed(requirement.name)
        ok = have is not None and (not requirement.specifier or specifier_matches(have, requirement.specifier))
        checks.append(RequirementCheck(requirement.text.split(";")[0].strip(), requirement.name, have, ok, via))

    for requirement in applicable(torch_requires, environment):
        if not requirement.name.startswith(CUDA_PREFIXES):
            continue
        add(requirement, "torch")
        if requirement.extras:
            via = "%s[%s]" % (requirement.name, ",".join(requirement.extras))
            for extra in requirement.extras:
                for inner in applicable(requires_of(requirement.name), environment, (extra,)):
                    if inner.name.startswith(CUDA_PREFIXES) and "extra" in inner.marker:
                        add(inner, via)
    return checks


class Verdict(NamedTuple):
    problems: List[str]  # each "expected ...; seen ..."
    passed: List[str]  # what was confirmed
    skipped: List[str]  # what could not be checked here, with the measured reason


def assess(facts: Dict[str, Any], args: Dict[str, Any]) -> Verdict:
    """Pass or fail the image's CUDA build identity from ``facts`` (see distval_suite.image.cuda_facts)."""
    problems: List[str] = []
    passed: List[str] = []
    skipped: List[str] = []
    cuda = facts.get("cuda_version")
    built = facts.get("cuda_is_built")
    have = "cuda" if cuda else "cpu"

    want_build = args.get("build")
    if want_build is not None:
        if want_build != have:
            problems.append(
                "expected a %s build of torch; image has a %s build (torch.version.cuda=%r)" % (want_build, have, cuda)
            )
        else:
            passed.append("a %s build as stated" % want_build)
    want_cuda = args.get("cuda")
    if want_cuda is not None:
        if cuda is None:
            problems.append("expected CUDA %s; image has a CPU build (torch.version.cuda is None)" % want_cuda)
        elif not version_matches(cuda, want_cuda):
            problems.append("expected CUDA %s; torch.version.cuda is %s" % (want_cuda, cuda))
        else:
            passed.append("CUDA %s matches %s" % (cuda, want_cuda))

    if cuda is None:
        if built:
            problems.append(
                "expected torch.version.cuda to name the CUDA version of a CUDA build; it is None while "
                "torch.backends.cuda.is_built() is True"
            )
        skipped.append("the CUDA parts (compiled CUDA, cuDNN, NCCL, nvidia-* wheels): a CPU build has none")
        return Verdict(problems, passed, skipped)

    # A build that claims CUDA must be one (pytorch#125879: a CUDA nightly that held a CPU build).
    if built is False:
        problems.append(
            "expected a CUDA build as torch.version.cuda=%r claims; torch.backends.cuda.is_built() is False "
            "(a CPU build labelled CUDA, pytorch#125879)" % cuda
        )
        skipped.append("cuDNN, NCCL and nvidia-* wheels: torch's C library has no CUDA")
        return Verdict(problems, passed, skipped)
    passed.append("torch.backends.cuda.is_built() is True")
    compiled = facts.get("compiled_cuda")
    if compiled is None:
        skipped.append("compiled CUDA version: %s" % (facts.get("compiled_cuda_error") or "not reported"))
    elif version_tuple(compiled)[:2] != version_tuple(cuda)[:2]:
        problems.append(
            "expected torch's C library to be compiled with CUDA %s as torch.version.cuda says; "
            "torch._C._cuda_getCompiledVersion() says %s" % (cuda, compiled)
        )
    else:
        passed.append("compiled with CUDA %s" % compiled)

    _assess_cudnn(facts, problems, passed, skipped)
    _assess_nccl(facts, problems, passed, skipped)

    requirements: List[RequirementCheck] = facts.get("requirements") or []
    if facts.get("requirements_error"):
        skipped.append("nvidia-* requirements: %s" % facts["requirements_error"])
    else:
        unmet = [r for r in requirements if not r.satisfied]
        for r in unmet:
            problems.append(
                "expected %s (required by %s); %s"
                % (r.requirement, r.via, "it is not installed" if r.installed is None else "installed: %s" % r.installed)
            )
        if requirements and not unmet:
            passed.append("all %d CUDA-library requirements of torch satisfied" % len(requirements))
        elif not requirements:
            skipped.append("nvidia-* requirements: torch's metadata names none for this platform")
    return Verdict(problems, passed, skipped)


def _assess_cudnn(facts: Dict[str, Any], problems: List[str], passed: List[str], skipped: List[str]) -> None:
    compiled, loaded = facts.get("cudnn_compiled"), facts.get("cudnn_loaded")
    if facts.get("cudnn_error"):
        # torch's own cuDNN check raises on an incompatible library: that is the finding.
        problems.append(
            "expected torch to load a cuDNN compatible with the %s it was compiled with; %s"
            % (compiled or "one", facts["cudnn_error"])
        )
        return
    if compiled is None or loaded is None:
        skipped.append(
            "cuDNN: %s"
            % ("not built with cuDNN" if compiled is None and loaded is None else "compiled %s, loaded %s" % (compiled, loaded))
        )
        return
    c, runtime = version_tuple(compiled), version_tuple(loaded)
    # cuDNN keeps compatibility within a major version, from the minor torch was compiled with on.
    if runtime[:1] != c[:1] or runtime[:2] < c[:2]:
        problems.append(
            "expected the cuDNN torch loads to be compatible with the one it was compiled with (same major, not "
            "older): compiled with %s, loads %s (pytorch#122571)" % (compiled, loaded)
        )
    else:
        passed.append("cuDNN compiled %s, loads %s" % (compiled, loaded))
    package = facts.get("cudnn_package")
    if package is not None:
        name, version = package
        if version_tuple(version)[:3] != runtime[:3]:
            problems.append("expected the cuDNN torch loads to be the installed %s %s; it loads %s" % (name, version, loaded))


def _assess_nccl(facts: Dict[str, Any], problems: List[str], passed: List[str], skipped: List[str]) -> None:
    runtime = facts.get("nccl_runtime")
    package = facts.get("nccl_package")
    if runtime is None:
        skipped.append("NCCL version: %s" % (facts.get("nccl_error") or "torch reports none"))
        return
    if package is None:
        passed.append("NCCL %s (no nvidia-nccl-* package: NCCL is linked into torch)" % runtime)
        return
    name, version = package
    if version_tuple(version)[:3] != version_tuple(runtime)[:3]:
        problems.append(
            "expected the NCCL torch reports (torch.cuda.nccl.version() = %s) to be the installed %s; its metadata says %s"
            % (runtime, name, version)
        )
    else:
        passed.append("NCCL %s = %s %s" % (runtime, name, version))


def find_package(packages: Dict[str, str], prefix: str) -> Optional[Tuple[str, str]]:
    """The installed (name, version) whose normalized name starts with ``prefix`` (nvidia-nccl-cu13 for 'nvidia-nccl-')."""
    for name in sorted(packages):
        if normalize(name).startswith(prefix):
            return name, packages[name]
    return None


def summary(verdict: Verdict) -> str:
    text = "; ".join(verdict.passed) or "nothing confirmed"
    if verdict.skipped:
        text += "; skipped: %s" % "; ".join(verdict.skipped)
    return text
