"""``distval attest --registry/--push`` and ``distval verify`` by digest and ``--registry``, through ``main`` against
tests/fake_registry.py (the real registry: tests/cli/test_attest_registry_docker.py). One test per rule: the subject
is the platform's manifest (an index's digest an annotation, never a match), the tag is ignored and the digest
matched, the attestation stored beside the image as cosign stores one; no Engine is asked for any of it."""

from __future__ import annotations

import base64
import copy
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import distval.cli.attest
import distval.cli.main
from distval.attestation import dsse, keys
from distval.attestation.published import DSSE_LAYER, attestation_tag
from distval.attestation.statement import PREDICATE_TYPE, Subject, statement_bytes
from distval.cli.main import main
from distval.engine_protocol import ImageInfo
from distval.errors import EXIT_BAD_INPUT, EXIT_CHECKS_FAILED, EXIT_ENVIRONMENT, EXIT_NOT_VERIFIED, EXIT_PASSED
from distval.registry.manifests import OCI_MANIFEST
from tests.attestation_helpers import MADE, changed, passing_report, write_json, write_key_pair
from tests.fake_engine import FakeEngine
from tests.fake_registry import FakeRegistry
from tests.registry_helpers import Pushed, one_file_layer, push_image, push_index

HOST = "127.0.0.1:5000"
REPOSITORY = "org/torch"
NAME = f"{HOST}/{REPOSITORY}"


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> FakeRegistry:
    """The fake registry for every host; an Engine that must never be asked; the clock at MADE."""
    fake = FakeRegistry()
    hosts: list[str] = []

    def registry_for(host: str) -> FakeRegistry:
        hosts.append(host)
        return fake

    def no_engine(run_id: str) -> Any:
        raise AssertionError("the Engine was asked")

    monkeypatch.setattr(distval.cli.main, "Registry", registry_for)
    monkeypatch.setattr(distval.cli.main, "Engine", no_engine)
    monkeypatch.setattr(distval.cli.attest, "now", lambda: MADE)
    monkeypatch.delenv("DISTVAL_KEY_PASSPHRASE", raising=False)
    return fake


def _report_of(tmp_path: Path, image_id: str, report: dict[str, Any] | None = None, name: str = "report.json") -> str:
    data = copy.deepcopy(report or passing_report(default_checks=True))
    for scenario in data["scenarios"]:
        scenario["image_id"] = image_id
    return write_json(tmp_path / name, data)


def _multi_platform(registry: FakeRegistry) -> tuple[Pushed, Pushed, str]:
    """amd64 and arm64 images of the same root filesystem, and an index over both tagged 2.6."""
    amd64 = push_image(registry, REPOSITORY, "2.6-amd64", "amd64", one_file_layer())
    arm64 = push_image(registry, REPOSITORY, "2.6-arm64", "arm64", one_file_layer())
    index = push_index(
        registry, REPOSITORY, "2.6", [(amd64.manifest_digest, "linux/amd64"), (arm64.manifest_digest, "linux/arm64")]
    )
    return amd64, arm64, index


def _statement(path: str) -> dict[str, Any]:
    return dict(json.loads(base64.b64decode(json.loads(Path(path).read_text())["payload"])))


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, err or out


def test_the_subject_is_the_platforms_manifest_and_the_index_only_an_annotation(
    tmp_path: Path, registry: FakeRegistry, capsys: pytest.CaptureFixture[str]
) -> None:
    amd64, _, index = _multi_platform(registry)
    private, _ = write_key_pair(tmp_path)
    output = str(tmp_path / "att.json")
    code, said = _run(
        capsys,
        "attest",
        _report_of(tmp_path, amd64.config_digest),
        "--image",
        f"{NAME}:2.6",
        "--key",
        private,
        "-o",
        output,
        "--registry",
    )
    assert code == EXIT_PASSED, said
    assert f"{NAME}@{amd64.manifest_digest} (linux/amd64, in index {index[:19]})" in said
    statement = _statement(output)
    assert statement["subject"] == [
        {
            "name": NAME,
            "digest": {"sha256": amd64.manifest_digest.removeprefix("sha256:")},
            "mediaType": OCI_MANIFEST,
            "annotations": {"platform": "linux/amd64", "index_digest": index},
        },
        {
            "name": NAME,
            "digest": {"sha256": amd64.config_digest.removeprefix("sha256:")},
            "mediaType": "application/vnd.oci.image.config.v1+json",
        },
    ]
    assert statement["predicate"]["published"] == {
        "repository": NAME,
        "manifest_digest": amd64.manifest_digest,
        "media_type": OCI_MANIFEST,
        "platform": "linux/amd64",
        "index_digest": index,
    }


def test_the_index_digest_and_another_platforms_manifest_never_match(
    tmp_path: Path, registry: FakeRegistry, capsys: pytest.CaptureFixture[str]
) -> None:
    amd64, arm64, index = _multi_platform(registry)
    private, public = write_key_pair(tmp_path)
    output = str(tmp_path / "att.json")
    report = _report_of(tmp_path, amd64.config_digest)
    assert main(["attest", report, "--image", f"{NAME}:2.6", "--key", private, "-o", output, "--registry"]) == EXIT_PASSED
    # A digest given: no Engine, no registry.
    assert _run(capsys, "verify", output, "--image", f"{NAME}@{amd64.manifest_digest}", "--key", public)[0] == EXIT_PASSED
    for digest in (arm64.manifest_digest, index):
        code, said = _run(capsys, "verify", output, "--image", f"{NAME}@{digest}", "--key", public)
        assert code == EXIT_NOT_VERIFIED and "not verified: the attestation is of sha256:" in said and "(linux/amd64)" in said
    # Asked of the registry: the index (by its tag or digest) is refused as an index, the arm64 manifest as another.
    for image in (f"{NAME}:2.6", f"{NAME}@{index}"):
        code, said = _run(capsys, "verify", output, "--image", image, "--key", public, "--registry")
        assert code == EXIT_NOT_VERIFIED and "is a multi-platform index, not one platform's image" in said, said
        assert f"linux/amd64 {amd64.manifest_digest[:19]}" in said and f"linux/arm64 {arm64.manifest_digest[:19]}" in said
    code, said = _run(capsys, "verify", output, "--image", f"{NAME}:2.6-arm64", "--key", public, "--registry")
    assert code == EXIT_NOT_VERIFIED and f"not of {NAME}@{arm64.manifest_digest}" in said
    code, said = _run(capsys, "verify", output, "--image", f"{NAME}:2.6-amd64", "--key", public, "--registry")
    assert code == EXIT_PASSED and said.startswith(f"verified: {NAME}@{amd64.manifest_digest}: ")


def test_an_index_digest_is_refused_even_where_a_statement_names_it_as_a_subject(
    tmp_path: Path, registry: FakeRegistry, capsys: pytest.CaptureFixture[str]
) -> None:
    """A statement made otherwise (by hand, or by an attest that took the Engine's repo digest) with the index's
    digest as its subject, validly signed: the registry says it is an index, and an index is never a match."""
    amd64, _, index = _multi_platform(registry)
    private, public = write_key_pair(tmp_path)
    output = str(tmp_path / "att.json")
    assert (
        main(
            [
                "attest",
                _report_of(tmp_path, amd64.config_digest),
                "--image",
                f"{NAME}:2.6",
                "--key",
                private,
                "-o",
                output,
                "--registry",
            ]
        )
        == 0
    )
    statement = _statement(output)
    key = keys.private_key_from_pem(Path(private).read_bytes(), private, None)
    payload = statement_bytes([Subject(NAME, index.removeprefix("sha256:"))], statement["predicate"])
    Path(output).write_text(dsse.envelope_json(dsse.signed(dsse.PAYLOAD_TYPE, payload, key)))
    code, said = _run(capsys, "verify", output, "--image", f"{NAME}@{index}", "--key", public, "--registry")
    assert code == EXIT_NOT_VERIFIED and "multi-platform index" in said


def test_the_tag_is_ignored_and_the_digest_matched(
    tmp_path: Path, registry: FakeRegistry, capsys: pytest.CaptureFixture[str]
) -> None:
    first = push_image(registry, REPOSITORY, "candidate", "amd64", one_file_layer("first\n"))
    private, public = write_key_pair(tmp_path)
    output = str(tmp_path / "att.json")
    report = _report_of(tmp_path, first.config_digest)
    assert main(["attest", report, "--image", f"{NAME}:candidate", "--key", private, "-o", output, "--registry"]) == 0
    assert _run(capsys, "verify", output, "--image", f"{NAME}:candidate", "--key", public, "--registry")[0] == EXIT_PASSED
    second = push_image(registry, REPOSITORY, "candidate", "amd64", one_file_layer("pushed again\n"))
    code, said = _run(capsys, "verify", output, "--image", f"{NAME}:candidate", "--key", public, "--registry")
    assert code == EXIT_NOT_VERIFIED and f"not of {NAME}@{second.manifest_digest}" in said
    # The first image by its digest is still the one attested, under any name.
    assert (
        _run(capsys, "verify", output, "--image", f"other.example/x@{first.manifest_digest}", "--key", public)[0] == EXIT_PASSED
    )
    # attest refuses the tag that now names another image than the report's.
    code, said = _run(capsys, "attest", report, "--image", f"{NAME}:candidate", "--key", private, "-o", output, "--registry")
    assert code == EXIT_BAD_INPUT and "is not the image the report validated" in said and "pushed again since" in said


def test_push_stores_the_attestation_as_cosign_does_and_verify_reads_the_newest(
    tmp_path: Path, registry: FakeRegistry, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    image = push_image(registry, REPOSITORY, "candidate", "amd64", one_file_layer())
    private, public = write_key_pair(tmp_path)
    code, said = _run(capsys, "verify", "--image", f"{NAME}:candidate", "--key", public, "--registry")
    assert code == EXIT_NOT_VERIFIED and "no attestation is stored in the registry" in said
    report = _report_of(tmp_path, image.config_digest)
    code, said = _run(capsys, "attest", report, "--image", f"{NAME}:candidate", "--key", private, "--push")
    tag = attestation_tag(image.manifest_digest)
    assert code == EXIT_PASSED and tag == "sha256-" + image.manifest_digest.removeprefix("sha256:") + ".att"
    assert f"wrote {NAME}:{tag}:" in said
    stored = registry.manifest(REPOSITORY, tag)
    assert stored.media_type == OCI_MANIFEST and len(stored.layers) == 1
    assert stored.layers[0].media_type == DSSE_LAYER == "application/vnd.dsse.envelope.v1+json"
    assert stored.layers[0].annotations == {"predicateType": PREDICATE_TYPE}
    envelope = json.loads(registry.blobs[stored.layers[0].digest])
    assert envelope["payloadType"] == dsse.PAYLOAD_TYPE
    code, said = _run(capsys, "verify", "--image", f"{NAME}:candidate", "--key", public, "--registry")
    assert code == EXIT_PASSED, said
    # A later run that failed, attested an hour later: the newest attestation decides.
    monkeypatch.setattr(distval.cli.attest, "now", lambda: MADE + timedelta(hours=1))
    failed = _report_of(
        tmp_path, image.config_digest, changed(passing_report(default_checks=True), 0, "ddp", "failed", "bad"), "failed.json"
    )
    assert main(["attest", failed, "--image", f"{NAME}:candidate", "--key", private, "--push"]) == EXIT_PASSED
    assert len(registry.manifest(REPOSITORY, tag).layers) == 2
    code, said = _run(capsys, "verify", "--image", f"{NAME}:candidate", "--key", public, "--registry")
    assert code == EXIT_CHECKS_FAILED and "ddp failed" in said
    # Under another key none is genuine.
    _, other = write_key_pair(tmp_path, "other")
    code, said = _run(capsys, "verify", "--image", f"{NAME}:candidate", "--key", other, "--registry")
    assert code == EXIT_NOT_VERIFIED and "each of the 2 attestation(s) stored for it" in said


def test_what_the_registry_lacks_and_what_the_command_line_lacks(
    tmp_path: Path, registry: FakeRegistry, capsys: pytest.CaptureFixture[str]
) -> None:
    private, public = write_key_pair(tmp_path)
    report = _report_of(tmp_path, "sha256:" + "1" * 64)
    code, said = _run(capsys, "attest", report, "--image", f"{NAME}:missing", "--key", private, "--push")
    assert code == EXIT_ENVIRONMENT and f"has no {NAME}:missing" in said
    code, said = _run(capsys, "verify", "--image", f"{NAME}:missing", "--key", public, "--registry")
    assert code == EXIT_ENVIRONMENT and said.count("\n") == 1
    code, said = _run(capsys, "verify", "--image", f"{NAME}@sha256:{'1' * 64}", "--key", public)
    assert code == EXIT_BAD_INPUT and "verify needs the attestation file, or --registry" in said
    code, said = _run(capsys, "attest", report, "--image", f"{NAME}:x", "--key", private, "--registry")
    assert code == EXIT_BAD_INPUT and "-o/--output (or --push)" in said


def test_an_engine_that_pulled_the_image_verifies_it_by_its_id_and_not_another_platforms(
    tmp_path: Path, registry: FakeRegistry, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An Engine that pulled the index's tag names the image by its configuration's digest (the second subject) and
    records the index's digest as its repo digest on every platform: only the platform attested verifies."""
    amd64, arm64, index = _multi_platform(registry)
    private, public = write_key_pair(tmp_path)
    output = str(tmp_path / "att.json")
    report = _report_of(tmp_path, amd64.config_digest)
    assert main(["attest", report, "--image", f"{NAME}:2.6", "--key", private, "-o", output, "--registry"]) == EXIT_PASSED
    pulled = f"{NAME}:2.6"
    monkeypatch.setattr(distval.cli.main, "Engine", FakeEngine)
    for config, expected in ((amd64.config_digest, EXIT_PASSED), (arm64.config_digest, EXIT_NOT_VERIFIED)):
        monkeypatch.setattr(FakeEngine, "images", {pulled: ImageInfo(config, (pulled,), {}, (f"{NAME}@{index}",))})
        code, said = _run(capsys, "verify", output, "--image", pulled, "--key", public)
        assert code == expected, said
