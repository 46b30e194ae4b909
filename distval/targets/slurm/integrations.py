"""How a Slurm job step runs a command inside the image under test: one function per container integration, each
turning the same request (the image, the bind mounts, the working directory, the environment, the command) into
the ``srun`` options and the command that integration documents.

- ``oci``: Slurm's own OCI support (``srun --container=BUNDLE``, slurm.conf's oci.conf runs runc or crun on an OCI
  bundle unpacked from the image). Slurm writes the step's environment and argv into the bundle's config.json and
  keeps its mounts, so the mounts and the working directory live in the bundle's config.json (distval writes one per
  node: distval/targets/slurm/export.py), not on the command line. In Debian's archive (slurmd 22.05, runc, skopeo,
  umoci): the one distval's tests run on a real cluster (tests/targets/slurm/).
- ``pyxis``: NVIDIA's SPANK plugin over enroot (``srun --container-image=...``), common on GPU clusters
  (https://github.com/NVIDIA/pyxis#usage). Not in Debian's archive: its lines are checked against its documented
  syntax only (tests/targets/slurm/test_integrations.py).
- ``apptainer``: ``srun apptainer exec ... docker://IMAGE CMD`` (https://apptainer.org/docs/user/latest/cli/apptainer_exec.html).
  Not in Debian's archive either: checked the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

OCI = "oci"
PYXIS = "pyxis"
APPTAINER = "apptainer"
INTEGRATIONS = (OCI, PYXIS, APPTAINER)
TESTED = OCI  # the one run on a real cluster in distval's tests


@dataclass(frozen=True)
class Mount:
    source: str  # on the node (a shared filesystem)
    destination: str  # in the container
    read_only: bool


@dataclass(frozen=True)
class StepRequest:
    """What one node's job step runs: ``argv`` in ``image`` (or the OCI ``bundle``), with ``mounts``, in ``workdir``,
    with ``env`` on top of the image's own environment."""

    image: str
    bundle: str  # the node's OCI bundle directory (oci only)
    mounts: tuple[Mount, ...]
    workdir: str
    env: tuple[tuple[str, str], ...]
    argv: tuple[str, ...]
    gpus: bool = False


def pyxis_image(image: str) -> str:
    """A Docker image reference in pyxis's form, ``[REGISTRY#]IMAGE[:TAG]``: enroot separates the registry with '#'
    (``nvcr.io/nvidia/pytorch:24.01-py3`` -> ``nvcr.io#nvidia/pytorch:24.01-py3``). A first component with a dot, a
    colon or ``localhost`` is a registry, as Docker reads it."""
    first, slash, rest = image.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        return f"{first}#{rest}"
    return image


def srun_options(integration: str, request: StepRequest) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The integration's ``srun`` options and the command after them (the argv, or a runner wrapping it)."""
    if integration == OCI:
        return (f"--container={request.bundle}",), request.argv
    if integration == PYXIS:
        mounts = ",".join(f"{m.source}:{m.destination}" + (":ro" if m.read_only else "") for m in request.mounts)
        return (
            f"--container-image={pyxis_image(request.image)}",
            f"--container-mounts={mounts}",
            f"--container-workdir={request.workdir}",
            # The submitting user's home is no part of the image under test.
            "--no-container-mount-home",
        ), request.argv
    if integration == APPTAINER:
        binds = ",".join(f"{m.source}:{m.destination}:{'ro' if m.read_only else 'rw'}" for m in request.mounts)
        runner = [
            "apptainer",
            "exec",
            # The image's environment and the variables distval sets, not the submitting shell's.
            "--cleanenv",
            # No home, /tmp or working directory of the host: only what distval binds.
            "--containall",
            "--bind",
            binds,
            "--pwd",
            request.workdir,
        ]
        for key, value in request.env:
            runner += ["--env", f"{key}={value}"]
        if request.gpus:
            runner.append("--nv")
        return (), (*runner, f"docker://{request.image}", *request.argv)
    raise ValueError(f"unknown container integration {integration!r}; expected one of {', '.join(INTEGRATIONS)}")
