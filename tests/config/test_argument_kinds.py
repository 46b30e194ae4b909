"""Every kind of check argument is declared once (distval/config/argument_kinds.py) with its words, its JSON Schema and
its reader, and the loader (config/check_list.py), the schema (config/schema.py) and the reference (``distval
checks``) read it from there: each kind has all three, the catalog uses no other kind, and for each kind the
schema and the reader agree on a value each takes and one each refuses."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
import yaml

from distval.checks.catalog import CATALOG, ArgSpec
from distval.config.argument_kinds import KINDS, kind_of
from distval.config.checks_reference import argument_kind, checks_data
from distval.config.compose import compose
from distval.config.yaml_nodes import Problems

CHOICES = ("gloo", "nccl")
# For each kind: a value its reader and its schema take, and one both refuse (as YAML text).
EXAMPLES: dict[str, tuple[str, str]] = {
    "int": ("3", "0"),
    "seconds": ("2.5", "0"),
    "fraction": ("0.05", "1.5"),
    "version": ("'>=2.6,<2.7'", "[2]"),
    "choice": ("nccl", "mpi"),
    "names": ("[gloo, nccl]", "gloo"),
    "paths": ("[/opt/hpcx/lib, /usr/local/cuda/lib64]", "/opt/hpcx/lib"),
    "variables": ("[NCCL_ALGO, GLOO_SOCKET_IFNAME]", "NCCL_ALGO"),
    "sizes": ("[4KiB, 1MiB]", "[]"),
    "busbw": ("{1MiB: 2.5}", "{}"),
    "efficiency": ("{1MiB: 0.5}", "1.5"),
    "bool": ("false", "'no'"),
}


def _spec(kind: str) -> ArgSpec:
    return ArgSpec(kind, "an argument", minimum=1, choices=CHOICES)


def _read(kind: str, text: str) -> tuple[Any, list[str]]:
    problems = Problems("a.yaml")
    node = compose(text, problems)
    assert isinstance(node, yaml.Node)
    value = kind_of(_spec(kind)).reader(_spec(kind))(node, "args.x", problems)
    return value, problems.lines


def test_the_catalog_uses_only_declared_kinds_and_every_declared_kind_is_tested() -> None:
    used = {spec.kind for info in CATALOG.values() for spec in info.args.values()}
    assert used <= set(KINDS)
    assert set(EXAMPLES) == set(KINDS)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_has_words_a_schema_and_a_reader_that_agree(kind: str) -> None:
    spec = _spec(kind)
    declared = KINDS[kind]
    assert declared.words(spec) and argument_kind(spec) == declared.words(spec)
    schema = declared.schema(spec)
    jsonschema.Draft7Validator.check_schema(schema)
    good, bad = EXAMPLES[kind]
    value, problems = _read(kind, good)
    assert value is not None and problems == []
    jsonschema.validate(yaml.safe_load(good), schema)
    value, problems = _read(kind, bad)
    assert value is None and len(problems) == 1 and problems[0].startswith("a.yaml:1: args.x: expected ")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(yaml.safe_load(bad), schema)


def test_a_kind_declared_nowhere_is_said_in_all_three() -> None:
    with pytest.raises(ValueError, match="argument kind 'colour' is not declared in distval/config/argument_kinds.py"):
        kind_of(ArgSpec("colour", "?"))


def test_the_reference_says_each_argument_in_its_kind_s_words() -> None:
    words = {(check["name"], a["name"]): a["values"] for check in checks_data() for a in check["arguments"]}
    assert words[("all_reduce", "numel")] == "whole number >= 1"
    assert words[("identity", "backends")] == "list of gloo, nccl, mpi"
    assert words[("libraries", "allow_dirs")] == "list of absolute paths"
    assert words[("environment", "allow")] == "list of environment variable names"
    assert words[("bandwidth", "min_busbw_gbps")] == "GB/s, or size -> GB/s"


@pytest.mark.parametrize(
    ("kind", "item"),
    [
        ("paths", "relative/lib"),
        ("paths", '"/opt/a\\x01"'),
        ("variables", "NCCL-ALGO"),
        ("variables", "1NCCL"),
        ("variables", "7"),
    ],
)
def test_a_list_item_that_is_not_a_path_or_a_variable_name_is_refused_where_it_stands(kind: str, item: str) -> None:
    value, problems = _read(kind, f"[{item}]")
    assert value is None and len(problems) == 1 and problems[0].startswith("a.yaml:1: args.x[0]: expected "), problems
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(yaml.safe_load(f"[{item}]"), KINDS[kind].schema(_spec(kind)))
