"""The container integrations' command lines against their documented syntax. Only Slurm's OCI support runs here
(tests/targets/slurm/test_slurm_docker.py); pyxis and Apptainer are not in Debian's archive, so their lines are checked
against the forms their documentation gives:

- pyxis (https://github.com/NVIDIA/pyxis#usage, its srun --help): ``--container-image=[USER@][REGISTRY#]IMAGE[:TAG]|PATH``,
  ``--container-mounts=SRC:DST[:FLAGS][,SRC:DST...]`` (FLAGS ro, rw, ...), ``--container-workdir=PATH``,
  ``--no-container-mount-home``;
- Apptainer (https://apptainer.org/docs/user/latest/cli/apptainer_exec.html): ``apptainer exec [exec options...]
  <container> <command>``, ``--bind src[:dest[:opts]]`` (comma-separated, opts ro or rw), ``--pwd``, ``--env K=V``,
  ``--cleanenv``, ``--containall``, ``--nv``, and a container as ``docker://IMAGE``;
- Slurm (srun(1), containers.html): ``--container=<path to OCI bundle>``.
"""

from __future__ import annotations

import re

import pytest

from distval.targets.slurm.integrations import APPTAINER, OCI, PYXIS, Mount, StepRequest, pyxis_image, srun_options

REQUEST = StepRequest(
    image="nvcr.io/nvidia/pytorch:24.01-py3",
    bundle="/shared/job/bundles/node-0",
    mounts=(Mount("/shared/job/distval", "/distval", True), Mount("/shared/job/run/node-0", "/distval/results", False)),
    workdir="/distval",
    env=(("DISTVAL_NODE_RANK", "0"), ("PYTHONUNBUFFERED", "1")),
    argv=("python3", "-m", "torch.distributed.run", "--nnodes=2"),
    gpus=True,
)
_PATH = r"/[^,:\s]*"
PYXIS_OPTIONS = {
    "--container-image": re.compile(r"^(?:[\w.-]+@)?(?:[\w.-]+(?::\d+)?#)?[\w./-]+(?::[\w.-]+)?$"),
    "--container-mounts": re.compile(rf"^{_PATH}:{_PATH}(?::(?:ro|rw|[a-z+]+))?(?:,{_PATH}:{_PATH}(?::(?:ro|rw|[a-z+]+))?)*$"),
    "--container-workdir": re.compile(rf"^{_PATH}$"),
}
PYXIS_FLAGS = {"--no-container-mount-home", "--container-mount-home", "--container-remap-root", "--no-container-remap-root"}
APPTAINER_VALUED = {
    "--bind": re.compile(rf"^{_PATH}(?::{_PATH}(?::(?:ro|rw))?)?(?:,{_PATH}(?::{_PATH}(?::(?:ro|rw))?)?)*$"),
    "--pwd": re.compile(rf"^{_PATH}$"),
    "--env": re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=.*$"),
}
APPTAINER_FLAGS = {"--cleanenv", "--containall", "--nv"}


def test_oci_is_srun_container_with_the_bundle_and_the_command_as_it_is() -> None:
    options, command = srun_options(OCI, REQUEST)
    assert options == ("--container=/shared/job/bundles/node-0",)
    assert command == REQUEST.argv


def test_pyxis_options_follow_its_documented_syntax() -> None:
    options, command = srun_options(PYXIS, REQUEST)
    assert command == REQUEST.argv
    for option in options:
        name, eq, value = option.partition("=")
        if not eq:
            assert name in PYXIS_FLAGS
            continue
        assert PYXIS_OPTIONS[name].match(value), option
    assert "--container-image=nvcr.io#nvidia/pytorch:24.01-py3" in options
    assert "--container-mounts=/shared/job/distval:/distval:ro,/shared/job/run/node-0:/distval/results" in options


@pytest.mark.parametrize(
    ("docker", "pyxis"),
    [
        ("nvcr.io/nvidia/pytorch:24.01-py3", "nvcr.io#nvidia/pytorch:24.01-py3"),
        ("localhost:5000/team/torch:1", "localhost:5000#team/torch:1"),
        ("pytorch/pytorch:2.6.0-cuda12.4-cudnn9-runtime", "pytorch/pytorch:2.6.0-cuda12.4-cudnn9-runtime"),
        ("ubuntu", "ubuntu"),
    ],
)
def test_pyxis_image_names_the_registry_with_a_hash(docker: str, pyxis: str) -> None:
    assert pyxis_image(docker) == pyxis
    assert PYXIS_OPTIONS["--container-image"].match(pyxis)


def test_apptainer_exec_follows_its_documented_syntax() -> None:
    options, command = srun_options(APPTAINER, REQUEST)
    assert options == ()
    assert command[:2] == ("apptainer", "exec")
    rest = list(command[2:])
    while rest[0].startswith("--"):
        option = rest.pop(0)
        if option in APPTAINER_FLAGS:
            continue
        assert APPTAINER_VALUED[option].match(rest.pop(0)), option
    assert rest[0] == "docker://nvcr.io/nvidia/pytorch:24.01-py3"  # <container>, then <command>
    assert tuple(rest[1:]) == REQUEST.argv
    assert "--nv" in command and ("--env", "DISTVAL_NODE_RANK=0") == command[command.index("--env") : command.index("--env") + 2]


def test_an_unknown_integration_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="expected one of oci, pyxis, apptainer"):
        srun_options("enroot", REQUEST)
