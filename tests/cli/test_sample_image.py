"""A pipeline must not gate on distval's sample image by accident: with $CI set, a run that names no image (no
--image, no image: in the config) is refused in one line (exit 2) unless --sample-image says it is meant; the
reports say when the sample image ran. No Docker: ``run`` uses the fake Engine (tests/report_helpers.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import distval.targets.docker.target
from distval.cli.main import main
from distval.config.shipped import DEFAULT_IMAGE
from distval.session.sample import in_ci
from tests.report_helpers import IMAGE, RUN_ID

REFUSED = (
    f"distval: no image named and $CI is set: this run would validate distval's sample image {DEFAULT_IMAGE}, not "
    "yours; give --image IMG (or image: in the config), or --sample-image to validate the sample on purpose"
)


@pytest.fixture
def sample_run(fake_docker: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake run's config, with the sample image taken as present (nothing is built)."""
    monkeypatch.setattr(distval.targets.docker.target, "ensure_images", lambda engine, images, progress, helpers, blocked: None)
    return fake_docker


def _run(config: Path, tmp_path: Path, *extra: str) -> int:
    reports = ["--junit", str(tmp_path / "r.xml"), "--json", str(tmp_path / "r.json")]
    return main(["run", str(config), "--run-id", RUN_ID, "--quiet", *reports, *extra])


def _report(tmp_path: Path) -> dict[str, object]:
    report: dict[str, object] = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    return report


@pytest.mark.parametrize("value", ["true", "1", "yes", "TRUE", "gitlab"])
def test_in_ci_the_sample_image_is_refused_in_one_line(
    value: str, sample_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CI", value)
    assert _run(sample_run, tmp_path) == 2
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [REFUSED]
    report = _report(tmp_path)
    assert report["early_error"] == {"kind": "image", "message": REFUSED.removeprefix("distval: ")}
    assert report["scenarios"] == []
    junit = (tmp_path / "r.xml").read_text(encoding="utf-8")
    assert 'type="image"' in junit
    # Refused before any scenario ran, the one testsuite still names the image it would have validated.
    assert f'<testsuite name="[{DEFAULT_IMAGE}] distval run"' in junit


@pytest.mark.parametrize("value", [None, "", "false", "0", "no", "off"])
def test_outside_ci_the_sample_image_runs_and_the_reports_say_so(
    value: str | None, sample_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if value is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", value)
    assert _run(sample_run, tmp_path) == 1  # the fake runtime fails all_reduce in 'across'
    report = _report(tmp_path)
    assert report["sample_image"] is True
    assert [s["properties"]["sample_image"] for s in report["scenarios"]] == ["true", "true"]  # type: ignore[index]
    assert '<property name="sample_image" value="true" />' in (tmp_path / "r.xml").read_text(encoding="utf-8")


def test_sample_image_runs_it_on_purpose_in_ci(
    sample_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CI", "true")
    assert _run(sample_run, tmp_path, "--sample-image") == 1
    report = _report(tmp_path)
    assert report["early_error"] is None and report["sample_image"] is True
    assert [s["image"] for s in report["scenarios"]] == [DEFAULT_IMAGE, DEFAULT_IMAGE]  # type: ignore[index]


def test_an_image_named_in_the_config_or_the_command_line_is_not_the_sample(
    sample_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CI", "true")
    assert _run(sample_run, tmp_path, "--image", IMAGE) == 1
    assert _report(tmp_path)["sample_image"] is False
    # The config's image, even when it is the sample's own name: named on purpose.
    sample_run.write_text(f"image: {DEFAULT_IMAGE}\n" + sample_run.read_text(encoding="utf-8"), encoding="utf-8")
    assert _run(sample_run, tmp_path) == 1
    report = _report(tmp_path)
    assert report["sample_image"] is False
    assert [s["properties"]["sample_image"] for s in report["scenarios"]] == ["false", "false"]  # type: ignore[index]


def test_a_scenario_without_an_image_beside_one_with_is_refused(
    sample_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CI", "true")
    text = sample_run.read_text(encoding="utf-8")
    sample_run.write_text(text.replace("  - name: inside\n", f"  - name: inside\n    image: {IMAGE}\n"), encoding="utf-8")
    assert _run(sample_run, tmp_path) == 2
    assert capsys.readouterr().err.splitlines() == [REFUSED]
    # Unless --filter leaves only the scenario that names one.
    assert _run(sample_run, tmp_path, "--filter", "inside") == 0


@pytest.mark.parametrize(
    ("extra", "line"),
    [
        (
            ["--image", IMAGE],
            "distval: --image names the image under test, --sample-image asks for distval's sample: give one, not both",
        ),
        (
            ["--local"],
            "distval: --sample-image names a container image, --local runs the local Python's torch: give one, not both",
        ),
    ],
)
def test_sample_image_with_another_choice_is_refused(
    extra: list[str], line: str, sample_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(sample_run, tmp_path, "--sample-image", *extra) == 2
    assert capsys.readouterr().err.splitlines() == [line]


def test_in_ci_reads_the_variable_as_pipelines_set_it() -> None:
    assert in_ci({"CI": "true"}) and in_ci({"CI": " 1 "}) and in_ci({"CI": "woodpecker"})
    assert not in_ci({}) and not in_ci({"CI": "False"}) and not in_ci({"CI": " "})
