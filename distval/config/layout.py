"""Layout rules: nodes x nproc_per_node = world_size, and what each topology allows of the rendezvous.

One function completes a layout from what was given (the YAML loader and Scenario built in code both use
it); the loader adds what a file must say on top of that, and reports each broken rule as an Issue.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from distval.config import rendezvous

TOPOLOGIES = ("in-container", "cross-container")
# The rendezvous forms (rendezvous.py declares each): all of them, those without a launcher, those in-container
# allows (it runs the launcher with --standalone) and those that run one process per container.
RENDEZVOUS = rendezvous.names()
LAUNCHER_RENDEZVOUS = rendezvous.names(launcher=True)
NO_LAUNCHER_RENDEZVOUS = rendezvous.names(launcher=False)
IN_CONTAINER_RENDEZVOUS = rendezvous.names(in_container=True)
ONE_PROCESS_RENDEZVOUS = rendezvous.names(several_per_node=False)
SEVERAL_PROCESS_RENDEZVOUS = rendezvous.names(several_per_node=True)
# How the other nodes address node 0: its DNS name, or its IP address learned at run time.
MASTER_ADDRS = ("name", "ip")
# distval's upper bounds on a layout (docs/scenarios.md, "Strictness"): checked on the keys (keys.py declares them
# with these) and on the values that follow from the others (world_size 1000 cross-container is 1000 nodes).
WORLD_SIZE_MAX = 1024
NODES_MAX = 256
NPROC_PER_NODE_MAX = 128


@dataclass(frozen=True)
class Issue:
    """A rule between keys broken: reported at ``key``; ``involved`` says which keys (or axes) caused it."""

    key: str
    message: str
    involved: frozenset[str]


def _issue(key: str, message: str, *involved: str) -> Issue:
    return Issue(key, message, frozenset(("topology", key, *involved)))


def complete_layout(
    topology: str, world_size: int | None, nodes: int | None, nproc: int | None
) -> tuple[int, int] | Issue | None:
    """(nodes, nproc_per_node) from what was given (None: not given), or the rule broken; None: too little given.

    Neither factor given: in-container is 1 x world_size, cross-container world_size x 1. One factor
    given: the other is world_size divided by it.
    """
    if nodes is not None and nproc is not None:
        if world_size is not None and world_size != nodes * nproc:
            return _issue(
                "world_size",
                f"expected world_size = nodes x nproc_per_node = {nodes * nproc}; got {world_size}",
                "nodes",
                "nproc_per_node",
            )
        return nodes, nproc
    if world_size is None:
        return None
    if nodes is None and nproc is None:
        return (1, world_size) if topology == "in-container" else (world_size, 1)
    if nodes is None:
        assert nproc is not None
        if nproc < 1 or world_size % nproc:
            return _issue(
                "world_size",
                f"expected world_size = nodes x nproc_per_node, a multiple of nproc_per_node = {nproc}; got {world_size}",
                "nproc_per_node",
            )
        return world_size // nproc, nproc
    if nodes < 1 or world_size % nodes:
        return _issue(
            "world_size",
            f"expected world_size = nodes x nproc_per_node, a multiple of nodes = {nodes}; got {world_size}",
            "nodes",
        )
    return nodes, world_size // nodes


def _bound_issues(nodes: int, nproc: int) -> list[Issue]:
    """The upper bounds broken by a completed layout (values given as keys were checked when read)."""
    found: list[Issue] = []
    if nodes * nproc > WORLD_SIZE_MAX:
        found.append(
            _issue(
                "world_size",
                f"expected at most {WORLD_SIZE_MAX} ranks (distval's bound on ranks per scenario); "
                f"nodes x nproc_per_node = {nodes} x {nproc} = {nodes * nproc}",
                "nodes",
                "nproc_per_node",
            )
        )
    elif nodes > NODES_MAX:
        found.append(
            _issue(
                "nodes",
                f"expected at most {NODES_MAX} nodes (distval's bound on containers per scenario); "
                f"world_size {nodes * nproc} / nproc_per_node {nproc} = {nodes}",
                "world_size",
                "nproc_per_node",
            )
        )
    elif nproc > NPROC_PER_NODE_MAX:
        found.append(
            _issue(
                "nproc_per_node",
                f"expected at most {NPROC_PER_NODE_MAX} processes per container (distval's bound); "
                f"world_size {nodes * nproc} / nodes {nodes} = {nproc}",
                "world_size",
                "nodes",
            )
        )
    return found


def resolve_layout(values: Mapping[str, Any], defaults: Mapping[str, Any]) -> tuple[dict[str, Any] | None, list[Issue]]:
    """The layout keys (keys.py: kind LAYOUT) of a scenario from its keys and the defaults (every key's), or the rules broken."""
    issues: list[Issue] = []
    topology: str = values["topology"]
    world_size: int | None = values.get("world_size")
    nodes: int | None = values.get("nodes")
    nproc: int | None = values.get("nproc_per_node")
    if topology == "in-container":
        if nodes is not None and nodes != 1:
            issues.append(
                _issue("nodes", f"expected 1 for in-container (one container; cross-container runs one per node); got {nodes}")
            )
        elif world_size is None and nproc is None:
            issues.append(
                _issue(
                    "nodes", "expected world_size or nproc_per_node with it (in-container: the processes in its one container)"
                )
            )
        nodes = 1
    else:
        if nodes is not None and nproc is None:
            nproc = 1  # a file that names the nodes and not the processes runs one process per node
        if nodes is None and world_size is None:
            issues.append(
                _issue(
                    "nproc_per_node", "expected nodes or world_size with it (cross-container: one container per node)", "nodes"
                )
            )
    done = complete_layout(topology, world_size, nodes, nproc)
    if isinstance(done, Issue):
        issues.append(done)
    elif done is not None:
        nodes, nproc = done

    if topology == "in-container":
        if values.get("rendezvous", IN_CONTAINER_RENDEZVOUS[0]) not in IN_CONTAINER_RENDEZVOUS:
            issues.append(
                _issue(
                    "rendezvous",
                    f"expected {' or '.join(IN_CONTAINER_RENDEZVOUS)} for in-container (it runs the launcher with "
                    f"--standalone); got {values['rendezvous']!r}",
                )
            )
        if values.get("master_addr") == "ip":
            issues.append(_issue("master_addr", "expected name for in-container (no other node addresses node 0); got 'ip'"))
        # The top level's rendezvous and master_addr apply to cross-container scenarios only.
        rendezvous, master_addr = IN_CONTAINER_RENDEZVOUS[0], "name"
    else:
        rendezvous = values.get("rendezvous", defaults["rendezvous"])
        master_addr = values.get("master_addr", defaults["master_addr"])
        if rendezvous in ONE_PROCESS_RENDEZVOUS and nproc is not None and nproc != 1:
            if "rendezvous" in values:
                issues.append(
                    _issue(
                        "rendezvous",
                        f"expected {' or '.join(SEVERAL_PROCESS_RENDEZVOUS)} with nproc_per_node = {nproc} "
                        f"({' and '.join(ONE_PROCESS_RENDEZVOUS)} run one process per container, no launcher); "
                        f"got {rendezvous!r}",
                        "nproc_per_node",
                    )
                )
            else:
                issues.append(
                    _issue(
                        "nproc_per_node",
                        f"expected 1 with rendezvous {rendezvous} (one process per container, no launcher); got {nproc}",
                        "rendezvous",
                    )
                )
    if isinstance(done, tuple):
        issues += _bound_issues(done[0], done[1])
    if issues or not isinstance(done, tuple):
        return None, issues
    nodes, nproc = done
    return {
        "topology": topology,
        "world_size": nodes * nproc,
        "nodes": nodes,
        "nproc_per_node": nproc,
        "rendezvous": rendezvous,
        "master_addr": master_addr,
    }, []
