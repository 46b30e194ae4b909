"""distval/attestation/statement.py: the in-toto Statement v1 around the predicate, its subjects (the image's id and
repo digests), and what verify refuses in a signed payload."""

from __future__ import annotations

import json

import pytest

from distval.attestation.statement import (
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    image_digests,
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


def test_the_subjects_are_the_image_id_then_its_repo_digests() -> None:
    assert image_digests("ghcr.io/org/torch:2.6", PULLED) == [
        ("ghcr.io/org/torch:2.6", "1" * 64),
        ("ghcr.io/org/torch", "2" * 64),
        ("mirror.example/torch", "3" * 64),
    ]
    built = ImageInfo(id=ID, tags=(), labels={})
    assert image_digests("local:dev", built) == [("local:dev", "1" * 64)]
    odd = ImageInfo(id="not-a-digest", tags=(), labels={}, repo_digests=("no-at-sign", "x@md5:00"))
    assert image_digests("x", odd) == []


def test_the_statement_is_in_toto_v1_with_distvals_predicate_type() -> None:
    payload = statement_bytes(image_digests("ghcr.io/org/torch:2.6", PULLED), {"attested_at": "2026-12-04T12:00:00Z"})
    data = json.loads(payload)
    assert data["_type"] == STATEMENT_TYPE == "https://in-toto.io/Statement/v1"
    assert data["predicateType"] == PREDICATE_TYPE
    assert data["subject"][0] == {"name": "ghcr.io/org/torch:2.6", "digest": {"sha256": "1" * 64}}
    parsed = parse_statement(payload)
    assert parsed.subjects[1] == ("ghcr.io/org/torch", "2" * 64)
    assert parsed.predicate == {"attested_at": "2026-12-04T12:00:00Z"}


def test_a_statement_is_of_the_image_when_one_digest_is_the_images() -> None:
    statement = parse_statement(statement_bytes([("ghcr.io/org/torch", "2" * 64)], {}))
    # Pulled elsewhere: the Engine here knows it by another id, but by the same repo digest.
    here = ImageInfo(id="sha256:" + "9" * 64, tags=(), labels={}, repo_digests=("ghcr.io/org/torch@sha256:" + "2" * 64,))
    assert subject_mismatch(statement, "ghcr.io/org/torch:2.6", here) is None
    other = ImageInfo(id="sha256:" + "4" * 64, tags=(), labels={})
    refusal = subject_mismatch(statement, "other:1", other)
    assert refusal == f"not verified: the attestation is of sha256:{'2' * 12}, not of other:1 (sha256:{'4' * 12})"


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
