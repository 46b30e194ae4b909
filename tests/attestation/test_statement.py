"""distval/attestation/statement.py: the in-toto Statement v1 around the predicate, its subjects (without a registry:
the image id alone, never a repo digest), subjects matched by digest, and what verify refuses in a signed payload."""

from __future__ import annotations

import json

import pytest

from distval.attestation.statement import (
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    Subject,
    image_id_subjects,
    parse_statement,
    statement_bytes,
    subject_mismatch,
)
from distval.engine_protocol import ImageInfo
from distval.errors import EXIT_NOT_VERIFIED, NotVerified

ID = "sha256:" + "1" * 64
PULLED = ImageInfo(
    id=ID,
    tags=("ghcr.io/org/torch:2.6",),
    labels={},
    repo_digests=("ghcr.io/org/torch@sha256:" + "2" * 64, "mirror.example/torch@sha256:" + "3" * 64),
)


def test_without_a_registry_the_subject_is_the_image_id_never_a_repo_digest() -> None:
    """The Engine records a multi-platform index's digest among the repo digests of an image pulled by tag: a repo
    digest as a subject made an attestation of the amd64 image verify for the arm64 one (pulled by the same tag)."""
    assert image_id_subjects("ghcr.io/org/torch:2.6", PULLED) == [Subject("ghcr.io/org/torch:2.6", "1" * 64)]
    odd = ImageInfo(id="not-a-digest", tags=(), labels={}, repo_digests=("x@sha256:" + "2" * 64,))
    assert image_id_subjects("x", odd) == []


def test_the_statement_is_in_toto_v1_with_distvals_predicate_type() -> None:
    manifest = Subject("ghcr.io/org/torch", "2" * 64, "application/vnd.oci.image.manifest.v1+json", {"platform": "linux/amd64"})
    payload = statement_bytes([manifest, Subject("ghcr.io/org/torch:2.6", "1" * 64)], {"attested_at": "2026-12-04T12:00:00Z"})
    data = json.loads(payload)
    assert data["_type"] == STATEMENT_TYPE == "https://in-toto.io/Statement/v1"
    assert data["predicateType"] == PREDICATE_TYPE
    assert data["subject"] == [
        {
            "name": "ghcr.io/org/torch",
            "digest": {"sha256": "2" * 64},
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "annotations": {"platform": "linux/amd64"},
        },
        {"name": "ghcr.io/org/torch:2.6", "digest": {"sha256": "1" * 64}},
    ]
    parsed = parse_statement(payload)
    assert parsed.subjects == (manifest, Subject("ghcr.io/org/torch:2.6", "1" * 64))
    assert parsed.predicate == {"attested_at": "2026-12-04T12:00:00Z"}


def test_a_statement_is_of_the_image_when_one_subjects_digest_is_the_one_given() -> None:
    annotations = {"platform": "linux/amd64", "index_digest": "sha256:" + "9" * 64}
    statement = parse_statement(statement_bytes([Subject("ghcr.io/org/torch", "2" * 64, None, annotations)], {}))
    assert subject_mismatch(statement, "sha256:" + "2" * 64, "ghcr.io/org/torch@sha256:2222") is None
    # The index the manifest was found in is recorded, and never matches.
    refusal = subject_mismatch(statement, "sha256:" + "9" * 64, "ghcr.io/org/torch:2.6")
    assert refusal == f"not verified: the attestation is of sha256:{'2' * 12} (linux/amd64), not of ghcr.io/org/torch:2.6"


def _statement(**changes: object) -> bytes:
    data: dict[str, object] = {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": "x", "digest": {"sha256": "1" * 64}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {},
    }
    data.update(changes)
    return json.dumps(data).encode()


@pytest.mark.parametrize(
    ("payload", "said"),
    [
        (b"not json", "the signed payload is not JSON"),
        (_statement(_type="https://in-toto.io/Statement/v0.1"), "not an in-toto Statement v1"),
        (_statement(predicateType="https://cosign.sigstore.dev/attestation/v1"), "not distval's"),
        (_statement(predicateType="x" * 10000), "'xxx"),
        (_statement(subject=[{"name": "x", "digest": {"sha512": "1" * 128}}]), "no subject with a sha256 digest"),
        (_statement(subject="x"), "no subject with a sha256 digest"),
        (_statement(predicate=[]), "no predicate object"),
    ],
)
def test_a_signed_payload_that_is_not_distvals_statement_is_not_verified(payload: bytes, said: str) -> None:
    with pytest.raises(NotVerified, match=said) as caught:
        parse_statement(payload)
    assert caught.value.exit_code == EXIT_NOT_VERIFIED and str(caught.value).startswith("not verified: ")
    assert len(str(caught.value)) < 250
