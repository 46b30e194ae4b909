"""A scenario's faults as plan data: when each lands, what exactly the harness does, and the helper
containers that do it (created with the exact docker-py arguments ``distval plan`` shows).

A ``partition`` with ``peers`` and a ``slow`` fault run iptables and tc in a helper container that shares
the victim's network namespace (``network_mode="container:<name>"``, ``cap_add=["NET_ADMIN"]``: Pumba's
pattern), so the image under test needs no tool and no capability. The helper is labelled like the
scenario's containers and removed with them; a qdisc outlives its helper, so the runtime removes it.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, replace
from typing import Any

from distval.config.faults import FaultSpec
from distval.config.model import Scenario
from distval.config.rendezvous import rendezvous_form
from distval.image_names import FAULT_HELPER
from distval.plan.specs import ContainerPlan, HelperPlan

HELPER_INTERFACE = "eth0"  # the scenario network is the container's first (and in fault scenarios, only) one
TBF_BURST = "32kbit"
TBF_LATENCY = "400ms"


@dataclass(frozen=True)
class FaultStep:
    """One fault: ``delay_s`` after rank ``trigger_rank`` wrote its record of ``trigger_check``, ``action``."""

    index: int
    kind: str
    node: int
    container: str  # the victim node's container
    victims: tuple[int, ...]  # the ranks the fault hits directly
    trigger_check: str
    trigger_rank: int
    delay_s: float
    # What the runtime does: "kill" (the container), "signal" (workers of victims, signum), "pause",
    # "disconnect" (from network), "exec" (commands in the helper), "mark" (nothing: the node's memory
    # limit is the fault, planned into its container; the time marks when the check starts to exceed it).
    action: str
    signum: int = 0
    network: str | None = None
    helper: str | None = None
    commands: tuple[tuple[str, ...], ...] = ()
    undo_after_s: float | None = None  # heal / resume this long after the fault
    undo_commands: tuple[tuple[str, ...], ...] = ()
    needs_netem: bool = False  # the runtime first checks that the kernel has sch_netem, else skips the scenario

    def describe(self) -> str:
        when = f"{self.delay_s:g} s after rank {self.trigger_rank} finished {self.trigger_check}"
        what = {
            "kill": f"kill container {self.container}",
            "signal": f"signal {self.signum} to the worker of rank(s) {', '.join(map(str, self.victims))} in {self.container}",
            "pause": f"pause container {self.container}",
            "disconnect": f"disconnect {self.container} from {self.network}",
            "exec": f"in helper {self.helper}: " + "; ".join(" ".join(c) for c in self.commands),
            "mark": f"mark the fault: {self.container} runs under its memory limit, which the next check exceeds",
        }[self.action]
        undo = ""
        if self.undo_after_s is not None:
            again = {
                "pause": "unpause it",
                "disconnect": f"connect it to {self.network} again",
                "exec": "; ".join(" ".join(c) for c in self.undo_commands),
            }[self.action]
            undo = f"; {self.undo_after_s:g} s later: {again}"
        elif self.undo_commands:
            undo = "; when the scenario ends: " + "; ".join(" ".join(c) for c in self.undo_commands)
        return f"fault {self.index} ({self.kind}, node {self.node}): {when}: {what}{undo}"


@dataclass(frozen=True)
class FaultPlan:
    steps: tuple[FaultStep, ...]
    helpers: tuple[HelperPlan, ...]

    def helper(self, name: str) -> HelperPlan:
        return next(h for h in self.helpers if h.name == name)


def fault_node(scenario: Scenario, fault: FaultSpec) -> int:
    """The node a fault hits: its own, else the one whose container holds the rendezvous store (the scenario's
    rendezvous row says which: torchrun's agent there, or rank 0 without a launcher)."""
    if fault.kind == "kill-store" or fault.node is None:
        return rendezvous_form(scenario.rendezvous).store_node
    return fault.node


def with_fault_limits(scenario: Scenario, containers: list[ContainerPlan]) -> list[ContainerPlan]:
    """The containers with each oom fault's memory limit on its node (the Engine enforces it from the start)."""
    limits = {fault_node(scenario, f): f.memory for f in scenario.faults if f.kind == "oom" and f.memory}
    return [
        replace(c, options=replace(c.options, memory=limits[c.node_rank])) if c.node_rank in limits else c for c in containers
    ]


def _peer_rules(flag: str, peers: list[str]) -> tuple[tuple[str, ...], ...]:
    # Both directions: a DROP on one side only still lets the victim's own sends through.
    rules: list[tuple[str, ...]] = []
    for peer in peers:
        rules.append(("iptables", flag, "INPUT", "-s", peer, "-j", "DROP"))
        rules.append(("iptables", flag, "OUTPUT", "-d", peer, "-j", "DROP"))
    return tuple(rules)


def plan_faults(
    scenario: Scenario, containers: tuple[ContainerPlan, ...], network: str, base: str, labels: tuple[tuple[str, str], ...]
) -> FaultPlan:
    """The scenario's faults as steps, and the helper containers they need (one per victim node)."""
    steps: list[FaultStep] = []
    helpers: dict[str, HelperPlan] = {}
    by_node = {c.node_rank: c for c in containers}
    for index, fault in enumerate(scenario.faults):
        node = fault_node(scenario, fault)
        victim = by_node[node]
        common: dict[str, Any] = {
            "index": index,
            "kind": fault.kind,
            "node": node,
            "container": victim.name,
            "victims": victim.ranks,
            "trigger_check": fault.after.check,
            "trigger_rank": victim.ranks[0],
            "delay_s": fault.after.delay_s,
        }
        helper_name = f"{base}-fault-n{node}"
        if fault.kind == "slow" or (fault.kind == "partition" and fault.peers):
            helpers.setdefault(helper_name, HelperPlan(helper_name, victim.name, FAULT_HELPER, labels))

        if fault.kind in ("kill", "kill-store"):
            if fault.rank is not None:
                steps.append(FaultStep(**{**common, "victims": (fault.rank,)}, action="signal", signum=int(signal.SIGKILL)))
            else:
                steps.append(FaultStep(**common, action="kill"))
        elif fault.kind == "freeze":
            steps.append(FaultStep(**common, action="pause", undo_after_s=fault.resume_after_s))
        elif fault.kind == "partition" and not fault.peers:
            steps.append(FaultStep(**common, action="disconnect", network=network, undo_after_s=fault.heal_after_s))
        elif fault.kind == "partition":
            peers = [by_node[p].name for p in fault.peers]
            steps.append(
                FaultStep(
                    **common,
                    action="exec",
                    helper=helper_name,
                    commands=_peer_rules("-I", peers),
                    undo_after_s=fault.heal_after_s,
                    undo_commands=_peer_rules("-D", peers),
                )
            )
        elif fault.kind == "slow":
            netem = fault.latency_ms is not None or fault.loss_percent is not None
            command: tuple[str, ...] = ("tc", "qdisc", "add", "dev", HELPER_INTERFACE, "root")
            if netem:
                command += ("netem",)
                if fault.latency_ms is not None:
                    command += ("delay", f"{fault.latency_ms:g}ms")
                if fault.loss_percent is not None:
                    command += ("loss", f"{fault.loss_percent:g}%")
                if fault.rate is not None:
                    command += ("rate", fault.rate)
            else:
                command += ("tbf", "rate", str(fault.rate), "burst", TBF_BURST, "latency", TBF_LATENCY)
            steps.append(
                FaultStep(
                    **common,
                    action="exec",
                    helper=helper_name,
                    commands=(command,),
                    undo_after_s=fault.heal_after_s,
                    undo_commands=(("tc", "qdisc", "del", "dev", HELPER_INTERFACE, "root"),),
                    needs_netem=netem,
                )
            )
        else:  # oom
            steps.append(FaultStep(**common, action="mark"))
    return FaultPlan(tuple(steps), tuple(helpers.values()))
