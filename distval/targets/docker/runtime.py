"""Executes a ScenarioPlan against the Engine: each step, resolved with what the Engine has told so far,
verbatim. The runtime decides nothing the plan does not show; it only observes facts (subnets, node 0's
address), waits, enforces the deadline and collects what happened.

The deadline is the harness's own monotonic clock (docker-py's wait(timeout=) is only an HTTP read
timeout, docker-py#2964): a container still running at the deadline is killed and reported. Whatever
happens, the scenario's containers and networks are removed before this returns or raises.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import distval_suite
from distval.errors import EngineError, RunStopped
from distval.faults.runtime import FaultRunner
from distval.labels import LABEL_SCENARIO
from distval.plan.model import CreateContainer, CreateNetwork, LearnAddress, LearnSubnets, ProbeHost, ScenarioPlan, StartContainer
from distval.plan.placeholders import facts_for_address, facts_on_host, resolve
from distval.plan.specs import ContainerPlan, FileCopy
from distval.results import diagnosis
from distval.results.outcome import ContainerOutcome, ScenarioOutcome
from distval.run.events import COLLECTING, KILLING, REMOVING, RUNNING, RunEvents
from distval.run.interrupts import signals_deferred as signals_deferred  # also distval/targets/docker/keep.py's, from here
from distval.tarball import Directory, Entry, File, build_tar
from distval.targets.docker.engine_protocol import EngineAPI

# The longest one wait on the Engine blocks: how late a stop request (Ctrl-C, SIGTERM) or the deadline is seen.
WAIT_SLICE_S = 0.5
# How long a killed container may take to reach 'exited' before its state is read as it is.
KILL_SETTLE_S = 10.0
RECHECK_S = 0.05
# With faults, every container's state is read this often: a fault's trigger and its verdict need them all.
FAULT_SLICE_S = 0.2
# Across several Engines, how often each Engine the wait does not block on is asked about one of its
# containers: an Engine that stopped answering is that host's error within this, not at the deadline.
HOST_WATCH_S = 2.0
# A container in these states still runs (paused: a freeze fault).
LIVE = ("created", "running", "restarting", "paused")


def suite_dir() -> Path:
    return Path(distval_suite.__file__).resolve().parent


def files_archive(files: tuple[FileCopy, ...]) -> bytes:
    """One tar rooted at / holding a container's FileCopy entries (the suite's *.py for a suite entry)."""
    entries: list[Entry] = []
    for copy in files:
        path = copy.path.strip("/")
        entries.append(Directory(path, copy.mode) if copy.text is None else File(path, copy.text.encode(), copy.mode))
        if copy.suite:
            entries += [File(f"{path}/{source.name}", source.read_bytes()) for source in sorted(suite_dir().glob("*.py"))]
    return build_tar(entries)


def gpu_shortfall(engine: EngineAPI, plan: ScenarioPlan) -> str | None:
    """Why the Engine cannot give this scenario its GPUs (None: it can, or it needs none)."""
    needed = plan.gpus_needed
    if not needed:
        return None
    support = engine.gpu_support(plan.image, plan.scenario.python)
    if support.count >= needed:
        return None
    why = support.reason or f"the Engine gives containers {support.count}"
    return f"{plan.gpus_needed_text}; {why}"


def run_scenario(
    engine: EngineAPI,
    plan: ScenarioPlan,
    events: RunEvents,
    stop: threading.Event | None = None,
    hosts: Mapping[str, EngineAPI] | None = None,
    remove: bool = True,
    before_start: Callable[[], object] | None = None,
) -> ScenarioOutcome:
    """``hosts``: the Engine of each --hosts URL a step or container names (distval/targets/engines/runtime.py); ``engine``
    runs the steps that name none. ``remove`` False (--keep-on-failure): the scenario's resources stay; the
    caller removes or keeps them once it knows the verdict (distval/targets/docker/keep.py). ``before_start``: called before
    the scenario starts any container (GPU probe, host probe, its own): the run's reaper must run first
    (distval/targets/docker/reaper.py ReaperLaunch), while creating networks and containers may go on beside its start."""
    started = time.monotonic()
    stop = stop or threading.Event()
    engines = dict(hosts or {})

    def on(host: str) -> EngineAPI:
        return engines.get(host, engine)

    def of(name: str) -> EngineAPI:
        return on(plan.container(name).host)

    engine = on(plan.hosts[0]) if plan.hosts else engine
    image = engine.image(plan.image)
    image_id = image.id if image else None
    created: dict[str, Any] = {}  # container name -> the Engine's handle, in creation order
    faults: FaultRunner | None = None

    def skipped(reason: str, kind: str) -> ScenarioOutcome:
        return ScenarioOutcome(
            plan, image_id, time.monotonic() - started, (), setup_error=reason, setup_skipped=True, skip_kind=kind
        )

    def covered() -> None:
        if before_start is not None:
            before_start()

    try:
        try:
            if plan.gpus_needed:
                covered()  # the GPU probe starts a container
            shortfall = gpu_shortfall(engine, plan)
            if shortfall is not None:
                return skipped(shortfall, "gpu")
            facts: dict[str, str] = {}
            deadline: float | None = None
            for step in plan.steps:
                if stop.is_set():
                    raise RunStopped()
                if isinstance(step, ProbeHost):
                    # Only across several hosts; imported here because it imports docker-py, and host mode
                    # imports this module (distval/cli/run.py) without docker-py.
                    from distval.targets.engines.runtime import probe_host

                    probe = plan.container(step.container)
                    covered()
                    facts.update(probe_host(on(step.host), resolve(probe, facts), files_archive(probe.files), step.first))
                    events.note(plan, f"host {step.host}: {', '.join(f'{k}={v}' for k, v in sorted(facts.items()))}")
                elif isinstance(step, CreateNetwork):
                    network = resolve(plan.network_named(step.network), facts)
                    try:
                        on(step.host).create_network(network)
                    except EngineError as exc:
                        if not network.ipv6:
                            raise
                        return skipped(f"the Docker Engine cannot create an IPv6 network here: {exc}", "ipv6")
                elif isinstance(step, LearnSubnets):
                    facts["subnets"] = ",".join(on(step.host).network_subnets(step.network))
                elif isinstance(step, CreateContainer):
                    container = resolve(plan.container(step.container), facts_on_host(facts, step.host))
                    handle = on(step.host).create_container(container)
                    created[container.name] = handle
                    for extra in container.networks[1:]:
                        on(step.host).connect(extra, handle)
                    on(step.host).put_archive(handle, "/", files_archive(container.files))
                elif isinstance(step, StartContainer):
                    if deadline is None:
                        covered()
                    # The deadline starts with the first container, after setup.
                    deadline = deadline or time.monotonic() + plan.deadline_s
                    on(step.host).start(created[step.container])
                elif isinstance(step, LearnAddress):
                    address = on(step.host).address(created[step.container], step.network, ipv6=step.ipv6)
                    facts.update(facts_for_address(address))
                    events.note(plan, f"node 0 is at {address}")
            assert deadline is not None, "a plan starts at least one container"
            events.phase(plan, RUNNING)
            events.note(plan, f"started {len(created)} container(s)")
            nodes = {name: handle for name, handle in created.items() if plan.container(name).node_rank >= 0}
            if plan.faults is not None:
                faults = FaultRunner(engine, plan, nodes, lambda text: events.note(plan, text), deadline)
            killed = _wait(of, nodes, deadline, events, plan, stop, faults)
            events.phase(plan, COLLECTING)
            outcomes = tuple(_collect(of(name), plan.container(name), handle, name in killed) for name, handle in nodes.items())
        except (EngineError, RunStopped) as exc:
            partial = tuple(
                ContainerOutcome(name, cp.node_rank, cp.ranks, None, False, *_safe_logs(of(name), handle))
                for name, handle in created.items()
                for cp in (plan.container(name),)
                if cp.node_rank >= 0
            )
            return ScenarioOutcome(plan, image_id, time.monotonic() - started, partial, setup_error=str(exc))
        return ScenarioOutcome(plan, image_id, time.monotonic() - started, outcomes, fault_log=faults.log() if faults else None)
    finally:
        if faults is not None:
            faults.close()
        if remove:
            events.phase(plan, REMOVING)
            with signals_deferred():
                _remove_everywhere(engine, engines, plan, events)


def _remove_everywhere(engine: EngineAPI, engines: Mapping[str, EngineAPI], plan: ScenarioPlan, events: RunEvents) -> None:
    """Remove the scenario's containers and networks from every Engine it used. With several hosts, one that
    cannot be reached is noted (the outcome already names it) and the others are still cleaned."""
    used = [engines[h] for h in plan.hosts if h in engines] or [engine]
    for each in used:
        try:
            each.remove_labelled(f"{LABEL_SCENARIO}={plan.scenario.name}")
        except EngineError as exc:
            if len(used) == 1:
                raise
            events.note(plan, f"cleanup: {exc}")


def _wait(
    of: Any,
    containers: dict[str, Any],
    deadline: float,
    events: RunEvents,
    plan: ScenarioPlan,
    stop: threading.Event,
    faults: FaultRunner | None = None,
) -> set[str]:
    """``of(name)``: the Engine of a container.

    Blocks on the Engine's wait API instead of polling inspect: an exit is seen at once (a 0.2 s poll
    cost 0.1 s per scenario on average and ~5 inspects per second per container). Each wait lasts at
    most WAIT_SLICE_S, so a stop request and the deadline are still noticed within that."""
    running = dict(containers)
    watch_at = time.monotonic() + HOST_WATCH_S
    while running:
        name, container = next(iter(running.items()))
        if time.monotonic() >= watch_at:
            watch_at = time.monotonic() + HOST_WATCH_S
            _watch_other_engines(of, running, name, events, plan)
        remaining_s = deadline - time.monotonic()
        slice_s = min(WAIT_SLICE_S if faults is None else FAULT_SLICE_S, remaining_s)
        if remaining_s > 0 and not stop.is_set() and of(name).wait_stopped(container, slice_s):
            if _exited(of, running, name, events, plan):
                continue
            time.sleep(RECHECK_S)  # the wait and the state disagree (a restart?): do not spin on the Engine
        if faults is not None or stop.is_set() or time.monotonic() >= deadline:
            # Which ones are still running: the others may have exited while this one was waited on.
            for other in list(running):
                _exited(of, running, other, events, plan)
            if not running:
                break
        if faults is not None and faults.poll(running):
            events.note(plan, faults.ended or "faults ended the scenario")
            # The verdict is decided; what still runs (a frozen node, survivors lingering) shows its stacks first.
            diagnosis.before_kill(of(next(iter(running))), running, plan, events, stop)
            faults.thaw()
            for other, handle in running.items():
                of(other).kill(handle)
            return set(running)
        if stop.is_set() or time.monotonic() >= deadline:
            if not stop.is_set():
                events.phase(plan, KILLING)
                events.note(plan, f"deadline of {plan.deadline_s:g} s reached; killing {', '.join(sorted(running))}")
                # Stacks and flight recorder, bounded. Each handle carries its own Engine's client.
                diagnosis.before_kill(of(next(iter(running))), running, plan, events, stop)
            for other, handle in running.items():
                of(other).kill(handle)
            return set(running)
        events.waiting(plan)
    return set()


def _watch_other_engines(of: Any, running: dict[str, Any], waited: str, events: RunEvents, plan: ScenarioPlan) -> None:
    """The wait blocks on one container, of one Engine: ask every other Engine of the scenario (--hosts) about
    one of its running containers. One that stopped answering raises its host's EngineError now (a node's
    Engine stopped mid-run: seen within HOST_WATCH_S instead of at the scenario's deadline); an exited
    container is noted as the wait would note it."""
    asked = {id(of(waited))}
    for name in list(running):
        if id(of(name)) not in asked:
            asked.add(id(of(name)))
            _exited(of, running, name, events, plan)


def _exited(of: Any, running: dict[str, Any], name: str, events: RunEvents, plan: ScenarioPlan) -> bool:
    """Read the container's state: one that no longer runs leaves ``running`` and is noted (True)."""
    state = of(name).state(running[name])
    if state.status in LIVE:
        return False
    del running[name]
    events.container_exited(plan, name, state.exit_code)
    return True


def _safe_logs(engine: EngineAPI, container: Any) -> tuple[str, str]:
    try:
        return engine.logs(container)
    except EngineError as exc:
        return "", f"(logs unavailable: {exc})"


def _collect(engine: EngineAPI, cp: ContainerPlan, container: Any, killed: bool) -> ContainerOutcome:
    # A killed container needs a moment to reach 'exited' before its exit code is final.
    state = engine.state(container)
    if state.status != "exited":
        engine.wait_stopped(container, KILL_SETTLE_S)
        state = engine.state(container)
    stdout, stderr = _safe_logs(engine, container)
    problem = None
    files: dict[str, bytes] = {}
    try:
        files = engine.read_files(container, cp.results_dir)
    except EngineError as exc:
        problem = f"results could not be copied out of {cp.name}: {exc}"
    if state.oom_killed:
        problem = f"container {cp.name} was killed by the kernel's OOM killer"
    return ContainerOutcome(
        name=cp.name,
        node_rank=cp.node_rank,
        ranks=cp.ranks,
        exit_code=state.exit_code,
        killed_at_deadline=killed,
        stdout=stdout,
        stderr=stderr,
        result_files=files,
        problem=problem,
    )
