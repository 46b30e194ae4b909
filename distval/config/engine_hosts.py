"""A Docker Engine as a run reaches it: its URL (distval/config/engine_urls.py says which URLs are taken) and, for
a TLS Engine, the client's files; --hosts and the TLS options read into them. Which Engines a run uses, and which
node runs on which, is distval/targets/engines/hosts.py; the client is made by distval/targets/docker/engine.py.

URLs are docker-py's: ``unix:///var/run/docker.sock``, ``tcp://HOST:PORT`` (plain), ``https://HOST:PORT``
(TCP with TLS: docker-py's own spelling of it; the certificates come from ``--tls-ca/--tls-cert/--tls-key``
or ``DOCKER_CERT_PATH``), ``ssh://USER@HOST[:PORT]``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from distval.config.engine_urls import HOSTS_MAX, url_problem
from distval.errors import BadInput

# The option that lets a config's ``hosts`` keys choose Engines (distval/targets/engines/hosts.py refuses them
# without it).
FROM_CONFIG_FLAG = "--hosts-from-config"


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


def parse_hosts(text: str) -> tuple[str, ...]:
    """``--hosts URL[,URL...]`` -> the URLs, in order; a bad one is a one-line BadInput naming it."""
    urls = tuple(part.strip() for part in text.split(","))
    if not text.strip() or any(not url for url in urls):
        raise BadInput(f"--hosts: expected URL[,URL...] with no empty entry; got {text!r}")
    check_urls(urls, "--hosts")
    return urls


def check_urls(urls: Sequence[str], where: str) -> None:
    if len(urls) > HOSTS_MAX:
        raise BadInput(f"{where}: expected at most {HOSTS_MAX} hosts; got {len(urls)}")
    for url in urls:
        problem = url_problem(url)
        if problem is not None:
            raise BadInput(f"{where}: {problem}")
    repeated = sorted({url for url in urls if list(urls).count(url) > 1})
    if repeated:
        raise BadInput(f"{where}: expected each host once; {repeated[0]!r} is listed twice")


def tls_files(ca: str | None, cert: str | None, key: str | None, environ: Mapping[str, str] = os.environ) -> TlsFiles | None:
    """The TLS client files: all three options, or DOCKER_CERT_PATH's ca.pem/cert.pem/key.pem; None: neither."""
    given = [ca, cert, key]
    if any(given) and not all(given):
        raise BadInput("--tls-ca, --tls-cert and --tls-key go together: give all three (or DOCKER_CERT_PATH)")
    if ca and cert and key:
        files = TlsFiles(ca, cert, key)
    elif environ.get("DOCKER_CERT_PATH"):
        base = environ["DOCKER_CERT_PATH"]
        files = TlsFiles(os.path.join(base, "ca.pem"), os.path.join(base, "cert.pem"), os.path.join(base, "key.pem"))
    else:
        return None
    for path in (files.ca, files.cert, files.key):
        if not os.path.isfile(path):
            raise BadInput(f"TLS: expected a readable file at {path}; there is none")
    return files


def host_specs(urls: Sequence[str], tls: TlsFiles | None, use_ssh_client: bool = True) -> tuple[HostSpec, ...]:
    """One HostSpec per URL: https:// hosts get the TLS files (and need them); ssh:// hosts go through the system
    ssh client (the user's ssh config, agent and known_hosts; docker-py's paramiko path needs the docker[ssh] extra)."""
    specs = []
    for url in urls:
        secure = url.startswith("https://")
        if secure and tls is None:
            raise BadInput(f"{url} is TLS (https://): give --tls-ca, --tls-cert and --tls-key, or set DOCKER_CERT_PATH")
        specs.append(HostSpec(url, tls if secure else None, use_ssh_client and url.startswith("ssh://")))
    return tuple(specs)
