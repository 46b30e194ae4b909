"""The CLI's early failures, without a Docker Engine: exit codes, one clear line, and a JUnit file."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from distval.cli.main import build_parser, main
from distval.errors import EXIT_INTERRUPTED, EXIT_MEANINGS
from distval.images import BROKEN_PREFIX, FIXTURES, recipe_hash
from distval.session.sample import SAMPLE_IMAGE_NOTE
from tests.paths import ROOT


def test_unreachable_engine_exits_3_with_one_line_and_an_error_testcase(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    junit = tmp_path / "results.xml"
    code = main(["run", str(ROOT / "configs" / "default.yaml"), "--sample-image", "--junit", str(junit), "--quiet"])
    assert code == 3
    err = capsys.readouterr().err
    # The sample image's note comes first, --quiet or not (tests/project/test_front_door.py), then the one line.
    note, line = err.strip().splitlines()
    assert note == f"distval: {SAMPLE_IMAGE_NOTE}"
    assert line.startswith(f"distval: cannot reach the Docker Engine at unix://{tmp_path}/no-engine.sock")
    assert "Traceback" not in err
    root = ET.parse(junit).getroot()
    (case,) = root.iter("testcase")
    assert case.get("name") == "environment"
    error = case.find("error")
    assert error is not None and "cannot reach the Docker Engine" in error.get("message", "")


def test_bad_run_id_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(ROOT / "configs" / "default.yaml"), "--run-id", "Not A Name"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "distval plan: error: argument --run-id: expected 1-16 lowercase letters, digits or '-' (starting with a letter "
        "or digit); got 'Not A Name' (see distval plan --help)"
    ]


def test_fixtures_list_names_every_fixture(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fixtures", "list", "--all"]) == 0
    out = capsys.readouterr().out
    for tag in (
        "distval-fixtures/torch:2.6-debian ",
        "distval-fixtures/broken:allreduce-noop",
        "distval-fixtures/torch:2.6-debian-stock",
    ):
        assert tag in out


def test_fixtures_list_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fixtures", "list", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    tags = [f["tag"] for f in data["fixtures"]]
    assert "distval-fixtures/torch:2.6-debian" in tags and not any("broken:" in t for t in tags)
    assert data["hidden"] == sum(1 for tag in FIXTURES if tag.startswith(BROKEN_PREFIX)) > 0
    first = data["fixtures"][0]
    assert first == {
        "tag": first["tag"],
        "recipe": recipe_hash(first["tag"]),
        "description": FIXTURES[first["tag"]].description,
        "broken": False,
    }
    assert main(["fixtures", "list", "--all", "--format", "json"]) == 0
    everything = json.loads(capsys.readouterr().out)
    assert [f["tag"] for f in everything["fixtures"]] == list(FIXTURES) and everything["hidden"] == 0
    assert any(f["broken"] for f in everything["fixtures"])


def test_fixtures_build_has_no_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fixtures", "build", "--format", "json"]) == 2
    assert "--format is fixtures list's" in capsys.readouterr().err


def test_the_top_level_help_lists_every_declared_exit_code() -> None:
    text = " ".join(build_parser().format_help().split())
    for code, meaning in EXIT_MEANINGS.items():
        assert f"{'128+N' if code == EXIT_INTERRUPTED else code} {meaning}" in text, (code, text)


def test_an_unreachable_engine_gets_no_cleanup_hint_and_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing was created, so no `distval cleanup --run-id` line; the error line says what to do instead."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "no-config"))  # no Docker CLI context in play
    assert main(["run", str(ROOT / "configs" / "default.yaml"), "--image", "distval-fixtures/torch:2.6-debian"]) == 3
    err = capsys.readouterr().err
    assert "if distval is killed" not in err and "distval cleanup" not in err, err
    assert "no Engine listens on that socket: start Docker" in err, err
