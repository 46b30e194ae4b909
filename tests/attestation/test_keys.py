"""distval/attestation/keys.py: ECDSA P-256 key pairs in PEM as cosign reads them, an encrypted private key, and one
line naming the file and what was expected for every other kind of key."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from distval.attestation import keys
from distval.errors import EXIT_BAD_INPUT


def test_a_generated_pair_signs_and_verifies_in_cosigns_formats() -> None:
    private_pem, public_pem = keys.generate_key_pair(None)
    assert private_pem.startswith("-----BEGIN PRIVATE KEY-----")  # PKCS#8
    assert public_pem.startswith("-----BEGIN PUBLIC KEY-----")  # PKIX, cosign.pub's format
    private = keys.private_key_from_pem(private_pem.encode(), "k.key", None)
    public = keys.public_key_from_pem(public_pem.encode(), "k.pub")
    assert isinstance(public.curve, ec.SECP256R1)
    signature = keys.sign(private, b"data")
    assert keys.signature_holds(public, signature, b"data")
    assert not keys.signature_holds(public, signature, b"date")
    assert not keys.signature_holds(public, b"not DER", b"data")


def test_an_encrypted_key_needs_its_passphrase() -> None:
    private_pem, _ = keys.generate_key_pair(b"s3cret")
    assert private_pem.startswith("-----BEGIN ENCRYPTED PRIVATE KEY-----")
    assert keys.private_key_from_pem(private_pem.encode(), "k.key", b"s3cret")
    with pytest.raises(keys.BadKey, match=r"k.key: the key is encrypted: set \$DISTVAL_KEY_PASSPHRASE"):
        keys.private_key_from_pem(private_pem.encode(), "k.key", None)
    # Every wrong passphrase, also those whose decryption happens to end in valid padding (about 1 in 256: the
    # library then says "Could not deserialize key data"), is told as a wrong passphrase.
    for attempt in range(600):
        with pytest.raises(keys.BadKey, match=r"the passphrase in \$DISTVAL_KEY_PASSPHRASE does not decrypt the key"):
            keys.private_key_from_pem(private_pem.encode(), "k.key", b"wrong%d" % attempt)
    plain, _ = keys.generate_key_pair(None)
    with pytest.raises(keys.BadKey, match="the key is not encrypted"):
        keys.private_key_from_pem(plain.encode(), "k.key", b"s3cret")


def _pem(key: object) -> bytes:
    if isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey):
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    assert isinstance(key, rsa.RSAPublicKey | ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey)
    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


@pytest.mark.parametrize(
    ("key", "said"),
    [
        (rsa.generate_private_key(65537, 2048), "got an RSA"),
        (ec.generate_private_key(ec.SECP384R1()), "got an EC key on the curve secp384r1"),
        (ed25519.Ed25519PrivateKey.generate(), "got an Ed25519"),
    ],
    ids=["rsa", "p384", "ed25519"],
)
def test_only_p256_keys_are_taken(
    key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey, said: str
) -> None:
    with pytest.raises(keys.BadKey, match=said) as private:
        keys.private_key_from_pem(_pem(key), "k.key", None)
    with pytest.raises(keys.BadKey, match=said) as public:
        keys.public_key_from_pem(_pem(key.public_key()), "k.pub")
    assert private.value.exit_code == public.value.exit_code == EXIT_BAD_INPUT


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (b"", "it is not one"),
        (b"\x00\xff garbage", "it is not one"),
        (b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n", "got a public key"),
        (b"-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n", "cosign's own"),
    ],
)
def test_what_is_not_a_private_key_is_one_line(data: bytes, said: str) -> None:
    with pytest.raises(keys.BadKey, match=said) as caught:
        keys.private_key_from_pem(data, "k.key", None)
    assert str(caught.value).startswith("k.key: ") and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("data", "said"),
    [(b"", "it is not one"), (b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "got a private key")],
)
def test_what_is_not_a_public_key_is_one_line(data: bytes, said: str) -> None:
    with pytest.raises(keys.BadKey, match=said) as caught:
        keys.public_key_from_pem(data, "k.pub")
    assert str(caught.value).startswith("k.pub: expected a PEM public key") and "\n" not in str(caught.value)
