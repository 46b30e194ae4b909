"""The parallelism checks (fsdp2, dtensor, dcp) against real images: the shipped training config passes on the three
good torch versions in both topologies, every check skipped with its version where the image's torch lacks the API;
each broken image is caught by exactly its check while the other two still pass. Marked ``docker``.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from distval.checks.catalog import CATALOG
from distval.cli.main import main
from tests.docker_helpers import TOPOLOGIES, cases, leftovers, outcome, validate
from tests.paths import ROOT

pytestmark = pytest.mark.docker

TRAINING_CONFIG = str(ROOT / "configs" / "training.yaml")
CHECKS = ("fsdp2", "dtensor", "dcp")
# The checks each good image skips by its torch version (the catalog's torch_minimum says which and why).
SKIPPED_BY_VERSION = {
    "distval-fixtures/torch:1.13-debian": {"fsdp2", "dtensor", "dcp"},
    "distval-fixtures/torch:2.6-debian": {"fsdp2"},
    "distval-fixtures/torch:2.15-pypi": set(),
}


@pytest.fixture
def run_id(docker_client: object) -> object:
    value = "p" + secrets.token_hex(4)
    yield value
    assert leftovers(docker_client, value) == [], "the run left containers or networks behind"


def run(config: str, image: str, run_id: str, junit: Path, *extra: str) -> tuple[int, dict[str, dict[str, tuple[str, str]]]]:
    """Exit code and, per topology, every testcase's (outcome, message)."""
    code = main(["run", config, "--image", image, "--junit", str(junit), "--run-id", run_id, "--quiet", *extra])
    by_topology: dict[str, dict[str, tuple[str, str]]] = {}
    for (suite, name), case in cases(validate(junit)).items():
        topology = suite.split("(")[-1].split(",")[0]
        by_topology.setdefault(topology, {})[name] = outcome(case)
    return code, by_topology


@pytest.mark.parametrize("image", sorted(SKIPPED_BY_VERSION))
def test_training_config_passes_on_good_images(
    fixture_image: Callable[[str], str], image: str, run_id: str, tmp_path: Path
) -> None:
    fixture_image(image)
    code, results = run(TRAINING_CONFIG, image, run_id, tmp_path / "results.xml")
    assert code == 0, results
    assert set(results) == set(TOPOLOGIES)
    for topology, found in results.items():
        for name in CHECKS:
            status, message = found[name]
            if name in SKIPPED_BY_VERSION[image]:
                minimum = CATALOG[name].torch_minimum
                assert minimum is not None
                assert status == "skipped", (topology, name, status, message)
                assert f"{name} needs torch >= {minimum[0]}.{minimum[1]}" in message, (topology, name, message)
            else:
                assert status == "passed", (topology, name, status, message)


@dataclass(frozen=True)
class Broken:
    image: str
    check: str
    fragments: tuple[str, ...]  # in the failing check's message
    passing: tuple[str, ...]  # the other parallelism checks, which must still pass on this image


BROKEN = [
    Broken(
        "distval-fixtures/broken:fsdp-sums-gradients",
        "fsdp2",
        ("after 3 steps", "gradient averaged over 2 ranks' batches", "summing the gradients instead would give"),
        ("dtensor", "dcp"),
    ),
    Broken(
        "distval-fixtures/broken:dtensor-reshard-no-exchange",
        "dtensor",
        ("rank 0: Shard(0) -> Shard(1): 8 of 20 elements differ, first at [3, 0]: expected 22, got 0",),
        ("dcp",),
    ),
    Broken(
        "distval-fixtures/broken:dcp-load-ignores-offsets",
        "dcp",
        ("rank 1: rows (saved Shard(0)) loaded as Shard(1): ", "elements differ"),
        ("dtensor",),
    ),
]


@pytest.mark.parametrize("broken", BROKEN, ids=[b.image.split(":")[1] for b in BROKEN])
def test_broken_image_is_caught_by_exactly_its_check(
    fixture_image: Callable[[str], str], broken: Broken, run_id: str, tmp_path: Path
) -> None:
    fixture_image(broken.image)
    # The shipped nightly config itself, with its deadlines; in one topology (no defect here depends on the transport:
    # dcp's checkpoint travels through the store whatever the layout, tests/suite/test_suite_docker.py says why one is
    # enough) and without ddp_training, which these images do not touch (tests/suite/test_ddp_docker.py runs it).
    code, results = run(
        TRAINING_CONFIG,
        broken.image,
        run_id,
        tmp_path / "results.xml",
        "--filter",
        "in-container-*",
        "--skip-check",
        "ddp_training",
    )
    assert code == 1
    assert set(results) == {"in-container"}
    for topology, found in results.items():
        status, message = found[broken.check]
        assert status == "failure", (topology, broken.check, status, message)
        for fragment in broken.fragments:
            assert fragment in message, (topology, fragment, message)
        for name in broken.passing:
            assert found[name][0] == "passed", (topology, name, found[name])
        # Nothing else is red: the defect is this check's alone.
        red = {name for name, (status, _) in found.items() if status in ("failure", "error")}
        assert red == {broken.check}, (topology, red)
