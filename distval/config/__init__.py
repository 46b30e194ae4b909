"""YAML scenario files -> frozen dataclasses, strictly.

The package's modules, one concern each: compose (YAML text -> nodes without recursion: bounded depth and
size, merge keys, the key path in every YAML error), yaml_nodes (strict node reading, problem collection),
values (readers of single values), check_list (the checks: list against the catalog), keys (the one
declaration of every key), rendezvous (the one declaration of every rendezvous form), layout (nodes x
nproc_per_node and the rendezvous rules), devices (device and gpus_per_node from the backend and the layout),
resolve (a scenario's fields from its keys and the defaults), matrix (axes, excludes, expansion), model (Config,
Scenario, CheckSpec), loader (parse_config, load_config) and schema (the JSON Schema of scenario files).

The names below are what the rest of distval and its tests import from ``distval.config``.
"""

from distval.config.devices import DEVICES, NCCL_BACKENDS
from distval.config.keys import (
    BACKENDS,
    DEFAULT_CHECK_TIMEOUT_S,
    DEFAULT_COLLECTIVE_TIMEOUT_S,
    DEFAULT_PYTHON,
    DEFAULT_TIMEOUT_S,
    MATRIX_AXES,
    NAME_MAX,
    NAME_PATTERN,
)
from distval.config.layout import MASTER_ADDRS, NO_LAUNCHER_RENDEZVOUS, RENDEZVOUS, TOPOLOGIES
from distval.config.loader import load_config, parse_config
from distval.config.model import CheckSpec, Config, Scenario
from distval.config.values import ENV_NAME_PATTERN, RESERVED_ENV, RESERVED_ENV_PREFIX, SIZE_PATTERN, USER_PATTERN, VERSION_PATTERN

__all__ = [
    "BACKENDS",
    "DEFAULT_CHECK_TIMEOUT_S",
    "DEFAULT_COLLECTIVE_TIMEOUT_S",
    "DEFAULT_PYTHON",
    "DEFAULT_TIMEOUT_S",
    "DEVICES",
    "ENV_NAME_PATTERN",
    "MASTER_ADDRS",
    "MATRIX_AXES",
    "NAME_MAX",
    "NAME_PATTERN",
    "NCCL_BACKENDS",
    "NO_LAUNCHER_RENDEZVOUS",
    "RENDEZVOUS",
    "RESERVED_ENV",
    "RESERVED_ENV_PREFIX",
    "SIZE_PATTERN",
    "TOPOLOGIES",
    "USER_PATTERN",
    "VERSION_PATTERN",
    "CheckSpec",
    "Config",
    "Scenario",
    "load_config",
    "parse_config",
]
