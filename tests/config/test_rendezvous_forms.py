"""distval/config/rendezvous.py: the one table of rendezvous forms, and the config rules derived from its rows."""

from __future__ import annotations

import ast
import json

import jsonschema
import pytest
import yaml

from distval.config import NO_LAUNCHER_RENDEZVOUS, RENDEZVOUS, RESERVED_ENV, parse_config
from distval.config import rendezvous as table
from distval.config.keys import KEYS
from distval.config.layout import IN_CONTAINER_RENDEZVOUS, LAUNCHER_RENDEZVOUS, ONE_PROCESS_RENDEZVOUS
from distval.config.rendezvous import FORMS, GIVEN, NODE_RANKS, PORTS, TEMPLATE_FIELDS, RendezvousForm, template_fields
from distval.config.schema import json_schema
from distval.errors import ConfigError
from tests.paths import ROOT

VALIDATOR = jsonschema.Draft7Validator(json_schema())
ROWS = pytest.mark.parametrize("row", FORMS, ids=[row.name for row in FORMS])


def accepted(text: str) -> tuple[bool, bool]:
    """Whether the loader and the JSON Schema (what an editor sees) accept the file."""
    try:
        parse_config(text, "x.yaml")
        loader = True
    except ConfigError:
        loader = False
    return loader, VALIDATOR.is_valid(json.loads(json.dumps(yaml.safe_load(text))))


def scenario(topology: str, layout: str, form: str) -> str:
    return f"scenarios:\n  - {{topology: {topology}, {layout}, rendezvous: {form}, checks: [env]}}\n"


def test_the_key_and_the_schema_list_the_tables_forms_in_its_order() -> None:
    names = tuple(row.name for row in FORMS)
    assert RENDEZVOUS == names and len(set(names)) == len(names)
    (key,) = [k for k in KEYS if k.name == "rendezvous"]
    assert key.schema is not None and tuple(key.schema["enum"]) == names
    assert json_schema()["definitions"]["rendezvous"]["enum"] == list(names)
    assert key.default == table.DEFAULT in names
    launchers, others = " or ".join(LAUNCHER_RENDEZVOUS), " or ".join(NO_LAUNCHER_RENDEZVOUS)
    assert key.doc == f"how the nodes meet: {launchers} (the launcher), {others} (no launcher)"


def test_the_derived_name_lists_are_the_rows_that_say_so() -> None:
    assert LAUNCHER_RENDEZVOUS == tuple(row.name for row in FORMS if row.launcher is not None)
    assert NO_LAUNCHER_RENDEZVOUS == tuple(row.name for row in FORMS if row.launcher is None)
    assert IN_CONTAINER_RENDEZVOUS == tuple(row.name for row in FORMS if row.in_container is not None)
    assert ONE_PROCESS_RENDEZVOUS == tuple(row.name for row in FORMS if not row.several_per_node)
    # Today's table, as the docs describe it.
    assert (LAUNCHER_RENDEZVOUS, NO_LAUNCHER_RENDEZVOUS) == (("static", "c10d"), ("env", "tcp"))
    assert IN_CONTAINER_RENDEZVOUS == ("static",)


@ROWS
def test_each_rows_in_container_rule_holds_in_the_loader_and_the_schema(row: RendezvousForm) -> None:
    allowed = row.in_container is not None
    assert accepted(scenario("in-container", "world_size: 2", row.name)) == (allowed, allowed)


@ROWS
def test_each_rows_processes_per_node_rule_holds_in_the_loader_and_the_schema(row: RendezvousForm) -> None:
    assert accepted(scenario("cross-container", "nodes: 2, nproc_per_node: 1", row.name)) == (True, True)
    several = row.several_per_node
    assert accepted(scenario("cross-container", "nodes: 2, nproc_per_node: 2", row.name)) == (several, several)
    # One process per node without a launcher: nothing would start a second.
    assert row.launcher is not None or not row.several_per_node


@ROWS
def test_each_rows_templates_name_only_fields_the_builder_gives_and_the_ports_it_declares(row: RendezvousForm) -> None:
    used = set().union(*(template_fields(t) for t in row.templates()))
    assert used <= set(TEMPLATE_FIELDS)
    assert set(row.ports) <= set(PORTS)
    assert used & set(PORTS) == set(row.ports), "ports: exactly the ports its templates use"
    assert row.node_ranks in NODE_RANKS
    # A given node rank is on the command line or in the environment; an assigned one never is.
    assert ("node_rank" in used) == (row.node_ranks == GIVEN)


@ROWS
def test_each_row_is_a_launcher_with_arguments_or_a_process_with_an_init_method(row: RendezvousForm) -> None:
    if row.launcher is None:
        assert row.launcher_args == () and row.in_container is None and not row.rdzv_conf
        assert row.init_method is not None and {"RANK", "WORLD_SIZE"} <= {name for name, _ in row.env}
    else:
        assert row.launcher_args and row.env == ()
    # A scenario may have one node: the store's node is node 0.
    assert row.store_node == 0


@ROWS
def test_a_scenarios_env_cannot_shadow_a_rows_variables(row: RendezvousForm) -> None:
    assert {name for name, _ in row.env} <= set(RESERVED_ENV)


def test_the_table_imports_nothing_from_distval() -> None:
    """A leaf: distval/config and distval/plan both import it without a cycle."""
    tree = ast.parse((ROOT / "distval" / "config" / "rendezvous.py").read_text(encoding="utf-8"))
    imported = [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    imported += [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    assert not [name for name in imported if name.startswith("distval")]


def test_an_unknown_form_is_a_key_error() -> None:
    assert table.rendezvous_form("c10d").dynamic_node_ranks
    with pytest.raises(KeyError, match="etcd"):
        table.rendezvous_form("etcd")
