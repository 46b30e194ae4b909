"""The slurm target as the command line chooses it (--target slurm) and its options."""

from __future__ import annotations

from distval.config import Config
from distval.targets.base import Target
from distval.targets.declarations import SLURM
from distval.targets.kind import CHOICE, PATH, TEXT, EngineFor, TargetKind, TargetOption, TargetOptions, Warn
from distval.targets.slurm.bundle_config import chosen_bundle
from distval.targets.slurm.integrations import INTEGRATIONS, OCI
from distval.targets.slurm.jobs import LocalCommands
from distval.targets.slurm.target import SlurmTarget


def _make(options: TargetOptions, config: Config, _engine_for: EngineFor, _warn: Warn) -> Target:
    """Slurm's client on this host, the jobs under --slurm-dir (nothing is written before a job is submitted)."""
    bundle, image_config = chosen_bundle(options.get("integration"), options.get("bundle"), "--target slurm")
    return SlurmTarget(
        LocalCommands(),
        options.get("slurm_dir"),
        options.image,
        config.path,
        options.get("integration"),
        bundle,
        image_config,
        options.get("partition"),
    )


def _dry_run(options: TargetOptions, config: Config, engine_for: EngineFor) -> Target:
    return _make(options, config, engine_for, lambda _line: None)


SLURM_KIND = TargetKind(
    declaration=SLURM,
    chosen=lambda options: options.get("target") == "slurm",
    make=_make,
    dry_run=_dry_run,
    chosen_with="--target slurm",
    options=(
        TargetOption(
            "--slurm-dir",
            "slurm_dir",
            "with --target slurm: where each scenario's job directory goes, on a filesystem every node sees at the "
            "same path (default distval-slurm-jobs)",
            kind=PATH,
            default="distval-slurm-jobs",
            metavar="DIR",
            names="the directory of the jobs",
        ),
        TargetOption(
            "--bundle",
            "bundle",
            "with --target slurm --integration oci: the image under test unpacked as an OCI bundle (docs/slurm.md)",
            kind=PATH,
            metavar="DIR",
            names="an OCI bundle directory",
            needs_its_target="is the OCI bundle of --target slurm",
        ),
        TargetOption(
            "--integration",
            "integration",
            "with --target slurm: how a job step runs the image (oci: srun --container, the default)",
            kind=CHOICE,
            default=OCI,
            choices=tuple(INTEGRATIONS),
        ),
        TargetOption(
            "--partition", "partition", "with --target slurm: the partition to submit to (default: the cluster's)", kind=TEXT
        ),
    ),
    refuses=(
        (("hosts",), "--hosts names Docker Engines, --target slurm submits to Slurm: give one, not both"),
        (("hosts_from_config",), "--hosts names Docker Engines, --target slurm submits to Slurm: give one, not both"),
    ),
    target_choice="slurm",
    target_help="slurm: each scenario as a batch job, submitted with sbatch from this host, followed to its deadline and "
    "cancelled (scancel) on every stop; see --slurm-dir, --bundle (docs/slurm.md)",
)
