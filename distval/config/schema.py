"""The JSON Schema of scenario files, for editors (yaml-language-server), generated from KEYS and the
catalog of checks so that it cannot drift from the loader.

It holds every rule that looks at one mapping: keys, types, values, required keys, and the rules between
keys of one scenario (or of the top level). The loader's rules that span levels (a scenario and the
top level's defaults), compare numbers (nodes x nproc_per_node = world_size, gpus_per_node >=
nproc_per_node) or read the text as written cannot be said in JSON Schema; tests/config/test_schema.py lists
examples of each.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from distval.checks.catalog import CATALOG, ArgSpec
from distval.config.argument_kinds import kind_of
from distval.config.devices import NCCL_BACKENDS
from distval.config.keys import DEFAULT_KEYS, KEYS, MATRIX_AXES, Key
from distval.config.layout import IN_CONTAINER_RENDEZVOUS, ONE_PROCESS_RENDEZVOUS
from distval.config.loader import CONFIG_VERSION
from distval.config.yaml_nodes import EXTENSION_PREFIX

DRAFT = "http://json-schema.org/draft-07/schema#"
# Where the shipped copy lives, relative to the repository (configs/ reference it by this name).
SHIPPED = "configs/distval.schema.json"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/definitions/{name}"}


def _argument(spec: ArgSpec) -> dict[str, Any]:
    return {"description": spec.description, **kind_of(spec).schema(spec)}


def _check() -> dict[str, Any]:
    """A check: its name, or {name, args, required} with the check's own arguments."""
    forms: list[dict[str, Any]] = [{"type": "string", "enum": list(CATALOG)}]
    for info in CATALOG.values():
        forms.append(
            {
                "type": "object",
                "description": info.description,
                "required": ["name"],
                "additionalProperties": False,
                "properties": {
                    "name": {"const": info.name},
                    "args": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {name: _argument(spec) for name, spec in info.args.items()},
                    },
                    "required": {
                        "type": "boolean",
                        "description": "true: fail, rather than skip, when the image cannot run the check",
                    },
                },
            }
        )
    return {"oneOf": forms}


def _definition(key: Key) -> dict[str, Any]:
    if key.name == "checks":
        schema: Mapping[str, Any] = {"type": "array", "minItems": 1, "uniqueItems": True, "items": _ref("check")}
    elif key.name == "matrix":
        schema = {
            "type": "object",
            "minProperties": 1,
            "additionalProperties": False,
            "properties": {
                axis: {"type": "array", "minItems": 1, "uniqueItems": True, "items": _ref(axis)} for axis in MATRIX_AXES
            },
        }
    elif key.name == "exclude":
        schema = {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "minProperties": 1,
                "additionalProperties": False,
                "properties": {axis: _ref(axis) for axis in MATRIX_AXES},
            },
        }
    else:
        assert key.schema is not None, f"key {key.name} declares no JSON Schema"
        schema = key.schema
    default = dict(key.default) if isinstance(key.default, Mapping) else key.default
    return {"description": key.doc, **schema, **({} if default is None else {"default": default})}


def _when(present: Mapping[str, Any], then: Mapping[str, Any]) -> dict[str, Any]:
    """``then`` applies where every key of ``present`` is there with a value its schema accepts."""
    return {"if": {"required": list(present), "properties": dict(present)}, "then": dict(then)}


def _given(key: str) -> dict[str, Any]:
    """The key is in the scenario, or is an axis of its matrix."""
    return {"anyOf": [{"required": [key]}, {"required": ["matrix"], "properties": {"matrix": {"required": [key]}}}]}


def _one_of(choices: tuple[str, ...]) -> dict[str, Any]:
    """A value among ``choices``: ``const`` for one (as the schema said before there could be more), else ``enum``."""
    return {"const": choices[0]} if len(choices) == 1 else {"enum": list(choices)}


def _device_rules() -> list[dict[str, Any]]:
    """Rules between backend, device and gpus_per_node of one mapping (a scenario, or the top level)."""
    nccl = {"enum": list(NCCL_BACKENDS)}
    return [
        _when({"backend": nccl, "device": {}}, {"properties": {"device": {"const": "cuda"}}}),
        _when({"backend": nccl, "gpus_per_node": {}}, {"properties": {"gpus_per_node": {"minimum": 1}}}),
        _when({"device": {"const": "cuda"}, "gpus_per_node": {}}, {"properties": {"gpus_per_node": {"minimum": 1}}}),
    ]


def _scenario() -> dict[str, Any]:
    in_container = {"const": "in-container"}
    rules: list[dict[str, Any]] = [
        _given("topology"),
        {"anyOf": [_given(key) for key in ("world_size", "nodes", "nproc_per_node")]},
        _when({"topology": in_container}, {"anyOf": [_given("world_size"), _given("nproc_per_node")]}),
        _when({"topology": {"const": "cross-container"}}, {"anyOf": [_given("world_size"), _given("nodes")]}),
        _when({"topology": in_container, "nodes": {}}, {"properties": {"nodes": {"const": 1}}}),
        _when({"topology": in_container, "rendezvous": {}}, {"properties": {"rendezvous": _one_of(IN_CONTAINER_RENDEZVOUS)}}),
        _when({"topology": in_container, "master_addr": {}}, {"properties": {"master_addr": {"const": "name"}}}),
        _when(
            {"rendezvous": {"enum": list(ONE_PROCESS_RENDEZVOUS)}, "nproc_per_node": {}},
            {"properties": {"nproc_per_node": {"const": 1}}},
        ),
        _when({"matrix": {}}, {"required": ["name"]}),
        *_device_rules(),
    ]
    # A key is set once: in the scenario or as an axis of its matrix.
    rules += [_when({"matrix": {"required": [axis]}}, {"not": {"required": [axis]}}) for axis in MATRIX_AXES]
    return {
        "type": "object",
        "description": "one scenario, or with matrix: one per combination of the axes' values",
        "required": ["checks"],
        "additionalProperties": False,
        "properties": {key.name: _ref(key.name) for key in KEYS},
        "dependencies": {"exclude": ["matrix"]},
        "allOf": rules,
    }


def json_schema() -> dict[str, Any]:
    definitions = {key.name: _definition(key) for key in KEYS}
    definitions["check"] = _check()
    definitions["scenario"] = _scenario()
    return {
        "$schema": DRAFT,
        "title": "distval scenario file",
        "description": "Scenarios that validate distributed PyTorch in a container image (distval run CONFIG).",
        "type": "object",
        "required": ["scenarios"],
        "additionalProperties": False,
        # The user's own keys (x-defaults: &defaults {...}), where anchors for merge keys live.
        "patternProperties": {f"^{EXTENSION_PREFIX}": {}},
        "properties": {
            "version": {"description": "the config version (the only one is 1)", "const": CONFIG_VERSION},
            **{name: _ref(name) for name in DEFAULT_KEYS},
            "scenarios": {"type": "array", "minItems": 1, "items": _ref("scenario")},
        },
        "allOf": _device_rules(),
        "definitions": definitions,
    }


def render_schema() -> str:
    """The schema as shipped in configs/distval.schema.json: stable order, two-space indent, final newline."""
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"
