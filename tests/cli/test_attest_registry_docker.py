"""attest and verify against a real registry (Debian's docker-registry, tests/local_registry.py).

The client alone (no Engine): an image written through the registry's API, attested with --push and verified with
--registry, an index over two platforms, a tag pushed again. Then the whole chain with the Engine: an image built from
the 2.6 fixture, run by distval, pushed by the Engine, attested and stored beside it in the registry, and verified
from distval's own image in a container that has no Docker socket and only the public key; the tag pushed again to
another image, and another platform's image of an index over both, refused with exit code 6."""

from __future__ import annotations

import base64
import io
import json
import os
import secrets
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from distval.attestation.published import DSSE_LAYER, attestation_tag
from distval.cli.main import main
from distval.errors import EXIT_CHECKS_FAILED, EXIT_ENVIRONMENT, EXIT_NOT_VERIFIED, EXIT_PASSED
from distval.registry.client import ManifestUnknown, Registry, RegistryError
from distval.registry.manifests import DOCKER_MANIFEST
from distval.targets.docker.engine import Engine
from tests.attestation_helpers import changed, passing_report, write_json, write_key_pair
from tests.local_registry import LocalRegistry, local_registry
from tests.registry_helpers import one_file_layer, push_image, push_index, push_other_platform

pytestmark = pytest.mark.docker

# One scenario of two checks: a real run of the image, kept short; the policy requires exactly those.
CONFIG = """\
version: 1
backend: gloo
scenarios:
  - name: in-container-2ranks
    topology: in-container
    world_size: 2
    checks: [env, all_reduce]
"""
POLICY = "required_checks: [env, all_reduce]\nmax_age_days: 1\n"


def _report(tmp_path: Path, image_id: str, name: str = "report.json", **change: str) -> str:
    data = passing_report(default_checks=True)
    if change:
        data = changed(data, 0, change["check"], change["status"], "wrong")
    for scenario in data["scenarios"]:
        scenario["image_id"] = image_id
    return write_json(tmp_path / name, data)


def test_the_client_attests_and_verifies_through_a_real_registry(
    local_registry: LocalRegistry, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api = Registry(local_registry.host)
    repository = "distval-tests/client-" + secrets.token_hex(3)
    name = f"{local_registry.host}/{repository}"
    amd64 = push_image(api, repository, "amd64", "amd64", one_file_layer())
    arm64 = push_other_platform(api, repository, "arm64", amd64.manifest_digest, "arm64")
    index = push_index(api, repository, "multi", [(amd64.manifest_digest, "linux/amd64"), (arm64.manifest_digest, "linux/arm64")])
    with pytest.raises(ManifestUnknown):
        api.manifest(repository, "missing")
    private, public = write_key_pair(tmp_path)
    # Attested by the index's tag: the subject is the amd64 manifest, stored beside it.
    argv = ["attest", _report(tmp_path, amd64.config_digest), "--image", f"{name}:multi", "--key", private, "--push"]
    assert main(argv) == EXIT_PASSED
    assert f"(linux/amd64, in index {index[:19]})" in capsys.readouterr().out
    stored = api.manifest(repository, attestation_tag(amd64.manifest_digest))
    assert [layer.media_type for layer in stored.layers] == [DSSE_LAYER]
    verify = ["verify", "--key", public, "--registry", "--image"]
    assert main([*verify, f"{name}:amd64"]) == EXIT_PASSED
    assert main([*verify, f"{name}@{amd64.manifest_digest}"]) == EXIT_PASSED
    for refused, said in (
        (f"{name}:multi", "is a multi-platform index"),
        (f"{name}@{index}", "is a multi-platform index"),
        (f"{name}:arm64", "no attestation is stored in the registry"),
    ):
        capsys.readouterr()
        assert main([*verify, refused]) == EXIT_NOT_VERIFIED
        assert said in capsys.readouterr().err
    # The amd64 tag pushed again to another image: its digest has no attestation, and the old one is not its.
    again = push_image(api, repository, "amd64", "amd64", one_file_layer("pushed again\n"))
    assert main([*verify, f"{name}:amd64"]) == EXIT_NOT_VERIFIED
    assert main([*verify, f"{name}@{amd64.manifest_digest}"]) == EXIT_PASSED
    # A newer attestation that fails its policy decides over the older pass.
    failed = _report(tmp_path, amd64.config_digest, "failed.json", check="ddp", status="failed")
    assert main(["attest", failed, "--image", f"{name}@{amd64.manifest_digest}", "--key", private, "--push"]) == EXIT_PASSED
    assert len(api.manifest(repository, attestation_tag(amd64.manifest_digest)).layers) == 2
    assert main([*verify, f"{name}@{amd64.manifest_digest}"]) == EXIT_CHECKS_FAILED
    assert again.manifest_digest != amd64.manifest_digest


def _push(docker_client: Any, reference: str) -> str:
    """Push ``reference`` (host/repository:tag) with the Engine; the manifest digest it reports."""
    repository, tag = reference.rsplit(":", 1)
    lines = list(docker_client.api.push(repository, tag=tag, stream=True, decode=True))
    errors = [line["error"] for line in lines if "error" in line]
    digests = [line["aux"]["Digest"] for line in lines if "Digest" in (line.get("aux") or {})]
    assert errors == [] and len(digests) == 1, lines[-3:]
    return str(digests[0])


def _verify_without_socket(docker_client: Any, harness: str, keys: Path, image: str) -> tuple[int, str]:
    """distval verify --registry in distval's image: no Docker socket, the public key and policy alone mounted."""
    command = (
        "test ! -e /var/run/docker.sock || exit 99; "
        f"exec distval verify --registry --image {image} --key /keys/release.pub --policy /keys/policy.yaml"
    )
    container = docker_client.containers.run(
        harness,
        entrypoint=["sh", "-c", command],
        network_mode="host",  # the registry listens on the host's 127.0.0.1
        volumes={str(keys): {"bind": "/keys", "mode": "ro"}},
        detach=True,
    )
    try:
        status = container.wait(timeout=120)
        return int(status["StatusCode"]), container.logs().decode()
    finally:
        container.remove(force=True)


def test_build_run_push_attest_and_verify_without_docker(
    local_registry: LocalRegistry,
    docker_client: Any,
    fixture_image: Callable[[str], str],
    harness_image: str,
    tmp_path: Path,
) -> None:
    base = fixture_image("distval-fixtures/torch:2.6-debian")
    repository = "distval-tests/torch-" + secrets.token_hex(3)
    candidate = f"{local_registry.host}/{repository}:candidate"
    engine = Engine("tests-attest-chain")
    built: list[str] = []
    try:
        context = _dockerfile_context(f"FROM {base}\nLABEL org.example.candidate={secrets.token_hex(4)}\n")
        built.append(engine.build(context, candidate, {}, print))
        config = tmp_path / "config.yaml"
        config.write_text(CONFIG)
        results = tmp_path / "results"
        run = subprocess.run(
            [sys.executable, "-m", "distval", "run", str(config), "--image", candidate, "-o", str(results), "-q"],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        started = time.monotonic()
        digest = _push(docker_client, candidate)
        pushed_s = time.monotonic() - started
        keys = tmp_path / "keys"
        keys.mkdir()
        private, _ = write_key_pair(keys, "release")
        (keys / "policy.yaml").write_text(POLICY)
        os.chmod(keys, 0o755)
        attest = subprocess.run(
            [sys.executable, "-m", "distval", "attest", str(results / "report.json"), "--image", candidate,
             "--key", private, "--push", "-o", str(results / "attestation.json")],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert attest.returncode == 0, attest.stderr
        assert f"{local_registry.host}/{repository}@{digest} (linux/amd64)" in attest.stdout
        (keys / "release.key").unlink()  # the verifying side holds the public key only

        code, said = _verify_without_socket(docker_client, harness_image, keys, candidate)
        assert code == EXIT_PASSED, said
        assert said.startswith(f"verified: {local_registry.host}/{repository}@{digest}: ")

        # Another platform's image of the same layers, and an index over both: refused, by digest and by index.
        api = Registry(local_registry.host)
        arm64 = push_other_platform(api, repository, "arm64", digest, "arm64")
        assert api.manifest(repository, digest).media_type == DOCKER_MANIFEST
        push_index(api, repository, "multi", [(digest, "linux/amd64"), (arm64.manifest_digest, "linux/arm64")])
        for image, said_part in (
            (f"{local_registry.host}/{repository}@{arm64.manifest_digest}", "no attestation is stored"),
            (f"{local_registry.host}/{repository}:multi", "is a multi-platform index"),
        ):
            code, said = _verify_without_socket(docker_client, harness_image, keys, image)
            assert code == EXIT_NOT_VERIFIED and said_part in said, said
        with_file = [
            "verify",
            str(results / "attestation.json"),
            "--key",
            str(keys / "release.pub"),
            "--policy",
            str(keys / "policy.yaml"),
        ]
        assert main([*with_file, "--image", f"{local_registry.host}/{repository}@{arm64.manifest_digest}"]) == EXIT_NOT_VERIFIED

        # The tag pushed again to another image: refused; the attested digest still verifies.
        docker_client.api.import_image_from_data(
            one_file_layer("another image\n"), repository=candidate.rsplit(":", 1)[0], tag="candidate"
        )
        built.append(docker_client.images.get(candidate).id)
        again = _push(docker_client, candidate)
        assert again != digest
        code, said = _verify_without_socket(docker_client, harness_image, keys, candidate)
        assert code == EXIT_NOT_VERIFIED and f"@{again}" in said, said
        assert main([*with_file, "--registry", "--image", candidate]) == EXIT_NOT_VERIFIED
        assert main([*with_file, "--image", f"{local_registry.host}/{repository}@{digest}"]) == EXIT_PASSED
        print(f"pushed the 2.6 fixture to the local registry in {pushed_s:.1f} s (load {os.getloadavg()[0]:.1f})")
    finally:
        for image_id in reversed(built):
            try:
                docker_client.images.remove(image_id, force=True)
            except Exception:  # noqa: BLE001 - already gone
                pass


def _dockerfile_context(dockerfile: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        data = dockerfile.encode()
        entry = tarfile.TarInfo("Dockerfile")
        entry.size = len(data)
        archive.addfile(entry, io.BytesIO(data))
    return buffer.getvalue()


def test_the_client_logs_in_with_docker_logins_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A registry that asks for credentials (a Basic challenge): refused without them (exit code 3, one line saying
    how to log in), served with the ones `docker login` writes into $DOCKER_CONFIG/config.json."""
    with local_registry(tmp_path / "registry", credentials=("distval", "s3cret")) as registry:
        docker_config = tmp_path / "docker-config"
        docker_config.mkdir()
        monkeypatch.setenv("DOCKER_CONFIG", str(docker_config))
        with pytest.raises(RegistryError, match=r"refused GET /v2/x/manifests/1 \(HTTP 401\).*docker login 127\.0\.0\.1"):
            Registry(registry.host).manifest("x", "1")
        auth = base64.b64encode(b"distval:s3cret").decode()
        (docker_config / "config.json").write_text(json.dumps({"auths": {registry.host: {"auth": auth}}}))
        api = Registry(registry.host)
        pushed = push_image(api, "distval-tests/private", "v1", "amd64", one_file_layer())
        assert api.manifest("distval-tests/private", "v1").digest == pushed.manifest_digest
        private, public = write_key_pair(tmp_path)
        report = _report(tmp_path, pushed.config_digest)
        name = f"{registry.host}/distval-tests/private"
        assert main(["attest", report, "--image", f"{name}:v1", "--key", private, "--push"]) == EXIT_PASSED
        assert main(["verify", "--image", f"{name}:v1", "--key", public, "--registry"]) == EXIT_PASSED
        (docker_config / "config.json").write_text(
            json.dumps({"auths": {registry.host: {"auth": base64.b64encode(b"distval:wrong").decode()}}})
        )
        capsys.readouterr()
        assert main(["verify", "--image", f"{name}:v1", "--key", public, "--registry"]) == EXIT_ENVIRONMENT
        assert "(HTTP 401)" in capsys.readouterr().err
