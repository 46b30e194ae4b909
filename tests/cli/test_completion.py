"""``distval completion {bash,zsh,fish}``: scripts generated from the parser. Every visible command and option
is in each script; the bash one completes in a real bash (zsh and fish are not installed here: their scripts
are checked as text)."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

import pytest

from distval.cli.completion import SHELLS, commands_of, render_completion
from distval.cli.main import build_parser, main


def visible(parser: argparse.ArgumentParser) -> tuple[set[str], set[str]]:
    """Every visible subcommand name and option string below ``parser`` (help not suppressed), read from argparse."""
    names: set[str] = set()
    options = {o for a in parser._actions if a.help != argparse.SUPPRESS for o in a.option_strings}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                names.add(choice.dest)
                below_names, below_options = visible(action.choices[choice.dest])
                names |= below_names
                options |= below_options
    return names, options


@pytest.fixture(scope="module")
def scripts() -> dict[str, str]:
    return {shell: render_completion(build_parser(), shell) for shell in SHELLS}


@pytest.mark.parametrize("shell", SHELLS)
def test_every_visible_command_and_option_is_in_the_script(shell: str, scripts: dict[str, str]) -> None:
    names, options = visible(build_parser())
    assert {"run", "compare", "cleanup", "kubernetes", "completion"} <= names and "nodes" not in names
    assert {"-j", "--jobs", "-o", "--output-dir", "--format"} <= options and "--host" not in options
    script = scripts[shell]
    words = set(script.replace("'", " ").replace("|", " ").replace("/", " ").replace(")", " ").split())
    missing_names = {n for n in names if n not in words}
    if shell == "fish":  # fish names an option without its dashes: -l jobs, -s j
        words |= {f"--{w}" for w in words} | {f"-{w}" for w in words}
    assert missing_names == set() and {o for o in options if o not in words} == set()


def test_the_command_prints_the_script(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "bash"]) == 0
    assert capsys.readouterr().out == render_completion(build_parser(), "bash")
    assert main(["completion", "tcsh"]) == 2


def test_a_new_option_completes_without_editing_a_script() -> None:
    parser = build_parser()
    run = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["run"]
    run.add_argument("--brand-new", choices=("this", "that"))
    for shell in SHELLS:
        script = render_completion(parser, shell)
        assert "brand-new" in script and "this that" in script, shell


def test_path_options_complete_files_and_dir_options_directories() -> None:
    by_key = {c.key: c for c in commands_of(build_parser())}
    kinds = {flag: o.value for o in by_key["run"].options for flag in o.flags}
    assert kinds["--junit"] == kinds["--python"] == kinds["--baseline"] == kinds["--tls-ca"] == "file"
    assert kinds["--output-dir"] == "directory" and kinds["--jobs"] == kinds["--hosts"] == "free"
    assert kinds["--image-distribution"] == "word" and kinds["--quiet"] is None
    assert by_key["run"].positional == "file" and by_key["fixtures"].positional_choices == ("build", "list")
    assert by_key["export kubernetes"].options and by_key["compare"].positional == "file"
    exported = {flag: o.value for o in by_key["export kubernetes"].options for flag in o.flags}
    assert exported["-o"] == exported["--output-dir"] == exported["--out"] == "directory"


# --- the bash script in a real bash -------------------------------------------------------------------


@pytest.fixture(scope="module")
def bash_script(tmp_path_factory: pytest.TempPathFactory, scripts: dict[str, str]) -> Path:
    path = tmp_path_factory.mktemp("completion") / "distval.bash"
    path.write_text(scripts["bash"], encoding="utf-8")
    assert subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True).returncode == 0
    return path


def complete(script: Path, line: str, cwd: Path | None = None) -> list[str]:
    """What bash offers for ``line`` (its last word completed; a trailing space: a new, empty word)."""
    words = line.split(" ")
    program = (
        f"source {script}; COMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}; "
        'COMP_LINE="${COMP_WORDS[*]}"; _distval; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, cwd=cwd, timeout=30)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return sorted(w for w in done.stdout.splitlines() if w)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("distval ru", ["run"]),
        ("distval c", ["checks", "cleanup", "collect", "compare", "completion"]),
        ("distval run --jo", ["--jobs"]),
        ("distval run --ho", ["--hosts", "--hosts-from-config"]),  # not the hidden --host
        ("distval run -", None),  # every option of run, checked below
        ("distval run --image-distribution ", ["pull", "transfer"]),
        ("distval run --filter plan --jo", ["--jobs"]),  # an option's value is not read as a command
        ("distval run -j ", []),  # a number: nothing to offer
        ("distval fixtures ", ["build", "list"]),
        ("distval fixtures list --format ", ["json", "text"]),
        ("distval export ", ["kubernetes", "slurm"]),
        ("distval export kubernetes --la", ["--layout"]),
        ("distval export kubernetes --ou", ["--out", "--output-dir"]),
        ("distval export kubernetes --layout j", ["jobset"]),
        ("distval cleanup --dr", ["--dry-run"]),
        ("distval completion ", ["bash", "fish", "zsh"]),
    ],
)
def test_bash_completes(bash_script: Path, line: str, expected: list[str] | None) -> None:
    got = complete(bash_script, line)
    if expected is None:
        by_key = {c.key: c for c in commands_of(build_parser())}
        assert got == sorted(flag for option in by_key["run"].options for flag in option.flags)
    else:
        assert got == expected


def test_bash_completes_files_and_directories(bash_script: Path, tmp_path: Path) -> None:
    (tmp_path / "reports").mkdir()
    (tmp_path / "suite.yaml").write_text("x")
    assert complete(bash_script, "distval run ", tmp_path) == ["reports", "suite.yaml"]
    assert complete(bash_script, "distval run s", tmp_path) == ["suite.yaml"]
    assert complete(bash_script, "distval run --junit ", tmp_path) == ["reports", "suite.yaml"]
    assert complete(bash_script, "distval run -o ", tmp_path) == ["reports"]
    assert complete(bash_script, "distval compare ", tmp_path) == ["reports", "suite.yaml"]
