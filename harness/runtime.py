"""Executes a ScenarioPlan against the Engine: each step, resolved with what the Engine has told so far,
verbatim. The runtime decides nothing the plan does not show; it only observes facts (subnets, node 0's
address), waits, enforces the deadline and collects what happened.

The deadline is the harness's own monotonic clock (docker-py's wait(timeout=) is only an HTTP read
timeout, docker-py#2964): a container still running at the deadline is killed and reported. Whatever
happens, the scenario's containers and networks are removed before this returns or raises.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import suite
from harness.docker_spec import ContainerPlan, FileCopy
from harness.engine_protocol import EngineAPI
from harness.errors import EngineError, RunStopped
from harness.events import COLLECTING, KILLING, REMOVING, RUNNING, RunEvents
from harness.fault_runtime import FaultRunner
from harness.labels import LABEL_SCENARIO
from harness.placeholders import facts_for_address, resolve
from harness.plan import CreateContainer, CreateNetwork, LearnAddress, LearnSubnets, ScenarioPlan, StartContainer
from harness.results import ContainerOutcome, ScenarioOutcome
from harness.tarball import Directory, Entry, File, build_tar

POLL_INTERVAL_S = 0.2


def suite_dir() -> Path:
    return Path(suite.__file__).resolve().parent


def files_archive(files: tuple[FileCopy, ...]) -> bytes:
    """One tar rooted at / holding a container's FileCopy entries (the suite's *.py for a suite entry)."""
    entries: list[Entry] = []
    for copy in files:
        path = copy.path.strip("/")
        entries.append(Directory(path, copy.mode) if copy.text is None else File(path, copy.text.encode(), copy.mode))
        if copy.suite:
            entries += [File(f"{path}/{source.name}", source.read_bytes()) for source in sorted(suite_dir().glob("*.py"))]
    return build_tar(entries)


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM while cleaning up, so a second Ctrl-C cannot cut the cleanup short."""
    blocked = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


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
    engine: EngineAPI, plan: ScenarioPlan, events: RunEvents, stop: threading.Event | None = None
) -> ScenarioOutcome:
    started = time.monotonic()
    stop = stop or threading.Event()
    image = engine.image(plan.image)
    image_id = image.id if image else None
    created: dict[str, Any] = {}  # container name -> the Engine's handle, in creation order
    faults: FaultRunner | None = None

    def skipped(reason: str, kind: str) -> ScenarioOutcome:
        return ScenarioOutcome(
            plan, image_id, time.monotonic() - started, (), setup_error=reason, setup_skipped=True, skip_kind=kind
        )

    try:
        try:
            shortfall = gpu_shortfall(engine, plan)
            if shortfall is not None:
                return skipped(shortfall, "gpu")
            facts: dict[str, str] = {}
            deadline: float | None = None
            for step in plan.steps:
                if stop.is_set():
                    raise RunStopped()
                if isinstance(step, CreateNetwork):
                    network = resolve(plan.network_named(step.network), facts)
                    try:
                        engine.create_network(network)
                    except EngineError as exc:
                        if not network.ipv6:
                            raise
                        return skipped(f"the Docker Engine cannot create an IPv6 network here: {exc}", "ipv6")
                elif isinstance(step, LearnSubnets):
                    facts["subnets"] = ",".join(engine.network_subnets(step.network))
                elif isinstance(step, CreateContainer):
                    container = resolve(plan.container(step.container), facts)
                    handle = engine.create_container(container)
                    created[container.name] = handle
                    for extra in container.networks[1:]:
                        engine.connect(extra, handle)
                    engine.put_archive(handle, "/", files_archive(container.files))
                elif isinstance(step, StartContainer):
                    # The deadline starts with the first container, after setup.
                    deadline = deadline or time.monotonic() + plan.deadline_s
                    engine.start(created[step.container])
                elif isinstance(step, LearnAddress):
                    address = engine.address(created[step.container], step.network, ipv6=step.ipv6)
                    facts.update(facts_for_address(address))
                    events.note(plan, f"node 0 is at {address}")
            assert deadline is not None, "a plan starts at least one container"
            events.phase(plan, RUNNING)
            events.note(plan, f"started {len(created)} container(s)")
            if plan.faults is not None:
                faults = FaultRunner(engine, plan, created, lambda text: events.note(plan, text), deadline)
            killed = _wait(engine, created, deadline, events, plan, stop, faults)
            events.phase(plan, COLLECTING)
            outcomes = tuple(_collect(engine, plan.container(name), handle, name in killed) for name, handle in created.items())
        except (EngineError, RunStopped) as exc:
            partial = tuple(
                ContainerOutcome(name, cp.node_rank, cp.ranks, None, False, *_safe_logs(engine, handle))
                for name, handle in created.items()
                for cp in (plan.container(name),)
            )
            return ScenarioOutcome(plan, image_id, time.monotonic() - started, partial, setup_error=str(exc))
        return ScenarioOutcome(plan, image_id, time.monotonic() - started, outcomes, fault_log=faults.log() if faults else None)
    finally:
        if faults is not None:
            faults.close()
        events.phase(plan, REMOVING)
        with signals_deferred():
            engine.remove_labelled(f"{LABEL_SCENARIO}={plan.scenario.name}")


def _wait(
    engine: EngineAPI,
    containers: dict[str, Any],
    deadline: float,
    events: RunEvents,
    plan: ScenarioPlan,
    stop: threading.Event,
    faults: FaultRunner | None = None,
) -> set[str]:
    running = dict(containers)
    while running:
        for name, container in list(running.items()):
            state = engine.state(container)
            if state.status not in ("created", "running", "restarting", "paused"):  # paused: a freeze fault
                del running[name]
                events.container_exited(plan, name, state.exit_code)
        if not running:
            break
        if faults is not None and faults.poll(running):
            events.note(plan, faults.ended or "faults ended the scenario")
            for container in running.values():
                engine.kill(container)
            return set(running)
        if stop.is_set():
            for container in running.values():
                engine.kill(container)
            return set(running)
        if time.monotonic() >= deadline:
            events.phase(plan, KILLING)
            events.note(plan, f"deadline of {plan.deadline_s:g} s reached; killing {', '.join(sorted(running))}")
            for container in running.values():
                engine.kill(container)
            return set(running)
        events.waiting(plan)
        time.sleep(POLL_INTERVAL_S)
    return set()


def _safe_logs(engine: EngineAPI, container: Any) -> tuple[str, str]:
    try:
        return engine.logs(container)
    except EngineError as exc:
        return "", f"(logs unavailable: {exc})"


def _collect(engine: EngineAPI, cp: ContainerPlan, container: Any, killed: bool) -> ContainerOutcome:
    # A killed container needs a moment to reach 'exited' before its exit code is final.
    state = engine.state(container)
    for _ in range(50):
        if state.status == "exited":
            break
        time.sleep(POLL_INTERVAL_S)
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
