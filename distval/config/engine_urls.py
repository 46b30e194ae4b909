"""Docker Engine URLs as a config value (a scenario's ``hosts`` key) and as ``--hosts`` take them: the grammar only.
What a run does with them is distval/targets/engines/hosts.py."""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

SCHEMES = ("unix", "tcp", "https", "ssh")
HOSTS_MAX = 64  # distval's bound on hosts per run (the plan lists every one)
EXPECTED = "a Docker Engine URL: unix:///PATH, tcp://HOST:PORT, https://HOST:PORT (TLS) or ssh://USER@HOST[:PORT]"
_HOST_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$")


def url_problem(url: str) -> str | None:
    """Why ``url`` is not an Engine URL distval takes (None: it is)."""
    if "://" not in url:
        return f"expected {EXPECTED}; got {url!r} (no scheme)"
    scheme, rest = url.split("://", 1)
    if scheme not in SCHEMES:
        return f"expected {EXPECTED}; got {url!r} (scheme {scheme!r})"
    if any(c.isspace() or ord(c) < 32 for c in url):
        return f"expected {EXPECTED}; got {url!r} (blanks or control characters)"
    if scheme == "unix":
        return None if rest.startswith("/") and len(rest) > 1 else f"expected unix:///ABSOLUTE/PATH; got {url!r}"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"expected {EXPECTED}; got {url!r} ({exc})"
    host = parts.hostname
    if not host:
        return f"expected {EXPECTED}; got {url!r} (no host)"
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        return f"expected {EXPECTED}; got {url!r} (a path, query or fragment)"
    if not is_address(host) and _HOST_NAME.fullmatch(host) is None:
        return f"expected {EXPECTED}; got {url!r} (host {host!r} is neither a host name nor an IP address)"
    if scheme in ("tcp", "https") and port is None:
        return f"expected {scheme}://HOST:PORT with a port (2375 plain, 2376 TLS by convention); got {url!r}"
    if scheme == "ssh" and parts.password is not None:
        return f"expected ssh://USER@HOST without a password (use keys); got {url!r}"
    return None


def is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True
