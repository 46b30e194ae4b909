"""The files ``distval attest`` writes are distval's own: a key pair created whole and never over a file that
appears while it is made (another user's public key planted in a shared directory is never taken for ours), and
an attestation that replaces a world-writable file is not world-writable."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

import distval.cli.attest
import distval.cli.main
from distval.attestation import keys
from distval.cli.main import main
from distval.errors import EXIT_BAD_INPUT, EXIT_PASSED
from tests.attestation_helpers import IMAGE, MADE, passing_report, write_json
from tests.fake_engine import FakeEngine

PLANTED = "-----BEGIN PUBLIC KEY-----\nnot ours\n-----END PUBLIC KEY-----\n"


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(distval.cli.main, "Engine", FakeEngine)
    monkeypatch.setattr(distval.cli.attest, "now", lambda: MADE)
    monkeypatch.delenv("DISTVAL_KEY_PASSPHRASE", raising=False)


def _umasked(mode: int) -> int:
    umask = os.umask(0o022)
    os.umask(umask)
    return mode & ~umask


def _planting(monkeypatch: pytest.MonkeyPatch, path: Path, owner: int | None) -> None:
    """Another user's file appears at ``path`` between attest's look and its write (while the key pair is made)."""
    make = keys.generate_key_pair

    def planted_meanwhile(passphrase: bytes | None) -> tuple[str, str]:
        path.write_text(PLANTED, encoding="utf-8")
        path.chmod(0o666)
        if owner is not None:
            os.chown(path, owner, owner)
        return make(passphrase)

    monkeypatch.setattr(keys, "generate_key_pair", planted_meanwhile)


@pytest.mark.parametrize("planted", ["cosign.pub", "cosign.key"])
def test_a_key_file_that_appears_meanwhile_is_never_written_over_nor_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], planted: str
) -> None:
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    _planting(monkeypatch, shared / planted, 65534 if os.geteuid() == 0 else None)
    code = main(["attest", "--generate-key", "--key", str(shared / "cosign.key")])
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{shared / planted} appeared while the key pair was made" in err
    assert sorted(p.name for p in shared.iterdir()) == [planted]  # nothing of ours left, no temporary file
    assert (shared / planted).read_text(encoding="utf-8") == PLANTED


def test_the_key_pair_is_made_with_its_own_modes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["attest", "--generate-key", "--key", str(tmp_path / "cosign.key")]) == EXIT_PASSED
    assert stat.S_IMODE((tmp_path / "cosign.key").stat().st_mode) == _umasked(0o600)
    assert stat.S_IMODE((tmp_path / "cosign.pub").stat().st_mode) == _umasked(0o644)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cosign.key", "cosign.pub"]


def test_a_dangling_link_at_the_key_path_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A link whose target does not exist yet is still something at the name: the key is not written through it."""
    (tmp_path / "cosign.key").symlink_to(tmp_path / "elsewhere.key")
    code = main(["attest", "--generate-key", "--key", str(tmp_path / "cosign.key")])
    assert code == EXIT_BAD_INPUT and not (tmp_path / "elsewhere.key").exists()
    assert "a key is never overwritten" in capsys.readouterr().err


def test_an_attestation_replacing_a_world_writable_file_is_not_world_writable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["attest", "--generate-key", "--key", str(tmp_path / "cosign.key")]) == EXIT_PASSED
    report = write_json(tmp_path / "report.json", passing_report(default_checks=True))
    output = tmp_path / "attestation.json"
    output.write_text("{}", encoding="utf-8")
    output.chmod(0o666)
    argv = ["attest", report, "--image", IMAGE, "--key", str(tmp_path / "cosign.key"), "-o", str(output)]
    assert main(argv) == EXIT_PASSED
    assert stat.S_IMODE(output.stat().st_mode) == _umasked(0o666) and output.stat().st_uid == os.geteuid()


def test_a_lone_surrogate_in_a_message_is_attested_and_verified(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The image's message "\\udc80" (a lone surrogate json reads from the report) is signed as the report has it."""
    assert main(["attest", "--generate-key", "--key", str(tmp_path / "cosign.key")]) == EXIT_PASSED
    data = passing_report(default_checks=True)
    data["scenarios"][0]["cases"][0]["message"] = "gave \udc80 and \ufffe"
    report = write_json(tmp_path / "report.json", data)
    output = str(tmp_path / "attestation.json")
    assert main(["attest", report, "--image", IMAGE, "--key", str(tmp_path / "cosign.key"), "-o", output]) == EXIT_PASSED
    assert main(["verify", output, "--image", IMAGE, "--key", str(tmp_path / "cosign.pub"), "--report", report]) == EXIT_PASSED
