"""``distval export slurm``'s command-line values that go into the jobs: a --partition or -o that would add a
shell line to job.sbatch (a line break) or a mount to a container (``,``, ``:``) is refused, one line, exit 2,
and nothing is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import distval.cli.main
from distval.targets.slurm.integrations import APPTAINER, PYXIS
from tests.paths import ROOT

CONFIG = str(ROOT / "configs" / "default.yaml")
IMAGE = "example/torch:candidate"


def _export(tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str, out: str | None = None) -> tuple[int, str]:
    argv = ["export", "slurm", CONFIG, "--image", IMAGE, "--integration", APPTAINER, "-o", out or str(tmp_path / "o")]
    code = distval.cli.main.main([*argv, *extra])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("partition", ["gpu\nrm -rf /", "gpu; rm -rf /", "gpu --wrap=id", "", "a" * 65, "gpu,,cpu"])
def test_a_partition_that_is_no_slurm_partition_name_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], partition: str
) -> None:
    code, err = _export(tmp_path, capsys, "--partition", partition)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "--partition" in err and "expected a Slurm partition name" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("partition", ["gpu", "gpu-a100.v2,debug_q"])
def test_partition_names_and_lists_are_written(tmp_path: Path, capsys: pytest.CaptureFixture[str], partition: str) -> None:
    code, err = _export(tmp_path, capsys, "--partition", partition)
    assert code == 0, err
    script = (tmp_path / "o" / "in-container-3ranks" / "job.sbatch").read_text(encoding="utf-8")
    assert f"#SBATCH --partition={partition}\n" in script


@pytest.mark.parametrize("name", ["jobs\necho pwned", "a,b", "src:/etc", "with space", "tab\there"])
def test_a_jobs_directory_that_would_add_a_line_or_a_mount_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    out = tmp_path / name
    code, err = _export(tmp_path, capsys, out=str(out))
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("distval: -o ") and "choose a path without" in err
    assert not out.exists()


def test_pyxis_mounts_of_a_plain_directory_are_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The control: the refusal is of the characters, not of pyxis or of -o."""
    argv = ["export", "slurm", CONFIG, "--image", IMAGE, "--integration", PYXIS, "-o", str(tmp_path / "jobs")]
    assert distval.cli.main.main(argv) == 0, capsys.readouterr().err
    plan = json.loads((tmp_path / "jobs" / "in-container-3ranks" / "plan.json").read_text(encoding="utf-8"))
    assert plan["origin"]["job"] == "in-container-3ranks"
