"""The keys of ``distval attest`` and ``distval verify``: ECDSA on the P-256 curve with SHA-256, the kind cosign's
``generate-key-pair`` makes. The public key is PKIX PEM (``-----BEGIN PUBLIC KEY-----``), which cosign reads as it
is; the private key is PKCS#8 PEM, encrypted with a passphrase from $DISTVAL_KEY_PASSPHRASE where that is set.
A signature is ASN.1 DER, as cosign writes and checks it."""

from __future__ import annotations

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from distval.errors import BadInput

# Where the private key's passphrase comes from: never the command line, where ps and the shell's history see it.
PASSPHRASE_ENV = "DISTVAL_KEY_PASSPHRASE"
# A PEM key is a few hundred bytes; a file past this is not one.
KEY_MAX_BYTES = 64 * 1024
CURVE_NAME = "P-256"


class BadKey(BadInput):
    """A key file that is not the key expected: one line naming the file and what was expected."""

    kind = "key"


def generate_key_pair(passphrase: bytes | None) -> tuple[str, str]:
    """A new key pair as (private key PEM, public key PEM); the private key encrypted when ``passphrase`` is given."""
    private = ec.generate_private_key(ec.SECP256R1())
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(passphrase) if passphrase else serialization.NoEncryption()
    )
    private_pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    return private_pem.decode("ascii"), public_pem(private.public_key())


def public_pem(key: ec.EllipticCurvePublicKey) -> str:
    """The key as PKIX PEM (SubjectPublicKeyInfo), cosign's public key format."""
    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode("ascii")


def _p256(key: object, where: str, expected: str) -> None:
    """BadKey unless ``key`` is on the P-256 curve: cosign's keys, and the only ones distval signs with."""
    if isinstance(key, ec.EllipticCurvePrivateKey | ec.EllipticCurvePublicKey):
        if isinstance(key.curve, ec.SECP256R1):
            return
        found = f"an EC key on the curve {key.curve.name}"
    else:
        found = "an " + type(key).__name__.replace("PrivateKey", " private key").replace("PublicKey", " public key")
    raise BadKey(f"{where}: expected {expected}; got {found}")


def _encrypted_pem(data: bytes) -> bool:
    """An encrypted PKCS#8 PEM, or a traditional (OpenSSL) PEM whose headers say it is encrypted."""
    return b"-----BEGIN ENCRYPTED PRIVATE KEY-----" in data or b"Proc-Type: 4,ENCRYPTED" in data


def private_key_from_pem(data: bytes, where: str, passphrase: bytes | None) -> ec.EllipticCurvePrivateKey:
    """The ECDSA P-256 private key in ``data`` (PKCS#8 or SEC1 PEM); BadKey (exit code 2) otherwise."""
    expected = "a PEM private key"
    if b"-----BEGIN PUBLIC KEY-----" in data:
        raise BadKey(f"{where}: expected {expected}; got a public key (distval attest signs with the private key)")
    if b"ENCRYPTED SIGSTORE PRIVATE KEY" in data or b"ENCRYPTED COSIGN PRIVATE KEY" in data:
        raise BadKey(
            f"{where}: expected {expected} (PKCS#8); got cosign's own encrypted key format: make the key with distval "
            "attest --generate-key, or with openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256"
        )
    try:
        key = serialization.load_pem_private_key(data, password=passphrase or None)
    except TypeError:  # encrypted without a passphrase, or a passphrase for a key that is not encrypted
        if passphrase:
            raise BadKey(f"{where}: the key is not encrypted: unset ${PASSPHRASE_ENV}") from None
        raise BadKey(f"{where}: the key is encrypted: set ${PASSPHRASE_ENV} to its passphrase") from None
    except (ValueError, UnsupportedAlgorithm):
        # Told from the PEM's own header, never from the library's words: a wrong passphrase decrypts to bytes whose
        # padding is valid about once in 256 tries, and then the error is "Could not deserialize key data", which a
        # test of the wording took for a key that is not PEM.
        if passphrase and _encrypted_pem(data):
            raise BadKey(f"{where}: the passphrase in ${PASSPHRASE_ENV} does not decrypt the key") from None
        raise BadKey(f"{where}: expected {expected} (-----BEGIN PRIVATE KEY-----, PKCS#8); it is not one") from None
    _p256(key, where, f"an ECDSA {CURVE_NAME} private key")
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    return key


def public_key_from_pem(data: bytes, where: str) -> ec.EllipticCurvePublicKey:
    """The ECDSA P-256 public key in ``data`` (PKIX PEM, as cosign's cosign.pub); BadKey (exit code 2) otherwise."""
    expected = "a PEM public key (-----BEGIN PUBLIC KEY-----, as cosign.pub)"
    if b"PRIVATE KEY-----" in data:
        raise BadKey(f"{where}: expected {expected}; got a private key (distval verify needs only the public key)")
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm):
        raise BadKey(f"{where}: expected {expected}; it is not one") from None
    _p256(key, where, f"an ECDSA {CURVE_NAME} public key")
    assert isinstance(key, ec.EllipticCurvePublicKey)
    return key


def sign(key: ec.EllipticCurvePrivateKey, data: bytes) -> bytes:
    """ECDSA over SHA-256 of ``data``, ASN.1 DER encoded."""
    return key.sign(data, ec.ECDSA(hashes.SHA256()))


def signature_holds(key: ec.EllipticCurvePublicKey, signature: bytes, data: bytes) -> bool:
    """Whether ``signature`` (DER) is ``key``'s over ``data``."""
    try:
        key.verify(signature, data, ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, ValueError):
        return False
    return True
