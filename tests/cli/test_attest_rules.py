"""Rules of ``distval verify`` pinned one by one (each with the attestation otherwise genuine, so that only the
rule under test can refuse it): the envelope's payloadType is part of what is checked, the subject is matched by
its digest alone, and the tolerance for a date in the future ends exactly at policy.CLOCK_SKEW."""

from __future__ import annotations

import base64
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import distval.cli.attest
import distval.cli.main
from distval.attestation import dsse, keys
from distval.attestation.policy import CLOCK_SKEW
from distval.attestation.statement import Subject, statement_bytes
from distval.cli.main import main
from distval.engine_protocol import ImageInfo
from distval.errors import EXIT_BAD_INPUT, EXIT_NOT_VERIFIED, EXIT_PASSED
from tests.attestation_helpers import IMAGE, MADE, passing_report, write_json, write_key_pair
from tests.fake_engine import FAKE_IMAGE_ID, FakeEngine

OTHER = "example/torch:other"
OTHER_ID = "sha256:" + "0f" * 32


@pytest.fixture(autouse=True)
def engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(distval.cli.main, "Engine", FakeEngine)
    monkeypatch.setattr(FakeEngine, "images", {OTHER: ImageInfo(OTHER_ID, (OTHER,), {})})
    monkeypatch.setattr(distval.cli.attest, "now", lambda: MADE)
    monkeypatch.delenv("DISTVAL_KEY_PASSPHRASE", raising=False)


def _attested(tmp_path: Path) -> tuple[Path, str, str]:
    """(attestation, private key, public key) of a passing report on IMAGE."""
    private, public = write_key_pair(tmp_path)
    report = write_json(tmp_path / "report.json", passing_report(default_checks=True))
    output = tmp_path / "attestation.json"
    assert main(["attest", report, "--image", IMAGE, "--key", private, "-o", str(output)]) == EXIT_PASSED
    return output, private, public


def _statement(envelope: Path) -> dict[str, Any]:
    return dict(json.loads(base64.b64decode(json.loads(envelope.read_text(encoding="utf-8"))["payload"])))


def _resigned(envelope: Path, private: str, payload_type: str = dsse.PAYLOAD_TYPE, **changes: Any) -> None:
    """The envelope's statement with ``changes``, signed again (validly) with the same key under ``payload_type``."""
    statement = {**_statement(envelope), **changes}
    subjects = [Subject(s["name"], s["digest"]["sha256"]) for s in statement["subject"]]
    payload = statement_bytes(subjects, statement["predicate"])
    key = keys.private_key_from_pem(Path(private).read_bytes(), private, None)
    envelope.write_text(dsse.envelope_json(dsse.signed(payload_type, payload, key)), encoding="utf-8")


def _verify(capsys: pytest.CaptureFixture[str], envelope: Path, public: str, image: str = IMAGE) -> tuple[int, str]:
    code = main(["verify", str(envelope), "--image", image, "--key", public])
    out, err = capsys.readouterr()
    return code, err or out


def test_an_envelope_signed_under_another_payload_type_is_not_verified(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    envelope, private, public = _attested(tmp_path)
    _resigned(envelope, private)  # the control: signed again under distval's type, it verifies
    assert _verify(capsys, envelope, public)[0] == EXIT_PASSED
    _resigned(envelope, private, payload_type="application/json")
    code, said = _verify(capsys, envelope, public)
    assert code == EXIT_NOT_VERIFIED and "payloadType is 'application/json', not application/vnd.in-toto+json" in said


def test_a_subject_named_as_the_image_but_of_another_digest_is_not_verified(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    envelope, private, public = _attested(tmp_path)
    _resigned(envelope, private, subject=[{"name": IMAGE, "digest": {"sha256": OTHER_ID.removeprefix("sha256:")}}])
    code, said = _verify(capsys, envelope, public)
    assert code == EXIT_NOT_VERIFIED and f"the attestation is of {OTHER_ID[:19]}, not of {IMAGE}" in said


def test_the_images_digest_under_another_name_is_verified(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Decided: the digest is the image (the bytes that were validated); the subject's name is what attest was
    told, a tag that can move. The same content under another name or tag is the image attested."""
    envelope, private, public = _attested(tmp_path)
    digest = FAKE_IMAGE_ID.removeprefix("sha256:")
    _resigned(envelope, private, subject=[{"name": "registry.example/renamed:v9", "digest": {"sha256": digest}}])
    assert _verify(capsys, envelope, public)[0] == EXIT_PASSED


@pytest.mark.parametrize(
    ("ahead", "expected"),
    [
        (CLOCK_SKEW, EXIT_PASSED),  # just inside: the declared tolerance itself
        (CLOCK_SKEW - timedelta(seconds=1), EXIT_PASSED),
        (CLOCK_SKEW + timedelta(seconds=1), EXIT_NOT_VERIFIED),  # just outside
    ],
)
def test_the_future_date_tolerance_ends_exactly_at_the_declared_clock_skew(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], ahead: timedelta, expected: int
) -> None:
    envelope, _, public = _attested(tmp_path)  # made at MADE
    monkeypatch.setattr(distval.cli.attest, "now", lambda: MADE - ahead)  # verify's clock behind the signer's
    code, said = _verify(capsys, envelope, public)
    assert code == expected, said
    if expected != EXIT_PASSED:
        assert "in the future" in said


def test_a_policy_file_of_up_to_one_mib_is_read_and_a_larger_one_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    envelope, _, public = _attested(tmp_path)
    policy = tmp_path / "policy.yaml"
    text = b"max_age_days: 7\n#"
    for size, expected in ((2**20, EXIT_PASSED), (2**20 + 1, EXIT_BAD_INPUT)):
        policy.write_bytes(text + b"x" * (size - len(text)))
        code = main(["verify", str(envelope), "--image", IMAGE, "--key", public, "--policy", str(policy)])
        out, err = capsys.readouterr()
        assert code == expected, err or out
    assert f"cannot read the policy {policy}" in err and len(err.strip().splitlines()) == 1
