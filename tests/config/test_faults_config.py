"""``faults:`` and ``expect:`` read strictly: each bad input is one problem with its file, line, key path,
what was expected and what was seen; the shipped configs/faults.yaml loads as written."""

from __future__ import annotations

import pytest

from distval.config import load_config, parse_config
from distval.config.faults import Expectation, FaultSpec, Trigger
from tests.config_helpers import FILE, line_of, problems_of, yaml_text
from tests.paths import ROOT

HEAD = """
scenarios:
  - topology: cross-container
    world_size: 3
    checks: [all_reduce, collective_loop]
"""


def scenario(faults: str, expect: str = "expect: []") -> str:
    return yaml_text(HEAD) + "".join(f"    {line}\n" for line in (faults + "\n" + expect).splitlines())


def test_a_fault_and_its_expectation_are_read() -> None:
    text = scenario(
        "faults: [{kind: partition, node: 2, peers: [0], heal_after_s: 4, after: {check: all_reduce, delay_s: 2}}]",
        "expect: [{ranks: survivors, error: [timeout, connection_closed], within_s: [8, 16]},"
        " {ranks: [2], error: killed, within_s: [0, 1]}]",
    )
    s = parse_config(text, FILE).scenarios[0]
    assert s.faults == (FaultSpec("partition", 2, Trigger("all_reduce", 2.0), peers=(0,), heal_after_s=4.0),)
    assert s.expect == (
        Expectation("survivors", ("timeout", "connection_closed"), (8.0, 16.0)),
        Expectation((2,), ("killed",), (0.0, 1.0)),
    )


def test_kill_store_names_no_node_and_defaults_delay() -> None:
    s = parse_config(scenario("faults: [{kind: kill-store, after: {check: all_reduce}}]"), FILE).scenarios[0]
    assert s.faults == (FaultSpec("kill-store", None, Trigger("all_reduce", 0.0)),)


BAD = [
    (
        "faults: [{kind: explode, node: 1, after: {check: all_reduce}}]",
        "scenarios[0].faults[0].kind: expected one of kill, partition, freeze, slow, oom, kill-store; got 'explode'",
    ),
    ("faults: [{kind: kill, node: 1}]", "scenarios[0].faults[0].after: required key is missing"),
    ("faults: [{kind: kill, after: {check: all_reduce}}]", "scenarios[0].faults[0].node: required key is missing"),
    (
        "faults: [{kind: kill, node: -1, after: {check: all_reduce}}]",
        "scenarios[0].faults[0].node: expected an integer >= 0; got '-1'",
    ),
    (
        "faults: [{kind: freeze, node: 1, rate: 1mbit, after: {check: all_reduce}}]",
        "scenarios[0].faults[0].rate: expected no rate for a freeze fault (it takes resume_after_s)",
    ),
    (
        "faults: [{kind: slow, node: 1, rate: fast, after: {check: all_reduce}}]",
        "scenarios[0].faults[0].rate: expected a tc rate like 1mbit (bit, kbit, mbit or gbit); got 'fast'",
    ),
    (
        "faults: [{kind: slow, node: 1, after: {check: all_reduce}}]",
        "scenarios[0].faults[0].rate: required key is missing (slow needs rate, latency_ms or loss_percent)",
    ),
    (
        "faults: [{kind: oom, node: 1, after: {check: all_reduce}}]",
        "scenarios[0].faults[0].memory: required key is missing (the node's memory limit)",
    ),
    (
        "faults: [{kind: kill-store, node: 0, after: {check: all_reduce}}]",
        "scenarios[0].faults[0].node: expected no node: kill-store hits the node holding the store",
    ),
    (
        "faults: [{kind: kill, node: 1, after: {check: all_reduce, delay_s: -1}}]",
        "scenarios[0].faults[0].after.delay_s: expected a number of seconds >= 0; got '-1'",
    ),
    (
        "faults: [{kind: kill, node: 1, after: {check: all_reduce, when: now}}]",
        "scenarios[0].faults[0].after.when: unknown key; expected one of check, delay_s",
    ),
    ("faults: []", "scenarios[0].faults: expected a list of 1 to 4 faults; got a list"),
    (
        "faults: [{kind: kill, node: 3, after: {check: all_reduce}}]",
        "scenarios[0].faults[0].node: expected a node of the scenario (0..2); got 3",
    ),
    (
        "faults: [{kind: kill, node: 1, rank: 0, after: {check: all_reduce}}]",
        "scenarios[0].faults[0].rank: expected a rank of node 1 (1); got 0",
    ),
    (
        "faults: [{kind: partition, node: 1, peers: [1], after: {check: all_reduce}}]",
        "scenarios[0].faults[0].peers: expected other nodes of the scenario (0..2, not 1); got 1",
    ),
    (
        "faults: [{kind: kill, node: 1, after: {check: store}}]",
        "scenarios[0].faults[0].after.check: expected a check the scenario lists (all_reduce, collective_loop); got 'store'",
    ),
]


@pytest.mark.parametrize(("faults", "problem"), BAD, ids=[p.split(": ", 1)[0] + f"-{i}" for i, (_, p) in enumerate(BAD)])
def test_bad_faults_are_one_line_with_the_key_path(faults: str, problem: str) -> None:
    text = scenario(faults)
    problems = problems_of(text)
    assert problems == [f"{FILE}:{line_of(text, 'faults:')}: {problem}"]


BAD_EXPECT = [
    (
        "expect: [{ranks: everyone, error: timeout, within_s: [0, 1]}]",
        "scenarios[0].expect[0].ranks: expected survivors or victims, or a list of ranks; got 'everyone'",
    ),
    (
        "expect: [{ranks: survivors, error: hang, within_s: [0, 1]}]",
        "scenarios[0].expect[0].error: expected one of timeout, connection_closed, killed, oom; got 'hang'",
    ),
    (
        "expect: [{ranks: survivors, error: timeout, within_s: [5, 1]}]",
        "scenarios[0].expect[0].within_s: expected [lo, hi]: two numbers of seconds with 0 <= lo <= hi; got [5, 1]",
    ),
    (
        "expect: [{ranks: survivors, error: timeout, within_s: 5}]",
        "scenarios[0].expect[0].within_s: expected [lo, hi]: two numbers of seconds with 0 <= lo <= hi; got '5'",
    ),
    ("expect: [{ranks: survivors, error: timeout}]", "scenarios[0].expect[0].within_s: required key is missing"),
    (
        "expect: [{ranks: [7], error: timeout, within_s: [0, 1]}]",
        "scenarios[0].expect[0].ranks: expected ranks of the scenario (0..2); got 7",
    ),
    (
        "expect: survivors",
        "scenarios[0].expect: expected a list of {ranks, error, within_s} (empty: no rank may fail); got 'survivors'",
    ),
]


@pytest.mark.parametrize(("expect", "problem"), BAD_EXPECT, ids=[f"expect-{i}" for i in range(len(BAD_EXPECT))])
def test_bad_expectations_are_one_line_with_the_key_path(expect: str, problem: str) -> None:
    text = scenario("faults: [{kind: kill, node: 1, after: {check: all_reduce}}]", expect)
    problems = problems_of(text)
    assert problems == [f"{FILE}:{line_of(text, 'expect:')}: {problem}"]


def test_a_fault_scenario_must_say_what_it_expects() -> None:
    text = yaml_text(HEAD) + "    faults: [{kind: kill, node: 1, after: {check: all_reduce}}]\n"
    assert problems_of(text) == [
        f"{FILE}:{line_of(text, 'faults:') - 3}: scenarios[0].expect: required key is missing "
        "(a fault scenario states how the ranks must react)"
    ]


def test_faults_need_several_containers() -> None:
    text = yaml_text(
        """
        scenarios:
          - topology: in-container
            world_size: 2
            checks: [all_reduce]
            faults: [{kind: kill, node: 0, after: {check: all_reduce}}]
            expect: []
        """
    )
    assert problems_of(text) == [
        f"{FILE}:{line_of(text, 'faults:')}: scenarios[0].faults: expected faults only in a cross-container scenario "
        "of 2 or more nodes; got in-container with 1 node(s)"
    ]


def test_expect_without_faults_is_refused() -> None:
    text = yaml_text(HEAD) + "    expect: []\n"
    assert problems_of(text) == [
        f"{FILE}:{line_of(text, 'expect:')}: scenarios[0].expect: expected expect only with faults "
        "(it judges how the ranks react to them)"
    ]


def test_faults_are_no_top_level_default() -> None:
    text = yaml_text("faults: []\n" + HEAD)
    (problem,) = problems_of(text)
    assert problem.startswith(f"{FILE}:1: faults: unknown key; expected one of version, ")


def test_the_shipped_fault_config_loads() -> None:
    config = load_config(ROOT / "configs" / "faults.yaml")
    kinds = {f.kind for s in config.scenarios for f in s.faults}
    assert kinds == {"kill", "partition", "freeze", "slow", "oom", "kill-store"}
    assert {s.nodes for s in config.scenarios} == {2, 3}
    for s in config.scenarios:
        assert s.topology == "cross-container" and s.expect is not None
        assert s.collective_timeout_s <= 60, "a fault scenario must not wait gloo's 30 min default"
        loop = [c for c in s.checks if c.name == "collective_loop"]
        assert all(0 < c.args["timeout_s"] <= 20 for c in loop), "the loop's group notices a lost peer within 20 s"
