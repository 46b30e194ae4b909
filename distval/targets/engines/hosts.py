"""Several Docker hosts: which Engines a run uses (``--hosts``, or the ``hosts`` key with ``--hosts-from-config``),
how to reach each one, and which node runs on which. Pure data and parsing; no docker-py here (distval/targets/docker/engine.py
makes the clients).

URLs are docker-py's: ``unix:///var/run/docker.sock``, ``tcp://HOST:PORT`` (plain), ``https://HOST:PORT``
(TCP with TLS: docker-py's own spelling of it; the certificates come from ``--tls-ca/--tls-cert/--tls-key``
or ``DOCKER_CERT_PATH``), ``ssh://USER@HOST[:PORT]``. Nodes go on hosts in order (node i on host i mod
the number of hosts) unless the scenario places them with ``placement`` (one host index per node).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from distval.config.engine_hosts import HostSpec, TlsFiles
from distval.config.engine_urls import HOSTS_MAX, url_problem
from distval.errors import BadInput


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


def placement(nodes: int, host_count: int, explicit: Sequence[int] = ()) -> tuple[int, ...]:
    """The host index of each node: ``explicit`` (checked), else in order, wrapping around."""
    if host_count < 1:
        raise BadInput("expected at least one host")
    if explicit:
        if len(explicit) != nodes:
            raise BadInput(f"placement: expected one host index per node ({nodes}); got {len(explicit)}")
        wrong = [i for i in explicit if not 0 <= i < host_count]
        if wrong:
            raise BadInput(f"placement: expected host indexes 0..{host_count - 1} (one per --hosts entry); got {wrong[0]}")
        return tuple(explicit)
    return tuple(node % host_count for node in range(nodes))


FROM_CONFIG_FLAG = "--hosts-from-config"


def check_hosts_allowed(
    config_path: str, scenario_hosts: Sequence[tuple[str, tuple[str, ...]]], override: Sequence[str], from_config: bool
) -> None:
    """Refuse a ``hosts`` key the person running distval did not allow. Several hosts run every rank in its host's
    network namespace (``egress: false`` cannot hold there) and copy the image to each Engine named: a decision
    of whoever runs distval, not of whoever wrote the file. ``--hosts`` (which replaces every ``hosts`` key) or
    ``--hosts-from-config`` allows it. ``scenario_hosts``: (scenario name, its hosts) per scenario."""
    if override or from_config:
        return
    named = next(((name, hosts) for name, hosts in scenario_hosts if hosts), None)
    if named is not None:
        raise BadInput(
            f"{config_path}: scenario {named[0]}: hosts: places the ranks on {len(named[1])} Engine(s) the file "
            f"names, with host networking, and copies the image to them; pass {FROM_CONFIG_FLAG} to allow it "
            "(or give the Engines with --hosts)"
        )


def run_hosts(plan_hosts: Sequence[tuple[str, ...]], override: tuple[str, ...]) -> tuple[str, ...]:
    """The Engines a run uses: --hosts, else every scenario's ``hosts`` in order of first mention."""
    if override:
        return override
    urls: list[str] = []
    for hosts in plan_hosts:
        urls += [url for url in hosts if url not in urls]
    return tuple(urls)
