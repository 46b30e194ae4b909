"""The registry the Docker tests push to (tests/local_registry.py) is a real one: the Engine pushes an image to it
and pulls it back by digest, and its API serves the manifest whose sha256 is that digest."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import urllib.request

import pytest

from tests.local_registry import LocalRegistry

pytestmark = pytest.mark.docker

MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json, "
    "application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.list.v2+json"
)


def _one_file_rootfs() -> bytes:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        payload = b"distval registry test\n"
        entry = tarfile.TarInfo("hello.txt")
        entry.size = len(payload)
        tar.addfile(entry, io.BytesIO(payload))
    return data.getvalue()


def test_the_engine_pushes_to_the_local_registry_and_pulls_back_by_digest(
    docker_client: object, local_registry: LocalRegistry
) -> None:
    import docker

    assert isinstance(docker_client, docker.DockerClient)
    reference = local_registry.reference("distval-tests/one-file", "v1")
    docker_client.api.import_image_from_data(_one_file_rootfs(), repository=reference.rsplit(":", 1)[0], tag="v1")
    try:
        pushed = docker_client.api.push(reference.rsplit(":", 1)[0], tag="v1", stream=True, decode=True)
        digests = [line["aux"]["Digest"] for line in pushed if "aux" in line and "Digest" in line["aux"]]
        errors = [line["error"] for line in pushed if "error" in line]
        assert errors == [] and len(digests) == 1
        request = urllib.request.Request(
            local_registry.url("/v2/distval-tests/one-file/manifests/v1"), headers={"Accept": MANIFEST_TYPES}
        )
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - the test's own registry
            manifest = response.read()
        assert f"sha256:{hashlib.sha256(manifest).hexdigest()}" == digests[0]
        assert json.loads(manifest)["schemaVersion"] == 2
        by_digest = local_registry.reference("distval-tests/one-file", digests[0])
        docker_client.images.remove(reference)
        docker_client.images.pull(by_digest)
        docker_client.images.remove(by_digest)
    finally:
        for leftover in (reference,):
            try:
                docker_client.images.remove(leftover)
            except docker.errors.ImageNotFound:
                pass
