"""The suite's torch-free helpers, on the host: version matching, requirements and markers, the
cuda_build verdict, device and skip decisions, interface selection, record writing.

These modules run inside the image under test, but they import only the standard library, so they
are imported and tested here; a subprocess proves they import with torch made unimportable.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from distval_suite.cudabuild import (
    RequirementCheck,
    assess,
    cuda_requirements,
    cuda_version_text,
    cudnn_version_text,
    find_package,
    summary,
)
from distval_suite.devices import backend_family, device_kind, is_nccl, local_device_index, no_device_reason
from distval_suite.network import parse_subnets, select_socket_interfaces
from distval_suite.records import ERROR, FAILED, PASSED, RecordWriter
from distval_suite.requirements import marker_holds, normalize, parse_requirement, specifier_matches
from distval_suite.tally import summarize_runs
from distval_suite.versions import readable, version_matches, version_tuple
from distval_suite.watchdog import Watchdog
from tests.paths import ROOT

TORCH_FREE = (
    "distval_suite",
    "distval_suite.versions",
    "distval_suite.requirements",
    "distval_suite.cudabuild",
    "distval_suite.devices",
    "distval_suite.network",
    "distval_suite.records",
    "distval_suite.tally",
    "distval_suite.watchdog",
    "distval_suite.answers",
    "distval_suite.support",
    "distval_suite.yardstick",
    "distval_suite.bandwidth_figures",
)


def test_torch_free_modules_import_with_torch_blocked() -> None:
    """Even where torch is installed, these modules must not need it: import them with torch forbidden."""
    program = textwrap.dedent(
        f"""
        import importlib, sys

        class NoTorch:
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith("torch."):
                    raise ImportError("torch is blocked in this test")
                return None

        sys.meta_path.insert(0, NoTorch())
        for module in {list(TORCH_FREE)!r}:
            importlib.import_module(module)
        assert not [m for m in sys.modules if m == "torch" or m.startswith("torch.")]
        print("ok")
        """
    )
    result = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


def test_torch_blocker_can_fail() -> None:
    """The blocker above is real: a module that imports torch fails under it."""
    program = textwrap.dedent(
        """
        import sys

        class NoTorch:
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith("torch."):
                    raise ImportError("torch is blocked in this test")
                return None

        sys.meta_path.insert(0, NoTorch())
        import distval_suite.core
        """
    )
    result = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode != 0 and "torch" in result.stderr


# -- versions -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("version", "specifier", "expected"),
    [
        ("2.6.0+debian", ">=2.6,<2.7", True),
        ("2.15.0", ">=2.6,<2.7", False),
        ("1.13.0a0", "1.13", True),
        ("2.6.1", "==2.6", True),
        ("2.6.1", "!=2.6", False),
        ("13.0", "13.*", True),
        ("13.2", "==13.*", True),
        ("12.8", "13.*", False),
        ("130.1", "13.*", False),
        ("12.8", "!=13.*", True),
        ("13.4.1.3", "==13.4.1.3.*", True),
        ("13.4.2.0", "==13.4.1.3.*", False),
        ("3.11.2", ">=3.11", True),
        ("3.9.18", ">=3.11", False),
    ],
)
def test_version_matches(version: str, specifier: str, expected: bool) -> None:
    assert version_matches(version, specifier) is expected


@pytest.mark.parametrize("specifier", ["latest", ">=13.*", "13.x", ""])
def test_version_matches_rejects_what_it_cannot_read(specifier: str) -> None:
    with pytest.raises(ValueError):
        version_matches("13.0", specifier)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (">=2.6,<2.7", True),
        ("2.6", True),
        ("13.*", True),
        ("!=12.*", True),
        (" >= 3.11 ", True),
        ("latest", False),
        (">=13.*", False),
        ("13.x", False),
        ("", False),
        ("2.6,", False),
        ("1..2", False),
    ],
)
def test_readable(text: str, expected: bool) -> None:
    assert readable(text) is expected


def test_version_tuple() -> None:
    assert version_tuple("2.6.0+debian") == (2, 6, 0)
    assert version_tuple("1.13.0a0+gitunknown") == (1, 13, 0)
    assert version_tuple("9.26.0.51") == (9, 26, 0, 51)


# -- requirements and markers ----------------------------------------------------------------------
LINUX = {
    "os_name": "posix",
    "sys_platform": "linux",
    "platform_machine": "x86_64",
    "platform_python_implementation": "CPython",
    "platform_release": "6.1.0",
    "platform_system": "Linux",
    "platform_version": "#1 SMP",
    "python_version": "3.13",
    "python_full_version": "3.13.5",
    "implementation_name": "cpython",
    "implementation_version": "3.13.5",
}


def test_parse_requirement() -> None:
    r = parse_requirement(
        'cuda-toolkit[cublas,cudart]==13.2.2; platform_system == "Linux"',
    )
    assert (r.name, r.extras, r.specifier, r.marker) == (
        "cuda-toolkit",
        ("cublas", "cudart"),
        "==13.2.2",
        'platform_system == "Linux"',
    )
    assert parse_requirement("typing_extensions>=4.13.0").name == "typing-extensions"
    assert parse_requirement("filelock").specifier == ""
    assert parse_requirement("cuda-bindings<14,>=13.0.3; python_version < '3.15'").specifier == "<14,>=13.0.3"
    assert normalize("Nvidia_NCCL.cu13") == "nvidia-nccl-cu13"


@pytest.mark.parametrize(
    ("marker", "extras", "expected"),
    [
        ('platform_system == "Linux"', (), True),
        ('platform_system == "Windows"', (), False),
        ('platform_system == "Linux" and python_version < "3.15"', (), True),
        ('platform_system == "Linux" and python_version < "3.13"', (), False),
        ('python_version >= "3.9"', (), True),
        ('python_version >= "3.10"', (), True),  # as versions: 3.13 >= 3.10 (as strings too, but "3.9" > "3.13")
        ('python_version < "3.9"', (), False),
        ('extra == "optree"', (), False),
        ('extra == "optree"', ("optree",), True),
        (
            "(sys_platform == 'linux' and platform_machine == 'aarch64' or sys_platform == 'linux' and "
            "platform_machine == 'x86_64' or sys_platform == 'win32' and platform_machine == 'AMD64') and extra == 'cublas'",
            ("cublas",),
            True,
        ),
        (
            "(sys_platform == 'linux' and platform_machine == 'aarch64') and extra == 'cudla'",
            ("cudla",),
            False,
        ),
        ("'linux' in sys_platform", (), True),
        ("platform_machine not in 'aarch64 arm64'", (), True),
    ],
)
def test_marker_holds(marker: str, extras: tuple[str, ...], expected: bool) -> None:
    assert marker_holds(marker, LINUX, extras) is expected


@pytest.mark.parametrize("marker", ["python_version >= ", 'nonsense == "1"', '(python_version == "3.13"'])
def test_marker_errors(marker: str) -> None:
    with pytest.raises(ValueError):
        marker_holds(marker, LINUX)


def test_specifier_matches() -> None:
    assert specifier_matches("3.9.0", "~=3.9.0")
    assert specifier_matches("3.9.4", "~=3.9.0")
    assert not specifier_matches("3.10.0", "~=3.9.0")
    assert specifier_matches("13.5.0", "<14,>=13.0.3")
    assert not specifier_matches("14.0", "<14,>=13.0.3")
    assert specifier_matches("2.30.7", "==2.30.7")
    assert not specifier_matches("2.27.7", "==2.30.7")


# torch 2.15.0's Requires-Dist (PyPI wheel, cp313 manylinux_2_28) and part of cuda-toolkit 13.2.2's.
TORCH_REQUIRES = [
    "filelock",
    "typing-extensions>=4.13.0",
    "sympy>=1.13.3",
    'cuda-toolkit[cublas,cudart,nvtx]==13.2.2; platform_system == "Linux"',
    'cuda-bindings<14,>=13.0.3; platform_system == "Linux" and python_version < "3.15"',
    'nvidia-cudnn-cu13==9.26.0.51; platform_system == "Linux"',
    'nvidia-nccl-cu13==2.30.7; platform_system == "Linux"',
    'triton~=3.9.0; platform_system == "Linux" and python_version < "3.16"',
    'optree>=0.13.0; extra == "optree"',
]
_LINUX_ANY = (
    "(sys_platform == 'linux' and platform_machine == 'x86_64' or sys_platform == 'win32' and platform_machine == 'AMD64')"
)
TOOLKIT_REQUIRES = [
    f"nvidia-cublas==13.4.1.3.*; {_LINUX_ANY} and extra == 'cublas'",
    f"nvidia-cuda-nvrtc==13.2.86.*; {_LINUX_ANY} and extra == 'cublas'",
    f"nvidia-cuda-runtime==13.2.86.*; {_LINUX_ANY} and extra == 'cudart'",
    f"nvidia-nvtx==13.2.86.*; {_LINUX_ANY} and extra == 'nvtx'",
    f"nvidia-curand==10.4.2.66.*; {_LINUX_ANY} and extra == 'curand'",
    "nvidia-cudla==13.2.86.*; (sys_platform == 'linux' and platform_machine == 'aarch64') and extra == 'all'",
]
INSTALLED = {
    "cuda-toolkit": "13.2.2",
    "cuda-bindings": "13.5.0",
    "nvidia-cudnn-cu13": "9.26.0.51",
    "nvidia-nccl-cu13": "2.30.7",
    "nvidia-cublas": "13.4.1.3",
    "nvidia-cuda-nvrtc": "13.2.86",
    "nvidia-cuda-runtime": "13.2.86",
    "nvidia-nvtx": "13.2.86",
}


def _requirements(installed: dict[str, str]) -> list[RequirementCheck]:
    return cuda_requirements(
        TORCH_REQUIRES, lambda name: TOOLKIT_REQUIRES if name == "cuda-toolkit" else None, installed.get, LINUX
    )


def test_cuda_requirements_follow_torch_and_the_toolkit_extras() -> None:
    checks = _requirements(INSTALLED)
    assert [c.name for c in checks] == [
        "cuda-toolkit",
        "nvidia-cublas",
        "nvidia-cuda-nvrtc",
        "nvidia-cuda-runtime",
        "nvidia-nvtx",
        "cuda-bindings",
        "nvidia-cudnn-cu13",
        "nvidia-nccl-cu13",
    ]
    assert all(c.satisfied for c in checks)
    assert {c.via for c in checks} == {"torch", "cuda-toolkit[cublas,cudart,nvtx]"}


def test_cuda_requirements_catch_a_wrong_and_a_missing_wheel() -> None:
    installed = dict(INSTALLED, **{"nvidia-nccl-cu13": "2.27.7"})
    del installed["nvidia-cuda-runtime"]
    unmet = {c.name: c for c in _requirements(installed) if not c.satisfied}
    assert set(unmet) == {"nvidia-nccl-cu13", "nvidia-cuda-runtime"}
    assert unmet["nvidia-nccl-cu13"].installed == "2.27.7"
    assert unmet["nvidia-cuda-runtime"].installed is None


# -- the cuda_build verdict --------------------------------------------------------------------------
def cuda_facts(**changes: Any) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "torch_version": "2.15.0+cu130",
        "cuda_version": "13.0",
        "cuda_is_built": True,
        "compiled_cuda": "13.0",
        "cudnn_compiled": "9.26.0",
        "cudnn_loaded": "9.26.0",
        "cudnn_package": ("nvidia-cudnn-cu13", "9.26.0.51"),
        "nccl_runtime": "2.30.7",
        "nccl_package": ("nvidia-nccl-cu13", "2.30.7"),
        "requirements": _requirements(INSTALLED),
    }
    facts.update(changes)
    return facts


CPU_FACTS = {"torch_version": "2.6.0+debian", "cuda_version": None, "cuda_is_built": False, "compiled_cuda": None}


def test_a_consistent_cuda_build_passes() -> None:
    verdict = assess(cuda_facts(), {"build": "cuda", "cuda": "13.*"})
    assert verdict.problems == []
    text = summary(verdict)
    assert "CUDA 13.0 matches 13.*" in text and "NCCL 2.30.7 = nvidia-nccl-cu13 2.30.7" in text
    assert "all 8 CUDA-library requirements of torch satisfied" in text


def test_a_cpu_build_stated_as_cpu_passes_with_the_cuda_parts_skipped() -> None:
    verdict = assess(CPU_FACTS, {"build": "cpu"})
    assert verdict.problems == []
    assert "a CPU build has none" in summary(verdict)


@pytest.mark.parametrize(
    ("facts", "args", "expected"),
    [
        (CPU_FACTS, {"build": "cuda"}, "expected a cuda build of torch; image has a cpu build (torch.version.cuda=None)"),
        (CPU_FACTS, {"cuda": "13.*"}, "expected CUDA 13.*; image has a CPU build (torch.version.cuda is None)"),
        (cuda_facts(), {"build": "cpu"}, "expected a cpu build of torch; image has a cuda build (torch.version.cuda='13.0')"),
        (
            cuda_facts(cuda_version="12.8", compiled_cuda="12.8"),
            {"cuda": "13.*"},
            "expected CUDA 13.*; torch.version.cuda is 12.8",
        ),
        (
            dict(CPU_FACTS, cuda_version="13.0"),
            {},
            "expected a CUDA build as torch.version.cuda='13.0' claims; torch.backends.cuda.is_built() is False",
        ),
        (
            cuda_facts(compiled_cuda="12.8"),
            {},
            "expected torch's C library to be compiled with CUDA 13.0 as torch.version.cuda says; "
            "torch._C._cuda_getCompiledVersion() says 12.8",
        ),
        (
            cuda_facts(cudnn_loaded="8.9.7"),
            {},
            "compiled with 9.26.0, loads 8.9.7",
        ),
        (
            cuda_facts(cudnn_loaded="9.20.0"),
            {},
            "compiled with 9.26.0, loads 9.20.0",
        ),
        (
            cuda_facts(cudnn_loaded=None, cudnn_error="RuntimeError: cuDNN version incompatibility"),
            {},
            "expected torch to load a cuDNN compatible with the 9.26.0 it was compiled with; RuntimeError: cuDNN version",
        ),
        (
            cuda_facts(nccl_package=("nvidia-nccl-cu13", "2.27.7")),
            {},
            "expected the NCCL torch reports (torch.cuda.nccl.version() = 2.30.7) to be the installed nvidia-nccl-cu13; "
            "its metadata says 2.27.7",
        ),
        (
            cuda_facts(requirements=_requirements(dict(INSTALLED, **{"nvidia-nccl-cu13": "2.27.7"}))),
            {},
            "expected nvidia-nccl-cu13==2.30.7 (required by torch); installed: 2.27.7",
        ),
    ],
)
def test_each_mismatch_says_expected_and_seen(facts: dict[str, Any], args: dict[str, Any], expected: str) -> None:
    problems = assess(facts, args).problems
    assert any(expected in p for p in problems), problems


def test_cudnn_newer_minor_is_compatible() -> None:
    assert assess(cuda_facts(cudnn_loaded="9.27.1", cudnn_package=None), {}).problems == []


def test_probes_that_need_a_driver_are_skipped_with_their_error() -> None:
    verdict = assess(cuda_facts(nccl_runtime=None, nccl_error="RuntimeError: no driver"), {"build": "cuda"})
    assert verdict.problems == []
    assert "NCCL version: RuntimeError: no driver" in summary(verdict)


def test_version_texts() -> None:
    assert cuda_version_text(13000) == "13.0"
    assert cuda_version_text(12080) == "12.8"
    assert cudnn_version_text(92600) == "9.26.0"
    assert cudnn_version_text(91002) == "9.10.2"
    assert cudnn_version_text(8907) == "8.9.7"
    assert find_package({"nvidia-nccl-cu13": "2.30.7", "nvidia-cudnn-cu13": "9"}, "nvidia-nccl-") == (
        "nvidia-nccl-cu13",
        "2.30.7",
    )
    assert find_package({}, "nvidia-nccl-") is None


# -- devices ------------------------------------------------------------------------------------------
def test_device_kind_and_backends() -> None:
    assert device_kind(None, "gloo") == "cpu"
    assert device_kind(None, "nccl") == "cuda"
    assert device_kind(None, "nccl-legacy") == "cuda"
    assert device_kind("cuda", "gloo") == "cuda"
    assert device_kind("cpu", "gloo") == "cpu"
    with pytest.raises(ValueError, match="device must be one of cpu, cuda"):
        device_kind("tpu", "gloo")
    assert is_nccl("nccl-legacy") and not is_nccl("gloo")
    assert backend_family("nccl-legacy") == "nccl" and backend_family("mpi") == "mpi"


def test_local_device_index() -> None:
    assert [local_device_index(r, 2) for r in range(4)] == [0, 1, 0, 1]
    assert local_device_index(3, 8) == 3
    with pytest.raises(ValueError):
        local_device_index(0, 0)


def test_no_device_reason() -> None:
    assert no_device_reason(0, "13.0", "RuntimeError: nccl2 requires at least one CUDA device") == (
        "no CUDA device is visible in this container (torch.cuda.device_count() = 0; CUDA 13.0 build): "
        "RuntimeError: nccl2 requires at least one CUDA device"
    )
    assert no_device_reason(0, None).startswith("this torch is a CPU build")


# -- network ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, []),
        ("", []),
        ([], []),
        (["172.18.0.0/16"], ["172.18.0.0/16"]),
        ("172.18.0.0/16,fd12::/64", ["172.18.0.0/16", "fd12::/64"]),
        (" 172.18.0.0/16 , fd12::/64 ,", ["172.18.0.0/16", "fd12::/64"]),
        (["172.18.0.0/16", "fd12::/64"], ["172.18.0.0/16", "fd12::/64"]),
    ],
)
def test_parse_subnets_takes_a_list_or_a_comma_separated_string(value: Any, expected: list[str]) -> None:
    assert parse_subnets(value) == expected


def test_socket_interfaces_are_set_for_gloo_and_nccl() -> None:
    environ: dict[str, str] = {}
    looked: list[list[str]] = []

    def find(subnets: list[str]) -> str | None:
        looked.append(subnets)
        return "eth1"

    chosen = select_socket_interfaces(["172.18.0.0/16"], environ, find)
    assert chosen == environ == {"GLOO_SOCKET_IFNAME": "eth1", "NCCL_SOCKET_IFNAME": "eth1"}
    assert looked == [["172.18.0.0/16"]]  # looked up once for both


def test_socket_interfaces_already_set_are_kept() -> None:
    environ = {"NCCL_SOCKET_IFNAME": "^lo,docker"}
    chosen = select_socket_interfaces(["172.18.0.0/16"], environ, lambda subnets: "eth0")
    assert environ == {"NCCL_SOCKET_IFNAME": "^lo,docker", "GLOO_SOCKET_IFNAME": "eth0"}
    assert chosen == environ


def test_socket_interfaces_without_subnets_or_a_match() -> None:
    environ: dict[str, str] = {}
    assert select_socket_interfaces([], environ, lambda subnets: "eth0") == {} == environ
    assert select_socket_interfaces(["10.0.0.0/8"], environ, lambda subnets: None) == {} == environ


# -- records ------------------------------------------------------------------------------------------
def test_record_writer_writes_one_json_line_per_result(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    writer = RecordWriter(str(tmp_path / "results"), 3)
    writer.write("collectives", "collectives.broadcast", PASSED, "ok", 0.1234567)
    writer.write("timeout", "timeout", FAILED, "expected a timeout; it completed", 2.0, {"path": "x"})
    lines = (tmp_path / "results" / "rank-3.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["case"] for r in records] == ["collectives.broadcast", "timeout"]
    assert records[0]["duration_s"] == 0.123457 and records[0]["rank"] == 3 and records[0]["details"] == {}
    assert records[1]["details"] == {"path": "x"}
    assert writer.worst == FAILED
    writer.write("env", "env", ERROR, "boom", 0.0)
    assert writer.worst == ERROR
    writer.write("env", "env", FAILED, "later failure", 0.0)
    assert writer.worst == ERROR  # an error stays the worst
    assert "distval: rank 3 timeout failed expected a timeout; it completed" in capsys.readouterr().out


# -- the watchdog: check_timeout_s bounds a whole check ----------------------------------------------
class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _watchdog(clock: FakeClock) -> tuple[Watchdog, list[tuple[Any, ...]]]:
    written: list[tuple[Any, ...]] = []
    dog = Watchdog(lambda *record: written.append(record), clock=clock, exit_process=lambda code: None, thread=False)
    return dog, written


def test_watchdog_limit_spans_every_step_of_a_check() -> None:
    """Many short steps do not restart the clock: 3 steps of 4 s pass a 10 s limit, in the last step."""
    clock = FakeClock()
    dog, _ = _watchdog(clock)
    dog.start("collectives", 10.0)
    for part in ("broadcast", "reduce", "gather"):
        dog.step(f"collectives.{part}", "float32, small, 5 elements")
        assert dog.due() is None
        clock.now += 4.0
    fired = dog.due()
    assert fired is not None
    assert (fired.check, fired.case, fired.status) == ("collectives", "collectives.gather", ERROR)
    assert fired.elapsed_s == pytest.approx(12.0)
    assert "did not finish within 10 s (check_timeout_s, for the whole check)" in fired.message
    assert "in collectives.gather (float32, small, 5 elements)" in fired.message


def test_watchdog_restarts_for_the_next_check_and_stops_when_disarmed() -> None:
    clock = FakeClock()
    dog, _ = _watchdog(clock)
    dog.start("all_reduce", 10.0)
    clock.now += 9.0
    dog.start("store", 10.0)  # a new check has its own 10 s
    clock.now += 9.0
    assert dog.due() is None and dog.remaining_s() == pytest.approx(1.0)
    clock.now += 1.0
    fired = dog.due()
    assert fired is not None and fired.case == "store" and "still running its first step" in fired.message
    dog.disarm()
    assert dog.due() is None and dog.remaining_s() is None


def test_watchdog_deadline_of_the_check_itself_applies_when_earlier() -> None:
    clock = FakeClock()
    dog, _ = _watchdog(clock)
    dog.start("timeout", 100.0)
    clock.now += 10.0
    dog.expect_within(5.0, FAILED, "expected a timeout error")
    clock.now += 4.9
    assert dog.due() is None
    clock.now += 0.2
    fired = dog.due()
    assert fired is not None and (fired.status, fired.message) == (FAILED, "expected a timeout error")
    # A check's own deadline later than check_timeout_s does not extend the check.
    dog.start("timeout", 10.0)
    dog.expect_within(60.0, FAILED, "expected a timeout error")
    clock.now += 10.5
    fired = dog.due()
    assert fired is not None and fired.status == ERROR and "check_timeout_s" in fired.message


def test_watchdog_thread_records_and_ends_the_rank() -> None:
    """The real thread: a check stepping every 20 ms is still stopped at its 150 ms limit (steps do not reset the
    limit). When is the fake clock's to say (above): here the thread only has to fire while the check steps on, which
    it does however long a loaded machine makes it wait for a core."""
    import threading

    written: list[tuple[Any, ...]] = []
    exited = threading.Event()
    codes: list[int] = []

    def exit_process(code: int) -> None:
        codes.append(code)
        exited.set()

    dog = Watchdog(lambda *record: written.append(record), exit_process=exit_process, poll_s=0.01)
    dog.start("ddp_sync", 0.15)
    steps = 0
    while not exited.wait(0.02) and steps < 3000:  # 60 s of steps, were the thread never to fire
        steps += 1
        dog.step(f"ddp_sync.step{steps}")
    assert exited.is_set() and codes == [Watchdog.EXIT_CODE], f"not fired in {steps} steps"
    (record,) = written
    check, case, status, message, elapsed, details = record
    assert check == "ddp_sync" and case.startswith("ddp_sync.step") and status == ERROR
    assert 0.15 <= elapsed and details == {"watchdog": True}


# -- counting repeated runs ---------------------------------------------------------------------------
def test_runs_are_counted_once_whether_wrong_or_raised() -> None:
    failures = ["run 1, float64, small, 5 elements: wrong", "run 3, float64, small, 5 elements: wrong"]
    errors = ["run 2, float32, small, 5 elements: RuntimeError: boom"]
    status, message = summarize_runs(4, failures, errors, [], repeat=4)
    assert status == FAILED
    assert message == (
        "2 of 4 runs wrong; first: run 1, float64, small, 5 elements: wrong; "
        "1 of 4 runs raised; first: run 2, float32, small, 5 elements: RuntimeError: boom"
    )
    status, message = summarize_runs(4, [], errors, [], repeat=4)
    assert (status, message) == (ERROR, "1 of 4 runs raised; first: run 2, float32, small, 5 elements: RuntimeError: boom")
    assert summarize_runs(4, [], [], [], repeat=4) == (PASSED, "4 runs correct (repeat 4)")
    assert summarize_runs(1, [], [], [], repeat=1) == (PASSED, "1 run correct (repeat 1)")  # not "1 runs"
    assert summarize_runs(1, [], [], ["x (no)"], repeat=1)[1].startswith("partially skipped: 1 run correct (repeat 1);")
    status, message = summarize_runs(0, [], [], ["bfloat16, small, 5 elements (RuntimeError: unsupported)"], repeat=1)
    assert (status, message) == ("skipped", "not supported by this image: RuntimeError: unsupported [bfloat16]")


def test_a_part_with_skipped_variants_beside_correct_runs_is_skipped_not_passed() -> None:
    """Partial skips are visible in the status (--fail-on-skip and required: read it), not only in the message."""
    skipped = ["bfloat16 (gloo's bfloat16 support may be missing; the capability probe raised on every rank)"]
    status, message = summarize_runs(12, [], [], skipped, repeat=1)
    assert status == "skipped"
    assert message.startswith("partially skipped: 12 runs correct (repeat 1); not supported by this image: ")
    assert "[bfloat16]" in message
    # A wrong answer or an error still outranks the skip.
    assert summarize_runs(12, ["run 1, float32: wrong"], [], skipped, repeat=1)[0] == FAILED
    assert summarize_runs(12, [], ["run 1, float32: RuntimeError: x"], skipped, repeat=1)[0] == ERROR


def test_a_records_start_is_the_process_spawn_not_when_the_writer_was_made(tmp_path: Path) -> None:
    """A worker that spends a second before it makes its RecordWriter (a slow torch import) still says it
    started when it was spawned: a sibling of the same round that already wrote its last record must not
    look older than it (distval/results/diagnosis.py orders a container's attempts by this time)."""
    code = textwrap.dedent(
        f"""
        import json, sys, time
        spawned = time.time()
        time.sleep(1.0)
        sys.path.insert(0, {str(ROOT)!r})
        from distval_suite.records import RecordWriter
        writer = RecordWriter({str(tmp_path)!r}, 0)
        print(json.dumps({{"spawned": spawned, "started_at": writer.started_at, "now": time.time()}}))
        """
    )
    found = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    # Spawned before the first line ran (interpreter start-up), at 10 ms resolution, a second before now.
    assert found["started_at"] <= found["spawned"] + 0.02
    assert found["now"] - found["started_at"] >= 1.0
