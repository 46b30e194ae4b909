"""distval_suite/image_probe.py as ``distval doctor`` runs it (``python -m distval_suite.image_probe``), with a stand-in
torch package on the path (no torch is installed here): its one JSON line is what the doctor's reader accepts, and a
torch that cannot be imported is an answer, not a crash."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from distval.doctor.torch_probe import PROBE_MODULE, TorchFacts, read_answer
from tests.paths import ROOT

TORCH = """import types
__version__ = "2.6.0+fake"
version = types.SimpleNamespace(cuda="12.4")
cuda = types.SimpleNamespace(device_count=lambda: 0, is_available=lambda: False)
"""
DISTRIBUTED = """def is_available(): return True
def is_gloo_available(): return True
def is_nccl_available(): return True
def is_mpi_available(): return False
"""


def run_probe(path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(path)}
    return subprocess.run([sys.executable, "-m", PROBE_MODULE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_the_probe_prints_the_facts_the_doctor_reads(tmp_path: Path) -> None:
    (tmp_path / "torch" / "distributed").mkdir(parents=True)
    (tmp_path / "torch" / "__init__.py").write_text(TORCH)
    (tmp_path / "torch" / "distributed" / "__init__.py").write_text(DISTRIBUTED)
    done = run_probe(tmp_path)
    facts = read_answer(done.returncode, done.stdout, done.stderr)
    python = ".".join(map(str, sys.version_info[:3]))
    assert facts == TorchFacts(python, "2.6.0+fake", distributed=True, gloo=True, nccl=True, cuda_version="12.4"), done


def test_a_torch_that_cannot_be_imported_is_an_answer(tmp_path: Path) -> None:
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("raise OSError('libtorch_cpu.so: cannot open shared object file')\n")
    done = run_probe(tmp_path)
    facts = read_answer(done.returncode, done.stdout, done.stderr)
    assert isinstance(facts, TorchFacts) and not facts.torch_version, done
    assert facts.error == "OSError: libtorch_cpu.so: cannot open shared object file"
