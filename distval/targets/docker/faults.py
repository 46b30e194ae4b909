"""Carries out a scenario's fault plan while its containers run: one ``poll`` per iteration of the runtime's
wait loop (distval/run/steps.py, on Docker: distval/targets/docker/runtime.py), never blocking long.

Triggers are the ranks' own records: the runtime reads the trigger rank's results file from the running
container (the Engine's archive API) and injects ``delay_s`` after that record's ``ended_at``, so a
loaded machine that starts the ranks late moves the fault with them. Every injection's wall-clock time
is logged; the verdict (distval/results/expectations.py) measures fault-to-failure times from it. Once more
waiting cannot change the verdict, ``poll`` says so and the runtime stops the containers instead of
waiting for launchers that would sit in torchrun's exit barrier (300 s) or gloo's timeouts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from typing import Any

from distval import strict_json
from distval.engine_protocol import EngineAPI
from distval.errors import EngineError
from distval.plan.faults import FaultStep
from distval.plan.model import ScenarioPlan
from distval.results.expectations import ContainerExit, FaultLog, Injected, decided, first_failures
from distval.targets.docker.processes import find_workers, signal_workers

READ_INTERVAL_S = 0.5  # how often the results files are read while something waits on them
# How often, after a fault, the runtime looks for worker processes that are gone while their container
# still runs: a launcher that lost its store may never exit (pytorch#168242), so its container's exit
# would never tell that the rank died.
WORKERS_INTERVAL_S = 1.0
PAUSE_ATTEMPTS = 3
NETEM_PROBE = ("tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms")
NETEM_UNDO = ("tc", "qdisc", "del", "dev", "lo", "root")
# Paused containers are resumed this long before the deadline, so that the runtime's kill reaches them
# (the Engine refuses to kill a paused container).
UNPAUSE_BEFORE_DEADLINE_S = 1.0


class FaultRunner:
    def __init__(
        self, engine: EngineAPI, plan: ScenarioPlan, containers: dict[str, Any], note: Callable[[str], None], deadline: float
    ) -> None:
        assert plan.faults is not None
        self.engine, self.plan, self.containers, self.note, self.deadline = engine, plan, containers, note, deadline
        self.steps = plan.faults.steps
        self.helpers: dict[str, Any] = {}
        self.due: dict[int, float] = {}  # step index -> wall-clock time to inject
        self.injected: dict[int, Injected] = {}
        self.undone: set[int] = set()
        self.paused: set[str] = set()
        self.exits: dict[str, ContainerExit] = {}
        self.records: dict[int, list[dict[str, object]]] = {}
        self.skip_reason: str | None = None
        self.ended: str | None = None
        self.decided_at: float | None = None
        self._started = False
        self._last_read = 0.0
        self._last_workers = 0.0
        self.gone: dict[int, ContainerExit] = {}  # rank -> its worker process seen gone (container still running)

    # -- the hook ----------------------------------------------------------------------------------
    def poll(self, running: Collection[str]) -> bool:
        """Advance the faults (``running``: the names of the containers still running); True when the runtime
        should stop the containers now (verdict decided, or the scenario cannot run its faults here)."""
        now = time.time()
        if not self._started:
            self._started = True
            self._start_helpers()
            if self.skip_reason is not None:
                self.ended = f"skipped: {self.skip_reason}"
                return True
        self._note_exits(running, now)
        if time.monotonic() >= self.deadline - UNPAUSE_BEFORE_DEADLINE_S:
            self._unpause_all()
        pending = [s for s in self.steps if s.index not in self.injected]
        if time.monotonic() - self._last_read >= READ_INTERVAL_S:
            self._last_read = time.monotonic()
            nodes = (
                {s.node for s in pending if s.index not in self.due} if pending else {c.node_rank for c in self.plan.containers}
            )
            self._read_records(nodes)
            for step in pending:
                if step.index not in self.due:
                    ended = self._trigger_time(step)
                    if ended is not None:
                        self.due[step.index] = ended + step.delay_s
        for step in pending:
            if step.index in self.due and now >= self.due[step.index]:
                self._inject(step)
        if self.injected and time.monotonic() - self._last_workers >= WORKERS_INTERVAL_S:
            self._last_workers = time.monotonic()
            self._note_gone_workers(running)
        for step in self.steps:
            done = self.injected.get(step.index)
            if done is not None and step.undo_after_s is not None and step.index not in self.undone:
                if time.time() >= done.at + step.undo_after_s:
                    self._undo(step)
        if self.plan.scenario.expect is not None and decided(
            self.plan.scenario.expect, self.log(), self.records, self.plan.scenario.world_size, time.time()
        ):
            self.ended = "the faults' verdict is decided; the containers still running are stopped"
            self.decided_at = time.time()
            # Still paused: the runtime reads the frozen node's stacks first (distval/results/diagnosis.py), then thaws
            # it (``thaw``) before its kill.
            return True
        return False

    def thaw(self) -> None:
        """Resume every container a fault paused (a paused container cannot be killed)."""
        self._unpause_all()

    def log(self) -> FaultLog:
        return FaultLog(
            injected=tuple(self.injected[i] for i in sorted(self.injected)),
            exits=tuple(self.exits.values()) + tuple(self.gone[r] for r in sorted(self.gone)),
            skip_reason=self.skip_reason,
            ended=self.ended,
            decided_at=self.decided_at,
        )

    def close(self) -> None:
        """Undo what outlives a helper (qdiscs, rules) and resume paused containers, so that cleanup works
        (a paused container keeps its network endpoint: measured, its network could not be removed)."""
        self._unpause_all()
        for name in sorted({s.container for s in self.steps if s.action == "pause"}):
            if self._is_paused(self.containers[name]):
                self.paused.add(name)
        self._unpause_all()
        for step in self.steps:
            if step.index in self.injected and step.undo_commands and step.index not in self.undone:
                self._undo(step, quiet=True)

    # -- parts --------------------------------------------------------------------------------------
    def _start_helpers(self) -> None:
        assert self.plan.faults is not None
        for helper in self.plan.faults.helpers:
            try:
                handle = self.engine.create_helper(helper)
                self.engine.start(handle)
                self.helpers[helper.name] = handle
            except EngineError as exc:
                self.note(f"fault helper {helper.name} could not start: {exc}")
        netem = next((s for s in self.steps if s.needs_netem and s.helper in self.helpers), None)
        if netem is not None and netem.helper is not None:
            probe = self._exec(self.helpers[netem.helper], NETEM_PROBE)
            if probe is not None:
                self.skip_reason = (
                    f"latency and loss need the kernel's sch_netem, which this machine lacks: `{' '.join(NETEM_PROBE)}` "
                    f"answered: {probe}"
                )
            else:
                self._exec(self.helpers[netem.helper], NETEM_UNDO)

    def _exec(self, helper: Any, argv: tuple[str, ...]) -> str | None:
        """None when ``argv`` succeeded in the helper, else why not."""
        try:
            result = self.engine.exec_run(helper, argv)
        except EngineError as exc:
            return str(exc)
        if result.exit_code == 0:
            return None
        return f"exit {result.exit_code}: {' '.join(result.output.split())[:300] or 'no output'}"

    def _note_exits(self, running: Collection[str], now: float) -> None:
        for name, handle in self.containers.items():
            if name in running or name in self.exits:
                continue
            try:
                state = self.engine.state(handle)
            except EngineError:
                continue
            ranks = self.plan.container(name).ranks
            self.exits[name] = ContainerExit(name, ranks, now, state.exit_code, state.oom_killed)

    def _note_gone_workers(self, running: Collection[str]) -> None:
        fault_at = min(f.at for f in self.injected.values())
        failed, _ = first_failures(self.records, self.log(), fault_at)
        for container in self.plan.containers:
            waiting = [r for r in container.ranks if r not in failed and r not in self.gone]
            if container.name not in running or not waiting:
                continue
            handle = self.containers[container.name]
            try:
                alive = {w.rank for w in find_workers(self.engine, handle, self.plan.scenario.python)}
                oom_killed = self.engine.state(handle).oom_killed
            except EngineError:
                continue  # it exited meanwhile: its exit tells
            now = time.time()
            for rank in waiting:
                if rank not in alive:
                    self.gone[rank] = ContainerExit(container.name, (rank,), now, None, oom_killed)

    def _read_records(self, nodes: set[int]) -> None:
        for container in self.plan.containers:
            if container.node_rank not in nodes:
                continue
            try:
                files = self.engine.read_files(self.containers[container.name], container.results_dir)
            except (EngineError, KeyError):
                continue
            for rank in container.ranks:
                data = files.get(f"rank-{rank}.jsonl", b"")
                found = []
                for line in data.decode("utf-8", "replace").splitlines():
                    try:
                        record = strict_json.loads(line)
                    except ValueError:
                        continue  # a line being written
                    if isinstance(record, dict):
                        found.append(record)
                if found:
                    self.records[rank] = found

    def _trigger_time(self, step: FaultStep) -> float | None:
        for record in self.records.get(step.trigger_rank, []):
            if record.get("check") == step.trigger_check and isinstance(record.get("ended_at"), (int, float)):
                return float(record["ended_at"])  # type: ignore[arg-type]
        return None

    def _inject(self, step: FaultStep) -> None:
        handle = self.containers[step.container]
        # A mark does nothing: the fault (the memory limit) is in force from the trigger record on.
        at = self.due[step.index] if step.action == "mark" else time.time()
        error: str | None = None
        kills = step.action in ("kill", "signal")
        try:
            if step.action == "kill":
                self.engine.kill(handle)
            elif step.action == "signal":
                workers = signal_workers(self.engine, handle, self.plan.scenario.python, step.signum, step.victims)
                hit = {w.rank for w in workers if w.error is None}
                if not set(step.victims) <= hit:
                    error = f"no running worker of rank(s) {sorted(set(step.victims) - hit)} to signal: found {workers}"
            elif step.action == "pause":
                at = self._pause(handle)
                self.paused.add(step.container)
            elif step.action == "disconnect":
                assert step.network is not None
                self.engine.disconnect(step.network, handle)
            elif step.action == "exec":
                helper = self.helpers.get(step.helper or "")
                if helper is None:
                    error = f"its helper container {step.helper} is not running"
                else:
                    for argv in step.commands:
                        error = error or self._exec(helper, argv)
        except EngineError as exc:
            error = str(exc)
        self.injected[step.index] = Injected(
            step.index, step.kind, step.node, step.victims, at, step.describe().split(": ", 2)[-1], kills, error, time.time() - at
        )
        self.note(f"fault {step.index} ({step.kind}) injected" + (f", but failed: {error}" if error else ""))

    def _pause(self, handle: Any) -> float:
        """Pause, retried: under load the cgroup freezer can fail once ("OCI runtime pause failed: unable to
        freeze", measured at load 30). Returns when the attempt that succeeded began."""
        for attempt in range(PAUSE_ATTEMPTS):
            at = time.time()
            try:
                self.engine.pause(handle)
                return at
            except EngineError:
                if self._is_paused(handle):
                    return at  # the freezer did freeze in the end
                if attempt == PAUSE_ATTEMPTS - 1:
                    raise
                time.sleep(0.2)
        raise AssertionError("unreachable")

    def _is_paused(self, handle: Any) -> bool:
        try:
            return self.engine.state(handle).status == "paused"
        except EngineError:
            return False

    def _undo(self, step: FaultStep, quiet: bool = False) -> None:
        self.undone.add(step.index)
        handle = self.containers[step.container]
        try:
            if step.action == "pause":
                self.engine.unpause(handle)
                self.paused.discard(step.container)
            elif step.action == "disconnect":
                assert step.network is not None
                self.engine.connect(step.network, handle)
            elif step.action == "exec" and step.helper in self.helpers:
                for argv in step.undo_commands:
                    self._exec(self.helpers[step.helper], argv)
        except EngineError as exc:
            if not quiet:
                self.note(f"undoing fault {step.index} failed: {exc}")
            return
        if not quiet:
            self.note(f"fault {step.index} ({step.kind}) undone")

    def _unpause_all(self) -> None:
        for name in sorted(self.paused):
            try:
                self.engine.unpause(self.containers[name])
            except EngineError:
                pass
            self.paused.discard(name)
