"""One declared bound on what a scenario file may ask distval to plan, and the measures derived from it.

Every key has its own bound, but products of bounds do not: 10,000 scenarios x 256 nodes was accepted (2.56
million containers, some 19 minutes and 55 GB to plan), 147 KB of message sizes in a matrix entry became
300 MB of plan (the sizes are repeated in every container of every scenario), and so did 1 MB of env values.
The plan is the measure: what ``distval plan --format json`` prints grows with the containers and, in each,
with its env values and its checks' arguments. PLAN_BYTES_MAX bounds that estimate, and the bound on the
containers of a file follows from it (each container costs at least CONTAINER_PLAN_BYTES).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from dataclasses import dataclass

from distval.config.model import Scenario

MIB = 2**20
# The plan of one file, at most (its JSON, the larger form): about 40 s and 700 MB of memory to plan here.
PLAN_BYTES_MAX = 64 * MIB
# What one container adds to the JSON plan besides its env and check arguments (measured: 3.2 KB for a
# two-node scenario of one check), and what a scenario adds besides its containers (measured: 1-2 KB).
CONTAINER_PLAN_BYTES = 3 * 1024
SCENARIO_PLAN_BYTES = 1024
# What a run adds once, whatever its scenarios: the containers distval starts beside the ranks (the reaper, the
# beside helper, the probes; "beside" in the plan, measured 1.4 KB with the reaper alone) and the run's header.
RUN_PLAN_BYTES = 8 * 1024
CONTAINERS_MAX = PLAN_BYTES_MAX // CONTAINER_PLAN_BYTES


@dataclass
class Budget:
    """The containers and the estimated plan bytes of the scenarios counted so far."""

    containers: int = 0
    plan_bytes: int = RUN_PLAN_BYTES

    def add(self, scenarios: Iterable[Scenario]) -> None:
        sizes: dict[int, int] = {}  # a matrix's scenarios share their checks' arguments: measured once
        for scenario in scenarios:
            containers = max(scenario.nodes, 1)
            # Its env and every text key (working_dir, python, user, image, name: each may be long) are in
            # every container's spec.
            texts = (getattr(scenario, f.name) for f in dataclasses.fields(scenario))
            # Each measured as a JSON string (every non-ASCII character as a 6-byte escape): at least its
            # length in either form of the plan, UTF-8 or escaped.
            per_container = CONTAINER_PLAN_BYTES + sum(len(json.dumps(t)) for t in texts if isinstance(t, str))
            per_container += sum(len(json.dumps(name)) + len(json.dumps(value)) + 4 for name, value in scenario.env)
            for check in scenario.checks:
                if check.args:
                    key = id(check.args)
                    if key not in sizes:
                        sizes[key] = len(json.dumps(dict(check.args), default=str))
                    per_container += sizes[key]
            self.containers += containers
            self.plan_bytes += SCENARIO_PLAN_BYTES + containers * per_container

    def problem(self) -> str | None:
        """What the scenarios counted so far exceed, or None."""
        if self.containers > CONTAINERS_MAX:
            return (
                f"expected at most {CONTAINERS_MAX} containers in a file (distval's bound: {PLAN_BYTES_MAX // MIB} MiB "
                f"of plan at {CONTAINER_PLAN_BYTES} bytes a container); the scenarios up to this entry start "
                f"{self.containers}"
            )
        if self.plan_bytes > PLAN_BYTES_MAX:
            return (
                f"expected a plan of at most {PLAN_BYTES_MAX // MIB} MiB (distval's bound); the scenarios up to this "
                f"entry make about {-(-self.plan_bytes // MIB)} MiB: env values and check arguments are repeated "
                "in every container of every scenario"
            )
        return None
