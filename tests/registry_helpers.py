"""Images written into a registry through its API (any distval.registry.client.RegistryAPI: the real client against a
local registry, or tests/fake_registry.py): one platform's OCI image of a given root filesystem and architecture, and
an index over several, as a multi-platform build pushes them."""

from __future__ import annotations

import io
import json
import tarfile
from dataclasses import dataclass

from distval.registry.client import RegistryAPI
from distval.registry.manifests import OCI_CONFIG, OCI_INDEX, OCI_MANIFEST

OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"


@dataclass(frozen=True)
class Pushed:
    manifest_digest: str
    config_digest: str  # what the Engine names the image by (its id)
    platform: str


def _json(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8")


def one_file_layer(text: str = "distval registry test\n") -> bytes:
    """An uncompressed tar of one file: a root filesystem the Engine can import, or a layer of an OCI image."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        payload = text.encode("utf-8")
        entry = tarfile.TarInfo("hello.txt")
        entry.size = len(payload)
        tar.addfile(entry, io.BytesIO(payload))
    return data.getvalue()


def push_image(api: RegistryAPI, repository: str, tag: str, architecture: str, layer: bytes) -> Pushed:
    """An OCI image of ``layer`` for linux/``architecture``, tagged ``tag``."""
    layer_digest = api.put_blob(repository, layer)
    config = _json(
        {
            "architecture": architecture,
            "os": "linux",
            "config": {"Cmd": ["/hello.txt"]},
            "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
        }
    )
    config_digest = api.put_blob(repository, config)
    manifest = _json(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": len(config)},
            "layers": [{"mediaType": OCI_LAYER, "digest": layer_digest, "size": len(layer)}],
        }
    )
    digest = api.put_manifest(repository, tag, manifest, OCI_MANIFEST)
    return Pushed(digest, config_digest, f"linux/{architecture}")


def push_index(api: RegistryAPI, repository: str, tag: str, platforms: list[tuple[str, str]]) -> str:
    """An OCI index tagged ``tag`` over manifests already there: (their digest, os/architecture)."""
    entries = []
    for digest, platform in platforms:
        manifest = api.manifest(repository, digest)
        system, architecture = platform.split("/")
        entries.append(
            {
                "mediaType": manifest.media_type,
                "digest": digest,
                "size": manifest.size,
                "platform": {"os": system, "architecture": architecture},
            }
        )
    index = _json({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries})
    return api.put_manifest(repository, tag, index, OCI_INDEX)


def push_other_platform(api: RegistryAPI, repository: str, tag: str, manifest_digest: str, architecture: str) -> Pushed:
    """The image ``manifest_digest`` again for linux/``architecture``: the same layers (already in the repository),
    its configuration with the architecture edited, a manifest of the same media type, tagged ``tag``."""
    manifest = api.manifest(repository, manifest_digest)
    assert manifest.config is not None
    config = json.loads(api.blob(repository, manifest.config.digest, 2**24))
    config["architecture"] = architecture
    raw_config = _json(config)
    config_digest = api.put_blob(repository, raw_config)
    data = {
        "schemaVersion": 2,
        "mediaType": manifest.media_type,
        "config": {"mediaType": manifest.config.media_type, "digest": config_digest, "size": len(raw_config)},
        "layers": [{"mediaType": layer.media_type, "digest": layer.digest, "size": layer.size} for layer in manifest.layers],
    }
    digest = api.put_manifest(repository, tag, _json(data), manifest.media_type)
    return Pushed(digest, config_digest, f"linux/{architecture}")
