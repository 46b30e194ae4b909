"""The labels distval puts on every container and network it creates, shared by the planner and the Engine.

``distval cleanup`` and the per-scenario cleanup find what to remove by these labels alone.
"""

from __future__ import annotations

LABEL_MANAGED = "distval.managed"  # always "true": everything distval created
LABEL_RUN = "distval.run"  # the run id
LABEL_SCENARIO = "distval.scenario"  # the scenario's name
LABEL_NODE = "distval.node"  # the node rank a container hosts
