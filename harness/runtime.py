"""Executes a ScenarioPlan against the Engine: network, containers, copy in, start, deadline, copy out.

The deadline is the harness's own monotonic clock (docker-py's wait(timeout=) is only an HTTP read
timeout, docker-py#2964): a container still running at the deadline is killed and reported. Whatever
happens, the scenario's containers and network are removed before this returns or raises.
"""

from __future__ import annotations

import io
import json
import signal
import tarfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import suite
from harness.engine import Engine, EngineError
from harness.events import COLLECTING, KILLING, REMOVING, RUNNING, RunEvents
from harness.plan import CONTAINER_ROOT, LABEL_SCENARIO, MASTER_ADDR_FIELD, NODE0_IP, RESULTS_DIR, ContainerPlan, ScenarioPlan
from harness.results import ContainerOutcome, ScenarioOutcome

POLL_INTERVAL_S = 0.2


def suite_dir() -> Path:
    return Path(suite.__file__).resolve().parent


def suite_archive(spec_json: str) -> bytes:
    """A tar rooted at / holding distval/suite/*.py, distval/spec.json and a writable distval/results/."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:

        def add_dir(name: str, mode: int) -> None:
            info = tarfile.TarInfo(name)
            info.type = tarfile.DIRTYPE
            info.mode = mode
            archive.addfile(info)

        def add_file(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            archive.addfile(info, io.BytesIO(data))

        root = CONTAINER_ROOT.strip("/")
        add_dir(root, 0o755)
        add_dir(f"{root}/suite", 0o755)
        # World-writable: images often run as a non-root user that must still write its records.
        add_dir(RESULTS_DIR.strip("/"), 0o777)
        for path in sorted(suite_dir().glob("*.py")):
            add_file(f"{root}/suite/{path.name}", path.read_bytes())
        add_file(f"{root}/spec.json", spec_json.encode())
    return buffer.getvalue()


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM while cleaning up, so a second Ctrl-C cannot cut the cleanup short."""
    blocked = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class Stopped(Exception):
    """The run is stopping (Ctrl-C, SIGTERM in another thread's run): create nothing more."""


def _container_spec(plan: ScenarioPlan, cp: ContainerPlan, subnets: list[str], node0_ip: str | None) -> str:
    """The suite spec this container reads: its own way to reach node 0, and the scenario's subnets."""
    spec = json.loads(plan.suite_spec_json)
    if spec.get("init_method"):
        spec["init_method"] = spec["init_method"].replace(MASTER_ADDR_FIELD, _resolve(cp.master_addr, node0_ip))
    spec["subnets"] = subnets
    return json.dumps(spec, indent=2, sort_keys=True)


def _resolve(text: str, node0_ip: str | None) -> str:
    if NODE0_IP not in text:
        return text
    if node0_ip is None:
        raise EngineError("node 0's IP address is not known yet")
    # An IPv6 address in a URL or host:port needs brackets; in MASTER_ADDR it does not.
    return text.replace(NODE0_IP, node0_ip)


def run_scenario(engine: Engine, plan: ScenarioPlan, events: RunEvents, stop: threading.Event | None = None) -> ScenarioOutcome:
    started = time.monotonic()
    stop = stop or threading.Event()
    image = engine.image(plan.image)
    image_id = image.id if image else None
    containers: list[Any] = []
    try:
        try:
            for network in plan.networks:
                _check_stop(stop)
                try:
                    engine.create_network(network.name, network.internal, dict(network.labels), ipv6=network.ipv6)
                except EngineError as exc:
                    if not network.ipv6:
                        raise
                    reason = f"the Docker Engine cannot create an IPv6 network here: {exc}"
                    return ScenarioOutcome(plan, image_id, time.monotonic() - started, (), setup_error=reason, setup_skipped=True)
            subnets = engine.network_subnets(plan.network.name)
            node0_ip: str | None = None
            deadline: float | None = None
            for cp in plan.containers:
                _check_stop(stop)
                container = engine.create_container(
                    name=cp.name,
                    image=plan.image,
                    argv=tuple(_resolve(a, node0_ip) for a in cp.argv),
                    hostname=cp.hostname,
                    env={k: _resolve(v, node0_ip) for k, v in cp.env},
                    labels=dict(cp.labels),
                    working_dir=cp.working_dir,
                    network=plan.network.name,
                    options=cp.options,
                )
                containers.append(container)
                for extra in cp.networks[1:]:
                    engine.connect(extra, container)
                engine.put_archive(container, "/", suite_archive(_container_spec(plan, cp, subnets, node0_ip)))
                if plan.needs_node0_ip and cp.node_rank == 0:
                    # The others address node 0 by the IP the Engine gave it, so it starts first.
                    deadline = time.monotonic() + plan.scenario.timeout_s
                    engine.start(container)
                    node0_ip = engine.address(container, plan.network.name, ipv6=plan.network.ipv6)
                    events.note(plan, f"node 0 is at {node0_ip}")
            # The deadline starts when the first container starts, after setup.
            deadline = deadline or time.monotonic() + plan.scenario.timeout_s
            # Node 0 last (unless the others need its address): every rendezvous form must cope with
            # ranks that arrive before the one they rendezvous at is listening.
            for container in reversed(containers[1 if plan.needs_node0_ip else 0 :]):
                _check_stop(stop)
                engine.start(container)
            events.phase(plan, RUNNING)
            events.note(plan, f"started {len(containers)} container(s)")
            killed = _wait(engine, containers, deadline, events, plan, stop)
            events.phase(plan, COLLECTING)
            outcomes = tuple(
                _collect(engine, cp, container, container.name in killed)
                for cp, container in zip(plan.containers, containers, strict=True)
            )
        except (EngineError, Stopped) as exc:
            partial = tuple(
                ContainerOutcome(cp.name, cp.node_rank, cp.ranks, None, False, *_safe_logs(engine, c))
                # Only the containers created before the failure: the lists may differ in length.
                for cp, c in zip(plan.containers, containers, strict=False)
            )
            message = "the run was interrupted" if isinstance(exc, Stopped) else str(exc)
            return ScenarioOutcome(plan, image_id, time.monotonic() - started, partial, setup_error=message)
        return ScenarioOutcome(plan, image_id, time.monotonic() - started, outcomes)
    finally:
        events.phase(plan, REMOVING)
        with signals_deferred():
            engine.remove_labelled(f"{LABEL_SCENARIO}={plan.scenario.name}")


def _check_stop(stop: threading.Event) -> None:
    if stop.is_set():
        raise Stopped()


def _wait(
    engine: Engine, containers: list[Any], deadline: float, events: RunEvents, plan: ScenarioPlan, stop: threading.Event
) -> set[str]:
    running = {c.name: c for c in containers}
    while running:
        for name, container in list(running.items()):
            state = engine.state(container)
            if state.status not in ("created", "running", "restarting"):
                del running[name]
                events.container_exited(plan, name, state.exit_code)
        if not running:
            break
        if stop.is_set():
            for container in running.values():
                engine.kill(container)
            return set(running)
        if time.monotonic() >= deadline:
            events.phase(plan, KILLING)
            events.note(plan, f"deadline of {plan.scenario.timeout_s:g} s reached; killing {', '.join(sorted(running))}")
            for container in running.values():
                engine.kill(container)
            return set(running)
        events.waiting(plan)
        time.sleep(POLL_INTERVAL_S)
    return set()


def _safe_logs(engine: Engine, container: Any) -> tuple[str, str]:
    try:
        return engine.logs(container)
    except EngineError as exc:
        return "", f"(logs unavailable: {exc})"


def _collect(engine: Engine, cp: Any, container: Any, killed: bool) -> ContainerOutcome:
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
        files = engine.read_files(container, RESULTS_DIR)
    except EngineError as exc:
        problem = f"results could not be copied out of {container.name}: {exc}"
    if state.oom_killed:
        problem = f"container {container.name} was killed by the kernel's OOM killer"
    return ContainerOutcome(
        name=container.name,
        node_rank=cp.node_rank,
        ranks=cp.ranks,
        exit_code=state.exit_code,
        killed_at_deadline=killed,
        stdout=stdout,
        stderr=stderr,
        result_files=files,
        problem=problem,
    )
