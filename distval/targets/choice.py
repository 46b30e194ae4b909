"""Which target runs a run: what its command line asked (``TargetOptions``), the refusals of options that belong
to another target, and the target made: local processes (--local), Slurm (--target slurm), several Docker Engines
(--hosts, or allowed ``hosts`` keys) or the one Engine of DOCKER_HOST."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from distval.config import Config
from distval.config.engine_hosts import TlsFiles
from distval.config.shipped import SAMPLE_IMAGE_FLAG
from distval.errors import BadInput
from distval.targets.base import Target
from distval.targets.docker.target import DockerTarget
from distval.targets.engines.hosts import check_hosts_allowed, run_hosts, tls_files
from distval.targets.local.target import LocalTarget
from distval.targets.slurm.bundle_config import chosen_bundle
from distval.targets.slurm.jobs import LocalCommands
from distval.targets.slurm.target import SlurmTarget

if TYPE_CHECKING:
    from distval.targets.docker.engine import Engine

Warn = Callable[[str], None]


@dataclass(frozen=True)
class TargetOptions:
    """What ``distval run``'s command line asked of the target, read once from it."""

    run_id: str
    image: str | None = None
    sample_image: bool = False
    local: bool = False
    python: str | None = None
    target: str = "docker"
    slurm_dir: str = "distval-slurm-jobs"
    bundle: str | None = None
    integration: str = "oci"
    partition: str | None = None
    hosts: tuple[str, ...] = ()
    hosts_from_config: bool = False
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    image_distribution: str = "transfer"
    keep_on_failure: bool = False
    patterns: tuple[str, ...] | None = None  # --filter's: the Engines of the selected scenarios are the run's

    @property
    def runs_images(self) -> bool:
        """Whether the target runs container images (--local runs the local Python's torch: no image, no sample)."""
        return not self.local

    @property
    def report_mode(self) -> str:
        """The reports' ``mode`` property, as before --local had its name."""
        return "host" if self.local else ("slurm" if self.target == "slurm" else "docker")

    @property
    def summary_note(self) -> str | None:
        """A line after the terminal summary of a run that ran scenarios (host mode says how its suites are marked)."""
        if self.local:
            return "(host mode, --local: local processes with the local torch, no Docker; every testsuite is marked [host])"
        return None


def containers_target(
    config: Config,
    image: str | None,
    override: tuple[str, ...],
    from_config: bool,
    patterns: Sequence[str] | None,
    engine_for: Callable[[str], Engine],
    warn: Warn,
    keep_on_failure: bool = False,
    tls: TlsFiles | None = None,
    distribution: str = "transfer",
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

        return EnginesTarget(urls, override, image, tls, distribution, warn)
    return DockerTarget(image, engine_for, keep_on_failure, warn)


def choose_target(options: TargetOptions, config: Config, engine_for: Callable[[str], Engine], warn: Warn) -> Target:
    """The target ``distval run``'s command line asks for: --local (or the deprecated --host), else containers."""
    if options.local:
        if options.image:
            raise BadInput("--image names a container image, --local runs the local Python's torch: give one, not both")
        if options.hosts:
            raise BadInput("--hosts names Docker Engines, --local runs local processes without Docker: give one, not both")
        if options.sample_image:
            raise BadInput(f"{SAMPLE_IMAGE_FLAG} names a container image, --local runs the local Python's torch: give one")
        return LocalTarget(options.run_id, options.python)
    if options.python:
        raise BadInput("--python names the local Python of --local: it needs --local")
    if options.target == "slurm":
        return slurm_target(options, config)
    if options.bundle:
        raise BadInput("--bundle is the OCI bundle of --target slurm: it needs --target slurm")
    if options.image and options.sample_image:
        raise BadInput(f"--image names the image under test, {SAMPLE_IMAGE_FLAG} asks for distval's sample: give one, not both")
    return containers_target(
        config,
        options.image,
        options.hosts,
        options.hosts_from_config,
        options.patterns,
        engine_for,
        warn,
        options.keep_on_failure,
        tls_files(options.tls_ca, options.tls_cert, options.tls_key),
        options.image_distribution,
    )


def slurm_target(options: TargetOptions, config: Config) -> Target:
    """--target slurm: Slurm's client on this host, the jobs under --slurm-dir."""
    if options.hosts or options.hosts_from_config:
        raise BadInput("--hosts names Docker Engines, --target slurm submits to Slurm: give one, not both")
    bundle, image_config = chosen_bundle(options.integration, options.bundle, "--target slurm")
    return SlurmTarget(
        LocalCommands(),
        options.slurm_dir,
        options.image,
        config.path,
        options.integration,
        bundle,
        image_config,
        options.partition,
    )
