"""Evidence a publisher can verify (docs/attestation.md): ``distval attest`` signs what a JSON report says of an
image as an in-toto Statement (v1) in a DSSE envelope, and ``distval verify`` checks it.

One concern per module, no file or Engine access (distval/cli/attest.py reads the files, asks the Engine and hands
published.py its registry):
``keys.py`` (ECDSA P-256 keys in PEM, as cosign's), ``dsse.py`` (the envelope, its pre-authentication encoding,
signing and verifying), ``predicate.py`` (the report -> the predicate), ``statement.py`` (the in-toto Statement: the
image's digests as subjects), ``published.py`` (the platform's manifest in the registry as the subject; the
attestations stored beside it, through a distval.registry.client.RegistryAPI it is given), ``policy.py`` (what a
verified attestation must say to pass, and how old it may be).
"""
