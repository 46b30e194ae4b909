"""Which planner plans a scenario: across several Docker Engines when hosts are named (--hosts, or the scenario's
``hosts`` key), else on one Engine. Every caller that plans a Docker run (``distval plan``, ``distval run``, the
Kubernetes export, tests, benchmarks) plans through here; host mode has its own entry point
(distval/targets/local/plan.py plan_local_scenario).
"""

from __future__ import annotations

from distval.config import Config, Scenario
from distval.config.shipped import DEFAULT_IMAGE
from distval.plan.identity import with_hashes
from distval.plan.model import RunPlan, ScenarioPlan, run_slugs, scenario_slug
from distval.targets.docker import plan as one_engine
from distval.targets.engines.plan import plan_across_hosts


def plan_scenario(
    scenario: Scenario, run_id: str, image_override: str | None, slug: str | None = None, hosts: tuple[str, ...] = ()
) -> ScenarioPlan:
    """``hosts``: --hosts, over the scenario's own ``hosts``."""
    slug = slug or scenario_slug(scenario.name)
    image = image_override or scenario.image or DEFAULT_IMAGE
    hosts = hosts or scenario.hosts
    if hosts:
        return plan_across_hosts(scenario, run_id, image, slug, hosts)
    return one_engine.plan_scenario(scenario, run_id, image, slug)


def plan_run(config: Config, run_id: str, image_override: str | None = None, hosts: tuple[str, ...] = ()) -> RunPlan:
    """``hosts``: --hosts, over every scenario's own ``hosts``. Each plan carries its scenario hash (the results read it)."""
    slugs = run_slugs(config)
    return RunPlan(
        run_id=run_id,
        config_path=config.path,
        scenarios=tuple(
            with_hashes(plan_scenario(s, run_id, image_override, slug, hosts))
            for s, slug in zip(config.scenarios, slugs, strict=True)
        ),
    )
