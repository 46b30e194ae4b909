"""A scenario's plan -> a Slurm batch job that runs it (``distval export slurm``).

Everything a node runs comes from the one-Engine ScenarioPlan (distval/targets/engines/planning.py), mapped as the
Kubernetes export maps it: node i's container -> job step i, one ``srun --nodes=1 --relative=i`` per node, all at once
in the background (each step's own exit code and output file: what a container's are on Docker). Only what differs
between Docker and Slurm is translated:

- node 0's container name -> the first host of ``SLURM_JOB_NODELIST`` (``scontrol show hostnames``); with
  ``master_addr: ip`` its IPv4 address (``getent ahostsv4``);
- the rendezvous ports -> one port the job picks from its job id (two jobs on one node do not share one);
- the files copied in -> the job directory (a filesystem every node sees at the same path, as Slurm's own output
  files need): the suite read-only at /distval, the spec rendered with the job's address and port, a results
  directory per node at /distval/results, where the suite writes ``rank-<R>.jsonl``;
- what ran -> the plan file (``plan.json``, distval/targets/plan_file.py) beside the batch script, which names its
  SHA-256 in a comment: collect judges the job's output against it;
- the job directory and everything in it are the job's user's alone (directories 0700, files 0600, the script 0700,
  and the script's ``umask 077`` for what the job writes): on a shared filesystem no other user may put a record
  there, and collect refuses what someone else could have written (docs/slurm.md);
- the scenario network -> none: a job step uses its node's network (the suite leaves GLOO_SOCKET_IFNAME unset);
- the deadline -> the job's time limit (``#SBATCH --time``): Slurm ends the job there, whatever distval does;
- GPUs -> ``--gpus-per-node`` and one rank per GPU; Slurm sets CUDA_VISIBLE_DEVICES.

The job directory's layout is this module's (``JobDir``); distval/targets/slurm/collect.py reads it back.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from distval import strict_json
from distval.config import Config
from distval.errors import BadInput, PlanError, one_line
from distval.plan.model import ScenarioPlan
from distval.plan.placeholders import placeholders_in, resolve
from distval.reports.files import write_atomically
from distval.targets.declarations import SLURM
from distval.targets.docker.plan import C10D_PORT, MASTER_PORT
from distval.targets.docker.runtime import suite_dir
from distval.targets.engines.planning import plan_run
from distval.targets.origin import Origin
from distval.targets.plan_file import PLAN_SHA256_KEY, plan_text, sha256_text
from distval.targets.slurm.integrations import APPTAINER, OCI, Mount, StepRequest, srun_options

# In the plan's text, where the job's rendezvous address and port go; the batch script fills them in.
ADDR = "@DISTVAL_MASTER_ADDR@"
PORT = "@DISTVAL_MASTER_PORT@"
# The job picks its port from its id: PORT_BASE + id % PORT_SPAN (two jobs on one node get different ports).
PORT_BASE = 20000
PORT_SPAN = 20000
NAME_MAX = 60
SUITE_MOUNT = "/distval"  # the plan's working directory: the suite, the spec and the results under it
BATCH_FILE = "job.sbatch"
PLAN_FILE = "plan.json"
# The batch script's line naming its plan file's SHA-256 (collect reads it back).
PLAN_SHA256_LINE = f"# {PLAN_SHA256_KEY}: "
# What the job directory's directories and files are made with: the job's user's alone.
DIR_MODE = 0o700
FILE_MODE = 0o600
SCRIPT_MODE = 0o700
SPEC_TEMPLATE = "spec.json.in"
# What Slurm puts in a step's environment (srun(1) OUTPUT ENVIRONMENT VARIABLES), besides what distval exports.
SET_BY_SLURM = ("SLURM_*", "SLURMD_*", "TMPDIR")
NODE_ROOTFS = "rootfs"  # in each node's bundle directory: the image's rootfs, hard-linked there by the batch script
_MASTER_PORT_OPTION = re.compile(r"^(--master[_-]port=)\d+$")
# A value srun --export cannot carry: its list is comma-separated, with no quoting.
_EXPORT_UNSAFE = re.compile(r"[,\n]")


@dataclass(frozen=True)
class JobDir:
    """The files of one exported scenario, under ``root`` (absolute, the same path on every node)."""

    root: str

    def path(self, *parts: str) -> str:
        return str(PurePosixPath(self.root, *parts))

    @property
    def batch(self) -> str:
        return self.path(BATCH_FILE)

    @property
    def run(self) -> str:
        """What one run of the job writes (removed and made again when the job starts)."""
        return self.path("run")

    def node_results(self, node: int) -> str:
        return self.path("run", f"node-{node}")

    def node_output(self, node: int, stream: str) -> str:
        return self.path("run", f"node-{node}.{stream}")

    def node_exit(self, node: int) -> str:
        return self.path("run", f"node-{node}.exit")

    def node_bundle(self, node: int) -> str:
        return self.path("bundles", f"node-{node}")


@dataclass(frozen=True)
class ExportedJob:
    plan: ScenarioPlan
    name: str  # the job's name (sbatch --job-name) and its directory's
    integration: str
    files: dict[str, str] = field(default_factory=dict)  # path relative to the job directory -> text
    dirs: tuple[str, ...] = ()  # empty directories it needs (mount points), relative
    refused: str | None = None


def job_names(slugs: Iterable[str]) -> list[str]:
    """Each scenario's job name and directory: its slug, unique within the export (a clash gets a number)."""
    names: list[str] = []
    for index, slug in enumerate(slugs):
        name = slug[:NAME_MAX]
        if name in names:
            name = f"{name[: NAME_MAX - 6]}-{index}"
        names.append(name)
    return names


def refusal(plan: ScenarioPlan, integration: str) -> str | None:
    """Why the scenario has no Slurm form, or None."""
    scenario = plan.scenario
    lacking = SLURM.refusals([scenario])
    if lacking:
        return "; ".join(lacking)
    if scenario.user is not None:
        return f"user {scenario.user!r}: a Slurm job step runs as the user who submitted the job"
    unknown = placeholders_in(plan.containers) - {"subnets", "node0_ip", "node0_host"}
    if unknown:
        return f"the plan needs {', '.join(sorted(unknown))}, which only the Docker Engine knows"
    if integration == OCI and plan.containers[0].options.gpu_device_ids:
        return (
            "GPUs with Slurm's OCI containers need the cluster's oci.conf to run NVIDIA's container hook, which distval "
            "cannot see from here: export with --integration pyxis or apptainer"
        )
    return None


def _mapped(plan: ScenarioPlan, text: str) -> str:
    """``text`` with node 0's address and the rendezvous ports as ADDR and PORT."""
    node0 = plan.containers[0].hostname
    text = resolve(text, {"node0_ip": ADDR, "node0_host": ADDR, "subnets": ""})
    for port in (MASTER_PORT, C10D_PORT):
        text = text.replace(f"{node0}:{port}", f"{ADDR}:{PORT}").replace(f"{ADDR}:{port}", f"{ADDR}:{PORT}")
    text = re.sub(rf"\b{re.escape(node0)}\b", ADDR, text)
    return _MASTER_PORT_OPTION.sub(rf"\g<1>{PORT}", text)


def _env(plan: ScenarioPlan, node: int) -> tuple[tuple[str, str], ...]:
    env = []
    for key, value in plan.containers[node].env:
        value = _mapped(plan, value)
        if key == "MASTER_PORT" and value in (str(MASTER_PORT), str(C10D_PORT)):
            value = PORT
        env.append((key, value))
    return tuple(env)


def shell_word(text: str) -> str:
    """``text`` as one shell word, ADDR and PORT expanded by the batch script's shell, everything else literal."""
    pieces = re.split(f"({re.escape(ADDR)}|{re.escape(PORT)})", text)
    out = []
    for piece in pieces:
        if piece == ADDR:
            out.append('"${MASTER_ADDR}"')
        elif piece == PORT:
            out.append('"${MASTER_PORT}"')
        elif piece:
            out.append(shlex.quote(piece))
    return "".join(out) or "''"


def _spec_template(plan: ScenarioPlan) -> str:
    spec = strict_json.loads(_mapped(plan, plan.suite_spec_json))
    # The environment check judges what the image bakes in: what Slurm sets in every step is the scheduler's, not the
    # image's (named by prefix: distval_suite/environment.py image_variables).
    spec["set_by_distval"] = sorted({*spec.get("set_by_distval", []), *SET_BY_SLURM})
    return json.dumps(spec, sort_keys=True, indent=1) + "\n"


def _bundle_config(image_config: dict[str, Any], plan: ScenarioPlan, job: JobDir, node: int) -> str:
    """Node ``node``'s OCI config.json: the image's (from umoci unpack: its environment, user, working directory),
    its root the image's rootfs read-only, the suite, spec and the node's results mounted, the node's own network.

    The rootfs's files are the bundle's, shared by every node and job: read-only, with a fresh /tmp, so that the image
    under test cannot change what the next run starts from (Docker gives each container a layer of its own instead)."""
    config = strict_json.loads(json.dumps(image_config))
    # Slurm 22.05 runs <bundle>/rootfs whatever root.path says, and runc refuses a rootfs that is a symbolic link: the
    # batch script links the image's rootfs there file by file (cp -al: hard links, 0.6 s for the 24,000 files of the
    # torch 2.6 image here) and removes the links when the steps end.
    config["root"] = {"path": NODE_ROOTFS, "readonly": True}
    process = config.setdefault("process", {})
    process["cwd"] = plan.containers[node].working_dir
    process["terminal"] = False
    linux = config.setdefault("linux", {})
    # A job step uses its node's network and hostname (the rendezvous address is the node's): no network or UTS
    # namespace of its own, as on any Slurm cluster.
    linux["namespaces"] = [n for n in linux.get("namespaces", []) if n.get("type") not in ("network", "uts")]
    config.pop("hostname", None)  # runc refuses a hostname without a UTS namespace of the container's own
    mounts = [
        m for m in config.get("mounts", []) if m.get("destination") not in ("/tmp", SUITE_MOUNT, "/etc/hosts", "/etc/resolv.conf")
    ]
    shm = plan.containers[node].options.shm_size
    if shm is not None:
        for mount in mounts:
            if mount.get("destination") == "/dev/shm":
                mount["options"] = [o for o in mount.get("options", []) if not o.startswith("size=")] + [f"size={shm}"]
    mounts.append({"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "mode=1777"]})
    # The node's names and resolver, as Docker and enroot give a container: an image's own /etc/hosts is empty, and
    # node 0's address is a name.
    mounts += [
        {"destination": path, "type": "bind", "source": path, "options": ["rbind", "ro"]}
        for path in ("/etc/hosts", "/etc/resolv.conf")
    ]
    mounts += [
        {"destination": m.destination, "type": "bind", "source": m.source, "options": ["rbind", "ro" if m.read_only else "rw"]}
        for m in _mounts(plan, job, node)
    ]
    config["mounts"] = mounts
    return json.dumps(config, indent=1, sort_keys=True) + "\n"


def _mounts(plan: ScenarioPlan, job: JobDir, node: int) -> tuple[Mount, ...]:
    container = plan.containers[node]
    spec_path = next(f.path for f in container.files if f.path.endswith("/spec.json") and f.text is not None)
    return (
        Mount(job.path("distval"), SUITE_MOUNT, read_only=True),
        Mount(job.path("run", "spec.json"), spec_path, read_only=True),
        Mount(job.node_results(node), container.results_dir, read_only=False),
    )


def _check_layout(plan: ScenarioPlan) -> None:
    """The files of the plan as this export maps them: the suite and spec under /distval, the results there too."""
    for container in plan.containers:
        paths = {f.path for f in container.files}
        expected = {SUITE_MOUNT, f"{SUITE_MOUNT}/distval_suite", f"{SUITE_MOUNT}/spec.json", container.results_dir}
        if paths != expected or container.results_dir != f"{SUITE_MOUNT}/results":
            raise PlanError(f"the plan's files {sorted(paths)} are not the ones the Slurm export maps ({sorted(expected)})")


def _time_limit(deadline_s: float) -> str:
    """``#SBATCH --time`` as minutes:seconds (Slurm's granularity is a minute; it rounds up)."""
    seconds = max(60, math.ceil(deadline_s))
    return f"{seconds // 60}:{seconds % 60:02d}"


def batch_script(
    plan: ScenarioPlan,
    name: str,
    job: JobDir,
    integration: str,
    image_ref: str,
    partition: str | None = None,
    bundle_rootfs: str | None = None,
    plan_sha256: str = "",
) -> str:
    containers = plan.containers
    nodes = len(containers)
    options = containers[0].options
    gpus = len(options.gpu_device_ids)
    lines = [
        "#!/bin/bash",
        f"# distval: scenario {plan.scenario.name!r} on {plan.image} (run {plan.run_id}), {nodes} node(s), "
        f"{integration} containers.",
        "# Written by distval export slurm; distval collect slurm reads what it leaves in this directory, and judges it",
        f"# against the plan file {PLAN_FILE} beside this script, whose SHA-256 is:",
        f"{PLAN_SHA256_LINE}{plan_sha256}",
        f"#SBATCH --job-name={name}",
        f"#SBATCH --nodes={nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --time={_time_limit(plan.deadline_s)}",
        f"#SBATCH --output={job.path('slurm-%j.out')}",
        # A failed node must fail this job, never be replaced by another one (Slurm's default requeues).
        "#SBATCH --no-requeue",
    ]
    if partition:
        lines.append(f"#SBATCH --partition={partition}")
    if gpus:
        lines.append(f"#SBATCH --gpus-per-node={gpus}")
    if options.cpus is not None:
        lines.append(f"#SBATCH --cpus-per-task={math.ceil(options.cpus)}")
    if options.memory is not None:
        lines.append(f"#SBATCH --mem={options.memory.upper().rstrip('B')}")
    if options.ulimits:
        lines.append(
            "# not mapped: ulimits "
            + ", ".join(f"{u.name}={u.soft}" for u in options.ulimits)
            + " (a step inherits the limits slurmd's PropagateResourceLimits gives it)"
        )
    addr = "$(getent ahostsv4 \"$NODE0\" | awk 'NR == 1 {print $1}')" if plan.needs_node0_ip else '"$NODE0"'
    lines += [
        "set -u",
        # What the job writes is its user's alone, whatever umask sbatch passed on (a shared filesystem's other
        # users must not put a record in it).
        "umask 077",
        f"JOB_DIR={shlex.quote(job.root)}",
        'NODE0=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        f"MASTER_ADDR={addr}",
        f"MASTER_PORT=$(( {PORT_BASE} + SLURM_JOB_ID % {PORT_SPAN} ))",
        # Only a host name or an address goes into the spec (sed) and the command lines.
        'case "$MASTER_ADDR" in ""|*[!A-Za-z0-9.:-]*) '
        "echo \"distval: no usable address for node 0: '$MASTER_ADDR'\" >&2; exit 2;; esac",
        f'rm -rf "$JOB_DIR/run" && mkdir -m {DIR_MODE:04o} "$JOB_DIR/run" || exit 2',
        # What collect needs besides the records: the job, its nodes in order, and the rendezvous it used.
        '{ echo "job_id=$SLURM_JOB_ID"; echo "started=$(date +%s.%N)"; echo "master_addr=$MASTER_ADDR"; '
        'echo "master_port=$MASTER_PORT"; '
        'scontrol show hostnames "$SLURM_JOB_NODELIST" | sed "s/^/node=/"; } > "$JOB_DIR/run/job"',
        f'sed -e "s/{ADDR}/$MASTER_ADDR/g" -e "s/{PORT}/$MASTER_PORT/g" '
        f'"$JOB_DIR/{SPEC_TEMPLATE}" > "$JOB_DIR/run/spec.json" || exit 2',
    ]
    for node in range(nodes):
        # The job's user's alone: the step runs the image as that user (docs/slurm.md), and no other user of the
        # shared filesystem may put a record there.
        lines.append(f'mkdir -m {DIR_MODE:04o} "$JOB_DIR/run/node-{node}" || exit 2')
    if integration == OCI:
        if bundle_rootfs is None:
            raise PlanError("the oci integration needs the image's OCI bundle (--bundle DIR)")
        lines.append(f"BUNDLE_ROOTFS={shlex.quote(bundle_rootfs)}")
        for node in range(nodes):
            rootfs = f'"$JOB_DIR/bundles/node-{node}/{NODE_ROOTFS}"'
            lines.append(
                f'rm -rf {rootfs} && cp -al "$BUNDLE_ROOTFS" {rootfs} || '
                "{ echo \"distval: cannot hard-link the bundle's rootfs into the job directory (the same filesystem is "
                'needed)" >&2; exit 2; }'
            )
    lines.append("# One step per node, all at once: each node's exit code and output, as a container's on Docker.")
    for node in range(nodes):
        container = containers[node]
        env = _env(plan, node)
        argv = tuple(_mapped(plan, a) for a in container.argv)
        request = StepRequest(
            image=image_ref,
            bundle=job.node_bundle(node),
            mounts=_mounts(plan, job, node),
            workdir=container.working_dir,
            env=env,
            argv=argv,
            gpus=bool(gpus),
        )
        runner, command = srun_options(integration, request)
        if integration == APPTAINER:
            export = "--export=ALL"  # apptainer itself runs on the node; the image gets only --env's
        else:
            unsafe = [key for key, value in env if _EXPORT_UNSAFE.search(value)]
            if unsafe:
                raise PlanError(f"srun --export cannot carry the value of {', '.join(unsafe)} (a comma or a newline)")
            export = "--export=" + ",".join(f"{key}={value}" for key, value in env) if env else "--export=NONE"
        srun = [
            "srun",
            "--nodes=1",
            "--ntasks=1",
            f"--relative={node}",
            f"--job-name={name}-n{node}",
            f"--output={job.node_output(node, 'out')}",
            f"--error={job.node_output(node, 'err')}",
            export,
            *runner,
            *command,
        ]
        if gpus:
            srun.insert(4, f"--gpus-per-node={gpus}")
        words = " ".join(shell_word(_mapped(plan, w)) for w in srun)
        lines.append(f'( {words}; echo $? > "$JOB_DIR/run/node-{node}.exit" ) &')
    lines += [
        "wait",
        'echo "ended=$(date +%s.%N)" >> "$JOB_DIR/run/job"',
        f'rm -rf "$JOB_DIR"/bundles/node-*/{NODE_ROOTFS}',
        'worst=0; for f in "$JOB_DIR"/run/node-*.exit; do code=$(cat "$f"); [ "$code" -gt "$worst" ] && worst=$code; done',
        'exit "$worst"',
    ]
    return "\n".join(lines) + "\n"


def export_scenario(
    plan: ScenarioPlan,
    name: str,
    root: str,
    integration: str,
    config_path: str,
    bundle: str | None = None,
    image_config: dict[str, Any] | None = None,
    partition: str | None = None,
    job_uid: int | None = None,
) -> ExportedJob:
    """``root``: the job's directory, absolute, as every node sees it. ``bundle``/``image_config``: the OCI bundle
    unpacked from the image (its directory and its config.json), for the oci integration. ``job_uid``: the user
    who submits the job, named in the plan (default: this process's effective uid, who writes the directory)."""
    why = refusal(plan, integration)
    if why is not None:
        return ExportedJob(plan, name, integration, refused=why)
    _check_layout(plan)
    job = JobDir(root)
    origin = Origin(plan.scenario, plan.image, plan.run_id, plan.slug, config_path, name)
    rootfs = None
    if integration == OCI and bundle is not None and image_config is not None:
        rootfs = str(PurePosixPath(bundle, str(image_config.get("root", {}).get("path", "rootfs"))))
    plan_file = plan_text(origin, os.geteuid() if job_uid is None else job_uid)
    files = {
        BATCH_FILE: batch_script(plan, name, job, integration, plan.image, partition, rootfs, sha256_text(plan_file)),
        PLAN_FILE: plan_file,
        SPEC_TEMPLATE: _spec_template(plan),
        # Mount points inside the read-only /distval, for the spec and the results directory.
        "distval/spec.json": "",
    }
    for path in sorted(suite_dir().glob("*.py")):
        files[f"distval/distval_suite/{path.name}"] = path.read_text(encoding="utf-8")
    if integration == OCI:
        if bundle is None or image_config is None:
            raise PlanError("the oci integration needs the image's OCI bundle (--bundle DIR)")
        for node in range(len(plan.containers)):
            files[f"bundles/node-{node}/config.json"] = _bundle_config(image_config, plan, job, node)
    return ExportedJob(plan, name, integration, files=files, dirs=("distval/results",))


# Slurm's partition names (a comma-separated list of them is one --partition): letters, digits, _ . -
_PARTITIONS = re.compile(r"[A-Za-z0-9_.-]{1,64}(,[A-Za-z0-9_.-]{1,64}){0,31}")
# What the job directory's path may not hold: it is written into #SBATCH lines and the job's script (a line break
# starts a shell line), and into container mount lists, where "," separates mounts and ":" source from target.
_PATH_FORBIDDEN = re.compile(r"[\x00-\x20\x7f-\x9f,:\u2028\u2029]")


def option_refusal(out: Path, partition: str | None) -> str | None:
    """Why the command line's --partition or -o cannot go into a job; None when both can. ``out`` resolved."""
    if partition is not None and not _PARTITIONS.fullmatch(partition):
        return (
            f"--partition {one_line(partition)[:100]!r}: expected a Slurm partition name (letters, digits, _ . -), "
            "or several separated by commas"
        )
    found = _PATH_FORBIDDEN.search(str(out))
    if found is not None:
        return (
            f"-o {one_line(str(out))[:200]!r}: the jobs' directory is written into #SBATCH lines, the job script and "
            f"mount lists, where {found.group()!r} cannot be: choose a path without spaces, line breaks, ',' or ':'"
        )
    return None


def export_config(
    config: Config,
    run_id: str,
    image: str | None,
    out: Path,
    integration: str,
    bundle: str | None = None,
    image_config: dict[str, Any] | None = None,
    partition: str | None = None,
) -> list[ExportedJob]:
    root = out.resolve()
    refused = option_refusal(root, partition)
    if refused is not None:
        raise BadInput(refused)
    plan = plan_run(config, run_id, image)
    names = job_names(s.slug for s in plan.scenarios)
    return [
        export_scenario(s, name, str(root / name), integration, config.path, bundle, image_config, partition)
        for s, name in zip(plan.scenarios, names, strict=True)
    ]


def write_job(exported: ExportedJob, out: Path) -> Path:
    """The job's files under ``out``/name (the batch script executable), the job's user's alone: every directory
    made here DIR_MODE, every file FILE_MODE (the umask only narrows them)."""
    directory = out / exported.name
    for relative, text in exported.files.items():
        path = directory / relative
        _private_dirs(path.parent)
        write_atomically(path, text, new_mode=SCRIPT_MODE if relative == BATCH_FILE else FILE_MODE)
    for relative in exported.dirs:
        _private_dirs(directory / relative)
    return directory


def _private_dirs(path: Path) -> None:
    """``path`` and its missing parents, each made DIR_MODE (Path.mkdir's parents get the umask's 0777)."""
    missing = []
    while not path.is_dir():
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, DIR_MODE)
        except FileExistsError:
            if not directory.is_dir():
                raise
