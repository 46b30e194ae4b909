"""``distval cleanup``: which runs' containers and networks to remove, and why; and removing them from one Engine.

A run's resources are removed only when the run is over: its owner (distval/owner.py) is dead (same
machine, and no process with that pid and start time), or its newest resource is older than
``--older-than``. A run whose owner lives, runs on another machine (another machine id, even under this host
name; or labels without a machine id from another boot), in another PID namespace, or is not named (made by a
distval before the owner labels) is kept, with the reason and the option that removes it anyway.
"""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from distval.config.durations import format_duration
from distval.engine_protocol import Resource
from distval.errors import DistvalError
from distval.labels import LABEL_ROLE, LABEL_RUN
from distval.owner import Owner, boot_id, machine_id, owner_alive

if TYPE_CHECKING:
    from distval.targets.docker.engine import Engine

NO_RUN_ID = "(no run id)"


@dataclass(frozen=True)
class RunDecision:
    run_id: str
    resources: tuple[Resource, ...]
    remove: bool
    reason: str

    @property
    def containers(self) -> int:
        return sum(1 for r in self.resources if r.kind == "container")

    @property
    def networks(self) -> int:
        return len(self.resources) - self.containers

    @property
    def has_reaper(self) -> bool:
        # A run's reaper (distval/targets/docker/reaper.py) is one of its containers: removing it first is harmless (it then
        # removes nothing), and a reaper still listed means its run's distval was alive or died seconds ago.
        return any(r.labels.get(LABEL_ROLE) == "reaper" for r in self.resources)

    def counts(self) -> str:
        among = " (its reaper among them)" if self.has_reaper else ""
        return f"{self.containers} container(s){among}, {self.networks} network(s)"


def by_run(resources: Iterable[Resource]) -> dict[str, list[Resource]]:
    runs: dict[str, list[Resource]] = {}
    for resource in resources:
        runs.setdefault(resource.labels.get(LABEL_RUN) or NO_RUN_ID, []).append(resource)
    return runs


def decide(
    resources: Iterable[Resource],
    older_than_s: float | None,
    now: float,
    host: str,
    alive: Callable[[Owner, str], bool | None] = owner_alive,
    machine: str | None = None,
) -> list[RunDecision]:
    """One decision per run, in the order the runs were listed. ``machine``: this machine's id (default:
    distval.owner.machine_id()), only for the reason given."""
    machine = machine if machine is not None else machine_id()
    decisions = []
    for run_id, found in by_run(resources).items():
        owner = next((o for o in (Owner.from_labels(r.labels) for r in found) if o is not None), None)
        created = [r.created for r in found if r.created is not None]
        age = now - max(created) if created else None
        old = older_than_s is not None and age is not None and age >= older_than_s
        state = alive(owner, host) if owner is not None else None
        if owner is not None and state is False:
            remove, reason = True, f"its owner, {owner.describe()}, is gone"
        elif old:
            assert older_than_s is not None and age is not None
            remove, reason = (
                True,
                f"its newest resource is {format_duration(age)} old (--older-than {format_duration(older_than_s)})",
            )
        elif owner is None:
            remove, reason = False, "it names no owner (made by an older distval); --older-than or --run-id removes it"
        elif state is None:
            if owner.host != host:
                where = "on another host"
            elif owner.machine and owner.machine != machine:
                where = f"on another machine with this host name (machine id {owner.machine[:12]})"
            elif not owner.machine and owner.started.split(":")[0] != boot_id():
                where = "on an unknown machine (labels without a machine id, of another boot)"
            else:
                where = "in another PID namespace (a container)"
            remove, reason = False, f"its owner, {owner.describe()}, runs {where}; --older-than or --run-id removes it"
        else:
            remove, reason = False, f"its owner, {owner.describe()}, is still running; --run-id {run_id} removes it anyway"
        if not remove and older_than_s is not None and age is not None:
            reason += f" (its newest resource is {format_duration(age)} old)"
        decisions.append(RunDecision(run_id, tuple(found), remove, reason))
    return decisions


def clean_engine(
    engine: Engine, run_id: str | None, every_run: bool, older_than: float | None, dry_run: bool, emit: Callable[[str], None]
) -> tuple[dict[str, Any], int]:
    """One Engine's cleanup (``distval cleanup``): the runs ``run_id`` names, every run (``every_run``), or those
    that are over (``older_than``: also those older); its lines through ``emit``, its outcome as data (an Engine's
    entry of ``distval cleanup --format json``), its exit code. ``dry_run``: the same decisions, nothing removed."""
    runs: list[dict[str, Any]] = []
    removed_containers = removed_networks = 0
    # --dry-run: the same decisions, the same lines, in the conditional ("would remove"); nothing removed.
    verb, keep = ("would remove", "would keep") if dry_run else ("removed", "kept")

    def outcome(error: str | None) -> dict[str, Any]:
        return {
            "engine": engine.where,
            "runs": runs,
            "removed_containers": removed_containers,
            "removed_networks": removed_networks,
            "kept_runs": sum(1 for run in runs if run["action"] == keep.replace(" ", "_")),
            "error": error,
        }

    try:
        if run_id or every_run:
            reason = f"named with --run-id {run_id}" if run_id else "--all"
            found = engine.list_managed([f"{LABEL_RUN}={run_id}"] if run_id else [])
            decisions = [RunDecision(run_id, tuple(rs), True, reason) for run_id, rs in by_run(found).items()]
        else:
            decisions = decide(engine.list_managed(), older_than, time.time(), socket.gethostname())
        for decision in decisions:
            action = verb if decision.remove else keep
            if not decision.remove:
                containers, networks = decision.containers, decision.networks
                emit(f"{keep} run {decision.run_id} ({decision.counts()}): {decision.reason}")
            elif dry_run:
                containers, networks = decision.containers, decision.networks
            else:
                containers, networks = engine.remove_resources(list(decision.resources))
            if decision.remove:
                removed_containers, removed_networks = removed_containers + containers, removed_networks + networks
                emit(f"{verb} run {decision.run_id} ({containers} container(s), {networks} network(s)): {decision.reason}")
            runs.append(
                {
                    "run_id": decision.run_id,
                    "action": action.replace(" ", "_"),
                    "reason": decision.reason,
                    "containers": containers,
                    "networks": networks,
                    "reaper": decision.has_reaper,
                }
            )
    except DistvalError as exc:
        print(f"distval: {exc}", file=sys.stderr)
        return outcome(str(exc)), exc.exit_code
    result = outcome(None)
    emit(f"{verb} {removed_containers} container(s) and {removed_networks} network(s); {keep} {result['kept_runs']} run(s)")
    return result, 0
