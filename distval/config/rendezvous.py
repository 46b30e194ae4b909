"""The rendezvous forms: one declaration each, the way keys.py declares keys.

A row says everything distval does differently for that form: the launcher (or none), its arguments across
containers and in one container, whether node ranks are given or assigned by the store, which node hosts the
store, the ports it needs, the init_method and environment of the launcher-less forms, and what layouts allow it.
The config rules (layout.py, keys.py, schema.py) derive their names and rules from these rows, and the node
builder (distval/plan/nodes.py) fills a row's templates in; neither compares form names. This module imports
nothing from distval: both distval.config and distval.plan import it.

Templates are ``str.format`` strings over these fields (a field a template names and the builder does not give
is a KeyError, so a row cannot use what no target provides):

- ``nodes``, ``nproc_per_node``, ``world_size``, ``max_restarts``: the scenario's;
- ``node_rank``: the node's own rank (forms whose node ranks are given);
- ``master_addr``: the store node's address as this node reaches it (a name, an IP address, a placeholder);
- ``master_host``: the same as it stands before ``:port`` or in a URL (an IPv6 address in brackets);
- ``master_port``, ``c10d_port``: the ports the row lists in ``ports`` (numbers, or placeholders a target fills in);
- ``rdzv_id``: an id unique to the run and scenario.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

# How a node learns its node rank.
GIVEN = "given"  # distval gives it: on the launcher's command line, or as RANK without a launcher
ASSIGNED = "assigned"  # the store assigns it as the nodes join (it may differ between rendezvous rounds)
NODE_RANKS = (GIVEN, ASSIGNED)
TEMPLATE_FIELDS = (
    "nodes",
    "nproc_per_node",
    "world_size",
    "max_restarts",
    "node_rank",
    "master_addr",
    "master_host",
    "master_port",
    "c10d_port",
    "rdzv_id",
)
PORTS = ("master_port", "c10d_port")


@dataclass(frozen=True)
class Launcher:
    """A launcher that starts a node's ranks: run as ``python -m <module> <rendezvous arguments> <tail> -m <suite>``."""

    name: str  # the suite spec's "launcher" (distval_suite/launch.py checks the environment it promises)
    module: str
    # After the rendezvous arguments. No restarts unless the scenario asks (max_restarts): a failing rank must fail
    # the scenario, not be retried into a pass; with restarts the report says how many happened.
    tail: tuple[str, ...] = ()


# torch.distributed.run through the interpreter, not the torchrun script that some images lack. Underscore
# spellings in every row's arguments: torch 1.13's launcher knows only those; later ones accept both.
TORCHRUN = Launcher("torchrun", "torch.distributed.run", ("--max_restarts={max_restarts}",))
NO_LAUNCHER = "none"  # the suite spec's "launcher" of the launcher-less forms


@dataclass(frozen=True)
class RendezvousForm:
    name: str
    launcher: Launcher | None  # None: one process per node, started with its rank by distval
    # The launcher's rendezvous arguments across containers (templates).
    launcher_args: tuple[str, ...] = ()
    # The launcher's arguments in one container (templates); None: in-container refuses the form.
    in_container: tuple[str, ...] | None = None
    # --rdzv_conf after launcher_args (across containers): ``is_host`` where several agents share one address (each
    # would otherwise decide it hosts the store: whichever binds first does, not the store node), then the
    # scenario's c10d timeouts (distval/config/keys.py rdzv_*_timeout_s).
    rdzv_conf: bool = False
    node_ranks: str = GIVEN
    # The node whose process hosts the store every other node dials (the launcher's agent, or rank 0 without a
    # launcher): it is addressed as "node 0" (master_addr), starts last (or first, where its address must be
    # learned), gets is_host=1, and is the victim of a kill-store fault.
    store_node: int = 0
    ports: tuple[str, ...] = ()  # the ports its templates use (placeholders where a target picks them)
    init_method: str | None = None  # init_process_group's, for the suite (template); None: the launcher's env://
    env: tuple[tuple[str, str], ...] = ()  # each node's rendezvous variables (templates; launcher-less forms)
    several_per_node: bool = True  # whether nproc_per_node may exceed 1

    @property
    def dynamic_node_ranks(self) -> bool:
        return self.node_ranks == ASSIGNED

    def templates(self) -> tuple[str, ...]:
        """Every template of the row (what the table's tests read)."""
        own = self.launcher_args + (self.in_container or ()) + tuple(value for _, value in self.env)
        return own + ((self.init_method,) if self.init_method is not None else ())


FORMS: tuple[RendezvousForm, ...] = (
    RendezvousForm(
        name="static",
        launcher=TORCHRUN,
        launcher_args=(
            "--nnodes={nodes}",
            "--nproc_per_node={nproc_per_node}",
            "--node_rank={node_rank}",
            "--master_addr={master_addr}",
            "--master_port={master_port}",
        ),
        in_container=("--standalone", "--nnodes=1", "--nproc_per_node={world_size}"),
        ports=("master_port",),
    ),
    RendezvousForm(
        name="c10d",
        launcher=TORCHRUN,
        # No node rank: the store assigns them. A run-unique id: two jobs on one endpoint must not meet.
        launcher_args=(
            "--nnodes={nodes}",
            "--nproc_per_node={nproc_per_node}",
            "--rdzv_backend=c10d",
            "--rdzv_endpoint={master_host}:{c10d_port}",
            "--rdzv_id={rdzv_id}",
        ),
        rdzv_conf=True,
        node_ranks=ASSIGNED,
        ports=("c10d_port",),
    ),
    RendezvousForm(
        name="env",
        launcher=None,
        init_method="env://",
        env=(
            ("RANK", "{node_rank}"),
            ("WORLD_SIZE", "{world_size}"),
            ("MASTER_ADDR", "{master_addr}"),
            ("MASTER_PORT", "{master_port}"),
        ),
        ports=("master_port",),
        several_per_node=False,
    ),
    RendezvousForm(
        name="tcp",
        launcher=None,
        init_method="tcp://{master_host}:{master_port}",
        env=(("RANK", "{node_rank}"), ("WORLD_SIZE", "{world_size}")),
        ports=("master_port",),
        several_per_node=False,
    ),
)
DEFAULT = "static"  # the rendezvous key's default


def rendezvous_form(name: str) -> RendezvousForm:
    """The row of ``name`` (a name the loader accepted). Read at call time, so a test may add a row."""
    for row in FORMS:
        if row.name == name:
            return row
    raise KeyError(f"no rendezvous form {name!r}")


def names(
    launcher: bool | None = None, in_container: bool | None = None, several_per_node: bool | None = None
) -> tuple[str, ...]:
    """The forms' names, in the table's order, of the rows that match every condition given."""
    return tuple(
        row.name
        for row in FORMS
        if (launcher is None or (row.launcher is not None) == launcher)
        and (in_container is None or (row.in_container is not None) == in_container)
        and (several_per_node is None or row.several_per_node == several_per_node)
    )


def template_fields(template: str) -> set[str]:
    """The fields a template names."""
    return {field for _, field, _, _ in string.Formatter().parse(template) if field is not None}
