"""DSSE, the Dead Simple Signing Envelope (github.com/secure-systems-lab/dsse, protocol.md and envelope.md), as
cosign and in-toto write it::

    {"payloadType": "application/vnd.in-toto+json", "payload": "<base64>", "signatures": [{"keyid": "", "sig": "<base64>"}]}

A signature is over the pre-authentication encoding (PAE) of the type and the payload, never over the payload
alone: ``"DSSEv1" SP LEN(type) SP type SP LEN(body) SP body``, lengths as ASCII decimal byte counts. ``keyid`` is
optional in the spec and empty here (cosign accepts that): the key to verify with is the one the verifier names.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric import ec

from distval import strict_json
from distval.attestation import keys
from distval.errors import BadInput, NotVerified

PAYLOAD_TYPE = "application/vnd.in-toto+json"
# An envelope is a few KiB (its statement lists each check once); a file past this is not one of distval's.
ENVELOPE_MAX_BYTES = 16 * 2**20
# At most this many signatures are tried: an envelope is not a way to make verify spend its time.
SIGNATURES_MAX = 16


class BadEnvelope(BadInput):
    """A file that is not a DSSE envelope at all (not JSON, fields missing or of the wrong type)."""

    kind = "envelope"


@dataclass(frozen=True)
class Signature:
    keyid: str
    sig: bytes


@dataclass(frozen=True)
class Envelope:
    payload_type: str
    payload: bytes
    signatures: tuple[Signature, ...]


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: what is signed."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(kind), kind, len(payload), payload)


def signed(payload_type: str, payload: bytes, key: ec.EllipticCurvePrivateKey, keyid: str = "") -> Envelope:
    """An envelope of ``payload`` with one signature of ``key``."""
    return Envelope(payload_type, payload, (Signature(keyid, keys.sign(key, pae(payload_type, payload))),))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def envelope_json(envelope: Envelope) -> str:
    """The envelope as JSON, standard base64 with padding (what cosign writes)."""
    data = {
        "payloadType": envelope.payload_type,
        "payload": _b64(envelope.payload),
        "signatures": [{"keyid": s.keyid, "sig": _b64(s.sig)} for s in envelope.signatures],
    }
    return json.dumps(data, indent=2) + "\n"


def _decoded(text: str) -> bytes:
    """Base64, standard or URL-safe, padded or not (the spec lets a writer use either)."""
    text = text.strip().replace("-", "+").replace("_", "/")
    return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)


def parse_envelope(raw: bytes, where: str) -> Envelope:
    """The envelope in the file ``where`` (its bytes ``raw``); BadEnvelope (exit code 2) when it is not one. An
    envelope with no signature is one: verify_payload says it is unsigned."""
    expected = "a DSSE envelope (JSON with payloadType, payload and signatures, as distval attest writes)"
    try:
        data = strict_json.loads(raw.decode("utf-8"))
    except strict_json.DuplicateKey as exc:
        raise BadEnvelope(f"{where}: expected {expected}; {exc}") from None
    except (ValueError, RecursionError):
        raise BadEnvelope(f"{where}: expected {expected}; it is not JSON") from None
    if not isinstance(data, dict):
        raise BadEnvelope(f"{where}: expected {expected}; got JSON that is not an object")
    missing = [key for key in ("payloadType", "payload") if not isinstance(data.get(key), str)]
    if missing:
        raise BadEnvelope(f"{where}: expected {expected}; {' and '.join(missing)} missing or not a string")
    signatures = data.get("signatures", [])
    if not isinstance(signatures, list):
        raise BadEnvelope(f"{where}: expected {expected}; signatures is not a list")
    try:
        payload = _decoded(data["payload"])
    except (binascii.Error, ValueError):
        raise BadEnvelope(f"{where}: expected {expected}; its payload is not base64") from None
    parsed = []
    for number, item in enumerate(signatures[:SIGNATURES_MAX], 1):
        if not isinstance(item, dict) or not isinstance(item.get("sig"), str) or not isinstance(item.get("keyid", ""), str):
            raise BadEnvelope(f"{where}: expected {expected}; signature {number} has no sig string")
        try:
            parsed.append(Signature(str(item.get("keyid", "")), _decoded(item["sig"])))
        except (binascii.Error, ValueError):
            raise BadEnvelope(f"{where}: expected {expected}; signature {number}'s sig is not base64") from None
    return Envelope(data["payloadType"], payload, tuple(parsed))


def verify_payload(envelope: Envelope, key: ec.EllipticCurvePublicKey, key_name: str) -> bytes:
    """The payload, once a signature of the envelope holds under ``key``; NotVerified (one line) otherwise."""
    if not envelope.signatures:
        raise NotVerified("not verified: the envelope is unsigned (it has no signature)")
    message = pae(envelope.payload_type, envelope.payload)
    if not any(keys.signature_holds(key, s.sig, message) for s in envelope.signatures):
        count = len(envelope.signatures)
        which = f"none of the envelope signatures ({count}) verifies" if count > 1 else "the envelope signature does not verify"
        raise NotVerified(f"not verified: {which} with {key_name} (another key signed it, or it was changed after signing)")
    return envelope.payload
