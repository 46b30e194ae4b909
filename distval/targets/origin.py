"""What an export ran: the scenario, image, run id, slug, config and job name of an exported job.

``distval export kubernetes`` and ``distval export slurm`` write it into the plan file beside what they export
(distval/targets/plan_file.py), and ``distval collect`` plans the scenario again from it, so that the reports come from
the same ScenarioPlan (and scenario hash) as a Docker run of that scenario. It never travels through the pods or job
steps: what they print about what ran is the image's to choose.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from distval.config import CheckSpec, Scenario
from distval.plan.identity import with_hashes
from distval.plan.model import ScenarioPlan
from distval.targets.engines.planning import plan_scenario

ORIGIN_VERSION = 1


@dataclass(frozen=True)
class Origin:
    scenario: Scenario
    image: str
    run_id: str
    slug: str
    config_path: str
    job: str  # the Kubernetes name of the scenario's Job (or JobSet), ConfigMap and Service

    def plan(self) -> ScenarioPlan:
        """The scenario's plan, exactly as ``distval run --run-id RUN_ID --image IMAGE`` plans it, with its hashes:
        the one place a plan is made again, because only the origin travels through the pods' logs."""
        return with_hashes(plan_scenario(self.scenario, self.run_id, self.image, self.slug))


def _plain(value: Any) -> Any:
    """JSON's view of a value: mappings as dicts, tuples as lists."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def _frozen(value: Any) -> Any:
    """The config loader's view of a JSON value: lists as tuples (the loader's sequences are tuples)."""
    if isinstance(value, dict):
        return {k: _frozen(v) for k, v in value.items()}
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


def origin_data(origin: Origin) -> dict[str, Any]:
    scenario = {f.name: _plain(getattr(origin.scenario, f.name)) for f in dataclasses.fields(origin.scenario)}
    scenario["checks"] = [{"name": c.name, "args": _plain(c.args), "required": c.required} for c in origin.scenario.checks]
    return {
        "version": ORIGIN_VERSION,
        "scenario": scenario,
        "image": origin.image,
        "run_id": origin.run_id,
        "slug": origin.slug,
        "config_path": origin.config_path,
        "job": origin.job,
    }


def origin_from_data(data: Any) -> Origin:
    """The Origin ``origin_data`` wrote. Raises ValueError (with what was expected) for anything else."""
    if not isinstance(data, dict) or data.get("version") != ORIGIN_VERSION:
        raise ValueError(f"expected a distval origin object of version {ORIGIN_VERSION}")
    try:
        fields = dict(data["scenario"])
        fields["checks"] = tuple(
            CheckSpec(name=str(c["name"]), args=MappingProxyType(_frozen(dict(c["args"]))), required=bool(c["required"]))
            for c in fields["checks"]
        )
        for name, value in fields.items():  # JSON lists back to the loader's tuples (env, axes, hosts, ...)
            if name != "checks":
                fields[name] = _frozen(value)
        scenario = Scenario(**fields)
        return Origin(
            scenario=scenario,
            image=str(data["image"]),
            run_id=str(data["run_id"]),
            slug=str(data["slug"]),
            config_path=str(data["config_path"]),
            job=str(data["job"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"expected a distval origin object (scenario, image, run_id, slug, config_path, job): {exc}") from exc
