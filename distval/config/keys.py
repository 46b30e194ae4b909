"""The one declaration of every scenario key: how it is read, its default, its JSON Schema, where it may
appear (in a scenario always; under the top level as a default for every scenario; as a matrix axis),
and a one-line description. Every list of keys elsewhere is derived from KEYS.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import yaml

from distval.config import rendezvous, values
from distval.config.check_list import read_checks
from distval.config.devices import DEVICES, NCCL_BACKENDS
from distval.config.engine_urls import HOSTS_MAX, SCHEMES, url_problem
from distval.config.faults import (
    ERROR_KINDS,
    FAULT_KINDS,
    RANK_GROUPS,
    read_expect,
    read_faults,
    schema_of_expect,
    schema_of_faults,
)
from distval.config.layout import (
    LAUNCHER_RENDEZVOUS,
    MASTER_ADDRS,
    NO_LAUNCHER_RENDEZVOUS,
    NODES_MAX,
    NPROC_PER_NODE_MAX,
    RENDEZVOUS,
    TOPOLOGIES,
    WORLD_SIZE_MAX,
)
from distval.config.values import Reader
from distval.config.yaml_nodes import Problems, describe, typed

BACKENDS = ("gloo", *NCCL_BACKENDS, "mpi")
DEFAULT_TIMEOUT_S = 300.0
DEFAULT_COLLECTIVE_TIMEOUT_S = 60.0
DEFAULT_CHECK_TIMEOUT_S = 120.0
DEFAULT_PYTHON = "python3"
NAME_MAX = 80
NAME_PATTERN = re.compile(rf"^[A-Za-z0-9][A-Za-z0-9_.-]{{0,{NAME_MAX - 1}}}$")
# distval's upper bounds (docs/scenarios.md, "Strictness"), declared with their keys below; the layout's (world_size,
# nodes, nproc_per_node) live in layout.py, which checks them on derived values too.
GPUS_PER_NODE_MAX = NPROC_PER_NODE_MAX
EXTRA_NETWORKS_MAX = 16
DISTRIBUTED_DEBUG = ("off", "info", "detail")
MAX_RESTARTS_MAX = 10
RDZV_TIMEOUT_MAX_S = 3600
# torchrun's c10d join_timeout is 600 s: survivors of a lost node would wait that long, past most deadlines.
DEFAULT_RDZV_JOIN_TIMEOUT_S = 60
# A matrix's combinations (before its exclude entries) and a file's scenarios: at most this many.
SCENARIOS_MAX = 10_000
NAME_EXPECTED = f"a name of letters, digits, '.', '_' or '-' (at most {NAME_MAX} characters)"

# How a key's value becomes a Scenario field:
VALUE = "value"  # the scenario's, else the top level's, else the key's default
LAYOUT = "layout"  # by the layout rules (layout.py), from several keys together
DEVICE = "device"  # by the device rules (devices.py), from the backend and the layout
ENTRY = "entry"  # by the loader: the entry's name, its checks, its matrix and exclude


@dataclass(frozen=True)
class Key:
    name: str
    doc: str
    # None: matrix and exclude, which need the rest of the entry and are read by matrix.py.
    read: Reader | None
    # The JSON Schema of the value; None where schema.py builds it (checks, matrix, exclude).
    schema: Mapping[str, Any] | None
    default: Any = None
    kind: str = VALUE
    # The key's place among the top level's keys (it is then a default for every scenario) and among the
    # matrix axes (it is then an axis); None: not there. Messages and docs/scenarios.md ("Matrices") list them in this order.
    top: int | None = None
    axis: int | None = None


def _name(node: yaml.Node, key_path: str, problems: Problems) -> str | None:
    value: str | None = typed(
        node, key_path, problems, NAME_EXPECTED, lambda v: isinstance(v, str) and NAME_PATTERN.fullmatch(v) is not None
    )
    return value


def _hosts(node: yaml.Node, key_path: str, problems: Problems) -> tuple[str, ...] | None:
    """Docker Engine URLs (distval/targets/engines/hosts.py), each once."""
    if not isinstance(node, yaml.SequenceNode) or not 1 <= len(node.value) <= HOSTS_MAX:
        problems.add(node, key_path, f"expected a list of 1..{HOSTS_MAX} Docker Engine URLs; got {describe(node)}")
        return None
    urls: list[str] = []
    for index, item in enumerate(node.value):
        path = f"{key_path}[{index}]"
        url = typed(item, path, problems, "a Docker Engine URL (a string)", lambda v: isinstance(v, str))
        if url is None:
            return None
        problem = url_problem(url) or (f"expected each host once; {url!r} is listed twice" if url in urls else None)
        if problem is not None:
            problems.add(item, path, problem)
            return None
        urls.append(url)
    return tuple(urls)


def _placement(node: yaml.Node, key_path: str, problems: Problems) -> tuple[int, ...] | None:
    """A host index per node (0-based, into the hosts in use)."""
    expected = f"a list of host indexes 0..{HOSTS_MAX - 1}, one per node"
    if not isinstance(node, yaml.SequenceNode) or not node.value:
        problems.add(node, key_path, f"expected {expected}; got {describe(node)}")
        return None
    indexes: list[int] = []
    for index, item in enumerate(node.value):
        value = typed(
            item,
            f"{key_path}[{index}]",
            problems,
            f"a host index 0..{HOSTS_MAX - 1}",
            lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v < HOSTS_MAX,
        )
        if value is None:
            return None
        indexes.append(value)
    return tuple(indexes)


def _address(node: yaml.Node, key_path: str, problems: Problems) -> str | None:
    def is_address(value: object) -> bool:
        try:
            ipaddress.ip_address(str(value))
        except ValueError:
            return False
        return isinstance(value, str)

    value: str | None = typed(node, key_path, problems, "an IP address (as a string)", is_address)
    return value


_SECONDS = {"type": "number", "exclusiveMinimum": 0, "maximum": values.SECONDS_MAX}
# A Docker size > 0; numbers stand for bytes. The pattern is the loader's SIZE_PATTERN without case
# folding (JSON Schema patterns have no flags) and with the "> 0" rule in it.
_SIZE = {"anyOf": [{"type": "string", "pattern": "^[0-9]*[1-9][0-9]*[bkmgBKMG]?$"}, {"type": "integer", "minimum": 1}]}


def _integer(minimum: int, maximum: int) -> Mapping[str, Any]:
    return {"type": "integer", "minimum": minimum, "maximum": maximum}


def _enum(choices: tuple[str, ...]) -> Mapping[str, Any]:
    return {"type": "string", "enum": list(choices)}


# In the order scenarios list their keys (and messages quote them).
KEYS: tuple[Key, ...] = (
    Key(
        name="name",
        doc="the scenario's name, or the matrix's (its scenarios are <name>.<value>...); JUnit suite name",
        read=_name,
        schema={"type": "string", "pattern": NAME_PATTERN.pattern},
        kind=ENTRY,
    ),
    Key(
        name="topology",
        doc="in-container: every rank in one container; cross-container: one container per node",
        read=values.choice(TOPOLOGIES),
        schema=_enum(TOPOLOGIES),
        kind=LAYOUT,
        axis=2,
    ),
    Key(
        name="world_size",
        doc="the number of ranks: nodes x nproc_per_node",
        read=values.integer(1, WORLD_SIZE_MAX, " (distval's bound on ranks per scenario)"),
        schema=_integer(1, WORLD_SIZE_MAX),
        kind=LAYOUT,
        axis=7,
    ),
    Key(
        name="nodes",
        doc="containers (cross-container) or 1 (in-container)",
        read=values.integer(1, NODES_MAX, " (distval's bound on containers per scenario)"),
        schema=_integer(1, NODES_MAX),
        kind=LAYOUT,
        axis=8,
    ),
    Key(
        name="nproc_per_node",
        doc="ranks (processes) in each container",
        read=values.integer(1, NPROC_PER_NODE_MAX, " (distval's bound on processes per container)"),
        schema=_integer(1, NPROC_PER_NODE_MAX),
        kind=LAYOUT,
        axis=9,
    ),
    Key(
        name="rendezvous",
        doc=f"how the nodes meet: {' or '.join(LAUNCHER_RENDEZVOUS)} (the launcher), "
        f"{' or '.join(NO_LAUNCHER_RENDEZVOUS)} (no launcher)",
        read=values.choice(RENDEZVOUS),
        schema=_enum(RENDEZVOUS),
        default=rendezvous.DEFAULT,
        kind=LAYOUT,
        top=9,
        axis=3,
    ),
    Key(
        name="master_addr",
        doc="how the other nodes address node 0: its DNS name or its IP address",
        read=values.choice(MASTER_ADDRS),
        schema=_enum(MASTER_ADDRS),
        default="name",
        kind=LAYOUT,
        top=10,
        axis=4,
    ),
    Key(
        name="backend",
        doc="the process group's backend",
        read=values.choice(BACKENDS),
        schema=_enum(BACKENDS),
        default="gloo",
        top=1,
        axis=5,
    ),
    Key(
        name="device",
        doc="where the ranks' tensors live: cpu or cuda; default cuda for nccl and nccl-legacy, cpu otherwise",
        read=values.choice(DEVICES),
        schema=_enum(DEVICES),
        kind=DEVICE,
        top=2,
        axis=6,
    ),
    Key(
        name="gpus_per_node",
        doc="GPUs given to each node's container; default nproc_per_node for nccl, 1 on cuda otherwise, 0 on cpu",
        read=values.integer(0, GPUS_PER_NODE_MAX, " (distval's bound on GPUs per container)"),
        schema=_integer(0, GPUS_PER_NODE_MAX),
        kind=DEVICE,
        top=3,
    ),
    Key(
        name="image",
        doc="the image under test (--image overrides it); none: the default fixture",
        read=values.image,
        schema={"type": "string", "pattern": values.IMAGE_PATTERN.pattern, "maxLength": values.IMAGE_MAX},
        top=4,
        axis=1,
    ),
    Key(
        name="timeout_s",
        doc="the harness's deadline per scenario, from the first container start",
        read=values.seconds,
        schema=_SECONDS,
        default=DEFAULT_TIMEOUT_S,
        top=5,
    ),
    Key(
        name="collective_timeout_s",
        doc="the process group's timeout (init_process_group(timeout=...))",
        read=values.seconds,
        schema=_SECONDS,
        default=DEFAULT_COLLECTIVE_TIMEOUT_S,
        top=6,
    ),
    Key(
        name="check_timeout_s",
        doc="a check running longer is stopped and reported where it hung",
        read=values.seconds,
        schema=_SECONDS,
        default=DEFAULT_CHECK_TIMEOUT_S,
        top=7,
    ),
    Key(
        name="python",
        doc="the image's Python interpreter",
        read=values.string("the image's Python interpreter"),
        schema={"type": "string", "pattern": r"^[^\u0000-\u001f\u007f]*\S[^\u0000-\u001f\u007f]*$"},
        default=DEFAULT_PYTHON,
        top=8,
    ),
    Key(
        name="egress",
        doc="true: the scenario's network reaches outside; false: it is internal",
        read=values.boolean,
        schema={"type": "boolean"},
        default=False,
        top=11,
    ),
    Key(
        name="extra_networks",
        doc="more networks, created per scenario, that every container is attached to",
        read=values.integer(0, EXTRA_NETWORKS_MAX, " (distval's bound on networks per scenario)"),
        schema=_integer(0, EXTRA_NETWORKS_MAX),
        default=0,
    ),
    Key(
        name="ipv6",
        doc="an IPv6-enabled scenario network",
        read=values.boolean,
        schema={"type": "boolean"},
        default=False,
        top=12,
    ),
    Key(
        name="cpus",
        doc="CPUs per container (none: no limit)",
        read=values.cpus,
        schema={"type": "number", "minimum": values.CPUS_MIN, "maximum": values.CPUS_MAX},
        top=13,
    ),
    Key(name="memory", doc="memory per container, a Docker size like 512m or 2g", read=values.size, schema=_SIZE, top=14),
    Key(name="shm_size", doc="/dev/shm per container, a Docker size like 512m or 2g", read=values.size, schema=_SIZE, top=15),
    Key(
        name="env",
        doc="extra environment variables (merged over the top level's)",
        read=values.env,
        schema={
            "type": "object",
            "propertyNames": {
                "pattern": values.ENV_NAME_PATTERN.pattern,
                "not": {"anyOf": [{"enum": list(values.RESERVED_ENV)}, {"pattern": f"^{values.RESERVED_ENV_PREFIX}"}]},
            },
            "additionalProperties": {
                "anyOf": [{"type": "string", "pattern": "^[^\u0000\r\n]*$"}, {"type": ["number", "boolean"]}]
            },
        },
        default=MappingProxyType({}),
        top=16,
    ),
    Key(
        name="user",
        doc="the user the ranks run as: name, uid, name:group or uid:gid",
        read=values.user,
        schema={"anyOf": [{"type": "string", "pattern": values.USER_PATTERN.pattern}, {"type": "integer", "minimum": 0}]},
        top=17,
    ),
    Key(
        name="working_dir",
        doc="the ranks' working directory, an absolute path in the container",
        read=values.working_dir,
        schema={"type": "string", "pattern": r"^/[^\u0000\r\n]*$"},
        top=18,
    ),
    # Diagnosis and elastic restarts (docs/diagnosis.md).
    Key(
        name="distributed_debug",
        doc="TORCH_DISTRIBUTED_DEBUG for the ranks: off, info, or detail (mismatched collectives are reported at once)",
        read=values.choice(DISTRIBUTED_DEBUG),
        schema=_enum(DISTRIBUTED_DEBUG),
        default="off",
        top=19,
    ),
    Key(
        name="max_restarts",
        doc="torchrun's --max_restarts: how often a failed worker group is restarted (0: a failure fails the scenario)",
        read=values.integer(0, MAX_RESTARTS_MAX, " (distval's bound on restarts)"),
        schema=_integer(0, MAX_RESTARTS_MAX),
        default=0,
        top=20,
    ),
    Key(
        name="rdzv_join_timeout_s",
        doc="c10d rendezvous: join_timeout, whole seconds (torch's default, 600 s, outlasts most deadlines)",
        read=values.integer(1, RDZV_TIMEOUT_MAX_S, " (distval's bound on rendezvous timeouts)"),
        schema=_integer(1, RDZV_TIMEOUT_MAX_S),
        default=DEFAULT_RDZV_JOIN_TIMEOUT_S,
        top=21,
    ),
    Key(
        name="rdzv_last_call_timeout_s",
        doc="c10d rendezvous: last_call_timeout, whole seconds (none: torch's 30 s)",
        read=values.integer(1, RDZV_TIMEOUT_MAX_S, " (distval's bound on rendezvous timeouts)"),
        schema=_integer(1, RDZV_TIMEOUT_MAX_S),
        top=22,
    ),
    Key(
        name="rdzv_close_timeout_s",
        doc="c10d rendezvous: close_timeout, whole seconds (none: torch's 30 s)",
        read=values.integer(1, RDZV_TIMEOUT_MAX_S, " (distval's bound on rendezvous timeouts)"),
        schema=_integer(1, RDZV_TIMEOUT_MAX_S),
        top=23,
    ),
    Key(
        name="rdzv_read_timeout_s",
        doc="c10d rendezvous: read_timeout of its store, whole seconds (none: torch's 60 s, short on a loaded host)",
        read=values.integer(1, RDZV_TIMEOUT_MAX_S, " (distval's bound on rendezvous timeouts)"),
        schema=_integer(1, RDZV_TIMEOUT_MAX_S),
        top=24,
    ),
    Key(
        name="share_rdzv_store",
        doc="false: TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1, the workers get a store of their own (pytorch#135712)",
        read=values.boolean,
        schema={"type": "boolean"},
        default=True,
        top=25,
    ),
    Key(
        name="hosts",
        doc=(
            "Docker Engine URLs (unix://, tcp://, https:// with TLS, ssh://) the nodes go on, in order; honoured only with "
            "--hosts-from-config (the image is sent to each and the nodes use their host's network); --hosts overrides"
        ),
        read=_hosts,
        schema={
            "type": "array",
            "minItems": 1,
            "maxItems": HOSTS_MAX,
            "uniqueItems": True,
            "items": {"type": "string", "pattern": f"^({'|'.join(SCHEMES)})://"},
        },
        default=(),
        top=26,
    ),
    Key(
        name="placement",
        doc="across several hosts: the host index of each node (default: node i on host i mod the number of hosts)",
        read=_placement,
        schema={"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0, "maximum": HOSTS_MAX - 1}},
        default=(),
    ),
    Key(
        name="advertise_addr",
        doc="across several hosts: host 0's address as the other hosts reach it (default: probed)",
        read=_address,
        schema={"anyOf": [{"type": "string", "format": "ipv4"}, {"type": "string", "format": "ipv6"}]},
        top=27,
    ),
    Key(
        name="checks",
        doc="the checks to run, in order: names, or {name, args, required}",
        read=read_checks,
        schema=None,
        kind=ENTRY,
    ),
    Key(name="matrix", doc="axes -> lists of values: one scenario per combination", read=None, schema=None, kind=ENTRY),
    Key(
        name="exclude", doc="combinations the matrix leaves out: a list of {axis: value, ...}", read=None, schema=None, kind=ENTRY
    ),
    Key(
        name="faults",
        doc=f"what the harness does to a node while the checks run ({', '.join(FAULT_KINDS)}), each after a check",
        read=read_faults,
        schema=schema_of_faults(),
        default=(),
    ),
    Key(
        name="expect",
        doc=f"how the ranks must react to the faults: a list of {{ranks: {'|'.join(RANK_GROUPS)}|[...], "
        f"error: {'|'.join(ERROR_KINDS)}, within_s: [lo, hi]}}; empty: no rank may fail",
        read=read_expect,
        schema=schema_of_expect(),
    ),
)

BY_NAME: Mapping[str, Key] = MappingProxyType({key.name: key for key in KEYS})
SCENARIO_KEYS = tuple(key.name for key in KEYS)
DEFAULT_KEYS = tuple(key.name for key in sorted((k for k in KEYS if k.top is not None), key=lambda k: k.top or 0))
MATRIX_AXES = tuple(key.name for key in sorted((k for k in KEYS if k.axis is not None), key=lambda k: k.axis or 0))
# The keys that hold one value each, read by their Key.read (the rest are the entry's own).
VALUE_KEYS = tuple(key.name for key in KEYS if key.kind != ENTRY)
