"""The image as published: which manifest in the registry an attestation is of, and where the attestation is stored
beside it (docs/attestation.md#in-the-registry).

The subject is the registry manifest of the exact platform image that the report validated: the image manifest
whose configuration's digest is the report's image id (the Engine names an image by its configuration's digest; on
containerd's image store by its manifest's digest, which matches too). A tag of a multi-platform index is followed
to that platform's manifest; the index's digest is recorded as an annotation of the subject, never as a subject,
since an index names every platform's image and pulling it on another machine gives another image.

The attestation is stored as cosign stores one: an OCI image manifest tagged ``sha256-<manifest hex>.att`` in the
image's repository, whose layers are DSSE envelopes (``application/vnd.dsse.envelope.v1+json``, annotation
``predicateType``). An attestation stored before for the same manifest is kept: the new one is added as a layer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from distval.attestation.statement import INDEX_ANNOTATION, PLATFORM_ANNOTATION, PREDICATE_TYPE, Subject
from distval.errors import BadInput, NotVerified
from distval.registry.client import ManifestUnknown, RegistryAPI, RegistryError
from distval.registry.manifests import (
    CONFIG_MAX_BYTES,
    DOCKER_CONFIG,
    IMAGE_MANIFESTS,
    OCI_CONFIG,
    OCI_MANIFEST,
    Descriptor,
    Manifest,
    config_platform,
)
from distval.registry.reference import Reference

DSSE_LAYER = "application/vnd.dsse.envelope.v1+json"
PREDICATE_TYPE_ANNOTATION = "predicateType"
# An index lists at most this many platforms' manifests that are read to find the image (each one request).
PLATFORMS_MAX = 64
# At most this many attestations are kept under one .att tag (the newest; older ones are dropped when it is full).
STORED_MAX = 32


class NotTheImage(BadInput):
    """The registry's manifest (or every platform's manifest of its index) is not the image the report validated."""

    kind = "image"


@dataclass(frozen=True)
class PublishedImage:
    """A platform's image manifest in the registry: the subject of an attestation."""

    reference: Reference
    manifest: Manifest
    platform: str | None
    index_digest: str | None  # the index the manifest was found in, when the reference named one

    @property
    def config_digest(self) -> str:
        assert self.manifest.config is not None
        return self.manifest.config.digest

    def subjects(self) -> list[Subject]:
        """The platform's manifest (its platform and index as annotations), then its configuration: the digest the
        Engine names the image by, so that verify against an Engine that pulled it finds it too."""
        annotations = {PLATFORM_ANNOTATION: self.platform} if self.platform else {}
        if self.index_digest is not None:
            annotations[INDEX_ANNOTATION] = self.index_digest
        config = self.manifest.config
        assert config is not None
        return [
            Subject(self.reference.name, self.manifest.digest.removeprefix("sha256:"), self.manifest.media_type, annotations),
            Subject(self.reference.name, config.digest.removeprefix("sha256:"), config.media_type),
        ]

    def described(self) -> str:
        where = [self.platform] if self.platform else []
        if self.index_digest is not None:
            where.append(f"in index {self.index_digest[:19]}")
        return f"{self.reference.with_digest(self.manifest.digest)}" + (f" ({', '.join(where)})" if where else "")


def _is_the_image(manifest: Manifest, image_id: str) -> bool:
    return manifest.config is not None and image_id in (manifest.config.digest, manifest.digest)


def _platform(api: RegistryAPI, reference: Reference, manifest: Manifest) -> str | None:
    """The platform the image's configuration says (the configuration's bytes checked against its digest)."""
    config = manifest.config
    if config is None or config.media_type not in (OCI_CONFIG, DOCKER_CONFIG) or config.size > CONFIG_MAX_BYTES:
        return None
    return config_platform(api.blob(reference.repository, config.digest, CONFIG_MAX_BYTES))


def _entries(index: Manifest) -> list[Descriptor]:
    images = [entry for entry in index.entries if entry.media_type in IMAGE_MANIFESTS]
    return images[:PLATFORMS_MAX]


def platform_image(api: RegistryAPI, reference: Reference, image_id: str) -> PublishedImage:
    """The manifest of ``reference`` in the registry that is the image ``image_id`` (sha256:<hex>): the manifest the
    reference names, or the one of its index's platforms that is. NotTheImage when there is none (the tag was
    pushed again since, or names another image); ManifestUnknown when the registry lacks the reference."""
    top = api.manifest(reference.repository, reference.manifest_reference)
    if not top.is_index:
        if not _is_the_image(top, image_id):
            raise NotTheImage(
                f"{reference.with_digest(top.digest)} (the registry's {reference.manifest_reference}) is not the image the "
                f"report validated ({image_id[:19]}): its configuration is {top.config.digest[:19] if top.config else 'none'} "
                "(pushed again since, or another image)"
            )
        return PublishedImage(reference, top, _platform(api, reference, top), None)
    for entry in _entries(top):
        child = api.manifest(reference.repository, entry.digest)
        if not child.is_index and _is_the_image(child, image_id):
            return PublishedImage(reference, child, _platform(api, reference, child) or entry.platform, top.digest)
    platforms = ", ".join(entry.platform or "unknown" for entry in _entries(top)) or "none"
    raise NotTheImage(
        f"{reference.with_digest(top.digest)} is an index of {platforms}: none of its platforms' manifests is the image the "
        f"report validated ({image_id[:19]})"
    )


def manifest_to_verify(api: RegistryAPI, reference: Reference) -> Manifest:
    """The image manifest ``reference`` names in the registry, for verify. An index is refused (NotVerified): an
    attestation is of one platform's image, and which one a puller gets depends on its machine; the line lists
    the platforms' manifests to verify instead."""
    top = api.manifest(reference.repository, reference.manifest_reference)
    if not top.is_index:
        return top
    platforms = ", ".join(f"{entry.platform or 'unknown'} {entry.digest[:19]}" for entry in _entries(top)[:8])
    raise NotVerified(
        f"not verified: {reference.with_digest(top.digest)} is a multi-platform index, not one platform's image: an "
        f"attestation is of one platform's manifest; verify {reference.name}@<the platform's digest> ({platforms or 'none'})"
    )


def attestation_tag(manifest_digest: str) -> str:
    """cosign's tag for the attestations of the manifest ``manifest_digest``: sha256-<hex>.att."""
    return manifest_digest.replace(":", "-") + ".att"


def _json(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8")


def _descriptor(media_type: str, digest: str, size: int, annotations: dict[str, str] | None = None) -> dict[str, object]:
    data: dict[str, object] = {"mediaType": media_type, "digest": digest, "size": size}
    if annotations:
        data["annotations"] = annotations
    return data


def stored_layers(api: RegistryAPI, reference: Reference, manifest_digest: str) -> list[Descriptor]:
    """The DSSE envelope layers stored under the attestation tag of ``manifest_digest``; none when it has no tag."""
    try:
        stored = api.manifest(reference.repository, attestation_tag(manifest_digest))
    except ManifestUnknown:
        return []
    if stored.is_index:
        raise RegistryError(f"{reference.name}:{attestation_tag(manifest_digest)} is an index, not an attestation manifest")
    # The newest STORED_MAX: a tag another writer filled with more is not a way to make verify read them all.
    return [layer for layer in stored.layers if layer.media_type == DSSE_LAYER][-STORED_MAX:]


def store(api: RegistryAPI, reference: Reference, manifest_digest: str, envelope: bytes) -> str:
    """Store ``envelope`` beside the image manifest ``manifest_digest`` (the attestations already there kept, up to
    STORED_MAX with the newest); the tag it is under."""
    kept = stored_layers(api, reference, manifest_digest)[-(STORED_MAX - 1) :]
    layer_digest = api.put_blob(reference.repository, envelope)
    layers = [
        _descriptor(layer.media_type, layer.digest, layer.size, dict(layer.annotations))
        for layer in kept
        if layer.digest != layer_digest
    ]
    layers.append(_descriptor(DSSE_LAYER, layer_digest, len(envelope), {PREDICATE_TYPE_ANNOTATION: PREDICATE_TYPE}))
    # An image configuration as cosign's attestation images have: no platform, the layers as its root filesystem.
    config = _json(
        {
            "architecture": "",
            "os": "",
            "config": {},
            "rootfs": {"type": "layers", "diff_ids": [layer["digest"] for layer in layers]},
        }
    )
    config_digest = api.put_blob(reference.repository, config)
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": _descriptor(OCI_CONFIG, config_digest, len(config)),
        "layers": layers,
    }
    tag = attestation_tag(manifest_digest)
    api.put_manifest(reference.repository, tag, _json(manifest), OCI_MANIFEST)
    return tag
