"""One in-memory registry for the quick tests of attest and verify's pure logic, implementing
distval.registry.client.RegistryAPI, the Protocol the real client (distval.registry.client.Registry, tested against
Debian's docker-registry in tests/cli/test_attest_registry_docker.py) implements; the assignment at the bottom is
what mypy checks. Manifests are parsed by the same parse_manifest as the real client's answers."""

from __future__ import annotations

from distval.registry.client import ManifestUnknown, RegistryAPI, RegistryError
from distval.registry.manifests import Manifest, parse_manifest, sha256_digest


class FakeRegistry:
    """Blobs and manifests of every repository by digest, tags per repository; ``requests`` counts manifest reads."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.manifests: dict[str, tuple[bytes, str]] = {}
        self.tags: dict[tuple[str, str], str] = {}
        self.requests = 0

    def manifest(self, repository: str, reference: str) -> Manifest:
        self.requests += 1
        digest = reference if reference.startswith("sha256:") else self.tags.get((repository, reference))
        if digest is None or digest not in self.manifests:
            raise ManifestUnknown(f"the fake registry has no {repository}:{reference}")
        raw, media_type = self.manifests[digest]
        return parse_manifest(raw, digest, media_type)

    def blob(self, repository: str, digest: str, limit: int) -> bytes:
        if digest not in self.blobs:
            raise ManifestUnknown(f"the fake registry has no blob {digest}")
        data = self.blobs[digest]
        if len(data) > limit:
            raise RegistryError(f"the blob {digest} is larger than {limit} bytes")
        return data

    def put_blob(self, repository: str, data: bytes) -> str:
        digest = sha256_digest(data)
        self.blobs[digest] = data
        return digest

    def put_manifest(self, repository: str, tag: str, data: bytes, media_type: str) -> str:
        digest = sha256_digest(data)
        self.manifests[digest] = (data, media_type)
        if not tag.startswith("sha256:"):
            self.tags[(repository, tag)] = digest
        return digest


_checked: type[RegistryAPI] = FakeRegistry
