"""The target layer: capabilities declared per target (distval/targets/declarations.py), refusals and capability
skips derived from them with one message form, and the docs page generated from the same rows."""

from __future__ import annotations

import dataclasses

import pytest

from distval.config import load_config, parse_config
from distval.errors import BadInput
from distval.targets.base import plan_on, refuse_what_it_lacks
from distval.targets.capabilities import CAPABILITIES, Lacking, TargetDeclaration
from distval.targets.declarations import DOCKER, ENGINES, KUBERNETES, LOCAL, TARGETS
from distval.targets.docker.target import DockerTarget
from distval.targets.reference import TARGETS_PAGE, render_targets_page
from tests.config_helpers import FILE, yaml_text
from tests.paths import ROOT

ASKING = """
version: 1
scenarios:
  - {name: plain, topology: cross-container, world_size: 2, checks: [env]}
  - {name: v6, topology: cross-container, world_size: 2, ipv6: true, checks: [env]}
  - {name: homed, topology: cross-container, world_size: 2, extra_networks: 1, checks: [env]}
  - {name: restarts, topology: cross-container, world_size: 2, max_restarts: 1, checks: [env]}
"""


def _scenarios() -> dict[str, object]:
    config = parse_config(yaml_text(ASKING), FILE)
    faulty = load_config(str(ROOT / "configs" / "faults.yaml")).scenarios[0]
    return {s.name: s for s in (*config.scenarios, faulty)}


def test_every_capability_a_scenario_can_ask_for_is_asked_by_some_scenario_here() -> None:
    """Each capability's predicate is exercised (a predicate that never holds would be a refusal never made)."""
    scenarios = _scenarios()
    for capability in CAPABILITIES:
        if capability.asked is not None and capability.name != "gpus":  # GPUs: tests/plan/test_gpu_plan.py
            assert any(capability.asked(s) for s in scenarios.values()), capability.name  # type: ignore[arg-type]
    assert not any(c.asked(scenarios["plain"]) for c in CAPABILITIES if c.asked is not None)  # type: ignore[arg-type]


@pytest.mark.parametrize("target", TARGETS, ids=[t.name for t in TARGETS])
def test_every_lacking_capability_is_refused_or_skipped_with_the_one_message_form(target: TargetDeclaration) -> None:
    scenarios = _scenarios()
    for capability in CAPABILITIES:
        lacking = target.lacks.get(capability.name)
        asking = [s for s in scenarios.values() if capability.asked is not None and capability.asked(s)]  # type: ignore[arg-type]
        for scenario in asking:
            refused = target.refusals([scenario])  # type: ignore[list-item]
            skipped = target.skip_reason(scenario)  # type: ignore[arg-type]
            if lacking is None:
                assert capability.name not in " ".join(refused) and skipped is None
                continue
            expected = (
                f"scenario {scenario.name} asks for {capability.what} ({capability.asked_by}); "  # type: ignore[attr-defined]
                f"the {target.name} target cannot give it: {lacking.why}"
            )
            assert (skipped == expected) if lacking.skip else (expected in refused), (target.name, capability.name)
    if "keep_on_failure" in target.lacks:
        (line,) = target.refusals([], ["keep_on_failure"])
        assert line.startswith("--keep-on-failure asks for ") and f"the {target.name} target cannot give it" in line
    else:
        assert target.refusals([], ["keep_on_failure"]) == []


def test_the_docker_target_lacks_nothing_and_a_plain_scenario_runs_everywhere() -> None:
    assert DOCKER.lacks == {}
    plain = _scenarios()["plain"]
    for target in TARGETS:
        assert target.refusals([plain]) == [] and target.skip_reason(plain) is None  # type: ignore[list-item, arg-type]


def test_a_refusal_names_at_most_five_scenarios_and_counts_the_rest() -> None:
    faulty = load_config(str(ROOT / "configs" / "faults.yaml")).scenarios
    (line,) = ENGINES.refusals(faulty)
    names = ", ".join(s.name for s in faulty[:5])
    assert line.startswith(f"scenarios {names} and {len(faulty) - 5} more ask for injected faults (faults:); ")


def test_a_declaration_naming_an_unknown_capability_is_a_bug_at_import() -> None:
    with pytest.raises(ValueError, match="unknown capabilities"):
        TargetDeclaration("typo", "nothing", "--typo", {"fautls": Lacking("x")})


def test_refusal_guard_can_fail() -> None:
    """The guard refuses exactly what the declaration lacks: a target that declared faults would let them through."""
    faulty = load_config(str(ROOT / "configs" / "faults.yaml"))
    plan = plan_on(DockerTarget(None, _no_engine, False, print), faulty, "r1")
    refuse_what_it_lacks(DockerTarget(None, _no_engine, False, print), plan)  # the docker target has faults
    lacking_faults = dataclasses.replace(DOCKER, lacks={"faults": Lacking("a test's declaration")})
    with pytest.raises(BadInput, match="the docker target cannot give it: a test's declaration"):
        lacking_faults.refuse(s.scenario for s in plan.scenarios)


def test_the_local_and_kubernetes_declarations_say_what_they_do_instead_of_a_reaper() -> None:
    assert "watchdog" in LOCAL.lacks["reaper"].why and "kubectl delete" in KUBERNETES.lacks["reaper"].why


def test_the_targets_page_is_current() -> None:
    assert (ROOT / TARGETS_PAGE).read_text(encoding="utf-8") == render_targets_page(), (
        "regenerate: python -c 'from distval.targets.reference import render_targets_page as r; "
        f'open("{TARGETS_PAGE}", "w").write(r())\''
    )


def _no_engine(run_id: str) -> object:
    raise AssertionError("planning never asks for the Engine")
