"""Several Docker hosts: which Engines a run uses (``--hosts``, or the ``hosts`` key with ``--hosts-from-config``)
and which node runs on which (how to reach each one is distval/config/engine_hosts.py). Pure data; no docker-py here
(distval/targets/docker/engine.py makes the clients). Nodes go on hosts in order (node i on host i mod the number
of hosts) unless the scenario places them with ``placement`` (one host index per node).
"""

from __future__ import annotations

from collections.abc import Sequence

from distval.config.engine_hosts import FROM_CONFIG_FLAG
from distval.errors import BadInput


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
