"""compose.yaml never pulls the image under test: the default one (distval-fixtures/torch:2.6-debian) is built
locally by distval, and pulling that name from a registry would run whatever someone published under it. The
file as docker-compose (1.29, the oldest supported) reads it, where it is installed; as YAML elsewhere."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
import yaml

from tests.paths import ROOT

RANKS = ("rank0", "rank1")


def test_the_ranks_never_pull_their_image() -> None:
    services = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))["services"]
    for name in RANKS:
        assert services[name]["pull_policy"] == "never", name
        assert services[name]["image"].startswith("${IMAGE:-distval-fixtures/")


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose is not installed")
def test_docker_compose_reads_the_pull_policy() -> None:
    """``docker-compose config`` reads the file without an Engine: a key Compose 1.29 did not know would fail it."""
    result = subprocess.run(
        ["docker-compose", "-f", str(ROOT / "compose.yaml"), "config"],
        env={k: v for k, v in os.environ.items() if k != "IMAGE"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    services = yaml.safe_load(result.stdout)["services"]
    assert {name: services[name].get("pull_policy") for name in RANKS} == dict.fromkeys(RANKS, "never")
    assert services["rank0"]["image"] == "distval-fixtures/torch:2.6-debian"
