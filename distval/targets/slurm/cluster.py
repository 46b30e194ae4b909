"""A real Slurm cluster in containers on this machine, for the slurm target's tests (as distval/targets/engines/dind.py
starts node Engines for the tests across several hosts): a controller (slurmctld, and the login node distval submits
from) and compute nodes (slurmd), each a container of the slurm-node fixture (Debian bookworm's Slurm 22.05, munge,
runc, skopeo, umoci: distval/images/recipes.py SLURM_NODE), on a network of their own.

- one munge key per cluster, made here and put into every node before it starts (munge authenticates every RPC);
- slurm.conf generated with the node names (the containers' hostnames, which Docker's DNS resolves on the network):
  ``ProctrackType=proctrack/pgid`` and ``TaskPlugin=task/none`` (no cgroup plugin inside a container),
  ``SlurmUser=root``, no accounting (so no sacct: the job's state comes from ``scontrol show job``);
- oci.conf runs runc on the bundle Slurm writes for each task (``srun --container``);
- a directory of this machine mounted at the same path in every node: the cluster's shared filesystem (job
  directories, the image's OCI bundle), as distval export slurm expects one.

runc starts the image under test's container inside a node container: it needs to create namespaces, mount proc and
bind mounts, and write cgroups. The node containers are therefore privileged in effect (every capability but
CAP_SYS_RESOURCE, which --privileged fails without here, no seccomp filter, the host's cgroup tree, no AppArmor):
acceptable for distval's own test cluster, like the node Engines. The image under test never gets any of this: it
runs in runc's container with runc's default capabilities, as it would on a real cluster.

Everything is named ``distval-slurm-<id>-...`` and labelled ``distval.slurm=<id>``; ``stop_cluster`` removes it.
"""

from __future__ import annotations

import io
import os
import secrets
import shutil
import tarfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distval.errors import BadInput, EngineError
from distval.image_names import SLURM_NODE
from distval.images import build_fixtures
from distval.plan.specs import NetworkPlan
from distval.targets.docker.engine import Engine

LABEL_CLUSTER = "distval.slurm"
NAME_PREFIX = "distval-slurm-"
NODES_MAX = 4
READY_TIMEOUT_S = 120.0
RUNC_ROOT = "/run/distval-runc"
Progress = Callable[[str], None]

_START = """set -e
chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key
mkdir -p /run/munge /var/log/munge /var/lib/munge && chown munge:munge /run/munge /var/log/munge /var/lib/munge
runuser -u munge -- /usr/sbin/munged
mkdir -p /var/spool/slurmctld /var/spool/slurmd /var/log/slurm {runc_root}
exec {daemon} -D
"""


@dataclass(frozen=True)
class Cluster:
    cluster_id: str
    network: str
    controller: str  # the controller's container (and hostname)
    nodes: tuple[str, ...]  # the compute nodes' containers (and hostnames, Slurm's node names)
    shared: str  # the shared directory, the same path here and in every node

    @property
    def containers(self) -> tuple[str, ...]:
        return (self.controller, *self.nodes)


def slurm_conf(controller: str, nodes: Sequence[str], cpus: int) -> str:
    lines = [
        "# Written by distval (distval/targets/slurm/cluster.py): a test cluster in containers.",
        "ClusterName=distval",
        f"SlurmctldHost={controller}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        "MpiDefault=none",
        # No cgroup plugin inside a container. Processes by process group, not through /proc (linuxproc): a step's
        # runc keeps its task's process group, and killing it kills the container's first process and with it the
        # container's PID namespace; under linuxproc a cancelled step's container kept running (measured).
        "ProctrackType=proctrack/pgid",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "SchedulerType=sched/backfill",
        # A node an admin (or a test) sets DOWN stays down until resumed; one that only stopped answering returns.
        "ReturnToService=1",
        "StateSaveLocation=/var/spool/slurmctld",
        "SlurmdSpoolDir=/var/spool/slurmd",
        "SlurmctldPidFile=/run/slurmctld.pid",
        "SlurmdPidFile=/run/slurmd.pid",
        "SlurmctldLogFile=/var/log/slurm/slurmctld.log",
        "SlurmdLogFile=/var/log/slurm/slurmd.log",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        # A finished job stays visible to scontrol show job for 10 minutes (no accounting database here).
        "MinJobAge=600",
        "KillWait=5",
        "SlurmdTimeout=30",
        "InactiveLimit=0",
        "Waittime=0",
        f"NodeName={','.join(nodes)} CPUs={cpus} State=UNKNOWN",
        "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
    ]
    return "\n".join(lines) + "\n"


def oci_conf() -> str:
    """Slurm's OCI runtime commands (oci.conf(5)): runc as root, one container per task, named by node, user, job,
    step and task; Slurm passes the bundle it rewrote for the task (%b)."""
    runc = f"runc --root={RUNC_ROOT}"
    name = "%n.%u.%j.%s.%t"
    return "\n".join(
        [
            f'RunTimeQuery="{runc} state {name}"',
            f'RunTimeKill="{runc} kill -a {name} SIGKILL"',
            f'RunTimeDelete="{runc} delete --force {name}"',
            f'RunTimeRun="{runc} run {name} -b %b"',
            "",
        ]
    )


def _archive(files: dict[str, tuple[bytes, int]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path, (data, mode) in files.items():
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _create_kwargs(name: str, network: str, cluster_id: str, shared: str, daemon: str) -> dict[str, Any]:
    return {
        "image": SLURM_NODE,
        "name": name,
        "hostname": name,
        "entrypoint": ["/bin/sh", "-c", _START.format(daemon=daemon, runc_root=RUNC_ROOT)],
        "command": [],
        "network": network,
        "labels": {LABEL_CLUSTER: cluster_id},
        # runc inside (see the module's docstring): distval's own node, never the image under test.
        "cap_add": ["ALL"],
        "cap_drop": ["SYS_RESOURCE"],
        "security_opt": ["seccomp=unconfined", "apparmor=unconfined"],
        "tmpfs": {"/run": "exec"},
        "mounts": [
            {"Target": "/sys/fs/cgroup", "Source": "/sys/fs/cgroup", "Type": "bind", "ReadOnly": False},
            {"Target": shared, "Source": shared, "Type": "bind", "ReadOnly": False},
        ],
        "detach": True,
        # An init as PID 1 that reaps: slurmd would leave every ended step's processes as zombies.
        "init": True,
    }


def start_cluster(shared: str, nodes: int = 2, progress: Progress = lambda line: None, cluster_id: str | None = None) -> Cluster:
    """Start a controller and ``nodes`` compute nodes sharing ``shared`` (an absolute directory here, one mount: the
    batch script hard-links a bundle's rootfs into a job's directory, and link(2) does not cross mounts), and wait
    until every node is idle. On any failure everything of the cluster is removed before the error leaves."""
    if not 1 <= nodes <= NODES_MAX:
        raise BadInput(f"slurm cluster: expected 1..{NODES_MAX} compute nodes; got {nodes}")
    if not os.path.isabs(shared):
        raise BadInput(f"slurm cluster: the shared directory must be absolute; got {shared}")
    cluster_id = cluster_id or secrets.token_hex(3)
    engine = Engine(f"slurm-{cluster_id}")
    build_fixtures(engine, [SLURM_NODE], progress)
    network = f"{NAME_PREFIX}{cluster_id}"
    controller = f"{network}-ctl"
    names = tuple(f"{network}-c{i + 1}" for i in range(nodes))
    started = time.monotonic()
    cluster = Cluster(cluster_id, network, controller, names, shared)
    try:
        engine.create_network(NetworkPlan(name=network, internal=True, labels=((LABEL_CLUSTER, cluster_id),)))
        key = secrets.token_bytes(1024)
        files = {
            "/etc/munge/munge.key": (key, 0o400),
            "/etc/slurm/slurm.conf": (slurm_conf(controller, names, os.cpu_count() or 1).encode(), 0o644),
            "/etc/slurm/oci.conf": (oci_conf().encode(), 0o644),
        }
        for name, daemon in ((controller, "slurmctld"), *((n, "slurmd") for n in names)):
            handle = engine.create_raw(_create_kwargs(name, network, cluster_id, shared, daemon))
            engine.put_archive(handle, "/", _archive(files))
            engine.start(handle)
        wait_idle(engine, cluster, started)
        progress(f"slurm cluster {cluster_id}: {len(names)} node(s) idle {time.monotonic() - started:.1f} s after the start")
        return cluster
    except BaseException:
        engine.remove_matching([f"{LABEL_CLUSTER}={cluster_id}"])
        raise


def stop_cluster(cluster_id: str) -> tuple[int, int]:
    """Remove the cluster's containers and network (its shared directory is the caller's)."""
    return Engine("slurm-down").remove_matching([f"{LABEL_CLUSTER}={cluster_id}"])


def run_on(engine: Engine, container: str, argv: Sequence[str]) -> tuple[int, str]:
    """``argv`` in one of the cluster's containers: its exit code (-1 where the Engine did not say) and output."""
    handle = engine.client.containers.get(container)
    result = engine.exec_run(handle, list(argv))
    return (-1 if result.exit_code is None else result.exit_code), result.output


def wait_idle(engine: Engine, cluster: Cluster, started: float) -> None:
    """Until sinfo on the controller lists every node idle."""
    last = ""
    while time.monotonic() - started < READY_TIMEOUT_S:
        try:
            code, last = run_on(engine, cluster.controller, ["sinfo", "--noheader", "--format=%n %t"])
        except EngineError as exc:
            last = str(exc)
            code = 1
        states = dict(line.split() for line in last.splitlines() if len(line.split()) == 2) if code == 0 else {}
        if all(states.get(node) == "idle" for node in cluster.nodes):
            return
        time.sleep(0.5)
    raise EngineError(f"slurm cluster {cluster.cluster_id}: the nodes were not idle within {READY_TIMEOUT_S:g} s: {last}")


def cached_bundle(engine: Engine, cluster: Cluster, image: str, cache: str) -> str:
    """The image's bundle under ``cache`` (a directory the cluster shares), made once per image id: a bundle takes
    minutes (docs/measurements.md#slurm), and the image's id names exactly its content."""
    info = engine.image(image)
    if info is None:
        raise EngineError(f"image {image} is not in the Engine")
    bundle = Path(cache) / info.id.replace("sha256:", "")[:32]
    if not (bundle / "config.json").is_file():
        partial = bundle.with_name(bundle.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        make_bundle(engine, cluster, image, str(partial))
        os.replace(partial, bundle)  # umoci's config.json names no path of its own: the bundle can move
    return str(bundle)


def make_bundle(engine: Engine, cluster: Cluster, image: str, bundle: str) -> None:
    """The image as an OCI bundle at ``bundle`` (under the shared directory): ``docker save``, then on the controller
    ``skopeo copy docker-archive:... oci:...`` and ``umoci unpack`` (what a release engineer runs on a login node)."""
    work = Path(bundle).parent / f"{Path(bundle).name}.work"
    work.mkdir(parents=True, exist_ok=True)
    archive = work / "image.tar"
    try:
        with open(archive, "wb") as handle:
            for chunk in engine.save_image(image):
                handle.write(chunk)
        for argv in (
            ["skopeo", "copy", f"docker-archive:{archive}", f"oci:{work}/oci:distval"],
            ["umoci", "unpack", "--image", f"{work}/oci:distval", bundle],
        ):
            code, output = run_on(engine, cluster.controller, argv)
            if code != 0:
                raise EngineError(f"{' '.join(argv)} failed ({code}): {output[-2000:]}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
