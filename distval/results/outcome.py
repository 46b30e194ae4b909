"""What the runtimes hand the results, and what one testcase came to: plain data, depending on nothing above the plan.

``ScenarioOutcome`` (one per scenario, with a ``ContainerOutcome`` per container or local node) is what a runtime
observed; distval/results/scenario.py turns it into ``CaseResult``s with one of the four statuses. The diagnosis
(distval/results/diagnosis.py), the faults' verdict (distval/results/faults.py) and the reports all read these types,
so they live below all of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from distval.plan.model import ScenarioPlan
from distval.results.expectations import FaultLog

PASSED, FAILED, ERROR, SKIPPED = "passed", "failed", "error", "skipped"
EXIT_STATUS_CASE = "exit_status"


@dataclass(frozen=True)
class ContainerOutcome:
    name: str
    node_rank: int
    ranks: tuple[int, ...]
    exit_code: int | None
    killed_at_deadline: bool
    stdout: str
    stderr: str
    result_files: dict[str, bytes] = field(default_factory=dict)
    problem: str | None = None
    kind: str = "container"  # what ran, in messages: "container", or "node" (a local process group, host mode)


@dataclass(frozen=True)
class ScenarioOutcome:
    plan: ScenarioPlan
    image_id: str | None
    duration_s: float
    containers: tuple[ContainerOutcome, ...]
    setup_error: str | None = None
    setup_skipped: bool = False  # the Engine cannot provide what the scenario needs (IPv6, GPUs): a skip, not an error
    skip_kind: str | None = None  # what it lacks: "ipv6", "gpu"
    fault_log: FaultLog | None = None  # what the faults did and when (distval/targets/docker/faults.py); None: no faults


@dataclass(frozen=True)
class CaseResult:
    name: str
    status: str
    message: str
    duration_s: float
    output: str = ""
    skipped_ranks: tuple[int, ...] = ()  # passed, but skipped on these ranks
    details: Mapping[str, object] = field(default_factory=dict)  # the lowest reporting rank's details (bandwidth figures)
