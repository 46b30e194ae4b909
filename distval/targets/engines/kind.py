"""The containers target as the command line chooses it (the default): the one Docker Engine of DOCKER_HOST, or
several when --hosts (or an allowed ``hosts`` key of a selected scenario) names any; and its options."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from distval.config import Config
from distval.config.engine_hosts import TlsFiles, tls_files
from distval.config.shipped import SAMPLE_IMAGE_FLAG
from distval.images.helper_base import DEFAULT, HELPER_BASE_DEST, HELPER_BASE_FLAG, HELPER_BASE_HELP, HelperBase, base_problem
from distval.images.helper_base import choose as choose_helpers
from distval.targets.base import Target
from distval.targets.declarations import DOCKER
from distval.targets.docker import beside as beside_container
from distval.targets.docker import gpu_probe as gpu_probe_container
from distval.targets.docker import reaper_container
from distval.targets.docker.cleanup import clean_engine
from distval.targets.docker.doctor import DOCTOR
from distval.targets.docker.target import DockerTarget
from distval.targets.engines.hosts import check_hosts_allowed, run_hosts
from distval.targets.engines.plan import hosts_data, hosts_lines, probe_description
from distval.targets.kind import (
    CHOICE,
    EngineFor,
    NodeEngines,
    PlanShown,
    TargetKind,
    TargetOption,
    TargetOptions,
    Warn,
)

if TYPE_CHECKING:
    from distval.targets.docker.engine import Engine


def containers_target(
    config: Config,
    image: str | None,
    override: tuple[str, ...],
    from_config: bool,
    patterns: Sequence[str] | None,
    engine_for: EngineFor,
    warn: Warn,
    keep_on_failure: bool = False,
    tls: TlsFiles | None = None,
    distribution: str = "transfer",
    helpers: HelperBase = DEFAULT,
) -> Target:
    """Several Engines when --hosts (``override``) or an allowed ``hosts`` key of a scenario --filter selects
    (``patterns``) names any, else the one Engine of DOCKER_HOST."""
    check_hosts_allowed(config.path, [(s.name, s.hosts) for s in config.scenarios], override, from_config)
    # The Engines of the selected scenarios: an unselected scenario's hosts are not the run's.
    chosen = [s for s in config.scenarios if not patterns or any(fnmatch.fnmatchcase(s.name, p) for p in patterns)]
    urls = run_hosts([s.hosts for s in chosen], override)
    if urls:
        # Imported here, as the Engine is (cli/main.py): it connects to Engines through docker-py, which --local and
        # ``plan`` never import (tests/targets/local/test_host_runtime.py runs them where docker-py cannot be imported).
        from distval.targets.engines.target import EnginesTarget

        return EnginesTarget(urls, override, image, tls, distribution, warn, helpers)
    return DockerTarget(image, engine_for, keep_on_failure, warn, helpers)


def helper_base(options: TargetOptions) -> HelperBase:
    """What distval's own images are built FROM where an Engine lacks them: --helper-base, else $DISTVAL_HELPER_BASE
    (a bad value is BadInput, one line), else Debian's pinned slim images."""
    return choose_helpers(options.get(HELPER_BASE_DEST), os.environ)


def _make(options: TargetOptions, config: Config, engine_for: EngineFor, warn: Warn) -> Target:
    return containers_target(
        config,
        options.image,
        tuple(options.get("hosts") or ()),
        bool(options.get("hosts_from_config")),
        options.patterns,
        engine_for,
        warn,
        options.keep_on_failure,
        tls_files(options.get("tls_ca"), options.get("tls_cert"), options.get("tls_key")),
        options.get("image_distribution") or "transfer",
        helper_base(options),
    )


def _dry_run(options: TargetOptions, config: Config, engine_for: EngineFor) -> Target:
    """The plan's target: the Engine is asked for only when a run opens, so planning touches nothing."""
    return containers_target(
        config,
        options.image,
        tuple(options.get("hosts") or ()),
        bool(options.get("hosts_from_config")),
        None,
        engine_for,
        lambda _line: None,
        helpers=helper_base(options),
    )


def engine_class() -> type[Engine]:
    """The Docker Engine's client class, imported on first use, and docker-py with it: host mode and ``plan`` never
    need it (every command that uses Docker makes its Engines from it: distval/cli/main.py)."""
    from distval.targets.docker.engine import Engine

    return Engine


# Node Engines (distval nodes): dind.py imports docker-py, which host mode and ``distval plan`` never need: imported
# on use.
def _start_nodes(count: int, plain: Sequence[int], progress: Warn) -> str:
    from distval.targets.engines.dind import start_nodes

    return start_nodes(count, plain, progress).describe()


def _stop_nodes(set_id: str | None) -> tuple[int, int]:
    from distval.targets.engines.dind import stop_nodes

    return stop_nodes(set_id)


def _beside() -> list[dict[str, Any]]:
    """What distval starts beside the ranks, each from the declaration its Engine call uses; the fault helpers
    are listed with their scenario's faults."""
    return [
        reaper_container.description(),
        beside_container.description(),
        gpu_probe_container.description(),
        probe_description(),
    ]


CONTAINERS_KIND = TargetKind(
    declaration=DOCKER,
    chosen=lambda _options: True,
    make=_make,
    dry_run=_dry_run,
    chosen_with="--target docker",
    options=(
        TargetOption(
            "--image-distribution",
            "image_distribution",
            "across several hosts: copy the image from host 0 (docker save | docker load, the default) or pull it "
            "by digest where it has one",
            kind=CHOICE,
            default="transfer",
            choices=("transfer", "pull"),
        ),
        TargetOption(
            HELPER_BASE_FLAG,
            HELPER_BASE_DEST,
            HELPER_BASE_HELP,
            metavar="IMAGE",
            needs_its_target="names what distval's own images are built FROM on a Docker Engine",
            problem=base_problem,
        ),
    ),
    refuses=(
        (
            ("image", "sample_image"),
            f"--image names the image under test, {SAMPLE_IMAGE_FLAG} asks for distval's sample: give one, not both",
        ),
    ),
    plan_shown=PlanShown(_beside, hosts_lines, hosts_data),
    clean_engine=clean_engine,
    engine_class=engine_class,
    node_engines=NodeEngines(_start_nodes, _stop_nodes),
    doctor=DOCTOR,
    target_choice="docker",
    target_help="docker (the default: one Engine, or several with --hosts)",
)
