"""The torch probe of ``distval doctor`` as every kind reads it: ``distval_suite/image_probe.py``, run where a kind's
doctor runs it (in the image as distval runs its ranks: distval/targets/docker/doctor_probe.py; by the local Python:
distval/targets/local/doctor.py), and the one reader of its answer and the finding made of it.

The answer is the image's output, so it is data: every value is checked for its type and form before it is
shown, text is escaped for the terminal, and an answer that is not what the probe prints is a failure that
quotes it (escaped), never a pass.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from distval import strict_json
from distval.config.keys import DEFAULT_PYTHON
from distval.doctor.checks import Finding
from distval.escape import terminal_line

PROBE_MODULE = "distval_suite.image_probe"
# Importing a CUDA build of torch from an image's cold layers takes tens of seconds (local runs' TORCH_PROBE_TIMEOUT_S
# is 120 s for the same reason); beyond that the probe is killed and the check fails.
PROBE_TIMEOUT_S = 120.0
# How much of the image's text a finding quotes.
QUOTE_MAX_CHARS = 200
# A version as torch and Python print them: 2.6.0, 2.6.0+debian, 2.15.0a0+git1234abc, 3.13.1.
VERSION = re.compile(r"[0-9]{1,4}(\.[0-9]{1,4}){1,3}[.+_a-zA-Z0-9-]{0,64}")
CUDA_VERSION = re.compile(r"[0-9]{1,3}\.[0-9]{1,3}(\.[0-9]{1,3})?")
FLAGS = ("distributed_available", "gloo_available", "nccl_available")


@dataclass(frozen=True)
class TorchFacts:
    """What the probe found, validated. ``torch_version`` empty: torch could not be imported, ``error`` says why."""

    python_version: str
    torch_version: str = ""
    error: str = ""
    distributed: bool = False
    gloo: bool = False
    nccl: bool = False
    cuda_version: str | None = None  # None: a CPU build

    def summary(self) -> str:
        build = f"CUDA {self.cuda_version} build" if self.cuda_version else "CPU build"
        backends = ", ".join(f"{name} {'yes' if have else 'no'}" for name, have in (("gloo", self.gloo), ("nccl", self.nccl)))
        return f"torch {self.torch_version} (Python {self.python_version}), {build}; {backends}"


def quoted(text: str) -> str:
    """The image's text, escaped for the terminal, on one line and short."""
    line = terminal_line(text)
    return line if len(line) <= QUOTE_MAX_CHARS else line[:QUOTE_MAX_CHARS] + "..."


def read_answer(exit_code: int | None, stdout: str, stderr: str) -> TorchFacts | str:
    """The probe's facts, or why its answer cannot be read (the reason quotes the image, escaped)."""
    lines = stdout.strip().splitlines()
    if exit_code != 0 or not lines:
        last = (stderr.strip().splitlines() or ["no output"])[-1]
        return f"the probe exited {exit_code}: {quoted(last)}"
    try:
        answer = strict_json.loads(lines[-1])
    except ValueError:
        return f"the probe printed {quoted(lines[-1])}, not its JSON line"
    if not isinstance(answer, dict):
        return f"the probe printed {quoted(lines[-1])}, not a JSON object"
    python_version = answer.get("python_version")
    if not isinstance(python_version, str) or not VERSION.fullmatch(python_version):
        return f"the probe's python_version is {quoted(repr(python_version))}, not a version"
    if answer.get("torch") is False:
        error = answer.get("error")
        return TorchFacts(python_version, error=quoted(error) if isinstance(error, str) and error else "no reason given")
    if answer.get("torch") is not True:
        return f"the probe's torch is {quoted(repr(answer.get('torch')))}, not true or false"
    torch_version = answer.get("torch_version")
    if not isinstance(torch_version, str) or not VERSION.fullmatch(torch_version):
        return f"the probe's torch_version is {quoted(repr(torch_version))}, not a version"
    cuda = answer.get("cuda_version")
    if cuda is not None and (not isinstance(cuda, str) or not CUDA_VERSION.fullmatch(cuda)):
        return f"the probe's cuda_version is {quoted(repr(cuda))}, not a CUDA version or null"
    flags = {name: answer.get(name) for name in FLAGS}
    for name, value in flags.items():
        if not isinstance(value, bool):
            return f"the probe's {name} is {quoted(repr(value))}, not true or false"
    return TorchFacts(
        python_version,
        torch_version,
        distributed=bool(flags["distributed_available"]),
        gloo=bool(flags["gloo_available"]),
        nccl=bool(flags["nccl_available"]),
        cuda_version=cuda,
    )


def torch_finding(answer: TorchFacts | str, where: str, whose: str) -> Finding:
    """The finding of a torch probe's answer: ``where`` it ran ("in IMAGE"), ``whose`` torch it is ("the image")."""
    if isinstance(answer, str):
        return Finding("fail", f"import torch {where}: {answer}", f"check that {whose} has a working {DEFAULT_PYTHON} with torch")
    if not answer.torch_version:
        return Finding(
            "fail",
            f"import torch {where} failed (Python {answer.python_version}): {answer.error}",
            f"every scenario needs torch: install it in {whose}",
        )
    if not answer.distributed:
        return Finding(
            "fail", f"{answer.summary()} {where}: torch.distributed is not available", "use a torch built with distributed"
        )
    if not answer.gloo:
        return Finding(
            "warn", f"{answer.summary()} {where}: no gloo", "scenarios with backend gloo (the default) fail: use backend nccl"
        )
    return Finding("ok", f"{answer.summary()} {where}")
