"""The front door of the command line: ``distval checks`` (and docs/checks-reference.md), ``distval init``, the
shipped default config when ``run`` and ``plan`` get none (and the sample-image note), bounded tolerances, what
the help hides (``nodes``, the broken fixtures), ``--no-step-summary`` and docs/command-line.md's usage error.
No Docker: ``run`` uses the fake Engine."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import distval.cli.run
import distval.targets.docker.target
from distval.checks.catalog import CATALOG
from distval.cli.main import build_parser, main
from distval.config import load_config
from distval.config.checks_reference import REFERENCE_PAGE, checks_data, render_checks
from distval.config.keys import KEYS
from distval.config.keys_reference import KEYS_PAGE, render_keys_markdown, schema_words
from distval.config.shipped import DEFAULT_CONFIG, DEFAULT_IMAGE, SCHEMA_COMMENT_PREFIX, SCHEMA_FILE, STARTER_NAME, starter_config
from distval.images import BROKEN_PREFIX, FIXTURES
from distval.session.sample import SAMPLE_IMAGE_NOTE
from distval_suite.support import MAY_LACK
from tests.paths import ROOT
from tests.report_helpers import IMAGE, RUN_ID, TIMESTAMP

# --- distval checks ------------------------------------------------------------------------------------------


def test_checks_lists_every_catalog_check_with_its_description(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["checks"]) == 0
    out = capsys.readouterr().out
    first_lines = [line for line in out.splitlines() if not line.startswith(" ")]
    assert [line.split()[0] for line in first_lines] == list(CATALOG)
    for line, info in zip(first_lines, CATALOG.values(), strict=True):
        assert line.endswith(info.description)


def test_checks_as_json_is_the_catalog_with_needs_and_gates(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["checks", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data == checks_data()
    by_name = {check["name"]: check for check in data}
    assert list(by_name) == list(CATALOG)
    for name, info in CATALOG.items():
        assert [argument["name"] for argument in by_name[name]["arguments"]] == list(info.args)
    assert "torch >= 2.14 (skipped below)" in by_name["reconfigure"]["requirements"]
    assert any(need.startswith("world_size >= 2") for need in by_name["all_reduce"]["requirements"])
    assert by_name["env"]["requirements"] == by_name["env"]["version_gates"] == []


def test_the_version_gates_are_suite_support_s_table() -> None:
    by_name = {check["name"]: check for check in checks_data()}
    gated = {gate["what"]: gate["before_torch"] for gate in by_name["collectives"]["version_gates"]}
    # Every entry of the table that is a gate (not UNDEFINED: no version has it) applies to collectives.
    expected = {what: ".".join(map(str, first)) for (first, what, below) in MAY_LACK.values() if below != "undefined"}
    assert gated == expected
    # bandwidth measures float32 with its own operations: the dtype entries and AVG are not its gates.
    assert {gate["what"] for gate in by_name["bandwidth"]["version_gates"]} == {"gloo's reduce_scatter", "gloo's all_to_all"}


def test_the_scenario_keys_page_is_current() -> None:
    page = (ROOT / KEYS_PAGE).read_text(encoding="utf-8")
    assert page == render_keys_markdown(), f"run: distval schema --format markdown > {KEYS_PAGE}"
    for key in KEYS:  # every key of the declaration has its row
        assert f"| `{key.name}` |" in page


def test_schema_words_read_each_kind_of_fragment() -> None:
    assert schema_words({"type": "integer", "minimum": 1, "maximum": 8}) == "integer 1..8"
    assert schema_words({"type": "string", "enum": ["a", "b"]}) == "one of `a`, `b`"
    assert schema_words({"type": "number", "exclusiveMinimum": 0, "maximum": 9}) == "number > 0 (at most 9)"
    assert schema_words({"anyOf": [{"type": "boolean"}, {"type": "integer", "minimum": 0}]}) == "true or false or integer >= 0"


def test_the_checks_reference_page_is_current() -> None:
    page = (ROOT / REFERENCE_PAGE).read_text(encoding="utf-8")
    assert page == render_checks("markdown"), f"run: distval checks --format markdown > {REFERENCE_PAGE}"


# --- distval init --------------------------------------------------------------------------------------------


def test_init_writes_a_starter_config_the_loader_accepts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["init"]) == 0
    written = tmp_path / STARTER_NAME
    assert capsys.readouterr().out == f"wrote {STARTER_NAME}; run it with: distval run {STARTER_NAME} --image <your image>\n"
    text = written.read_text(encoding="utf-8")
    assert text == starter_config()
    first = text.splitlines()[0]
    assert first.startswith(SCHEMA_COMMENT_PREFIX)
    assert Path(first.removeprefix(SCHEMA_COMMENT_PREFIX)) == SCHEMA_FILE and SCHEMA_FILE.is_file()
    config = load_config(written)
    assert [s.name for s in config.scenarios] == ["in-container-2ranks", "cross-container-2ranks"]


def test_init_never_overwrites_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "mine.yaml"
    target.write_text("my own scenarios\n", encoding="utf-8")
    assert main(["init", str(target)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"distval: {target} exists; not overwriting it (give another path: distval init PATH)"
    ]
    assert target.read_text(encoding="utf-8") == "my own scenarios\n"


def test_init_into_a_missing_folder_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", str(tmp_path / "no" / "such.yaml")]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == f"distval: cannot write {tmp_path / 'no' / 'such.yaml'}: No such file or directory"


# --- the shipped default config ------------------------------------------------------------------------------


def test_the_default_config_is_shipped_inside_the_package() -> None:
    assert DEFAULT_CONFIG.parent.is_symlink() and DEFAULT_CONFIG.parent.resolve() == (ROOT / "configs").resolve()
    assert DEFAULT_CONFIG.read_bytes() == (ROOT / "configs" / "default.yaml").read_bytes()
    # tomllib is Python >= 3.11; distval supports 3.10: the line as written.
    assert '\n"distval" = ["configs/*.yaml", "configs/*.json"]\n' in (ROOT / "pyproject.toml").read_text(encoding="utf-8")


def test_plan_without_a_config_plans_the_default_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan"]) == 0
    without = capsys.readouterr().out
    assert main(["plan", str(DEFAULT_CONFIG)]) == 0
    assert without == capsys.readouterr().out
    assert without.startswith(f"run <run-id> from {DEFAULT_CONFIG}: 3 scenario(s)")


@pytest.fixture
def default_run(fake_docker: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`distval run` against the fake Engine with the default image taken as present (nothing is built)."""
    monkeypatch.setattr(distval.targets.docker.target, "ensure_images", lambda engine, images, progress, helpers, blocked: None)


def test_run_without_config_or_image_says_it_validates_the_sample_image(
    default_run: None, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)  # in a pipeline it is refused (tests/cli/test_sample_image.py)
    # The fake runtime answers env and all_reduce only (the default config has more checks): exit code 1.
    assert main(["run", "--run-id", RUN_ID, "--json", str(tmp_path / "r.json")]) == 1
    captured = capsys.readouterr()
    assert SAMPLE_IMAGE_NOTE == f"no --image: validating distval's sample image {DEFAULT_IMAGE}"
    assert TIMESTAMP.sub("", captured.err.splitlines()[0]) == SAMPLE_IMAGE_NOTE
    lines = captured.out.splitlines()
    # The summary's first line, before the table anyone could take for a verdict on their image.
    assert lines[:3] == [SAMPLE_IMAGE_NOTE, "", lines[2]] and lines[2].startswith("scenario ")
    assert re.fullmatch(rf"distval run {RUN_ID}: \d+ of \d+ check results passed; exit code 1", lines[-1])
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert report["config"] == str(DEFAULT_CONFIG)
    assert [s["name"] for s in report["scenarios"]] == ["in-container-3ranks", "cross-container-2ranks", "cross-container-2x2"]


def test_the_sample_image_note_is_said_with_quiet_too(
    default_run: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--quiet drops the progress, not this warning: a pipeline's log must show the verdict is not on its image."""
    monkeypatch.delenv("CI", raising=False)
    assert main(["run", "--run-id", RUN_ID, "--quiet"]) == 1
    captured = capsys.readouterr()
    assert captured.err.splitlines()[0] == f"distval: {SAMPLE_IMAGE_NOTE}"
    assert captured.out.splitlines()[0] == SAMPLE_IMAGE_NOTE


def test_run_with_an_image_says_nothing_of_the_sample_image(default_run: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--image", IMAGE, "--run-id", RUN_ID]) == 1
    captured = capsys.readouterr()
    assert "sample image" not in captured.err + captured.out
    assert captured.out.splitlines()[-1].startswith(f"distval run {RUN_ID}: ")


# --- docs/command-line.md's usage error ------------------------------------------------------------------------


def cut_lists(line: str) -> str:
    """``line`` with each list of commands (the usage's ``{a,b,c,d}``, the error's ``(choose from 'a', ...)``) cut
    to its first two items and its last, as docs/command-line.md shows it."""

    def cut(items: list[str], separator: str) -> str:
        return separator.join(items if len(items) <= 3 else [*items[:2], "...", items[-1]])

    line = re.sub(r"\{([^{}]*)\}", lambda m: "{" + cut(m.group(1).split(","), ",") + "}", line)
    return re.sub(r"\(choose from ([^()]*)\)", lambda m: f"(choose from {cut(m.group(1).split(', '), ', ')})", line)


def test_the_documented_usage_error_is_what_the_parser_prints(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/command-line.md's example of a misspelt command, shortened by one rule (cut_lists), not by hand."""
    assert main(["rn"]) == 2
    (printed,) = capsys.readouterr().err.splitlines()
    page = (ROOT / "docs" / "command-line.md").read_text(encoding="utf-8")
    (documented,) = [line for line in page.splitlines() if "invalid choice: 'rn'" in line]
    assert documented == cut_lists(printed)
    assert cut_lists("x {a,b,c,d,e} (choose from 'a', 'b', 'c', 'd')") == "x {a,b,...,e} (choose from 'a', 'b', ..., 'd')"


# --- tolerances ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["150%", "100%", "1", "1.5", "-5%", "nan", "inf%"])
def test_a_busbw_tolerance_is_below_100_percent(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "old.json", "new.json", f"--busbw-tolerance={value}"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        "distval compare: error: argument --busbw-tolerance: expected a fraction like 0.2 or a percentage like 20%, "
        f"at least 0 and below 100%; got {value!r} (see distval compare --help)"
    )


@pytest.mark.parametrize(
    ("option", "value", "fraction"), [("--busbw-tolerance", "99.5%", 0.995), ("--duration-tolerance", "150%", 1.5)]
)
def test_tolerances_within_their_bounds(option: str, value: str, fraction: float) -> None:
    args = build_parser().parse_args(["compare", "old.json", "new.json", option, value])
    assert getattr(args, option.removeprefix("--").replace("-", "_")) == pytest.approx(fraction)


def test_a_duration_tolerance_is_below_a_hundredfold(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "old.json", "new.json", "--duration-tolerance", "10000%"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        "distval compare: error: argument --duration-tolerance: expected a fraction like 0.2 or a percentage like 20%, "
        "at least 0 and below 10000%; got '10000%' (see distval compare --help)"
    )


# --- what the help leaves out --------------------------------------------------------------------------------


def test_nodes_is_left_out_of_the_top_level_help_but_works() -> None:
    text = build_parser().format_help()
    assert not re.search(r"\bnodes\b", text), text
    args = build_parser().parse_args(["nodes", "down", "--set", "abc"])
    assert (args.action, args.set_id) == ("down", "abc")
    for command in ("run", "plan", "checks", "init", "fixtures", "cleanup"):
        assert f"    {command} " in text


def test_fixtures_list_shows_the_broken_fixtures_only_with_all(capsys: pytest.CaptureFixture[str]) -> None:
    broken = [tag for tag in FIXTURES if tag.startswith(BROKEN_PREFIX)]
    assert broken
    assert main(["fixtures", "list"]) == 0
    out = capsys.readouterr().out
    assert BROKEN_PREFIX + "allreduce" not in out
    assert out.splitlines()[-1] == (
        f"(and {len(broken)} {BROKEN_PREFIX}* images for distval's own tests: distval fixtures list --all)"
    )
    assert main(["fixtures", "list", "--all"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == list(FIXTURES)


# --- $GITHUB_STEP_SUMMARY ------------------------------------------------------------------------------------


@pytest.mark.parametrize("flag", [[], ["--no-step-summary"]])
def test_the_step_summary_is_written_unless_turned_off(
    flag: list[str], default_run: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    step_summary = tmp_path / "step.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))
    assert main(["run", "--image", IMAGE, "--run-id", RUN_ID, "--quiet", *flag]) == 1
    assert step_summary.exists() == (not flag)
