"""A real container registry for the Docker tests: Debian's ``docker-registry`` package (the CNCF Distribution
registry), started as a process of the test's own on a free 127.0.0.1 port, with its storage in a temporary folder.

Why a process and not a container: the machine has no registry to pull a registry image from, and the package is
the same server Docker Hub runs. The Engine pushes to and pulls from it without TLS because it treats registries
on 127.0.0.0/8 as insecure-allowed (dockerd's default ``--insecure-registry 127.0.0.0/8``).

``local_registry(folder)`` is a context manager that yields a ``LocalRegistry``; the ``local_registry`` fixture in
tests/conftest.py gives one per test session (skipped, or failed with --require-docker, where the package is
missing). ``local_registry(folder, credentials=(user, password))`` starts one that asks for them (the registry's
htpasswd authentication: a Basic challenge, over plain HTTP on the loopback as everything else here).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import bcrypt

REGISTRY_BINARY = "docker-registry"
# How long the server may take to answer its first /v2/: it only opens a folder and a socket (about 0.1 s here),
# so this bounds a server that cannot start, not the machine's speed.
START_DEADLINE_S = 30.0

_CONFIG = """\
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: {storage}
  delete:
    enabled: true
http:
  addr: 127.0.0.1:{port}
"""
_AUTH = """\
auth:
  htpasswd:
    realm: distval-tests
    path: {htpasswd}
"""


class RegistryUnavailable(RuntimeError):
    """The registry could not be started: the package is missing or the server did not answer."""


@dataclass(frozen=True)
class LocalRegistry:
    """A running registry: ``host`` is ``127.0.0.1:PORT``, the prefix of an image reference pushed to it."""

    host: str
    storage: Path

    def reference(self, repository: str, tag_or_digest: str = "latest") -> str:
        """``host/repository:tag`` or ``host/repository@sha256:...``."""
        separator = "@" if tag_or_digest.startswith("sha256:") else ":"
        return f"{self.host}/{repository}{separator}{tag_or_digest}"

    def url(self, path: str) -> str:
        """The registry API's URL for ``path`` (``/v2/...``)."""
        return f"http://{self.host}{path}"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _answers(url: str) -> bool:
    """The server answers (a 401 of one that asks for credentials is an answer)."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - a http URL the test built
            return bool(response.status == 200)
    except urllib.error.HTTPError as exc:
        return exc.code == 401
    except (urllib.error.URLError, OSError):
        return False


@contextmanager
def local_registry(folder: Path, credentials: tuple[str, str] | None = None) -> Iterator[LocalRegistry]:
    """Start a registry storing under ``folder`` (asking for ``credentials`` where given); stop it (and wait for it)
    on the way out."""
    binary = shutil.which(REGISTRY_BINARY)
    if binary is None:
        raise RegistryUnavailable(f"{REGISTRY_BINARY} is not installed (apt-get install docker-registry)")
    storage = folder / "storage"
    storage.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    config = folder / "config.yml"
    text = _CONFIG.format(storage=storage, port=port)
    if credentials is not None:
        user, password = credentials
        htpasswd = folder / "htpasswd"
        # htpasswd's bcrypt form, the only one the registry reads; few rounds: a test's password.
        htpasswd.write_text(f"{user}:{bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()}\n")
        text += _AUTH.format(htpasswd=htpasswd)
    config.write_text(text, encoding="utf-8")
    log = (folder / "registry.log").open("wb")
    server = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT)
    try:
        registry = LocalRegistry(host=f"127.0.0.1:{port}", storage=storage)
        deadline = time.monotonic() + START_DEADLINE_S
        while not _answers(registry.url("/v2/")):
            if server.poll() is not None or time.monotonic() > deadline:
                log.flush()
                tail = (folder / "registry.log").read_text(encoding="utf-8", errors="replace")[-2000:]
                raise RegistryUnavailable(f"{REGISTRY_BINARY} did not answer on {registry.host}: {tail}")
            time.sleep(0.1)
        yield registry
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
