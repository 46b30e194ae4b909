"""The command line people know: short options (-q, -v, -j, -o), --output-dir's fixed report names, and
--verbose's rank output (the image's text, escaped for the terminal)."""

from __future__ import annotations

import argparse
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

import distval.cli.main
from distval.cli.main import build_parser, main
from distval.session.reports import OUTPUT_NAMES
from tests.fake_engine import FakeEngine
from tests.paths import ROOT

DEFAULT = str(ROOT / "configs" / "default.yaml")
IMAGE = "distval-fixtures/torch:2.6-debian"
# What a hostile image prints: a colour, a window title (OSC ... BEL), a bidi override, a carriage return.
HOSTILE = "\x1b[31mred\x1b[0m \x1b]0;pwned\x07title \u202eevil\rover"


class LoudEngine(FakeEngine):
    def logs(self, container: Any) -> tuple[str, str]:
        return f"rank says {HOSTILE}", "rank warns"


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(distval.cli.main, "Engine", LoudEngine)


def test_short_options_are_the_long_ones() -> None:
    parser = build_parser()
    short = parser.parse_args(["run", "-q", "-j", "3", "-o", "out"])
    long = parser.parse_args(["run", "--quiet", "--jobs", "3", "--output-dir", "out"])
    assert (short.quiet, short.jobs, short.output_dir) == (long.quiet, long.jobs, long.output_dir) == (True, 3, "out")
    assert parser.parse_args(["run", "-v"]).verbose is True


def test_quiet_and_verbose_are_exclusive(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", DEFAULT, "-q", "-v"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("distval run: error: argument -v/--verbose: not allowed with argument -q/--quiet")


def test_output_dir_writes_every_report_under_its_fixed_name(engine: None, tmp_path: Path) -> None:
    out = tmp_path / "reports" / "new"  # created
    assert main(["run", DEFAULT, "--image", IMAGE, "-q", "--filter", "in-container*", "-o", str(out)]) == 1
    assert sorted(p.name for p in out.iterdir()) == sorted(OUTPUT_NAMES.values())
    assert ET.parse(out / OUTPUT_NAMES["--junit"]).getroot().tag == "testsuites"
    assert json.loads((out / OUTPUT_NAMES["--json"]).read_text())["exit_code"] == 1
    assert "exit code 1" in (out / OUTPUT_NAMES["--markdown"]).read_text()


def test_an_explicit_report_path_wins_over_output_dir(engine: None, tmp_path: Path) -> None:
    out, own = tmp_path / "out", tmp_path / "mine.json"
    assert main(["run", DEFAULT, "--image", IMAGE, "-q", "--filter", "in-container*", "-o", str(out), "--json", str(own)]) == 1
    assert json.loads(own.read_text())["exit_code"] == 1
    assert sorted(p.name for p in out.iterdir()) == sorted([OUTPUT_NAMES["--junit"], OUTPUT_NAMES["--markdown"]])


def test_output_dir_gets_the_reports_of_a_refused_command_line(tmp_path: Path) -> None:
    """--jobs 0 is refused by argparse: the reports still say why, in --output-dir too."""
    assert main(["run", DEFAULT, "-j", "0", "-o", str(tmp_path)]) == 2
    report = json.loads((tmp_path / OUTPUT_NAMES["--json"]).read_text())
    assert report["exit_code"] == 2 and "--jobs" in json.dumps(report)
    assert (tmp_path / OUTPUT_NAMES["--junit"]).exists()


def test_an_output_dir_that_is_a_file_is_refused_before_anything_runs(
    engine: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One line, exit 2, nothing run; a report named on its own still says why."""
    (tmp_path / "taken").write_text("keep")
    own = tmp_path / "mine.json"
    assert main(["run", DEFAULT, "--image", IMAGE, "-q", "-o", str(tmp_path / "taken"), "--json", str(own)]) == 2
    assert capsys.readouterr().err.splitlines() == [f"distval: --output-dir {tmp_path / 'taken'} is not a directory"]
    assert (tmp_path / "taken").read_text() == "keep"
    assert "is not a directory" in json.loads(own.read_text())["early_error"]["message"]


def test_verbose_shows_each_ranks_output_escaped_when_its_scenario_ends(engine: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", DEFAULT, "--image", IMAGE, "-v", "--filter", "in-container-3ranks"]) == 1
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if " | " in line]
    # The controls are taken out (what is left of a sequence is plain, harmless text).
    assert any(line.endswith("| rank says [31mred[0m ]0;pwnedtitle evilover") for line in lines), lines
    assert any(line.endswith("| rank warns") for line in lines), lines
    assert "\x1b" not in err and "\x07" not in err and "\u202e" not in err and "\r" not in err
    # Each line names its scenario, and comes after the scenario's verdict line.
    name = lines[0].split(" | ")[0]
    assert name.startswith("in-container-3ranks") and all(line.startswith(name + " | ") for line in lines)
    finished = next(i for i, line in enumerate(err.splitlines()) if re.search(r": (failed|error) in ", line))
    assert err.splitlines().index(lines[0]) > finished


def test_without_verbose_no_rank_output(engine: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", DEFAULT, "--image", IMAGE, "--filter", "in-container-3ranks"]) == 1
    assert "rank says" not in capsys.readouterr().err


# --- did you mean ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "prog", "hint"),
    [
        (["rn"], "distval", "did you mean 'run'?"),
        (["compre", "a.json", "b.json"], "distval", "did you mean 'compare'?"),
        (["run", DEFAULT, "--josn", "r.json"], "distval run", "did you mean '--json'?"),
        (["run", DEFAULT, "--filtr=x"], "distval run", "did you mean '--filter'?"),
        (["fixtures", "lst"], "distval fixtures", "did you mean 'list'?"),
        (["plan", DEFAULT, "--format", "jsn"], "distval plan", "did you mean 'json'?"),
        (["export", "kubernets"], "distval export", "did you mean 'kubernetes'?"),
        (["cleanup", "--dryrun"], "distval cleanup", "did you mean '--dry-run'?"),
    ],
)
def test_a_misspelt_command_choice_or_option_names_the_closest(
    argv: list[str], prog: str, hint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"{prog}: error: ") and line.endswith(f"; {hint} (see {prog} --help)"), line


@pytest.mark.parametrize("argv", [["zzzzzz"], ["run", DEFAULT, "--zzzzzz"], ["fixtures", "qqq"]])
def test_nothing_close_names_nothing(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert "did you mean" not in capsys.readouterr().err


def test_a_hidden_option_is_never_offered(capsys: pytest.CaptureFixture[str]) -> None:
    """--host (--local's old name) is hidden: "--hst" is closer to --host than to --hosts, which is what is offered."""
    assert main(["run", DEFAULT, "--hst"]) == 2
    assert capsys.readouterr().err.endswith("; did you mean '--hosts'? (see distval run --help)\n")


def test_the_namespace_a_handler_gets_has_no_parser_in_it() -> None:
    assert not any(name.startswith("_distval") for name in vars(build_parser().parse_args(["run", "-q"])))


@pytest.mark.parametrize("argv", [["rn"], ["node", "up"]])
def test_a_hidden_command_is_never_offered(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """`nodes` (test infrastructure) has no help line: a misspelt command lists the visible ones only, and is never
    told to mean the hidden one; `distval nodes` itself still works."""
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    offered = ", ".join(repr(name) for name in commands.choices if name != "nodes")
    assert f"invalid choice: {argv[0]!r} (choose from {offered})" in line
    assert "nodes" not in line
    assert parser.parse_args(["nodes", "down"]).action == "down"
