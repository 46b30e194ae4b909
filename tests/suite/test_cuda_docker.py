"""cuda_build and the NCCL skips against real images, driving the suite directly (one rank, no launcher,
no harness run): ``python3 -m distval_suite.main spec.json`` in a container created with docker-py, the suite
copied in with put_archive. Marked ``docker``; builds only the fixtures it uses.

cuda_build passes on the CUDA 2.15 fixture and on the CPU fixtures stated as CPU builds, and fails on
the two images broken for it with what was expected and what was seen; every NCCL backend is skipped
with the measured reason on these GPU-less machines, never failed.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from typing import Any

import pytest

from distval.tarball import Directory, File, build_tar, regular_files
from tests.paths import ROOT

# CI runs this file in its second process (.ci/run): alone in a CI run, images built, it kept 54 % (37.3 s) of the 2 cores busy
# (2026-12-07, /proc/stat every 10 s), a core idle much of its time; tests/budgets.py WAITING_S holds its budget.
pytestmark = [pytest.mark.docker, pytest.mark.waits]

SUITE_DIR = ROOT / "distval_suite"
TORCH_215 = "distval-fixtures/torch:2.15-pypi"
TORCH_26 = "distval-fixtures/torch:2.6-debian"
TORCH_113 = "distval-fixtures/torch:1.13-debian"
NCCL_MISMATCH = "distval-fixtures/broken:cuda-nccl-mismatch"
CPU_CLAIMS_CUDA = "distval-fixtures/broken:cpu-claims-cuda"
IMAGES = [TORCH_215, TORCH_26, TORCH_113, NCCL_MISMATCH, CPU_CLAIMS_CUDA]
RUN_TIMEOUT_S = 180.0


@pytest.fixture(scope="module")
def images(fixture_image: Callable[[str], str]) -> list[str]:
    return [fixture_image(tag) for tag in IMAGES]


def _archive(spec: dict[str, Any]) -> bytes:
    files = [File(f"distval/distval_suite/{p.name}", p.read_bytes()) for p in sorted(SUITE_DIR.glob("*.py"))]
    return build_tar([*files, File("distval/spec.json", json.dumps(spec).encode()), Directory("distval/results", 0o777)])


def run_suite(
    client: Any, image: str, checks: list[dict[str, Any]], backend: str = "gloo", **spec: Any
) -> dict[str, dict[str, Any]]:
    """Run the suite as rank 0 of 1 in ``image``; every record by testcase name."""
    full_spec = {
        "backend": backend,
        "collective_timeout_s": 30,
        "check_timeout_s": 60,
        "scenario": "cuda-docker",
        "results_dir": "/distval/results",
        "checks": checks,
        "world_size": 1,
        "nproc_per_node": 1,
        "launcher": "none",
        "init_method": "env://",
        **spec,
    }
    environment = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    container = client.containers.create(
        image,
        ["python3", "-m", "distval_suite.main", "/distval/spec.json"],
        working_dir="/distval",
        environment=environment,
        labels={"distval.managed": "true", "distval.run": "tests-cuda-" + secrets.token_hex(3)},
        network_disabled=True,
    )
    try:
        container.put_archive("/", _archive(full_spec))
        container.start()
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while time.monotonic() < deadline:
            container.reload()
            if container.status == "exited":
                break
            time.sleep(0.5)
        logs = container.logs().decode("utf-8", "replace")
        assert container.status == "exited", f"still running after {RUN_TIMEOUT_S} s:\n{logs[-3000:]}"
        stream, _ = container.get_archive("/distval/results/rank-0.jsonl")
        lines = regular_files(b"".join(stream))["rank-0.jsonl"].decode().splitlines()
        return {record["case"]: record for record in map(json.loads, lines)}
    finally:
        container.remove(force=True, v=True)


# -- cuda_build -------------------------------------------------------------------------------------
def test_cuda_build_passes_on_the_cuda_fixture(docker_client: Any, images: list[str]) -> None:
    records = run_suite(docker_client, TORCH_215, [{"name": "cuda_build", "args": {"build": "cuda", "cuda": "13.*"}}])
    record = records["cuda_build"]
    assert record["status"] == "passed", record["message"]
    message, details = record["message"], record["details"]
    assert details["cuda_version"].startswith("13.")
    cuda = details["cuda_version"]  # measured: 13.2 (torch 2.15.0+cu132)
    for part in ("a cuda build as stated", f"CUDA {cuda} matches 13.*", "torch.backends.cuda.is_built() is True"):
        assert part in message
    # Measured without a GPU on the 2.15 fixture: every probe answers, none is skipped.
    for part in (f"compiled with CUDA {cuda}", "cuDNN compiled 9.26.0, loads 9.26.0", "NCCL 2.30.7 = nvidia-nccl-cu13 2.30.7"):
        assert part in message
    assert "CUDA-library requirements of torch satisfied" in message and "skipped" not in message
    assert {r["name"] for r in details["requirements"]} >= {"nvidia-nccl-cu13", "nvidia-cudnn-cu13", "cuda-toolkit"}


def test_cuda_build_catches_a_mismatched_nccl_wheel(docker_client: Any, images: list[str]) -> None:
    records = run_suite(docker_client, NCCL_MISMATCH, [{"name": "cuda_build", "args": {"build": "cuda", "cuda": "13.*"}}])
    record = records["cuda_build"]
    assert record["status"] == "failed", record["message"]
    assert "expected nvidia-nccl-cu13==2.30.7 (required by torch); installed: 2.27.7" in record["message"]


def test_cuda_build_catches_a_cpu_build_claiming_cuda(docker_client: Any, images: list[str]) -> None:
    records = run_suite(docker_client, CPU_CLAIMS_CUDA, [{"name": "cuda_build", "args": {"build": "cuda"}}])
    record = records["cuda_build"]
    assert record["status"] == "failed", record["message"]
    assert (
        "expected a CUDA build as torch.version.cuda='13.0' claims; torch.backends.cuda.is_built() is False" in record["message"]
    )


@pytest.mark.parametrize("image", [TORCH_26, TORCH_113])
def test_cuda_build_passes_a_cpu_build_stated_as_cpu(docker_client: Any, images: list[str], image: str) -> None:
    records = run_suite(docker_client, image, [{"name": "cuda_build", "args": {"build": "cpu"}}])
    record = records["cuda_build"]
    assert record["status"] == "passed", record["message"]
    assert "a cpu build as stated" in record["message"] and "skipped: the CUDA parts" in record["message"]


# -- NCCL and CUDA tensors without a GPU: skipped with the measured reason ----------------------------
GROUP_CHECKS = [{"name": "env"}, {"name": "all_reduce"}, {"name": "collectives", "args": {"large_mib": 1}}, {"name": "store"}]


@pytest.mark.parametrize(
    ("image", "backend", "device", "reason"),
    [
        (TORCH_215, "nccl", "cuda", "no CUDA device is visible in this container (torch.cuda.device_count() = 0; CUDA 13."),
        (
            TORCH_215,
            "nccl-legacy",
            "cuda",
            "no CUDA device is visible in this container (torch.cuda.device_count() = 0; CUDA 13.",
        ),
        (TORCH_215, "gloo", "cuda", "device cuda: no CUDA device is visible in this container"),
        (TORCH_26, "nccl", "cuda", "this torch is a CPU build (torch.version.cuda is None)"),
        (TORCH_26, "nccl-legacy", "cuda", "does not know the backend name 'nccl-legacy'"),
    ],
)
def test_without_a_gpu_the_group_checks_are_skipped_with_the_reason(
    docker_client: Any, images: list[str], image: str, backend: str, device: str, reason: str
) -> None:
    records = run_suite(docker_client, image, GROUP_CHECKS, backend=backend, device=device)
    group = records["process_group"]
    assert group["status"] == "skipped", group
    assert reason in group["message"], group["message"]
    for name in ("all_reduce", "collectives", "store"):
        assert records[name]["status"] == "skipped" and records[name]["message"] == group["message"], records[name]
    assert records["env"]["status"] in ("passed", "skipped"), records["env"]
    assert not [r for r in records.values() if r["status"] in ("failed", "error")], records
