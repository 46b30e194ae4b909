"""Executes a host-mode ScenarioPlan (distval/targets/local/plan.py) as local processes: no Docker.

The same step loop as distval/targets/docker/runtime.py (distval/run/steps.py; this is its NodeBackend): each
step resolved with the facts known so far and executed as written; the harness's own monotonic deadline; the
same RunEvents; the same ScenarioOutcome (a node's directory name stands for the container name). Facts here:
``{subnets}`` is the loopback network, and ``{master_port}``/``{c10d_port}`` are ports found free on this host
(bound to port 0) when the scenario starts, so that two runs at once do not collide.

Nothing is left behind. Each node starts in its own session with a marker in its environment
(``DISTVAL_HOST_PROCESS``, unique per node and run); torchrun starts its workers in sessions of their
own (torch/distributed/elastic/multiprocessing/subprocess_handler: ``start_new_session=True``), so a
process group or session is not enough to find them once their launcher is gone, but the environment
is inherited. At the deadline, on stop, Ctrl-C or SIGTERM, and after every scenario, every process
carrying the node's marker gets SIGKILL (the idea of Jenkins' ProcessTreeKiller, which finds a
build's processes by an environment variable). Then the node directories are removed.

A distval killed with SIGKILL runs none of that: the run's watchdog (distval/targets/local/watchdog.py), a process
of its own that ``LocalSession`` starts, notices distval's end and kills every process carrying the run's
session marker (``DISTVAL_HOST_SESSION``).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from distval.bounded_read import CONTAINER_LOG_MAX_BYTES, RESULTS_MAX_BYTES, FileRefused, end_of_file, kept_end, read_regular_file
from distval.errors import EnvironmentUnusable, PlanError
from distval.plan.model import ScenarioPlan, Step
from distval.plan.specs import ContainerPlan
from distval.results.outcome import ScenarioOutcome
from distval.run.events import RunEvents
from distval.run.steps import KILL_SETTLE_S, Collected, Exited, GpuShortfall, NodeBackend, Skip, run_steps
from distval.targets.declarations import LOCAL
from distval.targets.docker.runtime import suite_dir
from distval.targets.local.plan import LOOPBACK, LOOPBACK_SUBNETS
from distval.targets.local.watchdog import SESSION_MARKER, kill_all

# How often the nodes are polled while they run: how late an exit, a stop request or the deadline is seen.
POLL_INTERVAL_S = 0.2
# How long asking the local torch for its GPU count may take: importing torch from a cold file system is slow.
TORCH_PROBE_TIMEOUT_S = 120.0
MARKER = "DISTVAL_HOST_PROCESS"
# What a launcher sets for its workers: inherited from a shell that is itself a rank (a Slurm step, a
# torchrun worker), they would mislead the nodes. The launcher-less forms get theirs from the plan.
LAUNCHER_VARIABLES = frozenset(
    {
        "RANK",
        "LOCAL_RANK",
        "WORLD_SIZE",
        "LOCAL_WORLD_SIZE",
        "GROUP_RANK",
        "GROUP_WORLD_SIZE",
        "ROLE_RANK",
        "ROLE_WORLD_SIZE",
        "ROLE_NAME",
        "MASTER_ADDR",
        "MASTER_PORT",
    }
)


class LocalTorch:
    """The local Python that runs the scenarios, and the GPUs its torch sees (measured once per run,
    the first time a scenario needs GPUs; thread-safe)."""

    def __init__(self, python: str) -> None:
        self.python = python
        self._lock = threading.Lock()
        self._gpus: tuple[int | None, str] | None = None

    def gpu_count(self) -> tuple[int | None, str]:
        """(count, how it was measured) or (None, why it could not be)."""
        with self._lock:
            if self._gpus is None:
                self._gpus = self._probe()
            return self._gpus

    def _probe(self) -> tuple[int | None, str]:
        code = "import torch; print(torch.cuda.device_count())"
        how = f"{self.python} -c '{code}'"
        try:
            done = subprocess.run(
                [self.python, "-c", code],
                env=_inherited_environment(),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=TORCH_PROBE_TIMEOUT_S,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return None, f"{how} failed: {exc}"
        lines = done.stdout.strip().splitlines()
        if done.returncode != 0 or not lines or not lines[-1].isdigit():
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return None, f"{how} exited {done.returncode}: {last}"
        return int(lines[-1]), how


def gpu_shortfall(local: LocalTorch, plan: ScenarioPlan) -> GpuShortfall | None:
    """Why this host cannot give the scenario its GPUs (None: it can, or it needs none)."""
    needed = plan.gpus_needed
    if not needed:
        return None
    count, how = local.gpu_count()
    if count is None:
        # Not a skip: torch could not even be asked, so nothing was measured.
        return GpuShortfall(f"the scenario needs {needed} GPU(s); cannot tell how many the local torch sees: {how}", skip=False)
    if count >= needed:
        return None
    return GpuShortfall(f"{plan.gpus_needed_text}; the local torch sees {count} ({how})")


def local_limitation(plan: ScenarioPlan) -> str | None:
    """What a scenario asks for that local processes on one host's loopback cannot give (a skip, with the reason
    the local target declares: distval/targets/declarations.py)."""
    return LOCAL.skip_reason(plan.scenario)


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports free on the loopback now (the kernel's choice for port 0)."""
    sockets = []
    try:
        for _ in range(count):
            probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(probe)
            probe.bind((LOOPBACK, 0))
        return [probe.getsockname()[1] for probe in sockets]
    finally:
        for probe in sockets:
            probe.close()


def _inherited_environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARIABLES and not k.startswith("TORCHELASTIC_")}


def process_environment(plan_env: tuple[tuple[str, str], ...], marker: str, session: str | None = None) -> dict[str, str]:
    """This host's environment (less any launcher's variables), then the plan's; PYTHONPATH keeps the
    host's entries after the node's directory (the local torch may need them, e.g. on module systems)."""
    env = _inherited_environment()
    for key, value in plan_env:
        if key == "PYTHONPATH" and os.environ.get("PYTHONPATH"):
            value = value + os.pathsep + os.environ["PYTHONPATH"]
        env[key] = value
    env[MARKER] = marker
    if session is not None:
        env[SESSION_MARKER] = session
    return env


def write_files(cp: ContainerPlan) -> None:
    """The node's FileCopy entries, written to disk (what the Docker runtime puts in a tar)."""
    for copy in cp.files:
        path = Path(copy.path)
        if copy.text is None:
            path.mkdir(parents=True, exist_ok=True)
            path.chmod(copy.mode)
            if copy.suite:
                for source in sorted(suite_dir().glob("*.py")):
                    shutil.copyfile(source, path / source.name)
        else:
            path.write_text(copy.text, encoding="utf-8")
            path.chmod(copy.mode)


def kill_marked(marker: str, leader: subprocess.Popen[bytes] | None = None) -> None:
    """SIGKILL the node's process group, then every process carrying its marker until none is left."""
    if leader is not None and leader.poll() is None:
        _kill_group(leader.pid)
    kill_all(MARKER, marker, KILL_SETTLE_S)
    if leader is not None:
        try:
            leader.wait(timeout=KILL_SETTLE_S)
        except subprocess.TimeoutExpired:
            pass


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@dataclass
class _Node:
    plan: ContainerPlan
    marker: str
    session: str | None = None
    process: subprocess.Popen[bytes] | None = None
    stdout: IO[bytes] | None = None
    stderr: IO[bytes] | None = None
    exit_code: int | None = None

    @property
    def directory(self) -> Path:
        return Path(self.plan.working_dir)

    def poll(self) -> int | None:
        if self.exit_code is None and self.process is not None:
            code = self.process.poll()
            if code is not None:
                # Like Docker: a process killed by signal N exits 128+N.
                self.exit_code = 128 - code if code < 0 else code
        return self.exit_code


def run_local_scenario(
    local: LocalTorch, plan: ScenarioPlan, events: RunEvents, stop: threading.Event | None = None, session: str | None = None
) -> ScenarioOutcome:
    """``session``: the run's session marker, which its watchdog kills by (distval/targets/local/watchdog.py)."""
    return run_steps(LocalNodes(local, plan, session), plan, events, stop)


class LocalNodes(NodeBackend):
    """A scenario's nodes as local processes, each in its own directory: the step loop's NodeBackend for host mode."""

    kind = "node"
    setup_errors: tuple[type[Exception], ...] = (OSError, PlanError, EnvironmentUnusable)

    def __init__(self, local: LocalTorch, plan: ScenarioPlan, session: str | None = None) -> None:
        self.local, self.plan, self.session = local, plan, session
        self.nodes: dict[str, _Node] = {}  # in creation order
        self.token = secrets.token_hex(6)
        self.ports = (0, 0)

    def limitation(self) -> Skip | None:
        limitation = local_limitation(self.plan)
        return None if limitation is None else Skip(limitation, "host")

    def gpu_shortfall(self) -> GpuShortfall | None:
        return gpu_shortfall(self.local, self.plan)

    def initial_facts(self) -> dict[str, str]:
        master_port, c10d_port = free_ports(2)
        self.ports = (master_port, c10d_port)
        return {"subnets": LOOPBACK_SUBNETS, "master_port": str(master_port), "c10d_port": str(c10d_port)}

    def run_step(self, step: Step, facts: dict[str, str]) -> Skip | None:
        raise PlanError(f"host mode cannot execute {type(step).__name__} (a plan for Docker?)")

    def create(self, node: ContainerPlan, host: str) -> None:
        marker = f"{self.plan.run_id}-{self.plan.slug}-n{node.node_rank}-{self.token}"
        self.nodes[node.name] = _Node(node, marker, self.session)
        write_files(node)

    def start(self, name: str, host: str) -> None:
        _start(self.nodes[name])

    def started_note(self, count: int) -> str:
        return f"started {count} local node(s) with {self.plan.image}, ports {self.ports[0]}/{self.ports[1]}"

    def wait(self, running: Sequence[str], timeout_s: float) -> dict[str, Exited]:
        """Polls every node (a local process's exit costs a waitpid), then sleeps up to POLL_INTERVAL_S if none stopped."""
        stopped = {name: state for name in running if (state := self.exited(name)) is not None}
        if not stopped:
            time.sleep(min(POLL_INTERVAL_S, timeout_s))
        return stopped

    def exited(self, name: str) -> Exited | None:
        code = self.nodes[name].poll()
        return None if code is None else Exited(code)

    def kill(self, name: str) -> None:
        node = self.nodes[name]
        kill_marked(node.marker, node.process)

    def collect(self, name: str) -> Collected:
        return _collect(self.nodes[name])

    def salvage(self, name: str) -> Collected:
        return _collect(self.nodes[name])  # the same: killed first, a node's files are all on this host

    def remove(self) -> None:
        for node in self.nodes.values():
            kill_marked(node.marker, node.process)
            _close(node)
            shutil.rmtree(node.directory, ignore_errors=True)


def _start(node: _Node) -> None:
    directory = node.directory
    node.stdout = open(directory / "stdout.log", "wb")  # noqa: SIM115 - closed in _close
    node.stderr = open(directory / "stderr.log", "wb")  # noqa: SIM115 - closed in _close
    node.process = subprocess.Popen(
        list(node.plan.argv),
        cwd=directory,
        env=process_environment(node.plan.env, node.marker, node.session),
        stdin=subprocess.DEVNULL,
        stdout=node.stdout,
        stderr=node.stderr,
        # Its own session: a Ctrl-C at the terminal reaches distval only, which then kills the node.
        start_new_session=True,
    )


def _close(node: _Node) -> None:
    for stream in (node.stdout, node.stderr):
        if stream is not None:
            stream.close()


def _read(path: Path) -> str:
    try:
        return kept_end(*end_of_file(path, CONTAINER_LOG_MAX_BYTES))  # the ranks' output, of any size: its end
    except FileRefused:
        return ""


def _collect(node: _Node) -> Collected:
    cp = node.plan
    # Whatever a node left running (a worker whose launcher exited) dies with it, as in a container.
    kill_marked(node.marker, node.process)
    for stream in (node.stdout, node.stderr):
        if stream is not None:
            stream.flush()
    files: dict[str, bytes] = {}
    problem = None
    left = RESULTS_MAX_BYTES  # the ranks write this directory: regular files only, not followed, bounded
    try:
        for path in sorted(Path(cp.results_dir).iterdir()):
            if path.is_file() and not path.is_symlink():
                files[path.name] = read_regular_file(path, left, follow_links=False)
                left -= len(files[path.name])
    except (OSError, FileRefused) as exc:
        problem = f"results could not be read from {cp.results_dir}: {exc}"
    return Collected(node.poll(), _read(node.directory / "stdout.log"), _read(node.directory / "stderr.log"), files, problem)


def find_python(name: str, what: str) -> str:
    """An interpreter as an absolute path (not resolved: a venv's python is a symlink that must stay one)."""
    found = shutil.which(name)
    if found is None:
        raise EnvironmentUnusable(f"{what} {name!r} is not an executable file or on PATH")
    return os.path.abspath(found)


class LocalSession:
    """One ``distval run --local``: the Pythons it runs (``--python``, else each scenario's ``python`` on
    PATH), a temporary root for the nodes' directories, removed by ``close``."""

    def __init__(self, run_id: str, python: str | None, dry_run: bool = False) -> None:
        """``dry_run``: a session that only plans: no directory is made; its root is named as a run's would be."""
        self.run_id = run_id
        self.python = find_python(python, "--python") if python else None
        self._torches: dict[str, LocalTorch] = {}
        self._lock = threading.Lock()
        prefix = f"distval-{run_id}-"
        self.root = os.path.join(tempfile.gettempdir(), prefix + "XXXXXXXX") if dry_run else tempfile.mkdtemp(prefix=prefix)
        self.session = f"{run_id}-{secrets.token_hex(8)}"
        self._watchdog: subprocess.Popen[bytes] | None = None

    def _start_watchdog(self) -> None:
        """The run's watchdog, once (distval/targets/local/watchdog.py): its stdin is a pipe only this process writes
        to, so it reads EOF when distval ends, however it ends."""
        with self._lock:
            if self._watchdog is None:
                self._watchdog = subprocess.Popen(
                    [sys.executable, "-m", "distval.targets.local.watchdog", self.session, repr(KILL_SETTLE_S)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    start_new_session=True,  # a Ctrl-C at the terminal must not end it before distval's cleanup
                )

    def run_scenario(self, plan: ScenarioPlan, events: RunEvents, stop: threading.Event) -> ScenarioOutcome:
        self._start_watchdog()
        with self._lock:
            local = self._torches.setdefault(plan.image, LocalTorch(plan.image))
        return run_local_scenario(local, plan, events, stop, self.session)

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        if self._watchdog is not None:
            assert self._watchdog.stdin is not None
            self._watchdog.stdin.close()  # the end of the watch: it finds nothing left to kill and exits
            try:
                self._watchdog.wait(timeout=KILL_SETTLE_S)
            except subprocess.TimeoutExpired:
                self._watchdog.kill()
