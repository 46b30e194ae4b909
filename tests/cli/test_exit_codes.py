"""Each command's help lists the exit codes it can return (COMMAND_EXIT_CODES in distval/cli/main.py), and each
command returns those: an example per declared code, run through ``main`` against tests/fake_engine.py or an
unreachable Engine, and a stated reason for a code no example here can reach (it needs Docker or a signal)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import distval.cli.main
from distval.cli.main import COMMAND_EXIT_CODES, build_parser, main, subcommands
from distval.errors import (
    EXIT_CHECKS_FAILED,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_MEANINGS,
    EXIT_NOT_VERIFIED,
    EXIT_NOTHING_VALIDATED,
    EXIT_PASSED,
    ExitCodes,
    exit_codes_line,
)
from distval.targets.docker.engine import Engine as RealEngine
from tests.attestation_helpers import IMAGE as ATTESTED
from tests.attestation_helpers import changed, passing_report, write_json, write_key_pair
from tests.fake_engine import FakeEngine
from tests.paths import DATA, ROOT

DEFAULT = str(ROOT / "configs" / "default.yaml")
NCCL = str(ROOT / "configs" / "nccl.yaml")
IMAGE = "distval-fixtures/torch:2.6-debian"
KUBE = DATA / "kube"

Setup = Callable[[Path, pytest.MonkeyPatch], list[str]]


def fake_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(distval.cli.main, "Engine", FakeEngine)
    monkeypatch.setattr(FakeEngine, "held", [])


def no_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real Engine, pointed at a socket nobody listens on: the environment is unusable."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "no-config"))


def _fake_run(*argv: str) -> Setup:
    def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
        fake_engine(monkeypatch)
        return ["run", *argv, "--image", IMAGE, "--quiet"]

    return setup


def _interrupted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    def ctrl_c(run_id: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(distval.cli.main, "Engine", ctrl_c)
    return ["run", DEFAULT, "--image", IMAGE, "--quiet"]


def _unreachable(*argv: str) -> Setup:
    def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
        no_engine(tmp_path, monkeypatch)
        return list(argv)

    return setup


def _plain(*argv: str) -> Setup:
    return lambda tmp_path, monkeypatch: list(argv)


def _reports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """Two JSON reports of fake runs: every scenario of the default config, and one of them only."""
    fake_engine(monkeypatch)
    whole, part = str(tmp_path / "whole.json"), str(tmp_path / "part.json")
    assert main(["run", DEFAULT, "--image", IMAGE, "--quiet", "--json", whole]) == EXIT_CHECKS_FAILED
    assert main(["run", DEFAULT, "--image", IMAGE, "--quiet", "--json", part, "--filter", "in-container*"]) == 1
    return whole, part


def _good_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A JSON report of a good run with one busbw figure, as references suggest takes it."""
    figure = {"operation": "all_reduce", "size": 65536, "label": "64KiB", "busbw_gbps": 0.5}
    scenario = {"name": "bw", "status": "passed", "bandwidth": [figure], "cases": []}
    path = tmp_path / "good.json"
    path.write_text(json.dumps({"schema_version": 1, "run_id": "r", "scenarios": [scenario], "early_error": None}))
    return ["references", "suggest", str(path), "--system", "ci"]


def _compare_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    whole, _ = _reports(tmp_path, monkeypatch)
    return ["compare", whole, whole]


def _compare_vanished(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    whole, part = _reports(tmp_path, monkeypatch)
    return ["compare", whole, part]


def _history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    whole, _ = _reports(tmp_path, monkeypatch)
    return ["history", whole, "--html", str(tmp_path / "page")]


def _compare_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Two reports of runs that ended early (a config that does not exist): nothing compared."""
    early = str(tmp_path / "early.json")
    assert main(["run", str(tmp_path / "no-such.yaml"), "--image", IMAGE, "--quiet", "--json", early]) == 2
    return ["compare", early, early]


def _init(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    return ["init", str(tmp_path / "new.yaml")]


def _init_existing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    (tmp_path / "old.yaml").write_text("x")
    return ["init", str(tmp_path / "old.yaml")]


def _cleanup_fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    fake_engine(monkeypatch)
    return ["cleanup"]


def _export(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    return ["export", "kubernetes", DEFAULT, "--image", IMAGE, "--out", str(tmp_path / "out")]


def _export_slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    return ["export", "slurm", DEFAULT, "--image", IMAGE, "--integration", "apptainer", "-o", str(tmp_path / "out")]


def _collect(directory: str) -> Setup:
    return lambda tmp_path, monkeypatch: [
        "collect",
        "kubernetes",
        "--plan",
        str(KUBE / directory),
        *map(str, sorted((KUBE / directory).glob("*.log"))),
    ]


def _collect_no_client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    return ["collect", "kubernetes", "--plan", str(KUBE / "torch-2.6"), "--job", "dv-kube-rec-cross-container-2ranks"]


def _attest_files(tmp_path: Path, report: dict[str, Any]) -> list[str]:
    private, _ = write_key_pair(tmp_path)
    path = write_json(tmp_path / "report.json", report)
    return ["attest", path, "--image", ATTESTED, "--key", private, "-o", str(tmp_path / "attestation.json")]


def _attest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    fake_engine(monkeypatch)
    return _attest_files(tmp_path, passing_report(default_checks=True))


def _attest_unreachable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    no_engine(tmp_path, monkeypatch)
    return _attest_files(tmp_path, passing_report(default_checks=True))


def _verify(report: dict[str, Any], key: str = "cosign") -> Setup:
    """verify of an attestation of ``report`` made on the fake Engine, with the public key ``key.pub`` (another
    pair than the signer's where ``key`` is not "cosign")."""

    def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
        fake_engine(monkeypatch)
        attest = _attest_files(tmp_path, report)
        assert main(attest) == EXIT_PASSED
        if key != "cosign":
            write_key_pair(tmp_path, key)
        return ["verify", attest[-1], "--image", ATTESTED, "--key", str(tmp_path / f"{key}.pub")]

    return setup


def _verify_unreachable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    argv = _verify(passing_report(default_checks=True))(tmp_path, monkeypatch)
    monkeypatch.setattr(distval.cli.main, "Engine", RealEngine)
    no_engine(tmp_path, monkeypatch)
    return argv


# (command, code, how): the command line (and its stand-ins) that makes the command return the code.
EXAMPLES: list[tuple[str, int, Setup]] = [
    ("run", 1, _fake_run(DEFAULT)),
    ("run", 2, _plain("run", "no-such-config.yaml", "--quiet")),
    ("run", 3, _unreachable("run", DEFAULT, "--image", IMAGE, "--quiet")),
    ("run", 5, _fake_run(NCCL)),
    ("run", EXIT_INTERRUPTED, _interrupted),
    ("compare", 0, _compare_same),
    ("compare", 1, _compare_vanished),
    ("compare", 2, _plain("compare", "no-such.json", "no-such.json")),
    ("compare", 5, _compare_nothing),
    ("history", 0, _history),
    ("history", 2, _plain("history", "no-such.json", "--html", "page")),
    ("doctor", 2, _plain("doctor", "--local", "--image", IMAGE)),
    ("doctor", 3, _unreachable("doctor", "--image", IMAGE)),
    ("plan", 0, _plain("plan", DEFAULT)),
    ("plan", 2, _plain("plan", "no-such-config.yaml")),
    ("schema", 0, _plain("schema")),
    ("schema", 2, _plain("schema", "--no-such-option")),
    ("checks", 0, _plain("checks")),
    ("checks", 2, _plain("checks", "--format", "yaml")),
    ("init", 0, _init),
    ("init", 2, _init_existing),
    ("fixtures", 0, _plain("fixtures", "list")),
    ("fixtures", 2, _plain("fixtures", "polish")),
    ("fixtures", 3, _unreachable("fixtures", "build")),
    ("nodes", 2, _plain("nodes", "sideways")),
    ("nodes", 3, _unreachable("nodes", "down")),
    ("cleanup", 0, _cleanup_fake),
    ("cleanup", 2, _plain("cleanup", "--older-than", "soon")),
    ("cleanup", 3, _unreachable("cleanup")),
    ("export kubernetes", 0, _export),
    ("export kubernetes", 2, _plain("export", "kubernetes", "no-such-config.yaml", "--image", IMAGE)),
    ("collect kubernetes", 0, _collect("torch-2.6")),
    ("collect kubernetes", 1, _collect("ddp-no-broadcast-rank1")),
    ("collect kubernetes", 2, _plain("collect", "kubernetes", "--plan", str(KUBE / "torch-2.6"), "no-such.log")),
    ("collect kubernetes", 3, _collect_no_client),
    ("export slurm", 0, _export_slurm),
    ("export slurm", 2, _plain("export", "slurm", DEFAULT, "--image", IMAGE)),  # no --bundle for Slurm's OCI containers
    ("collect slurm", 2, _plain("collect", "slurm", "no-such-directory")),
    ("attest", 0, _attest),
    ("attest", 2, _plain("attest", "no-such.json", "--image", IMAGE, "--key", "no.key", "-o", "a.json")),
    ("attest", 3, _attest_unreachable),
    ("verify", 0, _verify(passing_report(default_checks=True))),
    ("verify", 1, _verify(changed(passing_report(default_checks=True), 0, "ddp", "failed"))),
    ("verify", 2, _plain("verify", "no-such.json", "--image", IMAGE, "--key", "no.pub")),
    ("verify", 3, _verify_unreachable),
    ("verify", EXIT_NOT_VERIFIED, _verify(passing_report(default_checks=True), key="other")),
    ("completion", 0, _plain("completion", "bash")),
    ("references suggest", 0, _good_run),
    ("references suggest", 2, _plain("references", "suggest", "no-such.json", "--system", "ci")),
    ("completion", 2, _plain("completion", "tcsh")),
]

# Declared codes no example above reaches, and why (4, a bug, is reached for every command by the test below).
REACHED_ELSEWHERE = {
    ("run", EXIT_PASSED): "a passing run needs a real runtime: tests/**/*_docker.py, tests/targets/local/test_host_torch.py",
    ("doctor", EXIT_PASSED): "every check ok needs a reachable Engine with the image: tests/cli/test_doctor_docker.py",
    ("nodes", EXIT_PASSED): "starting and removing node Engines needs Docker: tests/targets/engines/test_nodes*.py",
    ("collect kubernetes", EXIT_NOTHING_VALIDATED): "tests/data/kube holds no log of a run that skipped everything; "
    "collect's verdict is RunSummary.exit_code, whose 5 tests/results/test_results.py tests",
    ("collect slurm", EXIT_PASSED): "job directories as a run leaves them: tests/targets/slurm/test_slurm_export.py",
    ("collect slurm", EXIT_CHECKS_FAILED): "job directories as a run leaves them: tests/targets/slurm/test_slurm_export.py",
    ("collect slurm", EXIT_NOTHING_VALIDATED): "collect's verdict is RunSummary.exit_code, whose 5 "
    "tests/results/test_results.py tests",
}


@pytest.mark.parametrize(("command", "code", "setup"), EXAMPLES, ids=[f"{c}-{n}" for c, n, _ in EXAMPLES])
def test_a_command_returns_the_codes_its_help_declares(
    command: str, code: int, setup: Setup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert code in COMMAND_EXIT_CODES[command].codes, f"distval {command} returns {code}, which its help does not list"
    argv = setup(tmp_path, monkeypatch)
    assert main(argv) == code, capsys.readouterr()


def test_every_declared_code_has_an_example_or_a_reason() -> None:
    reached = {(command, code) for command, code, _ in EXAMPLES}
    for command, declared in COMMAND_EXIT_CODES.items():
        for code in declared.codes:
            if code == EXIT_INTERNAL:
                continue
            assert ((command, code) in reached) != ((command, code) in REACHED_ELSEWHERE), (command, code)
    assert all(code in COMMAND_EXIT_CODES[command].codes for command, code in REACHED_ELSEWHERE)


def _commands_with_handlers() -> dict[str, argparse.ArgumentParser]:
    return {name: p for name, p in subcommands(build_parser()).items() if p.get_default("handler") is not None}


def test_every_command_declares_its_codes_and_its_help_lists_them() -> None:
    commands = _commands_with_handlers()
    assert set(commands) == set(COMMAND_EXIT_CODES)
    for name, parser in commands.items():
        declared = COMMAND_EXIT_CODES[name]
        assert parser.epilog == declared.line()
        help_text = " ".join(parser.format_help().split())
        assert " ".join(declared.line().split()) in help_text
    # A command made of subcommands says theirs together.
    export = subcommands(build_parser())["export"]
    assert export.epilog == COMMAND_EXIT_CODES["export kubernetes"].line()


@pytest.mark.parametrize("command", sorted(COMMAND_EXIT_CODES))
def test_a_bug_in_any_command_is_exit_4(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every command declares 4: main turns any exception of its handler into one line and 4."""
    assert EXIT_INTERNAL in COMMAND_EXIT_CODES[command].codes
    real = build_parser

    def bug(_args: argparse.Namespace) -> int:
        raise ZeroDivisionError("a bug")

    def with_bugs() -> argparse.ArgumentParser:
        parser = real()
        for sub in subcommands(parser).values():
            if sub.get_default("handler") is not None:
                sub.set_defaults(handler=bug)
        return parser

    monkeypatch.setattr(distval.cli.main, "build_parser", with_bugs)
    minimal = {
        "fixtures": ["list"],
        "nodes": ["down"],
        "compare": ["a.json", "b.json"],
        "history": ["a.json", "--html", "page"],
        "export kubernetes": ["c.yaml"],
        "completion": ["bash"],
        "references suggest": ["a.json", "--system", "ci"],
        "attest": ["--key", "k.key"],
        "verify": ["a.json", "--image", IMAGE, "--key", "k.pub"],
    }
    argv = [*command.split(), *minimal.get(command, [])]
    if command == "export kubernetes":
        argv += ["--image", IMAGE]
    if command == "collect kubernetes":
        argv += ["x.log"]
    if command == "export slurm":
        argv += ["c.yaml", "--image", IMAGE]
    if command == "collect slurm":
        argv += ["jobs"]
    assert main(argv) == EXIT_INTERNAL
    assert "internal error (a bug in distval" in capsys.readouterr().err


def test_an_undeclared_code_is_refused() -> None:
    with pytest.raises(KeyError, match=r"\[7\]"):
        exit_codes_line((0, 7))
    assert ExitCodes((0, 2), {0: "success"}).line() == f"Exit codes: 0 success; 2 {EXIT_MEANINGS[2]}"
