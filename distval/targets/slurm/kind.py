"""The slurm target as the command line chooses it (--target slurm) and its options; ``distval export slurm`` (one
job directory per scenario: its batch script, the suite, the spec, the plan file and, for Slurm's OCI containers,
each node's bundle config: export.py) and ``distval collect slurm`` (job directories -> the reports of a run,
judged against each job's plan file: collect.py).

export: a line per job, and a line on stderr per scenario that has no Slurm form; exit 0, or 2 when no scenario
could be exported. collect: exit 0 when every scenario passed, 1 when a check failed or errored, 5 when every
scenario was skipped, 2 for a directory that holds no exported job, a plan file missing or changed, or files another
user could have written."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from distval.config import Config
from distval.errors import EXIT_CHECKS_FAILED, EXIT_NOTHING_VALIDATED, BadInput
from distval.results.scenario import RunSummary
from distval.targets.base import Target
from distval.targets.declarations import SLURM
from distval.targets.kind import (
    CHOICE,
    PATH,
    TEXT,
    CollectCommand,
    EngineFor,
    ExportCommand,
    Exported,
    TargetKind,
    TargetOption,
    TargetOptions,
    Warn,
)
from distval.targets.slurm.bundle_config import chosen_bundle
from distval.targets.slurm.collect import summarize_jobs
from distval.targets.slurm.export import BATCH_FILE, export_config, write_job
from distval.targets.slurm.integrations import INTEGRATIONS, OCI
from distval.targets.slurm.jobs import LocalCommands
from distval.targets.slurm.target import SlurmTarget


def _make(options: TargetOptions, config: Config, _engine_for: EngineFor, _warn: Warn) -> Target:
    """Slurm's client on this host, the jobs under --slurm-dir (nothing is written before a job is submitted); its
    scenarios are reproduced with --target slurm and the options given to it (--bundle, --integration, ...)."""
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
        (*SLURM_KIND.chosen_again(options), "--image"),
    )


def _dry_run(options: TargetOptions, config: Config, engine_for: EngineFor) -> Target:
    return _make(options, config, engine_for, lambda _line: None)


def _export(options: TargetOptions, scenarios: Callable[[], Config], out: Path) -> Iterator[Exported]:
    """Each scenario's job directory written under ``out``, said as it is written."""
    integration = options.get("integration")
    bundle, image_config = chosen_bundle(integration, options.get("bundle"), "export slurm")
    chosen = scenarios()
    partition = options.get("partition")
    for job in export_config(chosen, options.run_id, options.image, out, integration, bundle, image_config, partition):
        name = job.plan.scenario.name
        if job.refused is not None:
            yield Exported(name, refused=job.refused)
            continue
        try:
            directory = write_job(job, out)
        except OSError as exc:
            raise BadInput(f"cannot write {out / job.name}: {exc.strerror or exc}") from exc
        yield Exported(name, line=f"{directory / BATCH_FILE}: {name} ({len(job.plan.containers)} node(s), {job.integration})")


def _collect(options: TargetOptions) -> RunSummary:
    return summarize_jobs([Path(d) for d in options.get("directories")], fail_on_skip=options.get("fail_on_skip"))


DEFAULT_OUT = "distval-slurm"

EXPORT = ExportCommand(
    help="a batch job per scenario (sbatch): one job step per node in the image, through srun's containers",
    write=_export,
    form="a Slurm form",
    next_step=lambda run_id, out: f"run id {run_id}: sbatch each {BATCH_FILE}; then distval collect slurm {out}",
    image_help="the image under test",
    out_default=DEFAULT_OUT,
    out_names="the directory of the jobs",
    out_help=f"write one job directory per scenario into DIR (default {DEFAULT_OUT}); every node must see DIR at the "
    "same path (a shared filesystem), as Slurm's own output files need",
    run_id_help="in the reports (default: random)",
    options=(
        TargetOption(
            "--integration",
            "integration",
            "how a job step runs the image: oci (Slurm's srun --container, the default, tested here), pyxis "
            "(srun --container-image) or apptainer (apptainer exec)",
            kind=CHOICE,
            default=OCI,
            choices=tuple(INTEGRATIONS),
        ),
        TargetOption(
            "--bundle",
            "bundle",
            "with --integration oci: the image unpacked as an OCI bundle on the shared filesystem (skopeo copy, then "
            "umoci unpack: docs/slurm.md)",
            kind=PATH,
            metavar="DIR",
            names="an OCI bundle directory",
        ),
        TargetOption("--partition", "partition", "#SBATCH --partition (default: the cluster's default partition)"),
    ),
)

COLLECT = CollectCommand(
    help="exported Slurm jobs' directories -> JUnit, JSON, Markdown (after the jobs ended)",
    summarize=_collect,
    exit_codes=(EXIT_CHECKS_FAILED, EXIT_NOTHING_VALIDATED),
    options=(
        TargetOption(
            "directories",
            "directories",
            "a job directory of distval export slurm, or the directory holding them (its --output-dir)",
            nargs="+",
            metavar="DIR",
        ),
    ),
)


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
    target_choice="slurm",
    export=EXPORT,
    collect=COLLECT,
    target_help="slurm: each scenario as a batch job, submitted with sbatch from this host, followed to its deadline and "
    "cancelled (scancel) on every stop; see --slurm-dir, --bundle (docs/slurm.md)",
)
