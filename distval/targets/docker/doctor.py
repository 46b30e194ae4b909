"""The docker kind's ``distval doctor`` (in containers: the default): its checks, declared once in CHECKS (name, once or
per Engine, what it looks at, its function), and the Engines it looks at (the one of DOCKER_HOST, or each of --hosts).
The output and the table of docs/doctor.md derive from CHECKS; what every kind's doctor shares is distval/doctor/'s.

Checks of one Engine run once per Engine; a check that needs an Engine that did not answer is skipped.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from distval.config.engine_hosts import HostSpec, host_specs, tls_files
from distval.config.keys import DEFAULT_PYTHON
from distval.config.shipped import DEFAULT_IMAGE
from distval.doctor import machine
from distval.doctor.checks import REPORT_DISK, DoctorCheck, Finding, Line, check_report_disk, disk_finding
from distval.doctor.torch_probe import torch_finding
from distval.engine_protocol import API_VERSION_GPUS, API_VERSION_NEEDED, EngineAPI, EngineFacts, ImageInfo
from distval.errors import EngineError, EngineUnreachable
from distval.images import FIXTURES, RECIPE_LABEL, recipe_hash
from distval.targets.docker.doctor_probe import probe_image, probe_plan
from distval.targets.docker.engine_advice import WITHOUT_DOCKER, context_endpoint, current_context, export_line
from distval.targets.kind import DoctorCommand, DoctorEngine, TargetOptions

DEFAULT_SOCKET = "unix:///var/run/docker.sock"

# Free space where the Engine keeps images and containers. A CUDA build of torch makes a 5-10 GB image, building
# a fixture or receiving an image across hosts (docker load) needs its size again, and every rank container
# writes logs and results there: below the first a run may stop on a full disk, below the second the
# 1.2 GB sample image (distval-fixtures/torch:2.6-debian) cannot even be built.
ENGINE_DISK_WARN_BYTES = 10 * machine.GIB
ENGINE_DISK_FAIL_BYTES = 2 * machine.GIB

ENGINE_TODO = f"start Docker, or set DOCKER_HOST to a running Engine's address, {WITHOUT_DOCKER}"


@dataclass
class EngineSlot:
    """One Engine the doctor looks at: how it was reached (or why not), and what it said, asked once."""

    where: str  # its address (DOCKER_HOST, the default socket, or a --hosts URL)
    label: str  # how the output names it ("" for the one Engine of a plain run)
    engine: EngineAPI | None
    error: EngineError | None = None  # why there is no engine
    _facts: EngineFacts | EngineError | None = None
    _image: ImageInfo | EngineError | None = None
    _image_asked: bool = False

    @property
    def local(self) -> bool:
        """Reached through a socket on this machine (its DockerRootDir may be readable here)."""
        return self.where.startswith("unix://")

    def facts(self) -> EngineFacts:
        if self._facts is None:
            assert self.engine is not None
            try:
                self._facts = self.engine.describe()
            except EngineError as exc:
                self._facts = exc
        if isinstance(self._facts, EngineError):
            raise self._facts
        return self._facts

    def image(self, reference: str) -> ImageInfo | None:
        if not self._image_asked:
            assert self.engine is not None
            self._image_asked = True
            try:
                self._image = self.engine.image(reference)
            except EngineError as exc:
                self._image = exc
        if isinstance(self._image, EngineError):
            raise self._image
        return self._image


@dataclass
class Doctor:
    """What the docker kind's ``distval doctor`` looks at."""

    image: str
    run_id: str
    slots: Sequence[EngineSlot] = ()
    report_dir: str = "."


CheckFunction = Callable[[Doctor, EngineSlot], Finding]


@dataclass(frozen=True, kw_only=True)
class EngineCheck(DoctorCheck):
    """A check of the docker kind: once per Engine (``per`` "Engine": the slot is the Engine's) or once (the slot is
    the first Engine, if any)."""

    function: CheckFunction

    @property
    def per_engine(self) -> bool:
        return bool(self.per)


def _version_tuple(text: str) -> tuple[int, ...] | None:
    try:
        return tuple(int(part) for part in text.split("."))
    except ValueError:
        return None


def _dotted(version: tuple[int, ...]) -> str:
    return ".".join(str(part) for part in version)


def _engine_down(slot: EngineSlot) -> Finding | None:
    """The skip of a check that needs the Engine, when the Engine did not answer."""
    if slot.engine is None:
        return Finding("skip", "the Engine did not answer (see the engine check)")
    return None


def check_engine(doctor: Doctor, slot: EngineSlot) -> Finding:
    if slot.engine is None:
        if isinstance(slot.error, EngineUnreachable):
            return Finding("fail", slot.error.found, slot.error.todo or ENGINE_TODO)
        return Finding("fail", str(slot.error), ENGINE_TODO)
    try:
        facts = slot.facts()
    except EngineError as exc:
        return Finding("fail", f"the Engine at {slot.where} answered a ping but not its version: {exc}", ENGINE_TODO)
    found = f"Docker {facts.version or '(no version given)'}, API {facts.api_version or '?'} at {slot.where}"
    needs = f"distval needs API >= {_dotted(API_VERSION_NEEDED)}, >= {_dotted(API_VERSION_GPUS)} for GPUs"
    if facts.os_type and facts.os_type != "linux":
        return Finding("fail", f"{found}, running {facts.os_type} containers", "switch Docker to Linux containers")
    api = _version_tuple(facts.api_version)
    if api is None:
        return Finding("warn", f"{found}: its API version cannot be read ({needs})", "check that DOCKER_HOST is a Docker Engine")
    if api < API_VERSION_NEEDED:
        return Finding("fail", f"{found} ({needs})", "upgrade Docker to 17.06 or later")
    if api < API_VERSION_GPUS:
        return Finding("warn", f"{found} ({needs})", "upgrade Docker to 19.03 or later for GPU scenarios")
    return Finding("ok", f"{found} ({needs})")


def check_context(doctor: Doctor, slot: EngineSlot) -> Finding:
    """docker-py reads DOCKER_HOST only, not the Docker CLI's current context (engine_advice.py)."""
    docker_host = os.environ.get("DOCKER_HOST")
    if docker_host:
        return Finding("ok", f"DOCKER_HOST={docker_host}: distval and the Docker CLI both use it (it overrides any context)")
    context = current_context()
    if context is None:
        return Finding("ok", f"the Docker CLI's default context: distval and the CLI both talk to {DEFAULT_SOCKET}")
    endpoint = context_endpoint(context)
    if endpoint == DEFAULT_SOCKET:
        return Finding("ok", f"the Docker CLI's context {context!r} is {DEFAULT_SOCKET}, the Engine distval talks to")
    at = f" ({endpoint})" if endpoint else ""
    todo = f"export DOCKER_HOST={endpoint}" if endpoint else export_line(context)
    return Finding(
        "warn",
        f"the Docker CLI uses context {context!r}{at}, which docker-py does not read: distval talks to {DEFAULT_SOCKET}",
        todo,
    )


def check_compose(doctor: Doctor, slot: EngineSlot) -> Finding:
    found = machine.compose_versions()
    if not found:
        return Finding(
            "warn",
            "neither docker-compose nor docker compose answers --version",
            "only the compose way of running (compose.yaml) needs it: install Docker Compose v2 (the docker-compose-plugin "
            "package) to use it",
        )
    return Finding("ok", "; ".join(f"{how}: {version}" for how, version in found.items()))


def check_gpu_runtime(doctor: Doctor, slot: EngineSlot) -> Finding:
    down = _engine_down(slot)
    if down is not None:
        return down
    try:
        facts = slot.facts()
    except EngineError as exc:
        return Finding("skip", f"the Engine did not say its runtimes: {exc}")
    gpus = [device for device in facts.cdi_devices if device.startswith("nvidia.com/gpu")]
    seen = [f"runtimes {', '.join(facts.runtimes) or '(none given)'}"] + ([f"CDI devices {', '.join(gpus)}"] if gpus else [])
    if "nvidia" in facts.runtimes or gpus:
        return Finding("ok", "; ".join(seen))
    return Finding(
        "warn",
        f"no nvidia runtime and no CDI GPU device ({'; '.join(seen)}): scenarios that need GPUs are skipped "
        "(they fail with --require-gpu); CPU scenarios are not affected",
        "for GPU scenarios, install the NVIDIA Container Toolkit and configure Docker for it "
        "(sudo nvidia-ctk runtime configure, then restart Docker)",
    )


def check_engine_disk(doctor: Doctor, slot: EngineSlot) -> Finding:
    down = _engine_down(slot)
    if down is not None:
        return down
    if not slot.local:
        return Finding("skip", f"the Engine at {slot.where} is on another machine: its disk is not measured from here")
    try:
        root = slot.facts().root_dir
    except EngineError as exc:
        return Finding("skip", f"the Engine did not say where it keeps its data: {exc}")
    free = machine.free_bytes(root) if root and os.path.isdir(root) else None
    if free is None:
        return Finding(
            "skip",
            f"the Engine's data directory {root or '(not given)'} is not readable here (Docker Desktop's VM, rootless "
            "Docker, or distval in a container)",
        )
    todo = "free space there: docker system prune removes unused images and stopped containers"
    return disk_finding(f"the Engine's data directory {root}", free, ENGINE_DISK_WARN_BYTES, ENGINE_DISK_FAIL_BYTES, todo)


def check_report_disk_here(doctor: Doctor, slot: EngineSlot) -> Finding:
    return check_report_disk(doctor.report_dir)


def check_image(doctor: Doctor, slot: EngineSlot) -> Finding:
    down = _engine_down(slot)
    if down is not None:
        return down
    try:
        info = slot.image(doctor.image)
    except EngineError as exc:
        return Finding("fail", f"cannot inspect {doctor.image}: {exc}", ENGINE_TODO)
    if info is not None:
        found = f"{doctor.image} is in the Engine ({info.id[:19]})"
        if doctor.image in FIXTURES and info.labels.get(RECIPE_LABEL) != recipe_hash(doctor.image):
            return Finding("warn", f"{found}, built from an older recipe", "distval run rebuilds it (minutes)")
        return Finding("ok", found)
    if doctor.image in FIXTURES:
        return Finding(
            "warn",
            f"{doctor.image} is not built yet",
            f"distval run builds it (minutes), or: distval fixtures build {doctor.image}",
        )
    found = f"{doctor.image} is not in the Engine at {slot.where}, and distval never pulls"
    elsewhere = [other.where for other in doctor.slots if other is not slot and _has_image(other, doctor.image)]
    if elsewhere:
        return Finding("warn", f"{found}; {elsewhere[0]} has it", "distval run copies it there (--image-distribution)")
    return Finding("fail", found, f"docker pull {doctor.image} (or docker load it), or name another image with --image")


def _has_image(slot: EngineSlot, image: str) -> bool:
    try:
        return slot.engine is not None and slot.image(image) is not None
    except EngineError:
        return False


def check_image_torch(doctor: Doctor, slot: EngineSlot) -> Finding:
    down = _engine_down(slot)
    if down is not None:
        return down
    if not _has_image(slot, doctor.image):
        return Finding("skip", f"{doctor.image} is not in the Engine (see the image check)")
    assert slot.engine is not None
    try:
        answer = probe_image(slot.engine, probe_plan(doctor.image, DEFAULT_PYTHON, doctor.run_id))
    except EngineError as exc:
        return Finding("fail", f"cannot run the torch probe in {doctor.image}: {exc}", ENGINE_TODO)
    return torch_finding(answer, f"in {doctor.image}", "the image")


CHECKS: tuple[EngineCheck, ...] = (
    EngineCheck(
        name="engine",
        per="Engine",
        function=check_engine,
        what="the Engine answers; its version and API version (and the minimum distval needs)",
    ),
    EngineCheck(
        name="context",
        function=check_context,
        what="the Docker CLI's context against DOCKER_HOST: docker-py reads only DOCKER_HOST, so a context elsewhere is "
        "not the Engine distval uses",
    ),
    EngineCheck(
        name="compose",
        function=check_compose,
        what="docker-compose (v1) and docker compose (v2) answer --version; only compose.yaml needs one",
    ),
    EngineCheck(
        name="gpu-runtime",
        per="Engine",
        function=check_gpu_runtime,
        what="the Engine has the nvidia runtime or CDI GPU devices (else GPU scenarios skip)",
    ),
    EngineCheck(
        name="engine-disk",
        per="Engine",
        function=check_engine_disk,
        what=f"free space of the Engine's data directory, when it is on this machine (warn below "
        f"{machine.size_text(ENGINE_DISK_WARN_BYTES)}, fail below {machine.size_text(ENGINE_DISK_FAIL_BYTES)})",
    ),
    EngineCheck(name=REPORT_DISK.name, what=REPORT_DISK.what, function=check_report_disk_here),
    EngineCheck(
        name="image",
        per="Engine",
        function=check_image,
        what="the image is in the Engine (never pulled); a fixture image is built by distval run",
    ),
    EngineCheck(
        name="image-torch",
        per="Engine",
        function=check_image_torch,
        what="import torch in the image, run as ranks run (no network, no privileges, a deadline): its version, CUDA build, "
        "gloo and nccl",
    ),
)


def run_checks(doctor: Doctor) -> Iterator[Line]:
    """Every check, in CHECKS' order; one of an Engine, once per Engine."""
    none = EngineSlot(where="", label="", engine=None)
    for check in CHECKS:
        slots = doctor.slots if check.per_engine else doctor.slots[:1] or [none]
        for slot in slots:
            yield Line(check.name, slot.label if check.per_engine else "", check.function(doctor, slot))


def slots(options: TargetOptions, connect: DoctorEngine) -> list[EngineSlot]:
    """The Engines to look at: DOCKER_HOST's, or each of --hosts; one that does not answer keeps its error."""
    specs: Sequence[HostSpec | None] = [None]
    if options.get("hosts"):
        tls = tls_files(options.get("tls_ca"), options.get("tls_cert"), options.get("tls_key"))
        specs = host_specs(options.get("hosts"), tls)
    found = []
    for index, spec in enumerate(specs):
        where = spec.url if spec is not None else os.environ.get("DOCKER_HOST") or DEFAULT_SOCKET
        label = f"host {index} ({where})" if spec is not None else ""
        try:
            found.append(EngineSlot(where, label, connect(options.run_id, spec)))
        except EngineError as exc:
            found.append(EngineSlot(where, label, None, exc))
    return found


def image(options: TargetOptions) -> str:
    """--image, else the sample image; never pulled."""
    return options.image or DEFAULT_IMAGE


def lines(options: TargetOptions, connect: DoctorEngine) -> Iterator[Line]:
    return run_checks(Doctor(image(options), options.run_id, slots(options, connect)))


DOCTOR = DoctorCommand(
    runs="in containers",
    heading=lambda options: f"in containers, image {image(options)}",
    checks=CHECKS,
    lines=lines,
    image=image,
)
