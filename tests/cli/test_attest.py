"""``distval attest`` and ``distval verify`` through ``main`` against tests/fake_engine.py: a key pair generated, a
report attested and verified, and each way an attestation fails verify with its own exit code and one line on
stderr (a tampered payload or report, another image, expired, unsigned, another key), bad input (exit code 2)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import distval.cli.attest
import distval.cli.main
from distval.cli.main import main
from distval.engine_protocol import ImageInfo
from distval.errors import EXIT_BAD_INPUT, EXIT_CHECKS_FAILED, EXIT_ENVIRONMENT, EXIT_NOT_VERIFIED, EXIT_PASSED
from tests.attestation_helpers import IMAGE, MADE, changed, passed_of, passing_report, write_json, write_key_pair
from tests.fake_engine import FAKE_IMAGE_ID, FakeEngine

OTHER = "example/torch:other"


@pytest.fixture(autouse=True)
def engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake Engine, holding IMAGE (FAKE_IMAGE_ID) and OTHER (another image); the clock at MADE."""
    monkeypatch.setattr(distval.cli.main, "Engine", FakeEngine)
    monkeypatch.setattr(FakeEngine, "images", {OTHER: ImageInfo("sha256:" + "0f" * 32, (OTHER,), {})})
    monkeypatch.setattr(distval.cli.attest, "now", lambda: MADE)
    monkeypatch.delenv("DISTVAL_KEY_PASSPHRASE", raising=False)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _attested(tmp_path: Path, report: dict[str, Any] | None = None) -> tuple[str, str, str]:
    """(attestation, public key, report path) of ``report`` (default: one that passed) on IMAGE."""
    private, public = write_key_pair(tmp_path)
    path = write_json(tmp_path / "report.json", report or passing_report(default_checks=True))
    output = str(tmp_path / "attestation.json")
    assert main(["attest", path, "--image", IMAGE, "--key", private, "-o", output]) == EXIT_PASSED
    return output, public, path


def _refused(code: int, err: str, expected: int, said: str) -> None:
    """One line on stderr, no traceback, the expected code."""
    assert code == expected, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert said in err, err


def test_generate_attest_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = str(tmp_path / "keys" / "release.key")
    code, out, _ = _run(["attest", "--generate-key", "--key", key], capsys)
    assert code == EXIT_PASSED and "release.key (private, not encrypted" in out
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    public = str(tmp_path / "keys" / "release.pub")
    assert Path(public).read_text().startswith("-----BEGIN PUBLIC KEY-----")
    report = write_json(tmp_path / "report.json", passing_report(default_checks=True))
    junit = tmp_path / "junit.xml"
    junit.write_text("<testsuites/>")
    output = str(tmp_path / "att.json")
    argv = ["attest", report, "--image", IMAGE, "--key", key, "-o", output, "--junit", str(junit)]
    code, out, _ = _run(argv, capsys)
    assert (code, out) == (
        EXIT_PASSED,
        f"wrote {output}: {IMAGE} (sha256:abababababab), {passed_of(passing_report(default_checks=True))}; run exit code 0\n",
    )
    code, out, err = _run(["verify", output, "--image", IMAGE, "--key", public, "--report", report], capsys)
    assert (code, err) == (EXIT_PASSED, "")
    passed = passed_of(passing_report(default_checks=True))
    assert out == f"verified: {IMAGE} (sha256:abababababab): {passed}; attested 2026-12-04T12:00:00Z\n"
    statement = json.loads(base64.b64decode(json.loads(Path(output).read_text())["payload"]))
    assert statement["subject"] == [{"name": IMAGE, "digest": {"sha256": FAKE_IMAGE_ID.removeprefix("sha256:")}}]
    assert statement["predicate"]["junit"] == {"sha256": hashlib.sha256(b"<testsuites/>").hexdigest()}
    assert statement["predicate"]["report"] == {"sha256": hashlib.sha256(Path(report).read_bytes()).hexdigest()}


def test_an_encrypted_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("DISTVAL_KEY_PASSPHRASE", "correct horse")
    key = str(tmp_path / "cosign.key")
    code, out, _ = _run(["attest", "--generate-key", "--key", key], capsys)
    assert code == EXIT_PASSED and "encrypted with $DISTVAL_KEY_PASSPHRASE" in out
    report = write_json(tmp_path / "report.json", passing_report(default_checks=True))
    argv = ["attest", report, "--image", IMAGE, "--key", key, "-o", str(tmp_path / "a.json")]
    assert main(argv) == EXIT_PASSED
    monkeypatch.delenv("DISTVAL_KEY_PASSPHRASE")
    _refused(*_run(argv, capsys)[::2], EXIT_BAD_INPUT, "the key is encrypted: set $DISTVAL_KEY_PASSPHRASE")


def test_a_key_is_never_overwritten(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "cosign.pub").write_text("old")
    code, _, err = _run(["attest", "--generate-key", "--key", str(tmp_path / "cosign.key")], capsys)
    _refused(code, err, EXIT_BAD_INPUT, "cosign.pub exists; a key is never overwritten")
    assert not (tmp_path / "cosign.key").exists() and (tmp_path / "cosign.pub").read_text() == "old"


def _tamper(path: str, change: Any) -> None:
    envelope = json.loads(Path(path).read_text())
    statement = json.loads(base64.b64decode(envelope["payload"]))
    change(statement)
    envelope["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    Path(path).write_text(json.dumps(envelope))


def test_a_tampered_payload_is_not_verified(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    failed = changed(passing_report(default_checks=True), 0, "ddp", "failed", "gradients differ")
    output, public, _ = _attested(tmp_path, failed)
    assert main(["verify", output, "--image", IMAGE, "--key", public]) == EXIT_CHECKS_FAILED  # genuine: refused
    capsys.readouterr()

    def passed(statement: dict[str, Any]) -> None:
        statement["predicate"]["scenarios"][0]["checks"][3]["status"] = "passed"

    _tamper(output, passed)
    code, _, err = _run(["verify", output, "--image", IMAGE, "--key", public], capsys)
    _refused(code, err, EXIT_NOT_VERIFIED, "distval: not verified: the envelope signature does not verify with")


def test_a_tampered_report_is_not_verified(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output, public, report = _attested(tmp_path)
    assert main(["verify", output, "--image", IMAGE, "--key", public, "--report", report]) == EXIT_PASSED
    data = json.loads(Path(report).read_text())
    data["scenarios"][0]["cases"][2]["message"] = "edited"
    write_json(Path(report), data)
    code, _, err = _run(["verify", output, "--image", IMAGE, "--key", public, "--report", report], capsys)
    _refused(code, err, EXIT_NOT_VERIFIED, f"not verified: {report} is not the report attested")


def test_another_images_attestation_is_not_verified(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output, public, _ = _attested(tmp_path)
    code, _, err = _run(["verify", output, "--image", OTHER, "--key", public], capsys)
    _refused(code, err, EXIT_NOT_VERIFIED, f"not verified: the attestation is of sha256:abababababab, not of {OTHER}")


def test_a_subject_digest_changed_to_another_images_breaks_the_signature(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output, public, _ = _attested(tmp_path)

    def retarget(statement: dict[str, Any]) -> None:
        statement["subject"][0]["digest"]["sha256"] = "0f" * 32

    _tamper(output, retarget)
    code, _, err = _run(["verify", output, "--image", OTHER, "--key", public], capsys)
    _refused(code, err, EXIT_NOT_VERIFIED, "changed after signing")


def test_a_shared_repo_digest_of_another_platforms_image_is_not_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reproducer of an attestation of one platform's image verified for another's: both Engines pulled the same
    multi-platform tag, so both record the index's digest as the repo digest; the arm64 image (another id) must not
    verify with the amd64 image's attestation."""
    index = ("ghcr.io/org/torch@sha256:" + "2" * 64,)
    monkeypatch.setitem(FakeEngine.images, IMAGE, ImageInfo(FAKE_IMAGE_ID, (IMAGE,), {}, index))
    output, public, _ = _attested(tmp_path)
    subjects = json.loads(base64.b64decode(json.loads(Path(output).read_text())["payload"]))["subject"]
    assert [subject["digest"]["sha256"] for subject in subjects] == [FAKE_IMAGE_ID.removeprefix("sha256:")]
    monkeypatch.setitem(FakeEngine.images, "ghcr.io/org/torch:2.6", ImageInfo("sha256:" + "9" * 64, (), {}, index))
    code, _, err = _run(["verify", output, "--image", "ghcr.io/org/torch:2.6", "--key", public], capsys)
    _refused(
        code, err, EXIT_NOT_VERIFIED, "not verified: the attestation is of sha256:abababababab, not of ghcr.io/org/torch:2.6"
    )


def test_an_expired_attestation_is_not_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    output, public, _ = _attested(tmp_path)
    monkeypatch.setattr(distval.cli.attest, "now", lambda: MADE + timedelta(days=8))
    code, _, err = _run(["verify", output, "--image", IMAGE, "--key", public], capsys)
    _refused(code, err, EXIT_NOT_VERIFIED, "not verified: expired: made 2026-12-04T12:00:00Z, 8.0 days ago")
    policy = write_json(tmp_path / "policy.json", {"max_age_days": 30})
    assert main(["verify", output, "--image", IMAGE, "--key", public, "--policy", policy]) == EXIT_PASSED


def test_an_unsigned_attestation_is_not_verified(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output, public, _ = _attested(tmp_path)
    envelope = json.loads(Path(output).read_text())
    envelope["signatures"] = []
    write_json(Path(output), envelope)
    code, _, err = _run(["verify", output, "--image", IMAGE, "--key", public], capsys)
    _refused(code, err, EXIT_NOT_VERIFIED, "not verified: the envelope is unsigned")


def test_another_key_does_not_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output, _, _ = _attested(tmp_path)
    _, other = write_key_pair(tmp_path, "other")
    code, _, err = _run(["verify", output, "--image", IMAGE, "--key", other], capsys)
    _refused(code, err, EXIT_NOT_VERIFIED, f"not verified: the envelope signature does not verify with {other}")


def test_a_verdict_the_policy_refuses_is_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output, public, _ = _attested(tmp_path)
    policy = write_json(tmp_path / "policy.json", {"required_checks": ["cuda_build"]})
    code, _, err = _run(["verify", output, "--image", IMAGE, "--key", public, "--policy", policy], capsys)
    _refused(code, err, EXIT_CHECKS_FAILED, "distval: refused: cross-container-2ranks: the required check cuda_build was skipped")


def test_an_attestation_of_a_run_that_validated_nothing_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = passing_report(default_checks=True)
    report["scenarios"], report["exit_code"] = [], 5
    output, public, _ = _attested(tmp_path, report)
    code, _, err = _run(["verify", output, "--image", IMAGE, "--key", public], capsys)
    _refused(code, err, EXIT_CHECKS_FAILED, "refused: the run exited 5 (nothing was validated)")


def test_an_image_the_engine_lacks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    output, public, report = _attested(tmp_path)
    monkeypatch.setattr(distval.cli.main, "Engine", lambda run_id: FakeEngine(run_id, missing=frozenset({IMAGE})))
    code, _, err = _run(["verify", output, "--image", IMAGE, "--key", public], capsys)
    _refused(code, err, EXIT_ENVIRONMENT, f"image {IMAGE} is not in the Engine")
    argv = ["attest", report, "--image", IMAGE, "--key", str(tmp_path / "cosign.key"), "-o", str(tmp_path / "x.json")]
    _refused(*_run(argv, capsys)[::2], EXIT_ENVIRONMENT, "is not in the Engine")


def test_a_report_of_another_image_is_not_attested(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    private, _ = write_key_pair(tmp_path)
    report = write_json(tmp_path / "report.json", passing_report(default_checks=True))
    argv = ["attest", report, "--image", OTHER, "--key", private, "-o", str(tmp_path / "a.json")]
    _refused(*_run(argv, capsys)[::2], EXIT_BAD_INPUT, f"scenario in-container-2ranks ran {IMAGE}")
    assert not (tmp_path / "a.json").exists()


def _bad_input_cases(tmp_path: Path) -> list[tuple[list[str], str]]:
    output, public, report = _attested(tmp_path)
    private = str(tmp_path / "cosign.key")
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"\x00\xffnot json")
    bad_policy = write_json(tmp_path / "policy.json", {"max_age": 3})
    attest = ["attest", report, "--image", IMAGE, "-o", str(tmp_path / "x.json")]
    verify = ["verify", output, "--image", IMAGE]
    return [
        (["attest", str(garbage), "--image", IMAGE, "--key", private, "-o", output], f"{garbage} is not JSON"),
        (["attest", output, "--image", IMAGE, "--key", private, "-o", output], "is not a distval JSON report"),
        (["attest", "/dev/zero", "--image", IMAGE, "--key", private, "-o", output], "expected a regular file; got a device"),
        ([*attest, "--key", public], "expected a PEM private key; got a public key"),
        ([*attest, "--key", str(garbage)], "expected a PEM private key (-----BEGIN PRIVATE KEY-----, PKCS#8); it is not one"),
        ([*attest, "--key", str(tmp_path / "none.key")], "cannot read the private key"),
        ([*attest, "--key", private, "--junit", str(tmp_path)], "cannot read the JUnit file"),
        (["attest", report, "--key", private], "attest needs --image, -o/--output"),
        (["attest", "--generate-key", "--key", private, "--image", IMAGE], "give it --key alone"),
        ([*attest, "--key", private, "-o", str(tmp_path)], "cannot write the attestation"),
        ([*verify, "--key", private], "expected a PEM public key (-----BEGIN PUBLIC KEY-----, as cosign.pub); got a private key"),
        (["verify", str(garbage), "--image", IMAGE, "--key", public], "expected a DSSE envelope (JSON with payloadType"),
        (["verify", report, "--image", IMAGE, "--key", public], "payloadType and payload missing or not a string"),
        (["verify", str(tmp_path / "none.json"), "--image", IMAGE, "--key", public], "cannot read the attestation"),
        (["verify", "/dev/zero", "--image", IMAGE, "--key", public], "expected a regular file; got a device"),
        ([*verify, "--key", "/dev/zero"], "cannot read the public key /dev/zero: expected a regular file"),
        ([*verify, "--key", public, "--policy", bad_policy], "unknown key 'max_age'"),
        ([*verify, "--key", public, "--policy", str(garbage)], "it is not YAML"),
        ([*verify, "--key", public, "--report", str(garbage)], f"{garbage} is not JSON"),
        (["verify", output, "--key", public], "the following arguments are required: --image"),
    ]


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv, said in _bad_input_cases(tmp_path):
        code, _, err = _run(argv, capsys)
        _refused(code, err, EXIT_BAD_INPUT, said)
