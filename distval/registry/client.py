"""A registry's HTTP API (the OCI distribution spec: /v2/<name>/manifests/<reference>, /v2/<name>/blobs/...) with
the standard library only: ``Registry`` is the real one, ``RegistryAPI`` the Protocol it shares with the tests'
stand-in for pure logic.

Every answer is untrusted: a body is read within a bound (its Content-Length is not believed), within a deadline (a
server that sends a byte a minute does not hold distval), its digest computed here and compared with the digest it
was asked by, never taken from the Docker-Content-Digest header. A registry on the loopback (127.0.0.0/8, ::1,
localhost) is spoken to over plain HTTP, as Docker does for such registries without configuration; any other over
HTTPS. Credentials are those ``docker login`` writes into $DOCKER_CONFIG/config.json (``auths``: basic credentials,
used for a Basic challenge or to get a Bearer token, the token flow every hosted registry uses); credential helpers
are not run.
"""

from __future__ import annotations

import ipaddress
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from http.client import HTTPResponse
from pathlib import Path
from typing import Protocol

from distval import strict_json
from distval.bounded_read import FileRefused, read_regular_file, size_text
from distval.errors import EnvironmentUnusable
from distval.escape import terminal_line
from distval.registry.manifests import ACCEPT, MANIFEST_MAX_BYTES, Manifest, ManifestRefused, parse_manifest, sha256_digest
from distval.text_caps import capped

# One request's socket timeout, the most one answer may take to arrive whole, and the most all the answers of one
# command may take together (a registry that drips its answers, or holds many, does not hold distval longer).
TIMEOUT_S = 30.0
ANSWER_DEADLINE_S = 120.0
TOTAL_DEADLINE_S = 600.0
# A token or an error's JSON: a few KiB.
SMALL_MAX_BYTES = 2**20
_CHUNK = 2**16
DOCKER_CONFIG_MAX_BYTES = 2**20
_CHALLENGE_PARAM = re.compile(r'(\w+)="([^"]*)"')


class RegistryError(EnvironmentUnusable):
    """The registry cannot be used: unreachable, an HTTP error, credentials it asks for and distval lacks, or an
    answer that is not what was asked for (exit code 3)."""

    kind = "registry"


class ManifestUnknown(RegistryError):
    """The registry has no manifest of that tag or digest (404)."""


class RegistryAPI(Protocol):
    """What attest and verify ask of a registry; one registry host per object."""

    def manifest(self, repository: str, reference: str) -> Manifest:
        """The manifest of a tag or digest (ManifestUnknown when there is none; a digest's bytes checked)."""
        ...

    def blob(self, repository: str, digest: str, limit: int) -> bytes:
        """The blob of ``digest``, at most ``limit`` bytes, its sha256 checked."""
        ...

    def put_blob(self, repository: str, data: bytes) -> str:
        """Upload ``data``; its digest."""
        ...

    def put_manifest(self, repository: str, tag: str, data: bytes, media_type: str) -> str:
        """Store the manifest ``data`` under ``tag``; its digest."""
        ...


def _loopback(host: str) -> bool:
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 or host.startswith("[") else host
    name = name.strip("[]")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _shown(text: str) -> str:
    return capped(terminal_line(text), 160)


def docker_credentials(host: str) -> str | None:
    """The base64 ``user:password`` that ``docker login HOST`` stored in $DOCKER_CONFIG/config.json (or
    ~/.docker/config.json); None without one (a missing or unreadable file is no credentials)."""
    folder = os.environ.get("DOCKER_CONFIG") or str(Path.home() / ".docker")
    try:
        data = strict_json.loads(read_regular_file(Path(folder) / "config.json", DOCKER_CONFIG_MAX_BYTES))
    except (FileRefused, ValueError, RecursionError):
        return None
    auths = data.get("auths") if isinstance(data, dict) else None
    if not isinstance(auths, dict):
        return None
    names = [host, f"https://{host}", f"http://{host}"]
    if host == "registry-1.docker.io":
        names = ["https://index.docker.io/v1/", "docker.io", "index.docker.io"]
    for name in names:
        entry = auths.get(name) or auths.get(name + "/")
        if isinstance(entry, dict) and isinstance(entry.get("auth"), str) and entry["auth"]:
            return str(entry["auth"])
    return None


class Registry:
    """The registry at ``host`` (host[:port]) over its HTTP API."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.base = f"{'http' if _loopback(host) else 'https'}://{host}"
        self._authorization: str | None = None
        # urllib follows a redirect for GET and HEAD only; the Authorization header is added unredirected, so that a
        # blob's redirect to its storage never carries the registry's token.
        self._opener = urllib.request.build_opener()
        self._until = time.monotonic() + TOTAL_DEADLINE_S

    # The one way a request is made: bounded, with one retry after an authentication challenge.
    def _request(
        self, method: str, url: str, limit: int, headers: dict[str, str] | None = None, body: bytes | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        for attempt in range(2):
            if time.monotonic() > self._until:
                raise RegistryError(f"the registry {self.host} took more than {TOTAL_DEADLINE_S:.0f} s in all: refused")
            request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
            if self._authorization is not None:
                request.add_unredirected_header("Authorization", self._authorization)
            try:
                with self._opener.open(request, timeout=TIMEOUT_S) as response:
                    return response.status, dict(response.headers.items()), self._read(response, limit, url)
            except urllib.error.HTTPError as exc:
                if exc.code == 401 and attempt == 0 and self._authenticate(exc.headers.get("WWW-Authenticate", "")):
                    continue
                detail = self._error_text(exc)
                if exc.code == 404:
                    raise ManifestUnknown(f"the registry {self.host} has no {url.rsplit('/', 1)[-1]}: {detail}") from None
                if exc.code in (401, 403):
                    raise RegistryError(
                        f"the registry {self.host} refused {method} {urllib.parse.urlsplit(url).path} (HTTP {exc.code}): "
                        f"{detail}; log in with docker login {self.host} (its credentials in $DOCKER_CONFIG/config.json "
                        "are used; credential helpers are not)"
                    ) from None
                raise RegistryError(f"the registry {self.host} answered HTTP {exc.code} to {method} {url}: {detail}") from None
            except (urllib.error.URLError, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                raise RegistryError(f"cannot reach the registry {self.host} ({self.base}): {_shown(str(reason))}") from None
        raise RegistryError(f"the registry {self.host} asked for credentials again after they were given")

    def _read(self, response: HTTPResponse, limit: int, url: str) -> bytes:
        """The body, at most ``limit`` bytes, whole within ANSWER_DEADLINE_S (and the command's TOTAL_DEADLINE_S)."""
        deadline = min(time.monotonic() + ANSWER_DEADLINE_S, self._until)
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = response.read1(_CHUNK)
            if not chunk:
                return b"".join(chunks)
            total += len(chunk)
            if total > limit:
                raise RegistryError(f"the registry's answer to {url} is larger than {size_text(limit)}: refused")
            if time.monotonic() > deadline:
                raise RegistryError(f"the registry's answer to {url} took too long (its deadline passed): refused")
            chunks.append(chunk)

    def _error_text(self, exc: urllib.error.HTTPError) -> str:
        """The registry's own words for an error (its errors[0].message), made safe to print."""
        try:
            raw = exc.fp.read(SMALL_MAX_BYTES) if exc.fp is not None else b""
            data = strict_json.loads(raw)
            first = data["errors"][0]
            return _shown(f"{first.get('code', '')}: {first.get('message', '')}")
        except (ValueError, RecursionError, KeyError, IndexError, TypeError, AttributeError, OSError):
            return _shown(str(exc.reason))

    def _authenticate(self, challenge: str) -> bool:
        """Credentials for the challenge of a 401 (Basic: docker login's; Bearer: a token from its realm, with
        them where there are some); False when there is nothing to answer it with."""
        scheme, _, rest = challenge.partition(" ")
        params = dict(_CHALLENGE_PARAM.findall(rest))
        credentials = docker_credentials(self.host)
        if scheme.lower() == "basic":
            if credentials is None:
                return False
            self._authorization = f"Basic {credentials}"
            return True
        # The token comes from the realm the registry names, over HTTPS (plain HTTP only to the loopback): docker
        # login's credentials never travel in the clear to another host.
        realm = urllib.parse.urlsplit(params.get("realm", ""))
        if scheme.lower() != "bearer" or not (realm.scheme == "https" or (realm.scheme == "http" and _loopback(realm.netloc))):
            return False
        query = {key: params[key] for key in ("service", "scope") if key in params}
        url = params["realm"] + ("?" + urllib.parse.urlencode(query) if query else "")
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        if credentials is not None:
            request.add_unredirected_header("Authorization", f"Basic {credentials}")
        try:
            with self._opener.open(request, timeout=TIMEOUT_S) as response:
                data = strict_json.loads(self._read(response, SMALL_MAX_BYTES, url))
        except (urllib.error.URLError, OSError, ValueError, RecursionError):
            return False
        token = (data.get("token") or data.get("access_token")) if isinstance(data, dict) else None
        if not isinstance(token, str) or not token:
            return False
        self._authorization = f"Bearer {token}"
        return True

    def manifest(self, repository: str, reference: str) -> Manifest:
        url = f"{self.base}/v2/{repository}/manifests/{reference}"
        _, headers, raw = self._request("GET", url, MANIFEST_MAX_BYTES, {"Accept": ACCEPT})
        digest = sha256_digest(raw)
        if reference.startswith("sha256:") and digest != reference:
            raise RegistryError(f"the registry {self.host} answered {repository}@{reference} with other bytes: refused")
        try:
            return parse_manifest(raw, digest, headers.get("Content-Type"))
        except ManifestRefused as exc:
            raise RegistryError(f"the registry's manifest of {repository}:{reference} is not one distval reads: {exc}") from None

    def blob(self, repository: str, digest: str, limit: int) -> bytes:
        url = f"{self.base}/v2/{repository}/blobs/{digest}"
        _, _, raw = self._request("GET", url, limit)
        if sha256_digest(raw) != digest:
            raise RegistryError(f"the registry {self.host} answered the blob {digest} with other bytes: refused")
        return raw

    def put_blob(self, repository: str, data: bytes) -> str:
        digest = sha256_digest(data)
        _, headers, _ = self._request("POST", f"{self.base}/v2/{repository}/blobs/uploads/", SMALL_MAX_BYTES, body=b"")
        location = headers.get("Location")
        if not location:
            raise RegistryError(f"the registry {self.host} started an upload without saying where to send it (no Location)")
        target = urllib.parse.urljoin(self.base + "/", location)
        if urllib.parse.urlsplit(target).netloc != urllib.parse.urlsplit(self.base).netloc:
            raise RegistryError(f"the registry {self.host} sent the upload elsewhere ({_shown(target)}): refused")
        separator = "&" if "?" in target else "?"
        self._request(
            "PUT",
            f"{target}{separator}digest={urllib.parse.quote(digest)}",
            SMALL_MAX_BYTES,
            {"Content-Type": "application/octet-stream"},
            data,
        )
        return digest

    def put_manifest(self, repository: str, tag: str, data: bytes, media_type: str) -> str:
        self._request("PUT", f"{self.base}/v2/{repository}/manifests/{tag}", SMALL_MAX_BYTES, {"Content-Type": media_type}, data)
        return sha256_digest(data)
