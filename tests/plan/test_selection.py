"""The check selection (distval/plan/selection.py): -k's grammar, names against the catalog, and what it does to
a config's scenarios (the checks they keep, a fault's trigger kept, a scenario left no check)."""

from __future__ import annotations

import pytest

from distval.checks.catalog import CATALOG
from distval.config import parse_config
from distval.errors import SelectionError
from distval.plan.selection import NO_CHECK_SELECTED, Selection, check_name, parse_expression, select_checks, selection_of

CONFIG = """\
scenarios:
  - name: quick
    topology: in-container
    world_size: 2
    checks: [env, all_reduce, ddp_sync, ddp_sampler, store]
  - name: env-only
    topology: in-container
    world_size: 1
    checks: [env]
  - name: kill
    topology: cross-container
    world_size: 2
    checks: [all_reduce, {name: collective_loop, args: {duration_s: 10}}]
    faults: [{kind: kill, node: 1, after: {check: all_reduce, delay_s: 1}}]
    expect: [{ranks: survivors, error: connection_closed, within_s: [0, 5]}]
"""
NAMES = ", ".join(CATALOG)


def _checks(selection: Selection) -> dict[str, list[str]]:
    selected = select_checks(parse_config(CONFIG, "s.yaml"), selection)
    return {
        s.name: [c.name for c in s.checks] if s.name not in selected.unselected else [NO_CHECK_SELECTED]
        for s in selected.config.scenarios
    }


def _k(text: str) -> list[str]:
    matches = parse_expression(text).matches
    return [name for name in CATALOG if matches(name)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ddp", ["ddp_sync", "ddp_training", "ddp_sampler"]),
        ("DDP_SYNC", ["ddp_sync"]),
        ("ddp and not sampler", ["ddp_sync", "ddp_training"]),
        ("env or store", ["env", "environment", "store"]),  # a part of a name, as pytest's -k: env is in environment
        ("env and not environment", ["env"]),
        ("collect and not (loop or ddp)", ["collectives"]),
        ("all", ["all_reduce", "allocate"]),
        ("all_reduce or collectives and not collectives", ["all_reduce"]),  # and binds tighter than or
        ("not not store", ["store"]),
        ("(env or store) and not environment", ["env", "store"]),  # a group read to its ')' and no further
    ],
)
def test_k_is_a_boolean_expression_over_parts_of_check_names(text: str, expected: list[str]) -> None:
    assert _k(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "-k '': expected a check name, 'not' or '(' at the end"),
        ("env and", "-k 'env and': expected a check name, 'not' or '(' at the end"),
        ("(env or store", "-k '(env or store': expected ')' at the end"),
        ("env store", "-k 'env store': expected 'and', 'or' or the end at column 5 ('store')"),
        ("env)", "-k 'env)': expected 'and', 'or' or the end at column 4 (')')"),
        ("env; rm", "-k 'env; rm': unexpected ';' at column 4; expected a check name"),
        ("not alreduce", f"-k 'not alreduce': 'alreduce' is in no check's name ({NAMES}); did you mean 'all_reduce'?"),
        ("xyz", f"-k 'xyz': 'xyz' is in no check's name ({NAMES})"),
        ("bandwith", f"-k 'bandwith': 'bandwith' is in no check's name ({NAMES}); did you mean 'bandwidth'?"),
    ],
)
def test_a_bad_k_says_what_was_expected_where(text: str, message: str) -> None:
    with pytest.raises(SelectionError) as raised:
        parse_expression(text)
    assert str(raised.value) == message


def test_a_name_that_is_no_check_gets_the_closest() -> None:
    assert check_name("all_reduce") == "all_reduce"
    with pytest.raises(SelectionError, match=r"got 'allreduce'; did you mean 'all_reduce'\?$"):
        check_name("allreduce")


def test_no_selection_changes_nothing() -> None:
    config = parse_config(CONFIG, "s.yaml")
    selected = select_checks(config, Selection())
    assert selected.config is config and not selected.unselected and not selected.kept


def test_check_keeps_only_the_named_checks_and_leaves_a_scenario_without_them_unselected() -> None:
    assert _checks(selection_of(["store", "env"], None, None)) == {
        "quick": ["env", "store"],  # the config's order, not the command line's
        "env-only": ["env"],
        "kill": [NO_CHECK_SELECTED],
    }


def test_skip_check_and_k_narrow_further() -> None:
    assert _checks(selection_of(None, ["env"], parse_expression("not ddp_sampler"))) == {
        "quick": ["all_reduce", "ddp_sync", "store"],
        "env-only": [NO_CHECK_SELECTED],
        "kill": ["all_reduce", "collective_loop"],
    }


def test_a_fault_s_trigger_check_is_kept_and_said() -> None:
    selected = select_checks(parse_config(CONFIG, "s.yaml"), selection_of(["collective_loop"], None, None))
    kill = next(s for s in selected.config.scenarios if s.name == "kill")
    assert [c.name for c in kill.checks] == ["all_reduce", "collective_loop"]
    assert selected.kept == ("kill: kept all_reduce: its faults[0] lands after it",)
    assert selected.unselected == {"quick", "env-only"}
    assert kill.checks[1].args["duration_s"] == 10  # its arguments go with it


def test_a_check_no_scenario_lists_is_refused() -> None:
    config = parse_config(CONFIG, "s.yaml")
    with pytest.raises(SelectionError) as raised:
        select_checks(config, selection_of(["bandwidth", "env"], None, None))
    assert str(raised.value) == (
        "--check bandwidth: no scenario of s.yaml lists it; they list: all_reduce, collective_loop, ddp_sampler, ddp_sync, "
        "env, store"
    )
    # Among the scenarios --filter chose: env-only lists no all_reduce.
    with pytest.raises(SelectionError, match="^--check all_reduce: no scenario selected of s.yaml lists it; they list: env$"):
        select_checks(config, selection_of(["all_reduce"], None, None), ["env-only"])


def test_the_selection_s_options_repeat_it() -> None:
    selection = selection_of(["env", "env", "store"], ["ddp_sync"], parse_expression("not ddp"))
    assert selection.arguments == ("--check", "env", "--check", "store", "--skip-check", "ddp_sync", "-k", "not ddp")
    assert selection.said == "no check selected (--check env --check store --skip-check ddp_sync -k 'not ddp')"
    assert not Selection() and selection
