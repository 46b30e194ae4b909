"""The envelope and statement that ``distval attest`` writes, checked by in-toto's own Python libraries: ``in-toto``
(its DSSE Envelope reads the file and verifies the signature with the public key) and ``in-toto-attestation`` (the
in-toto Attestation Framework's bindings: the statement parses into its Statement v1 message, unknown fields
refused, and passes its validate(), every subject a valid ResourceDescriptor)."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path

import pytest
from google.protobuf import json_format  # type: ignore[import-untyped]
from in_toto.exceptions import SignatureVerificationError  # type: ignore[import-untyped]
from in_toto.models.metadata import Envelope, Metadata  # type: ignore[import-untyped]
from in_toto_attestation.v1 import statement_pb2  # type: ignore[import-untyped]
from in_toto_attestation.v1.statement import Statement as InTotoStatement  # type: ignore[import-untyped]
from securesystemslib.signer import SSlibKey  # type: ignore[attr-defined]

from distval.attestation import dsse, keys
from distval.attestation.statement import Subject, statement_bytes
from distval.registry.manifests import OCI_CONFIG, OCI_MANIFEST
from tests.attestation_helpers import passing_report, write_key_pair


def _signed(tmp_path: Path) -> tuple[dict[str, object], str]:
    """(an envelope as attest --registry writes it, the public key's path)."""
    private, public = write_key_pair(tmp_path)
    subjects = [
        Subject(
            "127.0.0.1:5000/org/torch", "2" * 64, OCI_MANIFEST, {"platform": "linux/amd64", "index_digest": "sha256:" + "9" * 64}
        ),
        Subject("127.0.0.1:5000/org/torch", "1" * 64, OCI_CONFIG),
    ]
    payload = statement_bytes(subjects, {"attested_at": "2026-12-04T12:00:00Z", "scenarios": passing_report()["scenarios"]})
    key = keys.private_key_from_pem(Path(private).read_bytes(), private, None)
    return json.loads(dsse.envelope_json(dsse.signed(dsse.PAYLOAD_TYPE, payload, key))), public


def _in_toto_key(public: str, keyid: str = "") -> dict[str, object]:
    found = SSlibKey.from_crypto(keys.public_key_from_pem(Path(public).read_bytes(), public))
    return {"keyid": keyid, "keytype": found.keytype, "scheme": found.scheme, "keyval": found.keyval}


def test_in_toto_reads_the_envelope_and_verifies_its_signature(tmp_path: Path) -> None:
    envelope, public = _signed(tmp_path)
    read = Metadata.from_dict(copy.deepcopy(envelope))  # it changes the dict it reads
    assert isinstance(read, Envelope) and read.payload_type == "application/vnd.in-toto+json"
    read.verify_signature(_in_toto_key(public))
    _, other = write_key_pair(tmp_path, "other")
    with pytest.raises(SignatureVerificationError):
        Metadata.from_dict(copy.deepcopy(envelope)).verify_signature(_in_toto_key(other))


def test_the_statement_is_a_valid_in_toto_statement_v1(tmp_path: Path) -> None:
    envelope, _ = _signed(tmp_path)
    payload = base64.b64decode(str(envelope["payload"]))
    message = json_format.Parse(payload, statement_pb2.Statement())
    statement = InTotoStatement.copy_from_pb(message)
    statement.validate()
    subject = statement.pb.subject[0]
    assert subject.digest["sha256"] == "2" * 64 and subject.media_type == OCI_MANIFEST
    assert dict(subject.annotations)["index_digest"] == "sha256:" + "9" * 64
    # The control: the same validation refuses a statement without a subject's digest.
    broken = json.loads(payload)
    broken["subject"][0]["digest"] = {}
    with pytest.raises(ValueError, match="digest"):
        InTotoStatement.copy_from_pb(json_format.Parse(json.dumps(broken), statement_pb2.Statement())).validate()
