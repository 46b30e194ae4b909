"""distval.targets.local.runtime and ``distval run --host`` with a fake ``python`` standing in for torch: files on
disk, resolved ports, the deadline, stop and SIGTERM, no process left behind, GPU skips, and no docker-py."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import textwrap
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from distval.cli.main import DEPRECATED_HOST
from distval.config import parse_config
from distval.plan.identity import with_hashes
from distval.plan.model import ScenarioPlan
from distval.plan.placeholders import placeholders_in
from distval.results.outcome import ERROR, PASSED, SKIPPED
from distval.results.scenario import ScenarioResult, summarize_scenario
from distval.run.events import COLLECTING, KILLING, REMOVING, RUNNING
from distval.targets.local.plan import plan_local_scenario
from distval.targets.local.runtime import MARKER, LocalTorch, free_ports, process_environment, run_local_scenario
from tests import load

RUN_ID = "h0st"
# From a signal to the exit of a host-mode run whose nodes hang: a bound against a hang only, far from the 300 s
# deadline that would otherwise end it. That the signal ended it is the exit code and the "interrupted" testcase
# (the wait polls every 0.2 s, then each node is SIGKILLed: about a second beside the hog, printed).
SIGNAL_TO_EXIT_S = 60.0
# Stands in for a Python with torch: answers the GPU probe, and for a node's command line reports what
# it was given (one JSON line on stdout) and writes a passing record per check for each of its ranks.
# FAKE_MODE=hang: sleeps, with a child in a session of its own (as torchrun's workers are).
FAKE_PYTHON = """\
#!{python}
import json, os, subprocess, sys, time
args = sys.argv[1:]
if args[:1] == ["-c"]:
    if os.environ.get("FAKE_PROBES"):
        with open(os.environ["FAKE_PROBES"], "a") as log:
            log.write("probe\\n")
    if os.environ.get("FAKE_PROBE_FAILS"):
        sys.exit("ModuleNotFoundError: No module named 'torch'")
    print(os.environ.get("FAKE_GPUS", "0"))
    sys.exit(0)
with open(args[-1]) as handle:
    spec = json.load(handle)
if "torch.distributed.run" in args:
    options = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
    nproc, node = int(options["nproc_per_node"]), int(os.environ["DISTVAL_NODE_RANK"])
    ranks = list(range(node * nproc, (node + 1) * nproc))
else:
    ranks = [int(os.environ["RANK"])]
names = ("PYTHONPATH", "CUDA_VISIBLE_DEVICES", "MASTER_ADDR", "MASTER_PORT", "RANK", "{marker}", "INHERITED")
print(json.dumps({{"argv": args, "cwd": os.getcwd(), "spec": spec, "env": {{n: os.environ.get(n) for n in names}}}}), flush=True)
if os.environ.get("FAKE_MODE") == "hang":
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    time.sleep(600)
for rank in ranks:
    with open(os.path.join(spec["results_dir"], "rank-%d.jsonl" % rank), "a") as out:
        for check in spec["checks"]:
            record = {{"check": check["name"], "rank": rank, "status": "passed", "message": "fake", "duration_s": 0.01}}
            out.write(json.dumps(record) + "\\n")
print("fake stderr line", file=sys.stderr)
"""


@pytest.fixture
def fake_python(tmp_path: Path) -> Path:
    path = tmp_path / "bin" / "fakepython"
    path.parent.mkdir()
    path.write_text(FAKE_PYTHON.format(python=sys.executable, marker=MARKER))
    path.chmod(0o755)
    return path


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def _add(self, kind: str, value: str) -> None:
        with self.lock:
            self.events.append((kind, value))

    def scenario_started(self, plan: ScenarioPlan, index: int, total: int) -> None:
        self._add("started", plan.scenario.name)

    def phase(self, plan: ScenarioPlan, name: str) -> None:
        self._add("phase", name)

    def note(self, plan: ScenarioPlan | None, line: str) -> None:
        self._add("note", line)

    def container_exited(self, plan: ScenarioPlan, container: str, exit_code: int | None) -> None:
        self._add("exited", f"{container}={exit_code}")

    def waiting(self, plan: ScenarioPlan) -> None:
        pass

    def scenario_finished(self, result: ScenarioResult) -> None:
        pass

    def of(self, kind: str) -> list[str]:
        return [value for k, value in self.events if k == kind]


def plan_of(text: str, python: Path, root: Path, index: int = 0) -> ScenarioPlan:
    scenario = parse_config(textwrap.dedent(text), "host.yaml").scenarios[index]
    return with_hashes(plan_local_scenario(scenario, RUN_ID, str(python), str(root)))


def tagged_processes(tag: str) -> list[int]:
    """Live processes whose environment holds FAKE_TAG=tag (zombies are dead, only not yet reaped)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            state = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if f"FAKE_TAG={tag}".encode() in environ and state not in (b"Z", b"X"):
            found.append(int(entry))
    return found


CROSS_C10D = """
scenarios:
  - {name: across, topology: cross-container, rendezvous: c10d, nodes: 2, nproc_per_node: 2, checks: [env, all_reduce]}
"""


def test_nodes_run_in_their_directories_with_resolved_ports_and_their_results_are_collected(
    fake_python: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INHERITED", "yes")
    monkeypatch.setenv("RANK", "7")  # as if distval itself ran under a launcher: not passed on
    root = tmp_path / "root"
    plan = plan_of(CROSS_C10D, fake_python, root)
    events = Recorder()
    outcome = run_local_scenario(LocalTorch(str(fake_python)), plan, events)
    assert outcome.setup_error is None
    reports = [json.loads(o.stdout.splitlines()[0]) for o in outcome.containers]
    ports = set()
    for node, report in zip(plan.containers, reports, strict=True):
        assert report["cwd"] == node.working_dir
        assert report["env"]["PYTHONPATH"].split(os.pathsep)[0] == node.working_dir
        assert (report["env"]["CUDA_VISIBLE_DEVICES"], report["env"]["INHERITED"], report["env"]["RANK"]) == ("", "yes", None)
        assert report["env"][MARKER]
        assert report["spec"]["subnets"] == "127.0.0.0/8"
        assert report["spec"]["results_dir"] == node.results_dir
        endpoint = next(a for a in report["argv"] if a.startswith("--rdzv_endpoint="))
        ports.add(endpoint.rsplit(":", 1)[1])
        assert f"--rdzv_conf=is_host={int(node.node_rank == 0)},join_timeout=60" in report["argv"]
        assert placeholders_in(report) == set()  # every placeholder was resolved
    (port,) = ports
    assert port.isdigit() and int(port) > 0
    assert {o.name: o.exit_code for o in outcome.containers} == {c.name: 0 for c in plan.containers}
    assert all("fake stderr line" in o.stderr for o in outcome.containers)
    assert sorted(outcome.containers[1].result_files) == ["rank-2.jsonl", "rank-3.jsonl"]
    result = summarize_scenario(outcome)
    assert result.status == PASSED, result.cases
    assert [c.name for c in result.cases] == ["env", "all_reduce", "exit_status"]
    assert result.cases[-1].message == "2 node(s) exited 0 within the 300 s deadline"
    assert events.of("phase") == [RUNNING, COLLECTING, REMOVING]
    assert sorted(events.of("exited")) == sorted(f"{c.name}=0" for c in plan.containers)
    assert list(root.iterdir()) == []  # the nodes' directories are gone


def test_two_scenarios_get_different_free_ports() -> None:
    first, second = free_ports(2)
    assert first != second and min(first, second) > 0


def test_a_hanging_node_is_killed_at_the_deadline_with_every_process_it_started(fake_python: Path, tmp_path: Path) -> None:
    tag = secrets.token_hex(4)
    text = f"""
    timeout_s: 2
    scenarios:
      - {{name: hangs, topology: cross-container, nodes: 2, nproc_per_node: 1, env: {{FAKE_MODE: hang, FAKE_TAG: {tag}}},
          checks: [all_reduce]}}
    """
    plan = plan_of(text, fake_python, tmp_path / "root")
    events = Recorder()
    started = time.monotonic()
    outcome = run_local_scenario(LocalTorch(str(fake_python)), plan, events)
    elapsed = time.monotonic() - started
    # Not before the deadline; how soon after it is the step loop's, on a fake clock (tests/run/test_steps.py): here a
    # bound against a hang only, as real processes start and die as fast as the machine lets them.
    assert 2.0 <= elapsed < 60.0, elapsed
    assert tagged_processes(tag) == []
    assert all(o.killed_at_deadline and o.exit_code == 128 + signal.SIGKILL for o in outcome.containers)
    assert KILLING in events.of("phase")
    result = summarize_scenario(outcome)
    assert result.status == ERROR
    case = next(c for c in result.cases if c.name == "all_reduce")
    assert f"node {plan.containers[0].name} was still running at the 2 s deadline and was killed" in case.message
    assert list((tmp_path / "root").iterdir()) == []


class StopWhenRunning(Recorder):
    """Sets ``stop`` (a Ctrl-C) as the run enters its running phase: every node has started."""

    def __init__(self, stop: threading.Event) -> None:
        super().__init__()
        self.stop = stop

    def phase(self, plan: ScenarioPlan, name: str) -> None:
        super().phase(plan, name)
        if name == RUNNING:
            self.stop.set()


def test_stop_kills_the_nodes_at_once(fake_python: Path, tmp_path: Path) -> None:
    tag = secrets.token_hex(4)
    text = f"""
    timeout_s: 300
    scenarios:
      - {{name: hangs, topology: in-container, world_size: 2, env: {{FAKE_MODE: hang, FAKE_TAG: {tag}}}, checks: [env]}}
    """
    plan = plan_of(text, fake_python, tmp_path / "root")
    stop = threading.Event()
    events = StopWhenRunning(stop)  # once the nodes run: a timer raced their start on a loaded machine
    started = time.monotonic()
    outcome = run_local_scenario(LocalTorch(str(fake_python)), plan, events, stop)
    # The stop ended it, not the 300 s deadline (that would be the killing phase); the bound only catches a hang.
    assert time.monotonic() - started < plan.deadline_s / 2
    assert KILLING not in events.of("phase") and outcome.setup_error is None
    assert tagged_processes(tag) == []
    assert outcome.containers[0].exit_code == 128 + signal.SIGKILL and outcome.containers[0].killed_at_deadline


NCCL = """
backend: nccl
scenarios:
  - {name: n1, topology: cross-container, world_size: 2, checks: [env, all_reduce]}
  - {name: n2, topology: in-container, world_size: 2, checks: [env]}
"""


def test_a_gpu_shortfall_is_a_skip_with_the_measured_count_probed_once(
    fake_python: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probes = tmp_path / "probes.log"
    monkeypatch.setenv("FAKE_PROBES", str(probes))
    monkeypatch.setenv("FAKE_GPUS", "1")
    local = LocalTorch(str(fake_python))
    for index in (0, 1):
        outcome = run_local_scenario(local, plan_of(NCCL, fake_python, tmp_path / "root", index), Recorder())
        assert (outcome.setup_skipped, outcome.skip_kind) == (True, "gpu")
        assert "needs 2 GPU(s), one per NCCL rank; the local torch sees 1 (" in (outcome.setup_error or "")
        assert "torch.cuda.device_count()" in (outcome.setup_error or "")
        result = summarize_scenario(outcome)
        assert {c.status for c in result.cases} == {SKIPPED}
        assert summarize_scenario(outcome, require_gpu=True).status == "failed"
    assert probes.read_text().count("probe") == 1  # measured once per run (per Python)
    monkeypatch.setenv("FAKE_GPUS", "2")
    enough = run_local_scenario(LocalTorch(str(fake_python)), plan_of(NCCL, fake_python, tmp_path / "root"), Recorder())
    assert not enough.setup_skipped and summarize_scenario(enough).status == PASSED
    reports = [json.loads(o.stdout.splitlines()[0]) for o in enough.containers]
    assert [r["env"]["CUDA_VISIBLE_DEVICES"] for r in reports] == ["0", "1"]


def test_a_torch_that_cannot_be_asked_is_an_error_not_a_skip(
    fake_python: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_PROBE_FAILS", "1")
    outcome = run_local_scenario(LocalTorch(str(fake_python)), plan_of(NCCL, fake_python, tmp_path / "root"), Recorder())
    assert not outcome.setup_skipped
    assert "cannot tell how many the local torch sees" in (outcome.setup_error or "")
    assert "No module named 'torch'" in (outcome.setup_error or "")
    assert summarize_scenario(outcome).status == ERROR


def test_what_loopback_cannot_give_is_a_skip(fake_python: Path, tmp_path: Path) -> None:
    text = """
    scenarios:
      - {name: v6, topology: cross-container, world_size: 2, ipv6: true, checks: [env]}
      - {name: homed, topology: cross-container, world_size: 2, extra_networks: 1, checks: [env]}
    """
    for index, fragment in ((0, "IPv6"), (1, "multi-homed")):
        outcome = run_local_scenario(LocalTorch(str(fake_python)), plan_of(text, fake_python, tmp_path, index), Recorder())
        assert outcome.setup_skipped and fragment in (outcome.setup_error or "")


def test_the_environment_keeps_the_hosts_pythonpath_after_the_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", "/site/extra")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "outer")
    env = process_environment((("PYTHONPATH", "/node"), ("A", "b")), "m")
    assert env["PYTHONPATH"] == f"/node{os.pathsep}/site/extra"
    assert (env["A"], env[MARKER]) == ("b", "m") and "TORCHELASTIC_RUN_ID" not in env


# --- the command line, in a subprocess where docker-py cannot be imported -----------------------------
def no_docker_env(tmp_path: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    blocker = tmp_path / "blocker" / "docker"
    blocker.mkdir(parents=True, exist_ok=True)
    (blocker / "__init__.py").write_text('raise ImportError("host mode must not import docker-py")\n')
    env = {**os.environ, "PYTHONPATH": str(blocker.parent), "TMPDIR": str(tmp_path)}
    env.update(extra or {})
    return env


def distval(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "distval", *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


CLI_CONFIG = """
scenarios:
  - {name: inside, topology: in-container, world_size: 2, python: fakepython, checks: [env, all_reduce]}
  - {name: across, topology: cross-container, rendezvous: tcp, world_size: 2, python: fakepython, checks: [env]}
"""


def test_distval_run_host_without_docker_py(fake_python: Path, tmp_path: Path) -> None:
    config = tmp_path / "host.yaml"
    config.write_text(CLI_CONFIG)
    junit = tmp_path / "results.xml"
    env = no_docker_env(tmp_path)
    assert distval(["plan", str(config)], env).returncode == 0
    done = distval(["run", "--local", "--python", str(fake_python), str(config), "--junit", str(junit), "--quiet"], env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "host mode" in done.stdout
    suites = ET.parse(junit).getroot().findall("testsuite")
    assert [s.get("name") for s in suites] == [
        f"[{fake_python}] inside (in-container, 2 ranks) [host]",
        f"[{fake_python}] across (cross-container, 2x1, 2 ranks, tcp) [host]",
    ]
    for suite in suites:
        properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
        assert (properties["mode"], properties["image"]) == ("host", str(fake_python))
    assert not list(tmp_path.glob("distval-*"))  # the run's temporary root is gone
    # Without --python: each scenario's python, found on PATH.
    path = f"{fake_python.parent}{os.pathsep}{env['PATH']}"
    on_path = distval(["run", "--local", str(config), "--quiet"], {**env, "PATH": path})
    assert on_path.returncode == 0, on_path.stdout + on_path.stderr
    missing = distval(["run", "--local", str(config), "--quiet"], {**env, "PATH": "/nonexistent"})
    assert missing.returncode == 3 and "'fakepython' is not an executable file or on PATH" in missing.stderr


def test_image_with_host_is_bad_input(fake_python: Path, tmp_path: Path) -> None:
    config = tmp_path / "host.yaml"
    config.write_text(CLI_CONFIG)
    done = distval(["run", "--local", "--image", "x/y:z", str(config), "--quiet"], no_docker_env(tmp_path))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("distval: --image names a container image, --local runs the local Python's torch")


def test_the_old_name_host_still_runs_locally_for_one_release_and_says_so(fake_python: Path, tmp_path: Path) -> None:
    """--host was --local's name: one letter from --hosts (several Engines). It still works, with one line."""
    config = tmp_path / "host.yaml"
    config.write_text(CLI_CONFIG)
    done = distval(["run", "--host", "--python", str(fake_python), str(config), "--quiet"], no_docker_env(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr.splitlines()[0] == DEPRECATED_HOST
    assert "host mode" in done.stdout and "[host]" in done.stdout


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_kills_every_node_process_and_removes_the_directories(fake_python: Path, tmp_path: Path, signum: int) -> None:
    """SIGINT as a CI script's ``cmd &`` leaves it (inherited ignored), with a CPU hog beside the run (issue 20)."""
    tag = secrets.token_hex(4)
    config = tmp_path / "hang.yaml"
    config.write_text(
        "scenarios:\n"
        f"  - {{topology: cross-container, world_size: 2, env: {{FAKE_MODE: hang, FAKE_TAG: {tag}}}, checks: [env]}}\n"
    )
    junit = tmp_path / "results.xml"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "distval",
            "run",
            "--local",
            "--python",
            str(fake_python),
            str(config),
            "--junit",
            str(junit),
        ],
        env=no_docker_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=load.sigint_ignored,  # noqa: PLW1509 - a single call, no locks
    )
    with load.cpu_hog():
        try:
            deadline = time.monotonic() + 60
            while len(tagged_processes(tag)) < 4 and time.monotonic() < deadline:  # 2 nodes, each with a child
                time.sleep(0.1)
            assert len(tagged_processes(tag)) == 4
            signalled = time.monotonic()
            process.send_signal(signum)
            _, stderr = process.communicate(timeout=60)
            took = time.monotonic() - signalled
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    print(f"{signal.Signals(signum).name}: exited {took:.2f} s after the signal")
    assert process.returncode == 128 + signum, stderr
    assert took <= SIGNAL_TO_EXIT_S, f"{took:.1f} s from the signal to the exit"
    assert tagged_processes(tag) == []
    assert not list(tmp_path.glob("distval-*"))
    (case,) = ET.parse(junit).getroot().iter("testcase")
    assert case.get("name") == "interrupted"
