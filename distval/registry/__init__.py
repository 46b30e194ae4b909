"""A container registry, as distval attest and verify speak to it (docs/attestation.md#in-the-registry): image
references (``reference.py``), manifests and indexes read as data (``manifests.py``) and the registry's HTTP API of
the OCI distribution spec, with the standard library only (``client.py``). Whatever a registry answers is untrusted
input: every answer is read within a bound, parsed one way (strict_json) and checked against the digest it was
asked by."""
