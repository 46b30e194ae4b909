"""Running one scenario across several Docker hosts: each host's Engine as the runtime sees it (every error names
its host), and the probe step that learns a host's rendezvous facts (distval/targets/engines/plan.py says what they are).
"""

from __future__ import annotations

import ipaddress
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Concatenate, ParamSpec, TypeVar

from distval import strict_json
from distval.config.engine_hosts import HostSpec, TlsFiles, host_specs
from distval.engine_protocol import EngineAPI
from distval.errors import EngineError
from distval.escape import terminal_line
from distval.plan.model import ProbeHost, ScenarioPlan, Step
from distval.plan.placeholders import facts_for_address, host_fact, resolve
from distval.plan.specs import ContainerPlan
from distval.results.outcome import ScenarioOutcome
from distval.run.events import RunEvents
from distval.run.steps import Skip, run_steps
from distval.targets.docker.engine import Engine
from distval.targets.docker.runtime import EngineNodes, files_archive
from distval.targets.engines.transfer import same_image

P = ParamSpec("P")
R = TypeVar("R")
# How long a host's probe container (distval_suite/host_probe.py) may run, and how often it is asked whether it ended.
HOST_PROBE_TIMEOUT_S = 60.0
HOST_PROBE_POLL_S = 0.2


def _labelled(method: Callable[Concatenate[Engine, P], R]) -> Callable[Concatenate[HostEngine, P], R]:
    """``method`` (its signature: mypy checks HostEngine against EngineAPI with it), called on the host's own
    Engine by name (a test's stand-in is no Engine), its errors naming the host."""
    name = method.__name__

    def call(self: HostEngine, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self.errors_named():
            result: R = getattr(self.engine, name)(*args, **kwargs)
        return result

    call.__name__ = name
    return call


class HostEngine:
    """One host's Engine (implements EngineAPI and transfer.ImageHost): its errors say ``host N (URL): ...``,
    so a host that becomes unreachable mid-run is reported as that host's error."""

    def __init__(self, index: int, engine: Engine, label: str | None = None) -> None:
        self.index = index
        self.engine = engine
        self.where = engine.where
        self.run_id = engine.run_id
        self.label = label or f"host {index} ({self.where})"

    @contextmanager
    def errors_named(self) -> Iterator[None]:
        try:
            yield
        except EngineError as exc:
            raise type(exc)(f"{self.label}: {exc}") from None

    version = _labelled(Engine.version)
    describe = _labelled(Engine.describe)
    image = _labelled(Engine.image)
    create_network = _labelled(Engine.create_network)
    network_subnets = _labelled(Engine.network_subnets)
    create_container = _labelled(Engine.create_container)
    connect = _labelled(Engine.connect)
    put_archive = _labelled(Engine.put_archive)
    start = _labelled(Engine.start)
    address = _labelled(Engine.address)
    state = _labelled(Engine.state)
    wait_stopped = _labelled(Engine.wait_stopped)
    kill = _labelled(Engine.kill)
    logs = _labelled(Engine.logs)
    read_files = _labelled(Engine.read_files)
    exec_run = _labelled(Engine.exec_run)
    gpu_support = _labelled(Engine.gpu_support)
    pause = _labelled(Engine.pause)
    unpause = _labelled(Engine.unpause)
    disconnect = _labelled(Engine.disconnect)
    create_helper = _labelled(Engine.create_helper)
    run_beside = _labelled(Engine.run_beside)
    remove_labelled = _labelled(Engine.remove_labelled)
    load_image = _labelled(Engine.load_image)
    pull_digest = _labelled(Engine.pull_digest)

    def save_image(self, reference: str) -> Iterator[bytes]:
        with self.errors_named():  # around the whole stream: an Engine fails mid-transfer too
            yield from self.engine.save_image(reference)


_CONFORMS: Callable[[HostEngine], EngineAPI] = lambda engine: engine  # noqa: E731 - mypy: HostEngine is an EngineAPI


def connect_hosts(run_id: str, specs: Sequence[HostSpec]) -> dict[str, HostEngine]:
    """An Engine per host, by URL, each asked once that it answers; an unreachable one is a one-line error."""
    engines: dict[str, HostEngine] = {}
    for index, spec in enumerate(specs):
        try:
            engines[spec.url] = HostEngine(index, Engine(run_id, host=spec))
        except EngineError as exc:
            raise EngineError(f"host {index}: {exc}") from None
    return engines


def probe_host(engine: EngineAPI, probe: ContainerPlan, archive: bytes, first: bool) -> dict[str, str]:
    """Run ``probe`` (distval_suite/host_probe.py) to its end on its host; the facts it learned."""
    handle = engine.create_container(probe)
    engine.put_archive(handle, "/", archive)
    engine.start(handle)
    deadline = time.monotonic() + HOST_PROBE_TIMEOUT_S
    state = engine.state(handle)
    while state.status in ("created", "running", "restarting"):
        if time.monotonic() > deadline:
            engine.kill(handle)
            raise EngineError(f"the host probe {probe.name} on {probe.host} did not finish within {HOST_PROBE_TIMEOUT_S:g} s")
        time.sleep(HOST_PROBE_POLL_S)
        state = engine.state(handle)
    stdout, stderr = engine.logs(handle)
    lines = stdout.strip().splitlines()
    if state.exit_code != 0 or not lines:
        last = (stderr.strip().splitlines() or ["(no output)"])[-1]
        raise EngineError(f"the host probe on {probe.host} exited {state.exit_code}: {last}")
    return probe_facts(probe.host, lines[-1], first)


# A Linux interface name: at most IFNAMSIZ - 1 characters, none of them a space or a slash.
_INTERFACE = re.compile(r"[A-Za-z0-9_.@:-]{1,15}")


def probe_facts(host: str, line: str, first: bool) -> dict[str, str]:
    """The facts in the host probe's JSON line (the image's Python printed it, so every field is checked before
    it reaches a command line or a spec: a port of "1; rm -rf /" is refused); EngineError, one line, otherwise."""
    said = f"the host probe on {host} printed {terminal_line(line)[:200]!r}"
    try:
        found = strict_json.loads(line)
    except ValueError as exc:
        raise EngineError(f"{said}, not its JSON line ({exc})") from None
    if not isinstance(found, dict):
        raise EngineError(f"{said}, not a JSON object")
    address = found.get("address")
    try:
        address = str(ipaddress.ip_address(address if isinstance(address, str) else ""))
    except ValueError:
        raise EngineError(f"{said}: its address is not an IP address") from None
    interface = found.get("interface")
    if not interface:
        raise EngineError(f"the host probe on {host} found no interface holding {address}")
    if not isinstance(interface, str) or not _INTERFACE.fullmatch(interface):
        raise EngineError(f"{said}: its interface is not a network interface's name")
    ports = found.get("ports")
    # Node 0's host is asked for the master and c10d ports; the others for none (distval/targets/engines/plan.py).
    wanted = 2 if first else 0
    if (
        not isinstance(ports, list)
        or len(ports) < wanted
        or not all(isinstance(port, int) and not isinstance(port, bool) and 1 <= port <= 65535 for port in ports)
    ):
        raise EngineError(f"{said}: its ports are not {'two' if wanted else 'only'} port numbers (1 to 65535)")
    facts = {host_fact("socket_ifname", host): interface}
    if first:
        facts.update(facts_for_address(address))
        facts["master_port"], facts["c10d_port"] = str(ports[0]), str(ports[1])
    return facts


def prepare_hosts(
    run_id: str,
    urls: tuple[str, ...],
    tls: TlsFiles | None,
    distribution: str,
    images: Sequence[str],
    ensure_local: Callable[[Engine, str], None],
    progress: Callable[[str], None],
) -> dict[str, HostEngine]:
    """Connect to every host and make each image the same on all of them (distval/targets/engines/transfer.py), copied from the
    first host that has it, else from the local Engine (``ensure_local`` builds a missing fixture there), or
    refuse the run."""
    engines = connect_hosts(run_id, host_specs(urls, tls))
    hosts = list(engines.values())
    local: HostEngine | None = None
    for image in images:
        origin = next((h for h in hosts if h.image(image) is not None), None)
        if origin is None:
            # No host has it: the local Engine (DOCKER_HOST, where fixtures are built) is where it comes from.
            if local is None:
                base = Engine(run_id)
                local = HostEngine(-1, base, f"the local Engine ({base.where})")
            ensure_local(local.engine, image)
            origin = local
        same_image(hosts, image, distribution, progress, origin)
    return engines


class HostsNodes(EngineNodes):
    """A scenario's containers across several Engines: the Docker backend, plus the probe step that learns each
    host's rendezvous facts before any node is created (``ProbeHost``)."""

    def run_step(self, step: Step, facts: dict[str, str]) -> Skip | None:
        if not isinstance(step, ProbeHost):
            return super().run_step(step, facts)
        probe = self.plan.container(step.container)
        self.before_start()  # the probe is a container of the image under test: the reaper runs first
        facts.update(probe_host(self.on(step.host), resolve(probe, facts), files_archive(probe.files), step.first))
        self.events.note(self.plan, f"host {step.host}: {', '.join(f'{k}={v}' for k, v in sorted(facts.items()))}")
        return None


def run_across_hosts(
    engine: EngineAPI,
    plan: ScenarioPlan,
    events: RunEvents,
    stop: threading.Event | None = None,
    hosts: Mapping[str, EngineAPI] | None = None,
    before_start: Callable[[], object] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> ScenarioOutcome:
    """``run_scenario`` across several Engines (``hosts``: the Engine of each --hosts URL; ``engine`` runs the steps
    that name none): the probes first, then the nodes, each on its host. ``clock``: run_scenario's."""
    nodes = HostsNodes(engine, plan, events, hosts, before_start, clock)
    return run_steps(nodes, plan, events, stop, clock=clock)
