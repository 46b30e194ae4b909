"""The labels distval puts on every container and network it creates, shared by the planner and the Engine.

``distval cleanup`` and the per-scenario cleanup find what to remove by these labels alone. The owner
labels are added by the Engine when it creates a resource (``Engine._labels``), not by the planner: they
name the process that runs (distval/owner.py), which a plan does not know.
"""

from __future__ import annotations

LABEL_MANAGED = "distval.managed"  # always "true": everything distval created
LABEL_RUN = "distval.run"  # the run id
LABEL_SCENARIO = "distval.scenario"  # the scenario's name
LABEL_NODE = "distval.node"  # the node rank a container hosts
LABEL_OWNER_HOST = "distval.owner.host"  # the host name of the distval process that created it
LABEL_OWNER_PID = "distval.owner.pid"  # that process's pid
LABEL_OWNER_STARTED = "distval.owner.started"  # its start time ("<boot id>:<pid namespace>:<ticks since boot>")
# The machine it ran on (/etc/machine-id, else a random id kept under distval's cache directory): a host name
# alone does not tell two CI runners sharing one Engine apart.
LABEL_OWNER_MACHINE = "distval.owner.machine"
LABEL_ROLE = "distval.role"  # "reaper" on a run's reaper container (distval/targets/docker/reaper.py); empty elsewhere

# Every label distval reads. The Engine gives each of them a value on every resource it creates (empty where
# the caller gave none): a container inherits its image's LABELs, so an image under test with
# `LABEL distval.role=reaper` would otherwise exempt its rank containers from the reaper and from cleanup.
DISTVAL_LABELS = (
    LABEL_MANAGED,
    LABEL_RUN,
    LABEL_SCENARIO,
    LABEL_NODE,
    LABEL_OWNER_HOST,
    LABEL_OWNER_PID,
    LABEL_OWNER_STARTED,
    LABEL_OWNER_MACHINE,
    LABEL_ROLE,
)
