"""A JSON document with one key twice is read two ways by two readers (Python's json takes the last value, others
the first), so every JSON distval reads goes through distval/strict_json.py and refuses it: a report, an envelope
or a policy given on the command line is bad input (exit 2, one line), a rank's record is that rank's error."""

from __future__ import annotations

import ast
import base64
import json
from pathlib import Path

import pytest

import distval.cli.attest
import distval.cli.main
from distval import strict_json
from distval.cli.main import main
from distval.engine_protocol import ImageInfo
from distval.errors import EXIT_BAD_INPUT, EXIT_PASSED
from distval.results.outcome import ERROR, ScenarioOutcome
from distval.results.scenario import summarize_scenario
from tests.attestation_helpers import IMAGE, MADE, passing_report, write_json, write_key_pair
from tests.fake_engine import FakeEngine
from tests.paths import ROOT
from tests.results.test_results import cases_of, container, env_record, jsonl, plans, record

# The reaper runs in its own image on the standard library alone (python -I -S): it reads only the Engine's replies.
# distval/images/files/ is what the fixture images run (the reaper's copy, broken fixtures' sitecustomize.py).
OUTSIDE_THE_HELPER = {"distval/strict_json.py", "distval/targets/docker/reaper_daemon.py"}
IMAGE_FILES = "distval/images/files/"


@pytest.fixture(autouse=True)
def engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(distval.cli.main, "Engine", FakeEngine)
    monkeypatch.setattr(FakeEngine, "images", {"example/torch:other": ImageInfo("sha256:" + "0f" * 32, (), {})})
    monkeypatch.setattr(distval.cli.attest, "now", lambda: MADE)
    monkeypatch.delenv("DISTVAL_KEY_PASSPHRASE", raising=False)


def test_every_json_read_of_distval_goes_through_the_one_helper() -> None:
    found = []
    for path in sorted((ROOT / "distval").rglob("*.py")):
        relative = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            is_json_read = (
                isinstance(node, ast.Attribute)
                and node.attr in ("load", "loads", "JSONDecoder", "raw_decode")
                and isinstance(node.value, ast.Name)
                and node.value.id == "json"
            )
            if is_json_read and relative not in OUTSIDE_THE_HELPER and not relative.startswith(IMAGE_FILES):
                found.append(f"{relative}:{node.lineno}")
    assert found == []


@pytest.mark.parametrize(
    "text",
    ['{"a": 1, "a": 2}', '{"x": [{"status": "failed", "status": "passed"}]}', '{"a": {"b": 1}, "a": {"b": 1}}'],
)
def test_the_helper_refuses_a_duplicate_key_at_any_depth(text: str) -> None:
    with pytest.raises(strict_json.DuplicateKey, match="appears twice"):
        strict_json.loads(text)
    assert isinstance(strict_json.DuplicateKey("a"), ValueError)


def test_the_helper_refuses_json_too_deep_for_the_parser() -> None:
    with pytest.raises(strict_json.TooDeep):
        strict_json.loads("[" * 200_000 + "]" * 200_000)


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str], said: str) -> None:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT and err.count("\n") == 1 and "Traceback" not in err, err
    assert said in err, err


def _with_second(text: str, key: str, value: str) -> str:
    """``text`` (a JSON object) with ``"key": value`` added once more at its end."""
    return text.rstrip().removesuffix("}") + f', "{key}": {value}}}'


def test_a_report_with_a_key_twice_is_not_attested(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    private, _ = write_key_pair(tmp_path)
    report = tmp_path / "report.json"
    report.write_text(_with_second(json.dumps(passing_report(default_checks=True)), "exit_code", "1"), encoding="utf-8")
    argv = ["attest", str(report), "--image", IMAGE, "--key", private, "-o", str(tmp_path / "a.json")]
    _refused(capsys, argv, 'the key "exit_code" appears twice in one object')


def test_an_envelope_with_a_key_twice_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    private, public = write_key_pair(tmp_path)
    report = write_json(tmp_path / "report.json", passing_report(default_checks=True))
    output = tmp_path / "attestation.json"
    assert main(["attest", report, "--image", IMAGE, "--key", private, "-o", str(output)]) == EXIT_PASSED
    envelope = output.read_text(encoding="utf-8")
    other = base64.b64encode(b'{"_type": "forged"}').decode()
    output.write_text(_with_second(envelope, "payload", json.dumps(other)), encoding="utf-8")
    _refused(capsys, ["verify", str(output), "--image", IMAGE, "--key", public], "appears twice")


def test_a_policy_with_a_key_twice_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, public = write_key_pair(tmp_path)
    envelope = tmp_path / "a.json"
    envelope.write_text("{}", encoding="utf-8")
    for name, text in (
        ("policy.yaml", "max_age_days: 1\nmax_age_days: 365\n"),
        ("policy.json", '{"required_checks": ["all_reduce"], "required_checks": []}'),
    ):
        policy = tmp_path / name
        policy.write_text(text, encoding="utf-8")
        argv = ["verify", str(envelope), "--image", IMAGE, "--key", public, "--policy", str(policy)]
        _refused(capsys, argv, "appears twice")


def test_a_rank_record_with_a_key_twice_is_that_ranks_error() -> None:
    """Rank 1's all_reduce says failed, then passed: never read as either."""
    inside, _ = plans()
    twice = _with_second(record("all_reduce", 1, status="failed", message="gave 2.0"), "status", '"passed"')
    files = {
        "rank-0.jsonl": jsonl(env_record(0), record("all_reduce", 0)),
        "rank-1.jsonl": jsonl(env_record(1), twice),
    }
    result = summarize_scenario(ScenarioOutcome(inside, "id", 2.0, (container(inside, 0, files),)))
    cases = cases_of(result)
    assert cases["all_reduce"].status == ERROR and "rank(s) 1" in cases["all_reduce"].message
    assert cases["results"].message == (
        f'{inside.containers[0].name}:rank-1.jsonl:2: unreadable result line (the key "status" appears twice in one object)'
    )
