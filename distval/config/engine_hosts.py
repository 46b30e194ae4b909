"""A Docker Engine as a run reaches it: its URL (distval/config/engine_urls.py says which URLs are taken) and, for
a TLS Engine, the client's files. Data only: which Engines a run uses, and which node runs on which, is
distval/targets/engines/hosts.py; the client is made by distval/targets/docker/engine.py."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit


@dataclass(frozen=True)
class TlsFiles:
    """The client side of a TLS Engine: the CA that signed the Engine's certificate, and our certificate and key."""

    ca: str
    cert: str
    key: str


@dataclass(frozen=True)
class HostSpec:
    url: str
    tls: TlsFiles | None = None
    # ssh://: the system ssh client (its config, agent and known_hosts) instead of paramiko.
    use_ssh_client: bool = False

    @property
    def scheme(self) -> str:
        return self.url.split("://", 1)[0]

    @property
    def address(self) -> str | None:
        """The host part of a tcp/https/ssh URL (a name or an address; IPv6 without brackets); None for unix://."""
        if self.scheme == "unix":
            return None
        return urlsplit(self.url).hostname
