"""The torch probe of ``distval doctor``: ``distval_suite/image_probe.py`` run in the image as distval runs its ranks
(the suite copied in through the Engine API, no network, no capability, no new privileges, the image's own user,
a deadline, removed afterwards), or by the local Python with ``--local``; and the one reader of its answer.

The answer is the image's output, so it is data: every value is checked for its type and form before it is
shown, text is escaped for the terminal, and an answer that is not what the probe prints is a failure that
quotes it (escaped), never a pass.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from distval import strict_json
from distval.engine_protocol import EngineAPI
from distval.escape import terminal_line
from distval.plan.nodes import suite_copies
from distval.plan.specs import ContainerOptions, ContainerPlan
from distval.targets.docker.plan import CONTAINER_FILE_MODES, CONTAINER_ROOT
from distval.targets.docker.runtime import files_archive, suite_dir

PROBE_MODULE = "distval_suite.image_probe"
# Importing a CUDA build of torch from an image's cold layers takes tens of seconds (local runs' TORCH_PROBE_TIMEOUT_S
# is 120 s for the same reason); beyond that the probe is killed and the check fails.
PROBE_TIMEOUT_S = 120.0
# As the host probes (distval/targets/engines/plan.py): less than the ranks get, never more.
PROBE_CAP_DROP = ("ALL",)
PROBE_SECURITY_OPT = ("no-new-privileges",)
PROBE_ENV = (("PYTHONDONTWRITEBYTECODE", "1"),)
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


def probe_plan(image: str, python: str, run_id: str) -> ContainerPlan:
    """The probe container: the image under test on purpose, with the suite copied in and nothing else."""
    return ContainerPlan(
        name=f"distval-{run_id}-torch-probe",
        hostname="",
        node_rank=-1,
        ranks=(),
        argv=(python, "-m", PROBE_MODULE),
        env=PROBE_ENV,
        labels=(),
        working_dir=CONTAINER_ROOT,
        image=image,
        options=ContainerOptions(cap_drop=PROBE_CAP_DROP, security_opt=PROBE_SECURITY_OPT),
        files=suite_copies(CONTAINER_ROOT, CONTAINER_FILE_MODES),
        network_mode="none",
    )


def probe_image(engine: EngineAPI, plan: ContainerPlan, timeout_s: float = PROBE_TIMEOUT_S) -> TorchFacts | str:
    """Run the probe container to its end (killed at the deadline) and read its answer; whatever happens, every
    container of the doctor's run is removed. Engine errors leave as EngineError."""
    try:
        handle = engine.create_container(plan)
        engine.put_archive(handle, "/", files_archive(plan.files))
        engine.start(handle)
        if not engine.wait_stopped(handle, timeout_s):
            engine.kill(handle)
            return f"the probe did not finish within {timeout_s:g} s (killed)"
        state = engine.state(handle)
        stdout, stderr = engine.logs(handle)
    finally:
        engine.remove_labelled()
    return read_answer(state.exit_code, stdout, stderr)


def probe_local(python: str, timeout_s: float = PROBE_TIMEOUT_S) -> TorchFacts | str:
    """The same probe run by a local Python, from the directory that holds distval_suite (``-m`` puts it first on
    the path; the user's PYTHONPATH stays, as a local run keeps it)."""
    try:
        done = subprocess.run(
            [python, "-m", PROBE_MODULE],
            cwd=Path(suite_dir()).parent,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return f"{python} -m {PROBE_MODULE} did not finish within {timeout_s:g} s"
    except OSError as exc:
        return f"cannot run {python}: {quoted(exc.strerror or str(exc))}"
    return read_answer(done.returncode, done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace"))
