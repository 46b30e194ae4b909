"""distval/attestation/dsse.py: the pre-authentication encoding against the DSSE spec's own test vector (its
ECDSA P-256 signature verifies over distval's PAE), and envelopes checked both ways against securesystemslib's
DSSE implementation (the reference Python one, which python-tuf and in-toto use)."""

from __future__ import annotations

import base64
import json

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from securesystemslib.dsse import Envelope as ReferenceEnvelope
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer import CryptoSigner, SSlibKey  # type: ignore[attr-defined]

from distval.attestation import dsse, keys
from distval.errors import EXIT_BAD_INPUT, EXIT_NOT_VERIFIED, NotVerified
from tests.attestation_helpers import key_pair

# github.com/secure-systems-lab/dsse protocol.md, "Test Vectors" (the example is given there; the bytes are ours).
SPEC_TYPE = "http://example.com/HelloWorld"
SPEC_BODY = b"hello world"
SPEC_PAE = b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
SPEC_X = 46950820868899156662930047687818585632848591499744589407958293238635476079160
SPEC_Y = 5640078356564379163099075877009565129882514886557779369047442380624545832820
SPEC_D = 97358161215184420915383655311931858321456579547487070936769975997791359926199
SPEC_ENVELOPE = (
    '{"payload": "aGVsbG8gd29ybGQ=",\n "payloadType": "http://example.com/HelloWorld",\n "signatures": [{"sig": '
    '"A3JqsQGtVsJ2O2xqrI5IcnXip5GToJ3F+FnZ+O88SjtR6rDAajabZKciJTfUiHqJPcIAriEGAHTVeCUjW2JIZA=="}]}'
)


def test_pae_is_the_specs_test_vector() -> None:
    assert dsse.pae(SPEC_TYPE, SPEC_BODY) == SPEC_PAE


def test_pae_counts_bytes_not_characters() -> None:
    # "é" is 2 bytes in UTF-8: lengths are byte counts of the UTF-8 type and of the body.
    assert dsse.pae("t/é", "ü".encode()) == b"DSSEv1 4 t/\xc3\xa9 2 \xc3\xbc"
    assert dsse.pae("", b"") == b"DSSEv1 0  0 "


def test_the_specs_signature_verifies_over_our_pae() -> None:
    """The spec's envelope, read by parse_envelope; its signature (raw r||s, as the spec's reference code writes
    it) verifies with the spec's key over dsse.pae's bytes: our PAE is the one the spec signed."""
    envelope = dsse.parse_envelope(SPEC_ENVELOPE.encode(), "spec.json")
    assert (envelope.payload_type, envelope.payload) == (SPEC_TYPE, SPEC_BODY)
    assert [s.keyid for s in envelope.signatures] == [""]  # no keyid in the spec's envelope
    public = ec.EllipticCurvePublicNumbers(SPEC_X, SPEC_Y, ec.SECP256R1()).public_key()
    assert ec.derive_private_key(SPEC_D, ec.SECP256R1()).public_key().public_numbers() == public.public_numbers()
    raw = envelope.signatures[0].sig
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    assert keys.signature_holds(public, der, dsse.pae(envelope.payload_type, envelope.payload))
    assert not keys.signature_holds(public, der, dsse.pae(envelope.payload_type, b"hello world!"))


def test_an_envelope_round_trips_and_verifies() -> None:
    private, public = key_pair()
    envelope = dsse.signed(dsse.PAYLOAD_TYPE, b'{"a": 1}', private)
    text = dsse.envelope_json(envelope)
    data = json.loads(text)
    assert set(data) == {"payloadType", "payload", "signatures"}
    assert data["payloadType"] == "application/vnd.in-toto+json"
    assert base64.b64decode(data["payload"], validate=True) == b'{"a": 1}'
    assert data["signatures"][0]["keyid"] == ""
    assert dsse.verify_payload(dsse.parse_envelope(text.encode(), "a.json"), public, "k.pub") == b'{"a": 1}'


def _reference_key(public: ec.EllipticCurvePublicKey, keyid: str) -> SSlibKey:
    found = SSlibKey.from_crypto(public)
    return SSlibKey(keyid, found.keytype, found.scheme, found.keyval)


def test_securesystemslib_verifies_our_envelope() -> None:
    private, public = key_pair()
    text = dsse.envelope_json(dsse.signed(dsse.PAYLOAD_TYPE, b"payload bytes", private))
    reference = ReferenceEnvelope.from_dict(json.loads(text))
    assert reference.pae() == dsse.pae(dsse.PAYLOAD_TYPE, b"payload bytes")
    accepted = reference.verify([_reference_key(public, "")], 1)  # our keyid is empty: the key's must be too
    assert list(accepted) == [""]
    with pytest.raises(VerificationError):
        reference.verify([_reference_key(key_pair()[1], "")], 1)


def test_we_verify_securesystemslibs_envelope() -> None:
    private, public = key_pair()
    signer = CryptoSigner(private)
    reference = ReferenceEnvelope(b"signed by the reference", dsse.PAYLOAD_TYPE, {})
    reference.sign(signer)
    envelope = dsse.parse_envelope(json.dumps(reference.to_dict()).encode(), "ssl.json")
    assert envelope.signatures[0].keyid == signer.public_key.keyid  # theirs is set; ours ignores it
    assert dsse.verify_payload(envelope, public, "k.pub") == b"signed by the reference"
    with pytest.raises(NotVerified):
        dsse.verify_payload(envelope, key_pair()[1], "other.pub")


def test_url_safe_and_unpadded_base64_are_read() -> None:
    private, public = key_pair()
    envelope = dsse.signed("t", b"\xfb\xff payload?>", private)
    data = json.loads(dsse.envelope_json(envelope))
    data["payload"] = base64.urlsafe_b64encode(envelope.payload).decode().rstrip("=")
    data["signatures"][0]["sig"] = base64.urlsafe_b64encode(envelope.signatures[0].sig).decode().rstrip("=")
    parsed = dsse.parse_envelope(json.dumps(data).encode(), "u.json")
    assert dsse.verify_payload(parsed, public, "k.pub") == envelope.payload


def test_a_changed_payload_or_type_does_not_verify() -> None:
    private, public = key_pair()
    envelope = dsse.signed(dsse.PAYLOAD_TYPE, b'{"verdict": "failed"}', private)
    forged = dsse.Envelope(envelope.payload_type, b'{"verdict": "passed"}', envelope.signatures)
    retyped = dsse.Envelope("application/json", envelope.payload, envelope.signatures)
    for bad in (forged, retyped):
        with pytest.raises(NotVerified, match="changed after signing") as caught:
            dsse.verify_payload(bad, public, "k.pub")
        assert caught.value.exit_code == EXIT_NOT_VERIFIED


def test_an_unsigned_envelope_is_not_verified() -> None:
    text = json.dumps({"payloadType": dsse.PAYLOAD_TYPE, "payload": "e30=", "signatures": []}).encode()
    with pytest.raises(NotVerified, match="unsigned"):
        dsse.verify_payload(dsse.parse_envelope(text, "u.json"), key_pair()[1], "k.pub")
    no_field = json.dumps({"payloadType": dsse.PAYLOAD_TYPE, "payload": "e30="}).encode()
    assert dsse.parse_envelope(no_field, "u.json").signatures == ()


def test_one_good_signature_among_others_verifies() -> None:
    private, public = key_pair()
    good = dsse.signed("t", b"x", private).signatures[0]
    other = dsse.signed("t", b"x", key_pair()[0]).signatures[0]
    assert dsse.verify_payload(dsse.Envelope("t", b"x", (other, good)), public, "k.pub") == b"x"
    with pytest.raises(NotVerified, match=r"none of the envelope signatures \(2\) verifies"):
        dsse.verify_payload(dsse.Envelope("t", b"x", (other, other)), public, "k.pub")


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        (b"\xff\xfe", "it is not JSON"),
        (b"[1, 2]", "not an object"),
        (b"{}", "payloadType and payload missing"),
        (b'{"payloadType": "t", "payload": 3}', "payload missing or not a string"),
        (b'{"payloadType": "t", "payload": "%%%"}', "its payload is not base64"),
        (b'{"payloadType": "t", "payload": "", "signatures": {}}', "signatures is not a list"),
        (b'{"payloadType": "t", "payload": "", "signatures": [{"keyid": ""}]}', "signature 1 has no sig string"),
        (b'{"payloadType": "t", "payload": "", "signatures": [{"sig": "*"}]}', "signature 1's sig is not base64"),
        (b"[" * 100000, "it is not JSON"),
    ],
)
def test_what_is_not_an_envelope_is_bad_input(raw: bytes, said: str) -> None:
    with pytest.raises(dsse.BadEnvelope) as caught:
        dsse.parse_envelope(raw, "att.json")
    message = str(caught.value)
    assert message.startswith("att.json: expected a DSSE envelope") and said in message and "\n" not in message
    assert caught.value.exit_code == EXIT_BAD_INPUT
