"""The in-toto Statement (v1, github.com/in-toto/attestation spec/v1/statement.md) that ``distval attest`` signs:
its subjects are the image's digests as the Engine reports them, its predicate what the report says
(predicate.py), under distval's own predicate type."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from distval import strict_json
from distval.engine_protocol import ImageInfo
from distval.errors import NotVerified

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
# distval's predicate: an identifier (in-toto asks for a URI), versioned; docs/attestation.md describes its fields.
PREDICATE_TYPE = "https://distval.dev/attestation/run/v1"
# A value of the payload quoted in a line, at most this long.
SHOWN_MAX = 100
_SHA256 = re.compile(r"sha256:([0-9a-f]{64})")


@dataclass(frozen=True)
class Statement:
    subjects: tuple[tuple[str, str], ...]  # (name, sha256 hex)
    predicate: Mapping[str, Any]


def image_digests(reference: str, image: ImageInfo) -> list[tuple[str, str]]:
    """(name, sha256 hex) of the image: its id (the digest of its configuration, which the Engine names it by)
    under the reference given, then each repo digest (the manifest's digest in a registry) under its repository."""
    found: list[tuple[str, str]] = []
    match = _SHA256.fullmatch(image.id)
    if match is not None:
        found.append((reference, match.group(1)))
    for repo_digest in image.repo_digests:
        name, _, digest = repo_digest.rpartition("@")
        match = _SHA256.fullmatch(digest)
        if name and match is not None and (name, match.group(1)) not in found:
            found.append((name, match.group(1)))
    return found


def statement_bytes(subjects: list[tuple[str, str]], predicate: Mapping[str, Any]) -> bytes:
    """The statement as the envelope's payload: JSON, keys sorted, ASCII (every other character as a \\u escape: a
    lone surrogate of the image's in a message, which UTF-8 cannot encode, is kept as the report has it)."""
    data = {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": name, "digest": {"sha256": digest}} for name, digest in subjects],
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }
    return json.dumps(data, sort_keys=True, ensure_ascii=True).encode("ascii")


def _shown(value: object) -> str:
    """A value of the payload in a line: its repr, at most SHOWN_MAX characters."""
    text = repr(value)
    return text if len(text) <= SHOWN_MAX else text[:SHOWN_MAX] + "..."


def parse_statement(payload: bytes) -> Statement:
    """The statement of a verified payload; NotVerified when it is signed but not a distval statement (another
    predicate type, another statement version, subjects without a sha256 digest)."""
    try:
        data = strict_json.loads(payload.decode("utf-8"))
    except strict_json.DuplicateKey as exc:
        raise NotVerified(f"not verified: the signed payload is not a statement distval reads one way: {exc}") from None
    except (ValueError, RecursionError):
        raise NotVerified("not verified: the signed payload is not JSON (not an in-toto statement)") from None
    if not isinstance(data, dict) or data.get("_type") != STATEMENT_TYPE:
        found = data.get("_type") if isinstance(data, dict) else None
        raise NotVerified(f"not verified: the signed payload is not an in-toto Statement v1 (_type {_shown(found)})")
    if data.get("predicateType") != PREDICATE_TYPE:
        raise NotVerified(
            f"not verified: the statement's predicateType is {_shown(data.get('predicateType'))}, not distval's {PREDICATE_TYPE}"
        )
    subjects = []
    listed = data.get("subject")
    for subject in listed if isinstance(listed, list) else []:
        digest = subject.get("digest") if isinstance(subject, dict) else None
        sha = digest.get("sha256") if isinstance(digest, dict) else None
        if isinstance(sha, str) and re.fullmatch(r"[0-9a-f]{64}", sha):
            subjects.append((str(subject.get("name", "")), sha))
    if not subjects:
        raise NotVerified("not verified: the statement names no subject with a sha256 digest")
    predicate = data.get("predicate")
    if not isinstance(predicate, dict):
        raise NotVerified("not verified: the statement has no predicate object")
    return Statement(tuple(subjects), predicate)


def subject_mismatch(statement: Statement, reference: str, image: ImageInfo) -> str | None:
    """Why the statement is not about the image (none of its subjects' digests is one of the image's); None when
    it is."""
    mine = {digest for _, digest in image_digests(reference, image)}
    if any(digest in mine for _, digest in statement.subjects):
        return None
    theirs = ", ".join(f"sha256:{digest[:12]}" for _, digest in statement.subjects[:3])
    return f"not verified: the attestation is of {theirs}, not of {reference} ({image.id[:19]})"
