"""What runs, as 12 hex digits: the scenario hash of a plan, a pure function of the ScenarioPlan given.

sha256 over everything in the plan that changes what runs: the target (docker or host, and the --hosts URLs),
the image, every container with its creation arguments and files, the networks, the steps, the host probes and
the faults. What differs between two runs of the same scenario on the same target is read as a fixed string:

- the run id, wherever the planners put it (resource names, c10d's --rdzv_id, the run label, DISTVAL_RUN_ID);
- the slug (numbered when two scenarios' names share one: it depends on the rest of the config), in names;
- host mode's root directory (a temporary name; the plan carries it as ``root_dir``), in the nodes' paths;
- each network's IPv6 subnet (derived from its run-unique name).

Values the runtime picks (ports, addresses) are placeholders in the plan and hash as such. So the same scenario
hashes the same in every run, and a changed check argument, image, option, launcher line, target or host does
not. ``any_image``: the same with the image read as a fixed name too, so that the same scenario on another image
hashes the same (a last-known-good comparison matches a candidate image's scenarios with the good image's by it).

``with_hashes`` fills in the plan's two hash fields where a run is planned; the results only read them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from distval.labels import LABEL_RUN
from distval.plan.model import ScenarioPlan
from distval.plan.specs import ContainerPlan

HASH_RUN_ID = "run-id"  # what the run id reads as in the hashed form of a plan
HASH_SLUG = "slug"  # what the slug reads as in names
HASH_ROOT = "/tmp/distval-host"  # what host mode's root directory reads as
HASH_IPV6_SUBNET = "ipv6-subnet"  # what a network's IPv6 subnet reads as (it is derived from the name)
ANY_IMAGE = "IMAGE"  # what the image reads as in scenario_hash(any_image=True)
RUN_VALUED = (LABEL_RUN, "DISTVAL_RUN_ID")  # the label and the variable whose whole value is the run id


def with_hashes(plan: ScenarioPlan) -> ScenarioPlan:
    """``plan`` with its ``scenario_hash`` and ``scenario_hash_any_image`` filled in."""
    return dataclasses.replace(
        plan, scenario_hash=scenario_hash(plan), scenario_hash_any_image=scenario_hash(plan, any_image=True)
    )


def scenario_hash(plan: ScenarioPlan, any_image: bool = False) -> str:
    data: dict[str, Any] = {
        "target": {"mode": plan.mode, "hosts": list(plan.hosts)},
        "image": plan.image,
        "containers": [_hashed_container(c) for c in plan.containers],
        "networks": [n.create_kwargs() for n in plan.networks],
        "steps": [[type(step).__name__, dataclasses.asdict(step)] for step in plan.steps],
        "probes": [_hashed_container(p) for p in plan.probes],
        "faults": dataclasses.asdict(plan.faults) if plan.faults is not None else None,
    }
    exact = {n.ipv6_subnet: HASH_IPV6_SUBNET for n in plan.networks if n.ipv6_subnet is not None}
    if any_image:
        exact[plan.image] = ANY_IMAGE
    payload = json.dumps(_canonical(data, _Renames.of(plan), exact), sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:12]


def _hashed_container(container: ContainerPlan) -> dict[str, Any]:
    return {"create": container.create_kwargs(), "files": [dataclasses.asdict(f) for f in container.files]}


@dataclasses.dataclass(frozen=True)
class _Renames:
    """The run-specific prefixes of a plan's strings, each with what it reads as."""

    run_id: str
    pairs: tuple[tuple[str, str], ...]  # applied in order: the longest (the root-anchored paths) first

    @classmethod
    def of(cls, plan: ScenarioPlan) -> _Renames:
        base, hashed_base = f"distval-{plan.run_id}-{plan.slug}", f"distval-{HASH_RUN_ID}-{HASH_SLUG}"
        pairs = []
        if plan.root_dir:  # the planner puts each node's directory at <root>/<base>-n<rank>
            pairs.append((f"{plan.root_dir.rstrip('/')}/{base}", f"{HASH_ROOT}/{hashed_base}"))
        pairs.append((base, hashed_base))
        pairs.append((f"--rdzv_id={plan.run_id}-{plan.slug}", f"--rdzv_id={HASH_RUN_ID}-{HASH_SLUG}"))
        return cls(plan.run_id, tuple(pairs))

    def apply(self, text: str) -> str:
        for old, new in self.pairs:
            text = text.replace(old, new)
        return text


def _canonical(value: Any, renames: _Renames, exact: Mapping[str, str], key: str | None = None) -> Any:
    """``value`` (JSON-able) with the run's values read as fixed strings. Anchored (a whole label or variable value,
    an exact value, or the ``<run id>-<slug>`` of names and --rdzv_id), so that a short run id or slug does not
    rewrite unrelated text."""
    if isinstance(value, dict):
        return {k: _canonical(v, renames, exact, k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if len(value) == 2 and value[0] in RUN_VALUED and value[1] == renames.run_id:
            return [value[0], HASH_RUN_ID]  # a (name, value) pair of labels or environment
        return [_canonical(v, renames, exact) for v in value]
    if not isinstance(value, str):
        return value
    if value == renames.run_id and key in RUN_VALUED:
        return HASH_RUN_ID
    if value in exact:
        return exact[value]
    return renames.apply(value)
