"""distval export slurm: the batch script per scenario (nodes, tasks, time limit, node 0's address from the job's node
list, a port the job picks, one step per node in the image), the OCI bundle config per node, the refusals; and
distval collect slurm on job directories written as the batch script writes them (fail closed)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

import distval.cli.main
from distval.config import load_config, parse_config
from distval.results.outcome import ERROR, EXIT_STATUS_CASE, FAILED, PASSED
from distval.targets.plan_file import sha256_text
from distval.targets.slurm.collect import JobState, summarize_jobs
from distval.targets.slurm.export import ADDR, PORT, JobDir, batch_script, export_config, shell_word, write_job
from distval.targets.slurm.integrations import APPTAINER, OCI, PYXIS
from distval_suite.records import RecordWriter
from tests.config_helpers import FILE, yaml_text
from tests.paths import ROOT

IMAGE = "distval-fixtures/torch:2.6-debian"
IMAGE_CONFIG: dict[str, Any] = {
    "ociVersion": "1.0.2",
    "root": {"path": "rootfs"},
    "process": {"args": ["python3"], "env": ["PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"], "cwd": "/"},
    "mounts": [{"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": ["nosuid", "size=65536k"]}],
    "linux": {"namespaces": [{"type": "pid"}, {"type": "network"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}]},
}


def _export(tmp_path: Path, integration: str = OCI, config: str = "configs/default.yaml") -> dict[str, Any]:
    jobs = export_config(
        load_config(str(ROOT / config)), "r1", IMAGE, tmp_path / "out", integration, "/shared/bundle", IMAGE_CONFIG
    )
    return {j.plan.scenario.name: j for j in jobs}


def _sruns(script: str) -> list[list[str]]:
    """Each node's srun line of the batch script as the shell splits it (the variables left as they stand)."""
    found = []
    for line in script.splitlines():
        if line.startswith("( srun "):
            words = line[2 : line.index("; echo $?")]
            words = words.replace('"${MASTER_ADDR}"', "$MASTER_ADDR").replace('"${MASTER_PORT}"', "$MASTER_PORT")
            found.append(shlex.split(words))
    return found


def test_the_batch_script_allocates_the_nodes_and_runs_one_step_per_node_in_the_bundle(tmp_path: Path) -> None:
    job = _export(tmp_path)["cross-container-2ranks"]
    script = job.files["job.sbatch"]
    assert "#SBATCH --nodes=2\n" in script and "#SBATCH --ntasks-per-node=1\n" in script
    assert "#SBATCH --time=10:00\n" in script  # the scenario's 600 s deadline
    assert "#SBATCH --no-requeue\n" in script
    assert 'NODE0=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)' in script
    assert "MASTER_PORT=$(( 20000 + SLURM_JOB_ID % 20000 ))" in script
    steps = _sruns(script)
    assert len(steps) == 2
    for node, argv in enumerate(steps):
        assert f"--relative={node}" in argv and "--nodes=1" in argv and "--ntasks=1" in argv
        assert f"--container={tmp_path.resolve()}/out/cross-container-2ranks/bundles/node-{node}" in argv
        export = next(a for a in argv if a.startswith("--export="))
        assert f"DISTVAL_NODE_RANK={node}" in export and "PATH=" not in export  # the image's PATH, not the submitter's
        command = argv[argv.index("python3") :]
        assert f"--node_rank={node}" in command
        assert "--master_addr=$MASTER_ADDR" in command and "--master_port=$MASTER_PORT" in command
        assert not any("distval-r1" in a for a in argv)  # no Docker container name is left
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)


def test_each_node_gets_an_oci_bundle_config_with_the_suite_spec_and_its_own_results(tmp_path: Path) -> None:
    job = _export(tmp_path)["cross-container-2ranks"]
    root = f"{tmp_path.resolve()}/out/cross-container-2ranks"
    for node in (0, 1):
        config = json.loads(job.files[f"bundles/node-{node}/config.json"])
        assert config["root"] == {"path": "rootfs", "readonly": True}  # hard-linked there by the batch script
        assert "hostname" not in config
        assert {n["type"] for n in config["linux"]["namespaces"]} == {"pid", "ipc", "mount"}  # the node's network
        assert config["process"]["cwd"] == "/distval"
        assert "PATH=/usr/local/bin:/usr/bin:/bin" in config["process"]["env"]  # the image's environment kept
        binds = {m["destination"]: (m["source"], m["options"]) for m in config["mounts"] if m["type"] == "bind"}
        assert binds == {
            "/distval": (f"{root}/distval", ["rbind", "ro"]),
            "/distval/spec.json": (f"{root}/run/spec.json", ["rbind", "ro"]),
            "/distval/results": (f"{root}/run/node-{node}", ["rbind", "rw"]),
            "/etc/hosts": ("/etc/hosts", ["rbind", "ro"]),  # the node's names: node 0's address is one
            "/etc/resolv.conf": ("/etc/resolv.conf", ["rbind", "ro"]),
        }
        assert any(m["destination"] == "/tmp" and m["type"] == "tmpfs" for m in config["mounts"])


def test_the_spec_template_has_the_jobs_address_and_no_docker_name(tmp_path: Path) -> None:
    spec = json.loads(_export(tmp_path)["cross-container-2ranks"].files["spec.json.in"])
    assert spec["results_dir"] == "/distval/results" and spec["subnets"] == ""
    assert "distval-r1" not in json.dumps(spec)


RENDEZVOUS = """
version: 1
scenarios:
  - {name: c10d, topology: cross-container, world_size: 2, rendezvous: c10d, checks: [env]}
  - {name: env, topology: cross-container, world_size: 2, rendezvous: env, checks: [env]}
  - {name: tcp, topology: cross-container, world_size: 2, rendezvous: tcp, checks: [env]}
  - {name: by-ip, topology: cross-container, world_size: 2, master_addr: ip, checks: [env]}
  - {name: user, topology: cross-container, world_size: 2, user: nobody, checks: [env]}
  - {name: v6, topology: cross-container, world_size: 2, ipv6: true, checks: [env]}
"""


def test_every_rendezvous_form_is_expressed_with_the_jobs_address_and_port(tmp_path: Path) -> None:
    config = parse_config(yaml_text(RENDEZVOUS), FILE)
    jobs = {j.plan.scenario.name: j for j in export_config(config, "r1", IMAGE, tmp_path, OCI, "/b", IMAGE_CONFIG)}
    c10d = _sruns(jobs["c10d"].files["job.sbatch"])[1]
    assert "--rdzv_endpoint=$MASTER_ADDR:$MASTER_PORT" in c10d
    env = next(a for a in _sruns(jobs["env"].files["job.sbatch"])[1] if a.startswith("--export="))
    assert "RANK=1" in env and "MASTER_ADDR=$MASTER_ADDR" in env and "MASTER_PORT=$MASTER_PORT" in env
    assert json.loads(jobs["tcp"].files["spec.json.in"])["init_method"] == f"tcp://{ADDR}:{PORT}"
    assert "getent ahostsv4" in jobs["by-ip"].files["job.sbatch"]
    assert "runs as the user who submitted" in (jobs["user"].refused or "")
    assert "IPv6" in (jobs["v6"].refused or "")
    for name in ("c10d", "env", "tcp", "by-ip"):
        assert jobs[name].refused is None
        subprocess.run(["bash", "-n"], input=jobs[name].files["job.sbatch"], text=True, check=True)


def test_faults_are_refused_with_the_declared_reason(tmp_path: Path) -> None:
    jobs = _export(tmp_path, config="configs/faults.yaml")
    assert jobs and all("the slurm target cannot give it: faults are injected" in (j.refused or "") for j in jobs.values())


def test_shell_word_expands_only_the_jobs_address_and_port() -> None:
    word = shell_word(f"tcp://{ADDR}:{PORT}/$(rm -rf /)'x")
    out = subprocess.run(
        ["bash", "-c", f"MASTER_ADDR=n1; MASTER_PORT=25; printf %s {word}"], capture_output=True, text=True, check=True
    ).stdout
    assert out == "tcp://n1:25/$(rm -rf /)'x"


def test_gpus_ask_slurm_for_them_per_node(tmp_path: Path) -> None:
    jobs = _export(tmp_path, PYXIS, "configs/nccl.yaml")
    script = next(j for j in jobs.values() if j.refused is None and len(j.plan.containers) == 2).files["job.sbatch"]
    assert re.search(r"#SBATCH --gpus-per-node=\d\n", script)
    assert "CUDA_VISIBLE_DEVICES" not in script  # Slurm sets it
    oci = _export(tmp_path / "oci", OCI, "configs/nccl.yaml")
    gpu_jobs = [j for j in oci.values() if j.plan.containers[0].options.gpu_device_ids]
    assert gpu_jobs and all("NVIDIA's container hook" in (j.refused or "") for j in gpu_jobs)


# -- collect ------------------------------------------------------------------------------------------------
def _run_job(
    tmp_path: Path, broken_rank: int | None = None, missing_node: int | None = None, exit_codes: tuple[int, ...] = (0, 0)
) -> Path:
    """The cross-container job's directory as its batch script leaves it after a run: records from each rank (under
    the script's umask 077, whatever this process's)."""
    old = os.umask(0o077)
    try:
        return _written_job(tmp_path, broken_rank, missing_node, exit_codes)
    finally:
        os.umask(old)


def _written_job(tmp_path: Path, broken_rank: int | None, missing_node: int | None, exit_codes: tuple[int, ...]) -> Path:
    out = tmp_path / "out"
    job = _export(tmp_path)["cross-container-2ranks"]
    directory = write_job(job, out)
    jobdir = JobDir(str(directory))
    os.makedirs(jobdir.run)
    Path(jobdir.path("run", "job")).write_text(
        "job_id=7\nstarted=100.0\nmaster_addr=c1\nmaster_port=20007\nnode=c1\nnode=c2\nended=130.5\n", encoding="utf-8"
    )
    for node in (0, 1):
        if node == missing_node:
            continue
        writer = RecordWriter(jobdir.node_results(node), node)
        for check in job.plan.scenario.checks:
            status = FAILED if (check.name == "all_reduce" and node == broken_rank) else PASSED
            writer.write(check.name, check.name, status, "seen" if status == FAILED else "", 0.1)
        Path(jobdir.node_exit(node)).write_text(f"{exit_codes[node]}\n", encoding="ascii")
        Path(jobdir.node_output(node, "out")).write_text("output\n", encoding="utf-8")
    return directory


def _statuses(directory: Path, **kwargs: Any) -> dict[str, str]:
    summary = summarize_jobs([directory], **kwargs)
    (result,) = summary.scenarios
    return {c.name: c.status for c in result.cases}


def test_collect_reads_the_records_into_the_verdicts_of_a_docker_run(tmp_path: Path) -> None:
    directory = _run_job(tmp_path)
    statuses = _statuses(directory)
    assert set(statuses.values()) == {PASSED}, statuses
    summary = summarize_jobs([directory.parent])  # the export's directory: each job in it
    assert summary.scenarios[0].duration_s == pytest.approx(30.5)


def test_a_failed_check_on_one_rank_fails_that_testcase(tmp_path: Path) -> None:
    statuses = _statuses(_run_job(tmp_path, broken_rank=1, exit_codes=(0, 1)))
    assert statuses["all_reduce"] == FAILED and statuses["env"] == PASSED


def test_a_node_without_records_or_exit_code_is_an_error_naming_it_never_a_pass(tmp_path: Path) -> None:
    directory = _run_job(tmp_path, missing_node=1)
    state = JobState("NODE_FAIL", "nodes c[1-2]", lost_nodes=(("c2", "down*: distval-test"),))
    summary = summarize_jobs([directory], states={directory: state})
    (result,) = summary.scenarios
    cases = {c.name: c for c in result.cases}
    assert cases["all_reduce"].status == ERROR and cases[EXIT_STATUS_CASE].status == ERROR
    message = cases[EXIT_STATUS_CASE].message
    assert "Slurm took node c2 out while the job ran (down*: distval-test" in message and "NODE_FAIL" in message


def test_a_job_that_never_started_passes_nothing(tmp_path: Path) -> None:
    directory = write_job(_export(tmp_path)["cross-container-2ranks"], tmp_path / "out")
    assert set(_statuses(directory).values()) == {ERROR}


def test_collect_command_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = _run_job(tmp_path / "good")
    junit = tmp_path / "r.xml"
    assert distval.cli.main.main(["collect", "slurm", str(good), "--junit", str(junit)]) == 0
    assert 'name="all_reduce"' in junit.read_text(encoding="utf-8")
    broken = _run_job(tmp_path / "broken", broken_rank=0, exit_codes=(1, 0))
    assert distval.cli.main.main(["collect", "slurm", str(broken)]) == 1
    assert distval.cli.main.main(["collect", "slurm", str(tmp_path / "nothing")]) == 2
    assert "not a directory" in capsys.readouterr().err


def test_export_command_needs_a_bundle_for_oci_and_writes_the_jobs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = str(ROOT / "configs" / "default.yaml")
    assert distval.cli.main.main(["export", "slurm", config, "--image", IMAGE, "-o", str(tmp_path / "o")]) == 2
    assert "expected --bundle DIR" in capsys.readouterr().err
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "config.json").write_text(json.dumps(IMAGE_CONFIG), encoding="utf-8")
    argv = ["export", "slurm", config, "--image", IMAGE, "-o", str(tmp_path / "o"), "--bundle", str(bundle)]
    assert distval.cli.main.main(argv) == 0
    script = tmp_path / "o" / "cross-container-2ranks" / "job.sbatch"
    assert os.access(script, os.X_OK)
    assert (tmp_path / "o" / "cross-container-2ranks" / "distval" / "distval_suite" / "main.py").is_file()
    argv = ["export", "slurm", config, "--image", IMAGE, "-o", str(tmp_path / "p"), "--integration", APPTAINER]
    assert distval.cli.main.main(argv) == 0


def test_the_batch_script_runs_against_stand_ins_for_slurm(tmp_path: Path) -> None:
    """The script itself, run by bash with scontrol and srun as stand-ins: the job file, the spec with the job's
    address and port, each node's exit code, and the worst exit code as the job's."""
    bundle = tmp_path / "bundle"
    (bundle / "rootfs" / "usr" / "bin").mkdir(parents=True)
    (bundle / "rootfs" / "usr" / "bin" / "python3").write_text("", encoding="utf-8")
    config = load_config(str(ROOT / "configs" / "default.yaml"))
    jobs = export_config(config, "r1", IMAGE, tmp_path / "out", OCI, str(bundle), IMAGE_CONFIG)
    job = next(j for j in jobs if j.plan.scenario.name == "cross-container-2ranks")
    directory = write_job(job, tmp_path / "out")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text("#!/bin/sh\nprintf 'c1\\nc2\\n'\n", encoding="utf-8")
    (bin_dir / "srun").write_text('#!/bin/sh\ncase "$*" in *--relative=1*) exit 3;; esac\nexit 0\n', encoding="utf-8")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "c[1-2]"}
    # umask 000: what a user's shell may pass on; the job's files are still its user's alone.
    argv = ["bash", "-c", 'umask 000 && exec bash "$0"', str(directory / "job.sbatch")]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 3, done.stderr
    jobdir = JobDir(str(directory))
    assert "master_addr=c1\nmaster_port=20042\nnode=c1\nnode=c2\n" in Path(jobdir.path("run", "job")).read_text(encoding="utf-8")
    assert json.loads(Path(jobdir.path("run", "spec.json")).read_text(encoding="utf-8"))["results_dir"] == "/distval/results"
    assert [Path(jobdir.node_exit(n)).read_text(encoding="ascii").strip() for n in (0, 1)] == ["0", "3"]
    for path in (jobdir.run, jobdir.node_results(0), jobdir.node_results(1)):
        assert oct(os.stat(path).st_mode & 0o777) == "0o700", path
    for path in (jobdir.path("run", "job"), jobdir.path("run", "spec.json"), jobdir.node_exit(1)):
        assert oct(os.stat(path).st_mode & 0o777) == "0o600", path
    # The rootfs was hard-linked into each node's bundle while the steps ran, and removed after them.
    assert not (directory / "bundles" / "node-0" / "rootfs").exists()
    assert 'cp -al "$BUNDLE_ROOTFS"' in job.files["job.sbatch"]


def test_batch_script_is_what_export_writes(tmp_path: Path) -> None:
    job = _export(tmp_path)["in-container-3ranks"]
    directory = JobDir(f"{tmp_path.resolve()}/out/{job.name}")
    digest = sha256_text(job.files["plan.json"])
    script = batch_script(job.plan, job.name, directory, OCI, IMAGE, None, "/shared/bundle/rootfs", digest)
    assert job.files["job.sbatch"] == script and f"\n# distval.plan-sha256: {digest}\n" in script


# -- what ran is the plan file's, and the job's files its user's alone (issue 34, findings 3 and 4) -----------------


def test_the_job_directory_is_its_users_alone_whatever_the_umask(tmp_path: Path) -> None:
    """Was: files 0666 and the script 0777 less the umask, directories as the umask left them (0777 under umask 0)."""
    old = os.umask(0)
    try:
        directory = write_job(_export(tmp_path)["cross-container-2ranks"], tmp_path / "a" / "out")
    finally:
        os.umask(old)
    modes = {str(p.relative_to(tmp_path)): oct(p.stat().st_mode & 0o777) for p in [tmp_path / "a", *(tmp_path / "a").rglob("*")]}
    assert modes[f"a/out/{directory.name}/job.sbatch"] == "0o700"
    assert modes[f"a/out/{directory.name}/plan.json"] == "0o600"
    assert {m for p, m in modes.items() if (tmp_path / p).is_dir()} == {"0o700"}, modes
    assert {m for p, m in modes.items() if (tmp_path / p).is_file()} <= {"0o600", "0o700"}, modes


def _replaced_by_another_user(directory: Path, node: int, uid: int | None, mode: int | None) -> None:
    """What another user of the shared filesystem did: rank ``node``'s records replaced by passing ones."""
    jobdir = JobDir(str(directory))
    records = Path(jobdir.node_results(node)) / f"rank-{node}.jsonl"
    text = records.read_text(encoding="utf-8").replace('"status": "failed"', '"status": "passed"')
    records.unlink()
    records.write_text(text, encoding="utf-8")
    if uid is not None:
        os.chown(records, uid, uid)
    if mode is not None:
        os.chmod(records, mode)


@pytest.mark.parametrize(
    "case",
    ["world-writable-directory", "group-writable-record", "another-users-record", "record-link", "record-fifo", "run-link"],
)
def test_results_someone_else_could_have_written_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    """Was: every node's results directory was made 0777 on the shared filesystem; another user replaced a record and
    collect went from exit 1 to exit 0. Now what another user could have written is refused: exit 2, one line."""
    broken = _run_job(tmp_path, broken_rank=1, exit_codes=(0, 0))
    assert distval.cli.main.main(["collect", "slurm", str(broken)]) == 1  # the failure, as the job left it
    capsys.readouterr()
    jobdir = JobDir(str(broken))
    results = Path(jobdir.node_results(1))
    if case == "world-writable-directory":
        os.chmod(results, 0o777)  # what the batch script made until now
        _replaced_by_another_user(broken, 1, None, None)
        expected = "mode 0777 lets others write it"
    elif case == "group-writable-record":
        _replaced_by_another_user(broken, 1, None, 0o664)
        expected = "mode 0664 lets its group write it"
    elif case == "another-users-record":
        if os.geteuid() != 0:
            pytest.skip("making a file of another uid needs root")
        _replaced_by_another_user(broken, 1, 4242, None)
        expected = f"it belongs to uid 4242, expected {os.geteuid()}"
    elif case == "record-link":
        elsewhere = tmp_path / "planted.jsonl"
        (results / "rank-1.jsonl").rename(elsewhere)
        _passing = elsewhere.read_text(encoding="utf-8").replace('"status": "failed"', '"status": "passed"')
        elsewhere.write_text(_passing, encoding="utf-8")
        (results / "rank-1.jsonl").symlink_to(elsewhere)
        expected = "got a symbolic link"
    elif case == "record-fifo":
        os.mkfifo(results / "rank-9.jsonl")
        expected = "got a FIFO (named pipe)"
    else:
        run = Path(jobdir.run)
        run.rename(tmp_path / "run-elsewhere")
        run.symlink_to(tmp_path / "run-elsewhere")
        expected = "a symbolic link, never followed in a job's directory"
    assert distval.cli.main.main(["collect", "slurm", str(broken)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err and "docs/slurm.md" in err, err


def test_results_of_the_user_the_plan_names_are_read(tmp_path: Path) -> None:
    """The collecting user may be another than the job's (root, or a CI account): the job's user's files are read."""
    if os.geteuid() != 0:
        pytest.skip("making files of another uid needs root")
    directory = _run_job(tmp_path)
    plan = json.loads((directory / "plan.json").read_text(encoding="utf-8"))
    assert plan["job_uid"] == os.geteuid()  # the exporting user's by default
    plan["job_uid"] = 4242
    text = json.dumps(plan, indent=1, sort_keys=True) + "\n"
    (directory / "plan.json").write_text(text, encoding="utf-8")
    script = directory / "job.sbatch"
    script.write_text(
        re.sub(r"(# distval.plan-sha256: )[0-9a-f]{64}", rf"\g<1>{sha256_text(text)}", script.read_text(encoding="utf-8")),
        encoding="utf-8",
    )
    for path in [directory, *directory.rglob("*")]:
        os.lchown(path, 4242, 4242)
    assert set(_statuses(directory).values()) == {PASSED}


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("missing", r"plan\.json: no plan file \(distval export writes it"),
        ("changed", r"the plan file has SHA-256 [0-9a-f]{64}, and .*job\.sbatch names [0-9a-f]{64}: the plan was changed"),
        ("unnamed", r"job\.sbatch names no plan file SHA-256"),
        ("malformed", r"plan\.json: not a distval plan file"),
    ],
)
def test_a_plan_file_missing_changed_or_malformed_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, expected: str
) -> None:
    """A job's verdict comes from its plan file, the one its batch script names: one with only env (what a hand or the
    job itself could write) is refused, never judged."""
    directory = _run_job(tmp_path, broken_rank=1, exit_codes=(0, 1))
    plan, script = directory / "plan.json", directory / "job.sbatch"
    if case == "missing":
        plan.unlink()
    elif case == "changed":
        data = json.loads(plan.read_text(encoding="utf-8"))
        data["origin"]["scenario"]["checks"] = [c for c in data["origin"]["scenario"]["checks"] if c["name"] == "env"]
        plan.write_text(json.dumps(data), encoding="utf-8")
    elif case == "unnamed":
        script.write_text(re.sub(r"# distval.plan-sha256: .*\n", "", script.read_text(encoding="utf-8")), encoding="utf-8")
    else:
        plan.write_text("{", encoding="utf-8")
        script.write_text(re.sub(r"[0-9a-f]{64}", sha256_text("{"), script.read_text(encoding="utf-8")), encoding="utf-8")
    assert distval.cli.main.main(["collect", "slurm", str(directory)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(expected, err), err
