"""``distval doctor`` without Docker: every check against the fake Engine (tests/fake_engine.py) or a stand-in program
on PATH, each shown able to pass and to fail; the output's order, escaping and exit codes; the docs table.

No test here runs docker or reaches an Engine: PATH holds only the test's own programs, DOCKER_CONFIG a directory of
the test's, and the Engine is the fake one (or docker-py against a socket that does not exist).
"""

from __future__ import annotations

import hashlib
import json
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import distval.cli.main
from distval.cli.doctor import declared_checks, doctor_reference
from distval.cli.main import build_parser, main
from distval.config.engine_hosts import HostSpec
from distval.doctor import machine
from distval.doctor.checks import DoctorCheck, exit_code, reference_markdown
from distval.doctor.torch_probe import PROBE_MODULE, read_answer
from distval.engine_protocol import API_VERSION_GPUS, API_VERSION_NEEDED, EngineFacts
from distval.targets.docker import doctor as docker_doctor
from distval.targets.docker.doctor_probe import probe_image, probe_plan
from distval.targets.docker.engine import engine_facts
from distval.targets.docker.engine_advice import context_endpoint
from distval.targets.local import doctor as local_doctor
from tests.fake_engine import FakeEngine
from tests.paths import ROOT

IMAGE = "example/torch:ok"
GOOD = {
    "python_version": "3.13.1",
    "torch": True,
    "torch_version": "2.6.0+debian",
    "distributed_available": True,
    "gloo_available": True,
    "nccl_available": False,
    "cuda_version": None,
}
GPU_FACTS = EngineFacts("27.5.1", "1.47", "linux", "/", ("nvidia", "runc"), ())
DOCKER_NAMES = [c.name for c in docker_doctor.CHECKS]
LOCAL_NAMES = [c.name for c in local_doctor.CHECKS]


def answer(**changes: object) -> tuple[str, str]:
    return json.dumps({**GOOD, **changes}) + "\n", ""


def program(directory: Path, name: str, script: str) -> Path:
    path = directory / name
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH is this directory only (no docker, no docker-compose but the test's); the Docker CLI's config is empty."""
    directory = tmp_path / "bin"
    directory.mkdir()
    monkeypatch.setenv("PATH", str(directory))
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker-config"))
    monkeypatch.delenv("DOCKER_CONTEXT", raising=False)
    monkeypatch.setenv("DOCKER_HOST", "unix:///fake/docker.sock")
    monkeypatch.chdir(tmp_path)
    return directory


Made = list[FakeEngine]


@pytest.fixture
def engines(monkeypatch: pytest.MonkeyPatch, bin_dir: Path) -> Iterator[Callable[..., Made]]:
    """``engines(**fake_engine_arguments)``, or by host URL (``by_host={url: {...}}``): the fake Engines the doctor
    gets, recorded."""

    def configure(by_host: dict[str, dict[str, Any]] | None = None, **kwargs: Any) -> Made:
        made: Made = []

        def make(run_id: str, host: HostSpec | None = None) -> FakeEngine:
            arguments = (by_host or {}).get(host.url, {}) if host is not None else kwargs
            engine = FakeEngine(run_id, **{"output": answer(), **arguments})
            made.append(engine)
            return engine

        monkeypatch.setattr(distval.cli.main, "Engine", make, raising=False)
        return made

    yield configure
    FakeEngine.instances.clear()


def doctor(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, dict[str, Any]], str]:
    """Exit code, the JSON findings by check (and engine), and the text output of the same command."""
    code = main(["doctor", *args, "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    assert data["exit_code"] == code
    found = {c["check"] + (f"@{c['engine']}" if c["engine"] else ""): c for c in data["checks"]}
    assert main(["doctor", *args]) == code
    return code, found, capsys.readouterr().out


def statuses(found: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {name: c["status"] for name, c in found.items()}


# -- the whole command -----------------------------------------------------------------------------------------------


def test_a_good_setup_is_ok_in_the_declared_order_and_exits_0(
    engines: Callable[..., Made], bin_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    made = engines(facts=GPU_FACTS)
    program(bin_dir, "docker-compose", "echo 'Docker Compose version v2.29.7'")
    code, found, text = doctor(capsys, "--image", IMAGE)
    assert code == 0
    assert list(found) == DOCKER_NAMES
    assert set(statuses(found).values()) == {"ok"}, found
    assert "torch 2.6.0+debian (Python 3.13.1), CPU build; gloo yes, nccl no" in found["image-torch"]["found"]
    assert "Docker 27.5.1, API 1.47" in found["engine"]["found"]
    lines = text.splitlines()
    assert lines[1].startswith("ok    engine ") and lines[-1] == "8 ok, 0 warn, 0 fail, 0 skip: nothing stops a run (exit 0)"
    # The probe ran to its end and everything of the doctor's run was removed.
    calls = made[0].calls
    assert calls.index("create_container") < calls.index("put_archive") < calls.index("start") < calls.index("remove_labelled")
    assert made[0].run_id.startswith("doctor-")


def test_the_help_lists_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["doctor", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "Exit codes: 0 every check is ok or warn; 2 bad input; 3 the environment is unusable: a check failed" in help_text


@pytest.mark.parametrize(
    "args",
    [
        ["--local", "--image", IMAGE],
        ["--local", "--hosts", "tcp://10.0.0.1:2375"],
        ["--python", "/usr/bin/python3"],
        ["--image", "Not An Image!"],
        ["--format", "xml"],
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", *args]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_an_unreachable_engine_fails_with_what_to_do_and_exit_3(
    bin_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """docker-py against a socket that does not exist (no Engine is reached): the advice, not a repr."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    code, found, text = doctor(capsys)
    assert code == 3
    engine = found["engine"]
    assert engine["status"] == "fail" and engine["found"].startswith(f"cannot reach the Docker Engine at unix://{tmp_path}")
    assert engine["todo"].startswith("no Engine listens on that socket: start Docker")
    for name in ("gpu-runtime", "engine-disk", "image", "image-torch"):
        assert found[name]["status"] == "skip", name
    assert "Traceback" not in text and " -> no Engine listens on that socket" in text


def test_a_doctor_that_checked_nothing_does_not_exit_0() -> None:
    assert exit_code([]) == 3


# -- engine ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api", "os_type", "status"),
    [
        ("1.47", "linux", "ok"),
        (".".join(map(str, API_VERSION_GPUS)), "linux", "ok"),
        ("1.39", "linux", "warn"),
        (".".join(map(str, API_VERSION_NEEDED)), "linux", "warn"),
        ("1.29", "linux", "fail"),
        ("", "linux", "warn"),
        ("1.47", "windows", "fail"),
    ],
)
def test_the_engine_check_holds_the_api_version_to_what_distval_needs(
    api: str, os_type: str, status: str, engines: Callable[..., Made], capsys: pytest.CaptureFixture[str]
) -> None:
    engines(facts=EngineFacts("20.10.0", api, os_type, "/", ("runc",), ()))
    code, found, _ = doctor(capsys, "--image", IMAGE)
    assert found["engine"]["status"] == status, found["engine"]
    assert (code == 3) == (status == "fail")
    if status != "ok":
        assert found["engine"]["todo"]


# -- context -----------------------------------------------------------------------------------------------------------


def _context(tmp_path: Path, name: str, endpoint: str | None) -> None:
    config = tmp_path / "docker-config"
    config.mkdir(exist_ok=True)
    (config / "config.json").write_text(json.dumps({"currentContext": name}))
    if endpoint is not None:
        meta = config / "contexts" / "meta" / hashlib.sha256(name.encode()).hexdigest()
        meta.mkdir(parents=True)
        (meta / "meta.json").write_text(json.dumps({"Name": name, "Endpoints": {"docker": {"Host": endpoint}}}))


@pytest.mark.parametrize(
    ("endpoint", "status", "todo"),
    [
        ("tcp://10.0.0.9:2376", "warn", "export DOCKER_HOST=tcp://10.0.0.9:2376"),
        (None, "warn", "export DOCKER_HOST=\"$(docker context inspect remote --format '{{.Endpoints.docker.Host}}')\""),
        ("unix:///var/run/docker.sock", "ok", None),
    ],
)
def test_a_docker_cli_context_elsewhere_is_named_with_the_export_line(
    endpoint: str | None,
    status: str,
    todo: str | None,
    engines: Callable[..., Made],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    engines()
    monkeypatch.delenv("DOCKER_HOST")
    _context(tmp_path, "remote", endpoint)
    _, found, _ = doctor(capsys, "--image", IMAGE)
    assert (found["context"]["status"], found["context"]["todo"]) == (status, todo), found["context"]


def test_without_a_context_or_with_docker_host_the_context_is_ok(
    engines: Callable[..., Made], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    engines()
    _, found, _ = doctor(capsys, "--image", IMAGE)
    assert found["context"]["status"] == "ok" and "DOCKER_HOST=unix:///fake/docker.sock" in found["context"]["found"]
    monkeypatch.delenv("DOCKER_HOST")
    _, found, _ = doctor(capsys, "--image", IMAGE)
    assert found["context"]["status"] == "ok" and "default context" in found["context"]["found"]


def test_the_context_endpoint_is_read_from_the_clis_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker-config"))
    _context(tmp_path, "desk", "unix:///home/me/.docker/run/docker.sock")
    assert context_endpoint("desk") == "unix:///home/me/.docker/run/docker.sock"
    assert context_endpoint("other") is None


# -- compose -----------------------------------------------------------------------------------------------------------


def test_compose_v1_and_v2_are_found_and_none_is_a_warning(
    engines: Callable[..., Made], bin_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    engines()
    _, found, _ = doctor(capsys, "--image", IMAGE)
    assert found["compose"]["status"] == "warn" and "compose.yaml" in found["compose"]["todo"]
    program(bin_dir, "docker-compose", "echo 'docker-compose version 1.29.2, build unknown'")
    program(bin_dir, "docker", '[ "$1 $2" = "compose --version" ] && echo "Docker Compose version v2.29.7" || exit 1')
    code, found, _ = doctor(capsys, "--image", IMAGE)
    assert code == 0 and found["compose"]["status"] == "ok"
    assert found["compose"]["found"] == (
        "docker-compose: docker-compose version 1.29.2, build unknown; docker compose: Docker Compose version v2.29.7"
    )


def test_a_compose_that_fails_hangs_or_prints_escapes_is_handled(bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    program(bin_dir, "docker", "echo 'docker: compose is not a docker command' >&2; exit 1")
    program(bin_dir, "docker-compose", "sleep 5")
    monkeypatch.setattr(machine, "VERSION_TIMEOUT_S", 0.2)
    assert machine.compose_versions() == {}
    program(bin_dir, "docker-compose", r"printf 'v2\033]0;owned\007 \033[31mred\n'")
    (version,) = machine.compose_versions().values()
    assert "\x1b" not in version and "\x07" not in version and "v2" in version


# -- gpu runtime -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("runtimes", "cdi", "status"),
    [
        (("runc",), (), "warn"),
        (("nvidia", "runc"), (), "ok"),
        (("runc",), ("nvidia.com/gpu=0", "nvidia.com/gpu=all"), "ok"),
        (("runc",), ("vendor.com/fpga=0",), "warn"),
    ],
)
def test_the_gpu_runtime_is_seen_or_warned_of(
    runtimes: tuple[str, ...],
    cdi: tuple[str, ...],
    status: str,
    engines: Callable[..., Made],
    capsys: pytest.CaptureFixture[str],
) -> None:
    engines(facts=EngineFacts("27.5.1", "1.50", "linux", "/", runtimes, cdi))
    code, found, _ = doctor(capsys, "--image", IMAGE)
    assert found["gpu-runtime"]["status"] == status and code != 3  # never a failure: CPU scenarios need none
    if status == "warn":
        assert "--require-gpu" in found["gpu-runtime"]["found"]


# -- disk ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("free", "status"),
    [(50 * machine.GIB, "ok"), (5 * machine.GIB, "warn"), (1 * machine.GIB, "fail")],
)
def test_the_engines_data_directory_is_held_to_its_thresholds(
    free: int,
    status: str,
    engines: Callable[..., Made],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = tmp_path / "docker-root"
    root.mkdir()
    engines(facts=EngineFacts("27.5.1", "1.47", "linux", str(root), ("runc",), ()))
    monkeypatch.setattr(machine, "free_bytes", lambda path: free if path == str(root) else 100 * machine.GIB)
    code, found, _ = doctor(capsys, "--image", IMAGE)
    assert found["engine-disk"]["status"] == status and str(root) in found["engine-disk"]["found"]
    assert (code == 3) == (status == "fail")


def test_an_engine_elsewhere_or_a_root_not_here_is_not_measured(
    engines: Callable[..., Made], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    engines(facts=EngineFacts("27.5.1", "1.47", "linux", "/no/such/docker-root", ("runc",), ()))
    _, found, _ = doctor(capsys, "--image", IMAGE)
    assert found["engine-disk"]["status"] == "skip" and "not readable here" in found["engine-disk"]["found"]
    monkeypatch.setenv("DOCKER_HOST", "tcp://10.0.0.9:2375")
    _, found, _ = doctor(capsys, "--image", IMAGE)
    assert found["engine-disk"]["status"] == "skip" and "another machine" in found["engine-disk"]["found"]


@pytest.mark.parametrize(("free", "status"), [(10 * machine.GIB, "ok"), (100 * machine.MIB, "warn"), (1 * machine.MIB, "fail")])
def test_the_report_directory_is_held_to_its_thresholds(
    free: int, status: str, bin_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(machine, "free_bytes", lambda path: free)
    code, found, _ = doctor(capsys, "--local", "--python", sys.executable)
    assert found["report-disk"]["status"] == status


# -- image ---------------------------------------------------------------------------------------------------------------


def test_a_missing_image_fails_and_is_never_pulled(engines: Callable[..., Made], capsys: pytest.CaptureFixture[str]) -> None:
    made = engines(missing=frozenset({IMAGE}))
    code, found, _ = doctor(capsys, "--image", IMAGE)
    assert code == 3 and found["image"]["status"] == "fail" and "docker pull" in found["image"]["todo"]
    assert found["image-torch"]["status"] == "skip"
    assert "create_container" not in made[0].calls


def test_a_missing_fixture_image_is_a_warning_distval_run_builds_it(
    engines: Callable[..., Made], capsys: pytest.CaptureFixture[str]
) -> None:
    fixture = "distval-fixtures/torch:2.6-debian"
    engines(missing=frozenset({fixture}))
    code, found, _ = doctor(capsys)
    assert code == 0 and found["image"]["status"] == "warn"
    assert found["image"]["todo"] == f"distval run builds it (minutes), or: distval fixtures build {fixture}"


def test_across_hosts_each_engine_is_checked_and_an_image_elsewhere_is_a_warning(
    engines: Callable[..., Made], capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = "tcp://10.0.0.1:2375", "tcp://10.0.0.2:2375"
    engines(by_host={first: {}, second: {"missing": frozenset({IMAGE})}})
    code, found, _ = doctor(capsys, "--image", IMAGE, "--hosts", f"{first},{second}")
    assert code == 0
    assert found[f"image@host 0 ({first})"]["status"] == "ok"
    assert found[f"image@host 1 ({second})"]["status"] == "warn"
    assert found[f"image-torch@host 1 ({second})"]["status"] == "skip"
    assert found[f"engine-disk@host 0 ({first})"]["status"] == "skip"  # another machine
    engines(by_host={first: {"missing": frozenset({IMAGE})}, second: {"missing": frozenset({IMAGE})}})
    code, found, _ = doctor(capsys, "--image", IMAGE, "--hosts", f"{first},{second}")
    assert code == 3 and found[f"image@host 1 ({second})"]["status"] == "fail"


# -- torch in the image ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "status", "text"),
    [
        (answer(cuda_version="12.4", nccl_available=True), "ok", "CUDA 12.4 build; gloo yes, nccl yes"),
        (answer(gloo_available=False), "warn", "no gloo"),
        (answer(distributed_available=False), "fail", "torch.distributed is not available"),
        (
            (json.dumps({"python_version": "3.11.2", "torch": False, "error": "ModuleNotFoundError: no torch"}), ""),
            "fail",
            "failed (Python 3.11.2): ModuleNotFoundError: no torch",
        ),
        (answer(torch_version="2.6; rm -rf /"), "fail", "not a version"),
        (answer(cuda_version=12), "fail", "not a CUDA version"),
        (answer(gloo_available="yes"), "fail", "gloo_available is 'yes'"),
        (answer(torch="maybe"), "fail", "not true or false"),
        (("\x1b]0;owned\x07not json\n", ""), "fail", "not its JSON line"),
        (("", "Traceback ...\nImportError: \x1b[31mlibc10.so\n"), "fail", "exited 0: ImportError: [31mlibc10.so"),
    ],
)
def test_the_image_probe_answer_is_validated_and_escaped(
    output: tuple[str, str], status: str, text: str, engines: Callable[..., Made], capsys: pytest.CaptureFixture[str]
) -> None:
    engines(output=output)
    code, found, shown = doctor(capsys, "--image", IMAGE)
    torch = found["image-torch"]
    assert torch["status"] == status and text in torch["found"], torch
    assert (code == 3) == (status == "fail")
    assert "\x1b" not in shown and "\x07" not in shown


def test_a_probe_past_its_deadline_is_killed_failed_and_removed() -> None:
    class Hangs(FakeEngine):
        def wait_stopped(self, container: object, timeout_s: float) -> bool:
            self.calls.append("wait_stopped")
            return False

    engine = Hangs("doctor-test", output=answer())
    result = probe_image(engine, probe_plan(IMAGE, "python3", "doctor-test"), timeout_s=0.1)
    assert result == "the probe did not finish within 0.1 s (killed)"
    assert engine.calls[-3:] == ["wait_stopped", "kill", "remove_labelled"]


def test_the_probe_runs_as_ranks_run_without_network_privileges_or_mounts() -> None:
    kwargs = probe_plan(IMAGE, "python3", "doctor-test").create_kwargs()
    assert kwargs["network_mode"] == "none" and "network" not in kwargs
    assert kwargs["cap_drop"] == ["ALL"] and kwargs["security_opt"] == ["no-new-privileges"]
    assert kwargs["entrypoint"] == ["python3"] and kwargs["command"] == ["-m", PROBE_MODULE]
    for forbidden in ("privileged", "volumes", "mounts", "pid_mode", "ipc_mode", "cap_add", "device_requests", "user"):
        assert forbidden not in kwargs, forbidden


def test_an_exit_code_other_than_0_is_not_read_as_an_answer() -> None:
    assert isinstance(read_answer(1, json.dumps(GOOD), "boom"), str)
    assert isinstance(read_answer(None, json.dumps(GOOD), ""), str)


# -- --local -----------------------------------------------------------------------------------------------------------


def test_local_reports_python_and_a_torch_that_is_not_there(bin_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The test's own Python has no torch (distval's venv): its import fails, with the reason."""
    code, found, _ = doctor(capsys, "--local", "--python", sys.executable)
    assert list(found) == LOCAL_NAMES
    assert code == 3 and found["python"]["status"] == "ok" and found["python-torch"]["status"] == "fail"
    assert "No module named 'torch'" in found["python-torch"]["found"]


def test_local_with_a_python_whose_torch_answers_is_ok(bin_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    python = program(bin_dir, "python3", f"echo '{json.dumps(GOOD)}'")
    code, found, _ = doctor(capsys, "--local")
    assert code == 0 and statuses(found) == dict.fromkeys(LOCAL_NAMES, "ok")
    assert found["python"]["found"] == f"{python} (Python 3.13.1)"


def test_local_without_a_python_fails_and_skips_torch(bin_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, found, _ = doctor(capsys, "--local", "--python", str(bin_dir / "no-python"))
    assert code == 3 and found["python"]["status"] == "fail" and found["python-torch"]["status"] == "skip"


# -- the Engine's facts, and the docs ----------------------------------------------------------------------------------


def test_engine_facts_take_only_values_of_the_apis_types() -> None:
    facts = engine_facts(
        {"Version": "28.3.0", "ApiVersion": "1.51", "Os": "linux"},
        {
            "DockerRootDir": "/var/lib/docker",
            "Runtimes": {"runc": {}, "nvidia": {}},
            "DiscoveredDevices": [{"Source": "cdi", "ID": "nvidia.com/gpu=0"}, {"Source": "x", "ID": "y"}, "junk"],
        },
    )
    assert facts == EngineFacts("28.3.0", "1.51", "linux", "/var/lib/docker", ("nvidia", "runc"), ("nvidia.com/gpu=0",))
    assert engine_facts(["not a dict"], {"Runtimes": ["runc"], "DockerRootDir": 7}) == EngineFacts("", "", "", "", (), ())


def test_docs_doctor_md_holds_the_table_of_the_declared_checks() -> None:
    text = (ROOT / "docs" / "doctor.md").read_text()
    assert doctor_reference() in text, "regenerate docs/doctor.md's table from distval.cli.doctor.doctor_reference()"


def test_every_declared_check_has_a_name_of_its_own_and_runs_in_some_mode() -> None:
    declared = declared_checks()
    assert [runs for runs, _ in declared] == ["in containers", "--local"]  # each kind's doctor, the default first
    for runs, checks in declared:
        assert runs and checks
        assert len({c.name for c in checks}) == len(checks)
        assert all(c.what for c in checks)


def test_a_check_several_kinds_run_is_one_row_and_declared_alike() -> None:
    shared = DoctorCheck(name="shared", what="looks")
    table = reference_markdown([("here", (shared,)), ("there", (DoctorCheck(name="own", what="mine"), shared))])
    assert table.splitlines()[2:] == ["| `shared` | here and there | looks |", "| `own` | there | mine |"]
    with pytest.raises(ValueError, match="two kinds declare it differently"):
        reference_markdown([("here", (shared,)), ("there", (DoctorCheck(name="shared", what="other"),))])
