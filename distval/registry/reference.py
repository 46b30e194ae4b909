"""An image reference (``host:5000/org/torch:2.6``, ``org/torch@sha256:...``) as the registry's API needs it: which
registry, which repository in it, and the tag or digest, normalised as Docker normalises names (a name without a
registry host is Docker Hub's, a one-part name on Docker Hub is under ``library/``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from distval.config.values import image_problem
from distval.errors import BadInput

DOCKER_HUB = "docker.io"
# Docker Hub's registry API is served from another host than its name.
DOCKER_HUB_API = "registry-1.docker.io"
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


class BadReference(BadInput):
    kind = "image"


@dataclass(frozen=True)
class Reference:
    registry: str  # host[:port], as Docker names it (docker.io for Docker Hub)
    repository: str  # the repository's path in the registry (library/debian on Docker Hub)
    tag: str | None
    digest: str | None  # sha256:<64 hex>

    @property
    def name(self) -> str:
        """registry/repository: the subject's name, and what a digest is appended to."""
        return f"{self.registry}/{self.repository}"

    @property
    def api_host(self) -> str:
        return DOCKER_HUB_API if self.registry == DOCKER_HUB else self.registry

    @property
    def manifest_reference(self) -> str:
        """What GET /v2/<repository>/manifests/<reference> is asked for: the digest when given, else the tag."""
        return self.digest or self.tag or "latest"

    def with_digest(self, digest: str) -> str:
        return f"{self.name}@{digest}"


def _is_host(part: str) -> bool:
    return "." in part or ":" in part or part == "localhost"


def parse_reference(text: str) -> Reference:
    """The reference ``text`` (already checked against Docker's grammar by --image's type); BadReference for a digest
    that is not sha256 (the only one distval matches)."""
    why = image_problem(text)
    if why is not None:
        raise BadReference(f"{text!r}: {why}")
    name, _, digest = text.partition("@")
    if digest and DIGEST.fullmatch(digest) is None:
        raise BadReference(f"{text}: expected a sha256 digest (sha256: and 64 lowercase hex digits) after '@'")
    tag = None
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name, tag = name.rsplit(":", 1)
    first, _, rest = name.partition("/")
    if rest and _is_host(first):
        registry, repository = first, rest
    else:
        registry, repository = DOCKER_HUB, name
    if registry == DOCKER_HUB and "/" not in repository:
        repository = f"library/{repository}"
    return Reference(registry, repository, tag, digest or None)
