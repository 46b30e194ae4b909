"""Named placeholders: the values in a plan that only the Engine (or the host) knows, and the one function
that fills them in.

A plan is complete except for these. ``distval plan`` prints them as they are (``{node0_ip}``); the
runtime observes the facts (an address once node 0 has started, a network's subnets once it exists) and
passes each step through ``resolve`` before executing it verbatim.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any, TypeVar

from distval.errors import PlanError

# Every placeholder, with what fills it in (shown by ``distval plan``).
PLACEHOLDERS: Mapping[str, str] = {
    "node0_ip": "node 0's address on the scenario's network, read from the Engine once node 0 has started "
    "(across several hosts: host 0's address, probed there)",
    "node0_host": "node0_ip as a URL or host:port writes it (an IPv6 address in brackets)",
    "subnets": "the scenario network's subnets (comma-separated), read from the Engine once it exists",
    "master_port": "a TCP port free on this host (host mode) or on host 0 (several hosts), chosen when the scenario starts",
    "c10d_port": "a second TCP port free there, for the c10d rendezvous store",
    "socket_ifname": "the interface holding the route to the rendezvous on the container's host, probed there (several hosts)",
}
_PATTERN = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")
T = TypeVar("T")


def placeholder(name: str) -> str:
    if name not in PLACEHOLDERS:
        raise KeyError(name)
    return "{" + name + "}"


def placeholders_in(value: object) -> set[str]:
    """The names of the placeholders anywhere in ``value`` (strings, tuples, lists, dicts, dataclasses)."""
    found: set[str] = set()

    def collect(text: str) -> str:
        found.update(_PATTERN.findall(text))
        return text

    _walk(value, collect)
    return found


def host_form(address: str) -> str:
    """An address as it stands before ``:port`` or in a URL: IPv6 literals in brackets (RFC 3986)."""
    return f"[{address}]" if ":" in address and not address.startswith("[") else address


def facts_for_address(address: str) -> dict[str, str]:
    """The facts one observed node 0 address provides."""
    return {"node0_ip": address, "node0_host": host_form(address)}


def host_fact(name: str, host: str) -> str:
    """The key of a fact that differs per host (``socket_ifname`` of one --hosts URL)."""
    return f"{name}@{host}"


def facts_on_host(facts: Mapping[str, str], host: str) -> dict[str, str]:
    """The facts as a container on ``host`` sees them: that host's own for the per-host placeholders."""
    seen = dict(facts)
    for name in PLACEHOLDERS:
        if host_fact(name, host) in facts:
            seen[name] = facts[host_fact(name, host)]
    return seen


def resolve(value: T, facts: Mapping[str, str]) -> T:
    """``value`` with every placeholder replaced by its fact. A placeholder whose fact is not known yet is
    an error in the plan (a step ordered before the step that learns it), never silently left in."""

    def fill(text: str) -> str:
        def one(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in facts:
                raise PlanError(f"the plan uses {{{name}}} before it is known ({PLACEHOLDERS[name]})")
            return facts[name]

        return _PATTERN.sub(one, text)

    resolved: T = _walk(value, fill)
    return resolved


def _walk(value: Any, fill: Any) -> Any:
    if isinstance(value, str):
        return fill(value)
    if isinstance(value, tuple):
        return tuple(_walk(v, fill) for v in value)
    if isinstance(value, list):
        return [_walk(v, fill) for v in value]
    if isinstance(value, dict):
        return {_walk(k, fill): _walk(v, fill) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: _walk(getattr(value, f.name), fill) for f in dataclasses.fields(value) if f.init}
        return dataclasses.replace(value, **changes)
    return value
