"""distval/registry/: image references normalised as Docker normalises them, and manifests read from bytes a
registry sent (strict JSON, every field checked, an index told from an image manifest)."""

from __future__ import annotations

import json

import pytest

from distval.errors import EXIT_BAD_INPUT
from distval.registry.client import Registry, _loopback
from distval.registry.manifests import (
    DOCKER_LIST,
    ENTRIES_MAX,
    OCI_INDEX,
    OCI_MANIFEST,
    ManifestRefused,
    config_platform,
    parse_manifest,
    sha256_digest,
)
from distval.registry.reference import BadReference, Reference, parse_reference

DIGEST = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:5000/org/torch:2.6", Reference("127.0.0.1:5000", "org/torch", "2.6", None)),
        (f"ghcr.io/org/torch@{DIGEST}", Reference("ghcr.io", "org/torch", None, DIGEST)),
        (f"localhost/torch:1@{DIGEST}", Reference("localhost", "torch", "1", DIGEST)),
        ("pytorch/pytorch:2.6", Reference("docker.io", "pytorch/pytorch", "2.6", None)),
        ("debian", Reference("docker.io", "library/debian", None, None)),
    ],
)
def test_a_reference_is_normalised_as_docker_does(text: str, expected: Reference) -> None:
    assert parse_reference(text) == expected


def test_what_the_api_is_asked_for() -> None:
    hub = parse_reference("debian")
    assert (hub.name, hub.api_host, hub.manifest_reference) == ("docker.io/library/debian", "registry-1.docker.io", "latest")
    pinned = parse_reference(f"ghcr.io/org/torch:2.6@{DIGEST}")
    assert pinned.manifest_reference == DIGEST  # the digest, not the tag
    assert pinned.with_digest("sha256:" + "b" * 64) == "ghcr.io/org/torch@sha256:" + "b" * 64


def test_a_digest_other_than_sha256_is_bad_input() -> None:
    with pytest.raises(BadReference) as caught:
        parse_reference("ghcr.io/org/torch@sha512:" + "a" * 128)
    assert caught.value.exit_code == EXIT_BAD_INPUT


def test_only_the_loopback_is_spoken_to_over_plain_http() -> None:
    assert [_loopback(host) for host in ("127.0.0.1:5000", "127.9.9.9", "localhost:5000", "[::1]:5000")] == [True] * 4
    assert [_loopback(host) for host in ("ghcr.io", "10.0.0.1:5000", "localhost.example.com")] == [False] * 3
    assert Registry("127.0.0.1:5000").base == "http://127.0.0.1:5000"
    assert Registry("ghcr.io").base == "https://ghcr.io"


def _manifest(**changes: object) -> bytes:
    data: dict[str, object] = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": DIGEST, "size": 12},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": DIGEST, "size": 3}],
    }
    data.update(changes)
    return json.dumps(data).encode()


def test_an_image_manifest_and_an_index_are_told_apart() -> None:
    raw = _manifest()
    manifest = parse_manifest(raw, sha256_digest(raw), None)
    assert not manifest.is_index and manifest.config is not None and manifest.config.digest == DIGEST
    assert manifest.size == len(raw)
    entry = {
        "mediaType": OCI_MANIFEST,
        "digest": DIGEST,
        "size": 5,
        "platform": {"os": "linux", "architecture": "arm64", "variant": "v8"},
    }
    index = json.dumps({"schemaVersion": 2, "manifests": [entry]}).encode()
    parsed = parse_manifest(index, sha256_digest(index), DOCKER_LIST + "; charset=utf-8")  # the header, where the body is silent
    assert parsed.is_index and parsed.entries[0].platform == "linux/arm64/v8"
    assert parse_manifest(_manifest(mediaType=OCI_INDEX, manifests=[]), DIGEST, None).is_index


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        (b"<html>", "not JSON"),
        (b'{"schemaVersion": 2, "schemaVersion": 2}', "appears twice"),
        (_manifest(schemaVersion=1), "schemaVersion 2"),
        (_manifest(mediaType="application/vnd.docker.distribution.manifest.v1+prettyjws"), "got mediaType"),
        (_manifest(config={"mediaType": "x", "digest": "md5:00", "size": 1}), "sha256 digest"),
        (_manifest(config={"mediaType": "x", "digest": DIGEST, "size": -1}), "size in bytes"),
        (_manifest(layers=[{}] * (ENTRIES_MAX + 1)), f"at most {ENTRIES_MAX} layers"),
        (_manifest(mediaType=OCI_INDEX, manifests="x"), "list of at most"),
        (b"[" * 5000 + b"]" * 5000, "not JSON"),
    ],
)
def test_a_registry_answer_that_is_no_manifest_is_refused(raw: bytes, said: str) -> None:
    with pytest.raises(ManifestRefused, match=said):
        parse_manifest(raw, sha256_digest(raw), None)


def test_a_configurations_platform() -> None:
    assert config_platform(b'{"os": "linux", "architecture": "amd64"}') == "linux/amd64"
    assert config_platform(b'{"os": "linux", "architecture": "arm", "variant": "v7"}') == "linux/arm/v7"
    assert config_platform(b'{"architecture": "amd64"}') is None
    assert config_platform(b"not json") is None
