"""The in-toto Statement (v1, github.com/in-toto/attestation spec/v1/statement.md) that ``distval attest`` signs:
its subjects are the image's digests (published.py: the platform's manifest in the registry and its configuration;
without a registry, the image id the Engine reports), its predicate what the report says (predicate.py), under
distval's own predicate type. A subject is an in-toto ResourceDescriptor: name, digest, and where known its
mediaType and annotations (the index a platform's manifest was found in is an annotation, never a subject: an index
names every platform's image)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from distval import strict_json
from distval.engine_protocol import ImageInfo
from distval.errors import NotVerified
from distval.escape import terminal_line
from distval.text_caps import capped

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
# distval's predicate: an identifier (in-toto asks for a URI), versioned; docs/attestation.md describes its fields.
PREDICATE_TYPE = "https://distval.dev/attestation/run/v1"
# A value of the payload quoted in a line, at most this long.
SHOWN_MAX = 100
# The annotations of a platform's manifest subject: its platform, and the index it was found in (never a subject).
PLATFORM_ANNOTATION = "platform"
INDEX_ANNOTATION = "index_digest"
_SHA256 = re.compile(r"sha256:([0-9a-f]{64})")


@dataclass(frozen=True)
class Subject:
    """One subject: ``sha256`` is the hex digest; ``media_type`` and ``annotations`` where attest knows them."""

    name: str
    sha256: str
    media_type: str | None = None
    annotations: Mapping[str, str] = field(default_factory=dict)

    def descriptor(self) -> dict[str, Any]:
        """The subject as the statement's JSON has it (in-toto's ResourceDescriptor)."""
        data: dict[str, Any] = {"name": self.name, "digest": {"sha256": self.sha256}}
        if self.media_type is not None:
            data["mediaType"] = self.media_type
        if self.annotations:
            data["annotations"] = dict(self.annotations)
        return data


@dataclass(frozen=True)
class Statement:
    subjects: tuple[Subject, ...]
    predicate: Mapping[str, Any]


def image_id_subjects(reference: str, image: ImageInfo) -> list[Subject]:
    """The subject of an image known only to the Engine: its id (the digest of its configuration, which the Engine
    names it by) under the reference given. Its repo digests are not subjects: the Engine records a multi-platform
    index's digest there when it pulled by tag, and an index names every platform's image."""
    match = _SHA256.fullmatch(image.id)
    return [Subject(reference, match.group(1))] if match is not None else []


def statement_bytes(subjects: list[Subject], predicate: Mapping[str, Any]) -> bytes:
    """The statement as the envelope's payload: JSON, keys sorted, ASCII (every other character as a \\u escape: a
    lone surrogate of the image's in a message, which UTF-8 cannot encode, is kept as the report has it)."""
    data = {
        "_type": STATEMENT_TYPE,
        "subject": [subject.descriptor() for subject in subjects],
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
            assert isinstance(subject, dict)
            media_type = subject.get("mediaType")
            found = subject.get("annotations")
            annotations = {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}
            subjects.append(
                Subject(str(subject.get("name", "")), sha, media_type if isinstance(media_type, str) else None, annotations)
            )
    if not subjects:
        raise NotVerified("not verified: the statement names no subject with a sha256 digest")
    predicate = data.get("predicate")
    if not isinstance(predicate, dict):
        raise NotVerified("not verified: the statement has no predicate object")
    return Statement(tuple(subjects), predicate)


def subject_mismatch(statement: Statement, digest: str, described: str) -> str | None:
    """Why the statement is not about the image whose digest is ``digest`` (sha256:<hex>; ``described``: how to name
    it in the line): no subject has that digest. None when one has. The digest alone is matched: a subject's name is
    what attest was told (a tag can move)."""
    if any(f"sha256:{subject.sha256}" == digest for subject in statement.subjects):
        return None
    theirs = ", ".join(_subject_text(subject) for subject in statement.subjects[:3])
    return f"not verified: the attestation is of {theirs}, not of {described}"


def _subject_text(subject: Subject) -> str:
    platform = subject.annotations.get(PLATFORM_ANNOTATION)
    return f"sha256:{subject.sha256[:12]}" + (f" ({capped(terminal_line(platform), 40)})" if platform else "")
