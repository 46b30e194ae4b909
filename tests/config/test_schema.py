"""The JSON Schema of scenario files (distval/config/schema.py, shipped as configs/distval.schema.json):
generated from the one declaration per key, valid, referenced by every shipped config, and in agreement
with the loader on a corpus of valid and invalid documents.

Agreement means: the loader accepts a document exactly when the schema accepts it. Where the loader's
rule cannot be said in JSON Schema the example is listed, with the reason, in LOADER_ONLY (the loader
rejects, the schema accepts) or TEXT_AS_WRITTEN (the loader reads the text as written, the schema the
value YAML makes of it).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from distval.cli.main import main
from distval.config import Scenario, parse_config
from distval.config.keys import DEFAULT_KEYS, ENTRY, KEYS, MATRIX_AXES
from distval.config.schema import SHIPPED, json_schema, render_schema
from distval.errors import ConfigError
from tests.config_helpers import FILE
from tests.paths import ROOT

CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))
COMMENT = "# yaml-language-server: $schema=./distval.schema.json"
VALIDATOR = jsonschema.Draft7Validator(json_schema())


def loader_accepts(text: str) -> bool:
    try:
        parse_config(text, FILE)
    except ConfigError:
        return False
    return True


def schema_accepts(text: str) -> bool:
    # What an editor sees: JSON values (keys as strings; a YAML date becomes its text).
    instance = json.loads(json.dumps(yaml.safe_load(text), default=str))
    return VALIDATOR.is_valid(instance)


def doc(*lines: str, top: tuple[str, ...] = (), topology: str = "cross-container") -> str:
    """A file with one scenario of ``topology``, the given lines (world_size: 2 unless a layout key is among
    them), checks last; ``top`` lines go before ``scenarios:``.
    """
    layout = any(key in line for line in lines for key in ("world_size:", "nodes:", "nproc_per_node:"))
    body = "".join(f"    {line}\n" for line in (lines if layout else ("world_size: 2", *lines)))
    checks = "" if any(line.startswith("checks:") for line in lines) else "    checks: [env]\n"
    return "".join(f"{line}\n" for line in top) + f"scenarios:\n  - topology: {topology}\n{body}{checks}"


MATRIX = ("name: m", "matrix: {rendezvous: [static, c10d], nodes: [2, 4]}")

ACCEPTED = {
    "extension-key-and-merge": "x-common: &common {topology: in-container, world_size: 2}\n"
    + "scenarios:\n  - <<: *common\n    checks: [env]\n",
    "image-with-registry-port-and-digest": doc("image: registry.example:5000/team/torch:2.6@sha256:" + "0" * 64),
    "minimal": doc(),
    "version": doc(top=("version: 1",)),
    "every-top-level-default": doc(
        top=(
            "backend: gloo",
            "device: cpu",
            "gpus_per_node: 0",
            "image: my/torch:2.6",
            "timeout_s: 60",
            "collective_timeout_s: 30.5",
            "check_timeout_s: 10",
            "python: python3.11",
            "rendezvous: c10d",
            "master_addr: ip",
            "egress: true",
            "ipv6: false",
            "cpus: 1.5",
            "memory: 2g",
            "shm_size: 512",
            "env: {A: '1', B: 2, C: true}",
            "user: '1000:1000'",
            "working_dir: /work",
        )
    ),
    "in-container-world-size": doc("world_size: 4", topology="in-container"),
    "in-container-nproc": doc("nproc_per_node: 3", topology="in-container"),
    "in-container-one-node": doc("nodes: 1", "nproc_per_node: 2", "rendezvous: static", topology="in-container"),
    "cross-layout": doc("nodes: 2", "nproc_per_node: 2", "world_size: 4", "rendezvous: c10d", "master_addr: ip"),
    "env-rendezvous": doc("nodes: 3", "nproc_per_node: 1", "rendezvous: env"),
    "nccl": doc("nodes: 2", "nproc_per_node: 2", "backend: nccl", "gpus_per_node: 2"),
    "nccl-legacy-on-cuda": doc("backend: nccl-legacy", "device: cuda"),
    "gloo-on-cuda": doc("device: cuda", "gpus_per_node: 1"),
    "scenario-options": doc("extra_networks: 2", "ipv6: true", "user: 1000", "memory: 512m", "env: {}", "name: x.y-z_1"),
    "matrix-and-exclude": doc(*MATRIX, "exclude: [{nodes: 4, rendezvous: c10d}]"),
    "device-and-image-axes": doc("name: d", "matrix: {device: [cpu, cuda], image: [a/t:1, b/u:2]}"),
    "check-forms": doc(
        "checks: [env, {name: identity, args: {torch: '>=2.6', python: 3.11, build: cuda, backends: [gloo, nccl]}}, "
        "{name: all_reduce, args: {numel: 8}, required: true}, {name: timeout, args: {deadline_s: 1.5}}, "
        "{name: store, args: {}}, {name: bytecode, args: {max_stale_fraction: 0}}]"
    ),
}

REJECTED = {
    "timeout-infinite": doc("timeout_s: .inf"),
    "timeout-over-a-week": doc("timeout_s: 604801"),
    "world-size-over-the-bound": doc("world_size: 1025"),
    "nodes-over-the-bound": doc("nodes: 257"),
    "extra-networks-over-the-bound": doc("extra_networks: 17"),
    "image-uppercase-name": doc("image: Torch:2.6"),
    "image-empty-tag": doc("image: 'torch:'"),
    "image-short-digest": doc("image: torch@sha256:abcd"),
    "python-with-a-newline": doc('python: "python3\\nrm"'),
    "env-value-with-a-newline": doc('env: {A: "a\\nb"}'),
    "env-value-with-nul": doc('env: {A: "a\\0b"}'),
    "empty": "",
    "a-list": "- scenarios\n",
    "unknown-top-level-key": doc(top=("colour: red",)),
    "scenario-only-key-at-the-top": doc(top=("nodes: 2",)),
    "unknown-scenario-key": doc("colour: red"),
    "version-2": doc(top=("version: 2",)),
    "version-true": doc(top=("version: true",)),
    "no-scenarios": "backend: gloo\n",
    "no-scenario-in-the-list": "scenarios: []\n",
    "no-topology": "scenarios:\n  - world_size: 2\n    checks: [env]\n",
    "no-layout": "scenarios:\n  - topology: in-container\n    checks: [env]\n",
    "no-checks": "scenarios:\n  - topology: in-container\n    world_size: 2\n",
    "bad-topology": doc(topology="sideways"),
    "world-size-0": doc("world_size: 0"),
    "world-size-a-string": doc("world_size: '2'"),
    "world-size-true": doc("world_size: true"),
    "bad-backend": doc("backend: tcp"),
    "bad-device": doc("device: gpu"),
    "negative-gpus": doc("gpus_per_node: -1"),
    "timeout-0": doc("timeout_s: 0"),
    "timeout-a-string": doc("timeout_s: '5'"),
    "python-blank": doc("python: ' '"),
    "memory-0": doc("memory: 0"),
    "memory-0m": doc("memory: 0m"),
    "memory-fraction": doc("memory: 1.5g"),
    "memory-null": doc("memory:"),
    "env-reserved": doc("env: {RANK: '1'}"),
    "env-distval-prefix": doc("env: {DISTVAL_X: '1'}"),
    "env-bad-name": doc("env: {1A: x}"),
    "env-null-value": doc("env: {A: null}"),
    "env-list-value": doc("env: {A: [1]}"),
    "env-a-list": doc("env: [A]"),
    "user-with-a-blank": doc("user: 'a b'"),
    "user-negative": doc("user: -1"),
    "working-dir-relative": doc("working_dir: work"),
    "name-with-a-blank": doc("name: 'a b'"),
    "name-too-long": doc(f"name: {'n' * 81}"),
    "checks-empty": doc("checks: []"),
    "unknown-check": doc("checks: [nope]"),
    "check-twice": doc("checks: [env, env]"),
    "check-without-name": doc("checks: [{args: {}}]"),
    "check-unknown-key": doc("checks: [{name: env, colour: red}]"),
    "check-unknown-arg": doc("checks: [{name: env, args: {x: 1}}]"),
    "check-args-null": doc("checks: [{name: env, args: null}]"),
    "check-required-a-string": doc("checks: [{name: env, required: 'yes'}]"),
    "arg-int-0": doc("checks: [{name: all_reduce, args: {numel: 0}}]"),
    "arg-choice": doc("checks: [{name: identity, args: {build: rocm}}]"),
    "arg-names-not-a-list": doc("checks: [{name: identity, args: {backends: gloo}}]"),
    "arg-version": doc("checks: [{name: identity, args: {torch: '~=2.6'}}]"),
    "arg-seconds-0": doc("checks: [{name: timeout, args: {deadline_s: 0}}]"),
    "arg-fraction-over-1": doc("checks: [{name: bytecode, args: {max_stale_fraction: 1.5}}]"),
    "in-container-two-nodes": doc("nodes: 2", "nproc_per_node: 2", topology="in-container"),
    "in-container-c10d": doc("rendezvous: c10d", topology="in-container"),
    "in-container-by-ip": doc("master_addr: ip", topology="in-container"),
    "in-container-nodes-only": doc("nodes: 1", topology="in-container"),
    "cross-nproc-only": doc("nproc_per_node: 2"),
    "env-rendezvous-two-per-node": doc("nodes: 2", "nproc_per_node: 2", "rendezvous: env"),
    "matrix-without-name": doc("matrix: {nodes: [2, 4]}"),
    "matrix-empty": doc("name: m", "matrix: {}"),
    "matrix-unknown-axis": doc("name: m", "matrix: {gpus_per_node: [1]}"),
    "matrix-empty-axis": doc("name: m", "matrix: {nodes: []}"),
    "matrix-value-twice": doc("name: m", "matrix: {nodes: [2, 2]}"),
    "matrix-bad-value": doc("name: m", "matrix: {nodes: [0]}"),
    "key-and-axis": doc("name: m", "nodes: 2", "matrix: {nodes: [2, 4]}"),
    "exclude-without-matrix": doc("world_size: 2", "exclude: [{nodes: 2}]"),
    "exclude-empty": doc(*MATRIX, "exclude: []"),
    "exclude-empty-entry": doc(*MATRIX, "exclude: [{}]"),
    "exclude-not-an-axis": doc(*MATRIX, "exclude: [{colour: red}]"),
    "nccl-on-cpu": doc("backend: nccl", "device: cpu"),
    "nccl-without-gpus": doc("backend: nccl", "gpus_per_node: 0"),
    "cuda-without-gpus": doc("device: cuda", "gpus_per_node: 0"),
    "top-level-nccl-on-cpu": doc(top=("backend: nccl-legacy", "device: cpu")),
    "top-level-cuda-without-gpus": doc(top=("device: cuda", "gpus_per_node: 0")),
}

# The loader rejects these; the schema cannot: each names the loader's rule and why JSON Schema cannot say it.
LOADER_ONLY = {
    "duplicate-key": (
        doc("world_size: 3", "world_size: 2"),
        "duplicate keys: YAML parsers keep the last value, so the schema never sees the first",
    ),
    "world-size-not-nodes-x-nproc": (
        doc("nodes: 2", "nproc_per_node: 2", "world_size: 3"),
        "world_size = nodes x nproc_per_node: JSON Schema cannot multiply or compare two values",
    ),
    "world-size-not-a-multiple": (doc("nproc_per_node: 2", "world_size: 3"), "world_size a multiple of nproc_per_node"),
    "in-container-world-size-vs-nproc": (
        doc("world_size: 4", "nproc_per_node: 2", topology="in-container"),
        "world_size = nproc_per_node in one container: comparing two values",
    ),
    "two-nccl-ranks-on-one-gpu": (
        doc("nodes: 2", "nproc_per_node: 2", "backend: nccl", "gpus_per_node: 1"),
        "gpus_per_node >= nproc_per_node for NCCL: comparing two values",
    ),
    "top-level-cpu-under-a-nccl-scenario": (
        doc("backend: nccl", top=("device: cpu",)),
        "a top-level default breaks a scenario's rule: the rule spans two levels of the file",
    ),
    "top-level-env-rendezvous-with-two-per-node": (
        doc("nodes: 2", "nproc_per_node: 2", top=("rendezvous: env",)),
        "a top-level default breaks a scenario's rule: the rule spans two levels of the file",
    ),
    "invalid-combination": (
        "scenarios:\n  - name: m\n    world_size: 2\n    rendezvous: c10d\n    checks: [env]\n"
        "    matrix: {topology: [in-container, cross-container]}\n",
        "each combination of a matrix is checked as a scenario: rules over values the schema sees only as lists",
    ),
    "nccl-axis-on-cpu": (
        doc("name: m", "device: cpu", "matrix: {backend: [gloo, nccl]}"),
        "each combination of a matrix is checked as a scenario",
    ),
    "exclude-axis-not-in-the-matrix": (
        doc(*MATRIX, "exclude: [{backend: gloo}]"),
        "exclude names axes of the same entry's matrix: JSON Schema cannot refer to a sibling's keys",
    ),
    "exclude-value-not-in-the-axis": (
        doc(*MATRIX, "exclude: [{nodes: 8}]"),
        "exclude takes the axis's values: JSON Schema cannot refer to a sibling's values",
    ),
    "exclude-everything": (
        doc("name: m", "matrix: {nodes: [2]}", "exclude: [{nodes: 2}]"),
        "at least one combination left: counting combinations",
    ),
    "image-axis-short-names-collide": (
        doc("name: m", "matrix: {image: [a/torch:1, b/torch:1]}"),
        "distinct short names in scenario names: a function of the values",
    ),
    "duplicate-scenario-names": (
        doc("name: x") + "  - name: x\n    topology: in-container\n    world_size: 2\n    checks: [env]\n",
        "unique names across the list: JSON Schema's uniqueItems compares whole items",
    ),
    "expanded-name-too-long": (
        doc(f"name: {'n' * 78}", "matrix: {nodes: [2, 4]}"),
        "at most 80 characters for <name>.<value>...: names are made from values",
    ),
    "check-twice-in-two-forms": (
        doc("checks: [env, {name: env}]"),
        "each check once: uniqueItems compares whole items, and 'env' and {name: env} differ",
    ),
    "world-size-2.0": (doc("world_size: 2.0"), "JSON Schema counts 2.0 as an integer; the loader wants YAML's int"),
    "layout-over-the-bound": (
        doc("nodes: 64", "nproc_per_node: 32"),
        "at most 1024 ranks: nodes x nproc_per_node is a product of two keys",
    ),
    "matrix-over-the-bound": (
        doc("name: big", f"matrix: {{world_size: {list(range(1, 102))}, image: {[f'i{n}' for n in range(100)]}}}"),
        "at most 10,000 combinations: a product of the axes' lengths",
    ),
    "exclude-removing-nothing": (
        doc(
            "name: m",
            "matrix: {nodes: [2, 4], rendezvous: [static, c10d]}",
            "exclude: [{nodes: 2}, {nodes: 2, rendezvous: c10d}]",
        ),
        "an exclude entry must remove a combination the entries before it did not",
    ),
    "memory-in-hex": (
        doc("memory: 0x10"),
        "the loader reads the size as written (0x10 is no Docker size); YAML 1.1 makes it the integer 16",
    ),
    "image-a-date": (
        doc("image: 2024-01-01"),
        "YAML 1.1 makes an unquoted date a timestamp, no image reference; YAML 1.2 editors see a string",
    ),
}

# The loader reads these values as written, the schema sees what YAML makes of them: the loader accepts,
# the schema asks for what the key means (a name or uid, not a float or a boolean).
TEXT_AS_WRITTEN = {
    "user-a-float": (doc("user: 1.5"), "the loader takes the text '1.5' as a user name"),
    "user-true": (doc("user: true"), "the loader takes the text 'true' as a user name"),
}


def test_shipped_schema_is_the_generated_one() -> None:
    assert (ROOT / SHIPPED).read_text(encoding="utf-8") == render_schema(), "run: distval schema > " + SHIPPED


def test_cli_prints_the_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    assert capsys.readouterr().out == render_schema()


def test_schema_is_valid_draft_7() -> None:
    jsonschema.Draft7Validator.check_schema(json_schema())


def test_schema_is_derived_from_the_keys() -> None:
    schema = json_schema()
    assert list(schema["properties"]) == ["version", *DEFAULT_KEYS, "scenarios"]
    scenario = schema["definitions"]["scenario"]
    assert list(scenario["properties"]) == [key.name for key in KEYS]
    assert list(schema["definitions"]["matrix"]["properties"]) == list(MATRIX_AXES)
    for key in KEYS:
        assert schema["definitions"][key.name]["description"] == key.doc


def test_every_key_but_the_entry_s_own_is_a_scenario_field() -> None:
    fields = {field.name for field in dataclasses.fields(Scenario)}
    assert {key.name for key in KEYS if key.kind != ENTRY} <= fields
    assert {"name", "checks"} <= fields


@pytest.mark.parametrize("path", CONFIGS, ids=[path.name for path in CONFIGS])
def test_shipped_config_references_and_validates_against_the_schema(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.splitlines()[0] == COMMENT
    assert (path.parent / "distval.schema.json").is_file()
    VALIDATOR.validate(json.loads(json.dumps(yaml.safe_load(text))))
    assert loader_accepts(text)


@pytest.mark.parametrize("text", list(ACCEPTED.values()), ids=list(ACCEPTED))
def test_both_accept(text: str) -> None:
    assert loader_accepts(text)
    assert schema_accepts(text)


@pytest.mark.parametrize("text", list(REJECTED.values()), ids=list(REJECTED))
def test_both_reject(text: str) -> None:
    assert not loader_accepts(text)
    assert not schema_accepts(text)


@pytest.mark.parametrize(("text", "reason"), list(LOADER_ONLY.values()), ids=list(LOADER_ONLY))
def test_loader_only_rules(text: str, reason: str) -> None:
    assert not loader_accepts(text), reason
    assert schema_accepts(text), reason


@pytest.mark.parametrize(("text", "reason"), list(TEXT_AS_WRITTEN.values()), ids=list(TEXT_AS_WRITTEN))
def test_text_as_written(text: str, reason: str) -> None:
    assert loader_accepts(text), reason
    assert not schema_accepts(text), reason


def _errors(text: str) -> list[Any]:
    return list(VALIDATOR.iter_errors(json.loads(json.dumps(yaml.safe_load(text)))))


def test_schema_names_the_key_an_editor_underlines() -> None:
    (error,) = _errors(doc("colour: red"))
    assert list(error.absolute_path) == ["scenarios", 0]
    assert "colour" in error.message
