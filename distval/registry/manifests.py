"""Manifests and indexes (OCI image spec, Docker's v2 schema 2) read as data: what an image manifest names (its
configuration, its layers), what an index lists (one manifest per platform), and an image configuration's platform.
Everything here reads bytes a registry sent: strict JSON, fields checked, nothing trusted that was not checked."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from distval import strict_json

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
IMAGE_MANIFESTS = (OCI_MANIFEST, DOCKER_MANIFEST)
INDEXES = (OCI_INDEX, DOCKER_LIST)
# The Accept header of a manifest request: every kind distval reads, nothing older (schema 1 is not content-addressed
# the same way).
ACCEPT = ", ".join(IMAGE_MANIFESTS + INDEXES)
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
# A manifest is a few KiB; the registry itself refuses one over 4 MiB (distribution's default), so does distval.
MANIFEST_MAX_BYTES = 4 * 2**20
# An image configuration: its history and environment, far below this.
CONFIG_MAX_BYTES = 8 * 2**20
# At most this many entries of an index or layers of a manifest are read.
ENTRIES_MAX = 256
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


class ManifestRefused(ValueError):
    """Bytes that are not a manifest distval reads: one line saying what was expected."""


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Descriptor:
    media_type: str
    digest: str
    size: int
    platform: str | None = None  # os/architecture[/variant], where an index says it
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Manifest:
    """A manifest as fetched: its bytes' digest, its media type, and either an image manifest's configuration and
    layers or an index's entries."""

    digest: str
    media_type: str
    size: int  # of its bytes, for a descriptor of it
    config: Descriptor | None = None
    layers: tuple[Descriptor, ...] = ()
    entries: tuple[Descriptor, ...] = ()

    @property
    def is_index(self) -> bool:
        return self.media_type in INDEXES


def platform_text(platform: object) -> str | None:
    """os/architecture[/variant] of an OCI platform object; None when it is not one."""
    if not isinstance(platform, dict):
        return None
    system, architecture, variant = platform.get("os"), platform.get("architecture"), platform.get("variant")
    if not (isinstance(system, str) and system and isinstance(architecture, str) and architecture):
        return None
    return "/".join([system, architecture] + ([variant] if isinstance(variant, str) and variant else []))


def _descriptor(value: object, where: str) -> Descriptor:
    if not isinstance(value, dict):
        raise ManifestRefused(f"{where}: expected a descriptor object")
    media_type, digest, size = value.get("mediaType"), value.get("digest"), value.get("size")
    if not isinstance(media_type, str) or not isinstance(digest, str) or _DIGEST.fullmatch(digest) is None:
        raise ManifestRefused(f"{where}: expected a mediaType and a sha256 digest")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ManifestRefused(f"{where}: expected a size in bytes")
    found = value.get("annotations")
    annotations = {k: v for k, v in found.items() if isinstance(v, str)} if isinstance(found, dict) else {}
    return Descriptor(media_type, digest, size, platform_text(value.get("platform")), annotations)


def parse_manifest(raw: bytes, digest: str, content_type: str | None) -> Manifest:
    """The manifest in ``raw`` (whose sha256 is ``digest``; ``content_type``: the registry's Content-Type header, which
    counts only where the body does not say its mediaType); ManifestRefused when it is not an image manifest or index."""
    try:
        data = strict_json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ManifestRefused(f"not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("schemaVersion") != 2:
        raise ManifestRefused("expected a manifest of schemaVersion 2")
    said = data.get("mediaType")
    media_type = said if isinstance(said, str) else (content_type or "").split(";")[0].strip()
    if media_type in INDEXES:
        entries = data.get("manifests")
        if not isinstance(entries, list) or len(entries) > ENTRIES_MAX:
            raise ManifestRefused(f"an index with a list of at most {ENTRIES_MAX} manifests")
        return Manifest(
            digest, media_type, len(raw), entries=tuple(_descriptor(e, f"manifests[{i}]") for i, e in enumerate(entries))
        )
    if media_type in IMAGE_MANIFESTS:
        layers = data.get("layers")
        if not isinstance(layers, list) or len(layers) > ENTRIES_MAX:
            raise ManifestRefused(f"an image manifest with a list of at most {ENTRIES_MAX} layers")
        return Manifest(
            digest,
            media_type,
            len(raw),
            config=_descriptor(data.get("config"), "config"),
            layers=tuple(_descriptor(layer, f"layers[{i}]") for i, layer in enumerate(layers)),
        )
    raise ManifestRefused(f"expected one of {', '.join(IMAGE_MANIFESTS + INDEXES)}; got mediaType {str(media_type)[:80]!r}")


def config_platform(raw: bytes) -> str | None:
    """os/architecture[/variant] of an image configuration; None when it does not say."""
    try:
        data = strict_json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return platform_text(data) if isinstance(data, dict) else None
