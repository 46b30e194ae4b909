"""Running one scenario across several Docker hosts: each host's Engine as the runtime sees it (every error names
its host), and the probe step that learns a host's rendezvous facts (distval/targets/engines/plan.py says what they are).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from distval.errors import EngineError
from distval.plan.placeholders import facts_for_address, host_fact
from distval.plan.specs import ContainerPlan, HelperPlan, NetworkPlan
from distval.targets.docker.engine import Engine
from distval.targets.docker.engine_protocol import ContainerState, EngineAPI, ExecResult, GpuSupport, ImageInfo
from distval.targets.engines.hosts import HostSpec, TlsFiles, host_specs
from distval.targets.engines.transfer import same_image

T = TypeVar("T")
PROBE_TIMEOUT_S = 60.0
POLL_INTERVAL_S = 0.2


class HostEngine:
    """One host's Engine (implements EngineAPI and transfer.ImageHost): its errors say ``host N (URL): ...``,
    so a host that becomes unreachable mid-run is reported as that host's error."""

    def __init__(self, index: int, engine: Engine, label: str | None = None) -> None:
        self.index = index
        self.engine = engine
        self.where = engine.where
        self.run_id = engine.run_id
        self.label = label or f"host {index} ({self.where})"

    def _on(self, function: Callable[[], T]) -> T:
        try:
            return function()
        except EngineError as exc:
            raise type(exc)(f"{self.label}: {exc}") from None

    def version(self) -> str:
        return self._on(self.engine.version)

    def image(self, reference: str) -> ImageInfo | None:
        return self._on(lambda: self.engine.image(reference))

    def create_network(self, network: NetworkPlan) -> None:
        self._on(lambda: self.engine.create_network(network))

    def network_subnets(self, name: str) -> list[str]:
        return self._on(lambda: self.engine.network_subnets(name))

    def create_container(self, container: ContainerPlan) -> Any:
        return self._on(lambda: self.engine.create_container(container))

    def connect(self, network: str, container: Any) -> None:
        self._on(lambda: self.engine.connect(network, container))

    def put_archive(self, container: Any, path: str, data: bytes) -> None:
        self._on(lambda: self.engine.put_archive(container, path, data))

    def start(self, container: Any) -> None:
        self._on(lambda: self.engine.start(container))

    def address(self, container: Any, network: str, ipv6: bool = False) -> str:
        return self._on(lambda: self.engine.address(container, network, ipv6))

    def state(self, container: Any) -> ContainerState:
        return self._on(lambda: self.engine.state(container))

    def kill(self, container: Any) -> None:
        self._on(lambda: self.engine.kill(container))

    def logs(self, container: Any) -> tuple[str, str]:
        return self._on(lambda: self.engine.logs(container))

    def read_files(self, container: Any, path: str) -> dict[str, bytes]:
        return self._on(lambda: self.engine.read_files(container, path))

    def pause(self, container: Any) -> None:
        self._on(lambda: self.engine.pause(container))

    def unpause(self, container: Any) -> None:
        self._on(lambda: self.engine.unpause(container))

    def disconnect(self, network: str, container: Any) -> None:
        self._on(lambda: self.engine.disconnect(network, container))

    def create_helper(self, helper: HelperPlan) -> Any:
        return self._on(lambda: self.engine.create_helper(helper))

    def run_beside(self, container: Any, arguments: Sequence[str], timeout_s: float) -> ExecResult:
        return self._on(lambda: self.engine.run_beside(container, arguments, timeout_s))

    def exec_run(self, container: Any, argv: Sequence[str]) -> ExecResult:
        return self._on(lambda: self.engine.exec_run(container, argv))

    def wait_stopped(self, container: Any, timeout_s: float) -> bool:
        return self._on(lambda: self.engine.wait_stopped(container, timeout_s))

    def gpu_support(self, image: str, python: str) -> GpuSupport:
        return self._on(lambda: self.engine.gpu_support(image, python))

    def remove_labelled(self, extra_label: str | None = None) -> tuple[int, int]:
        return self._on(lambda: self.engine.remove_labelled(extra_label))

    def save_image(self, reference: str) -> Iterator[bytes]:
        try:
            yield from self.engine.save_image(reference)
        except EngineError as exc:
            raise type(exc)(f"{self.label}: {exc}") from None

    def load_image(self, chunks: Iterable[bytes]) -> list[str]:
        return self._on(lambda: self.engine.load_image(chunks))

    def pull_digest(self, reference: str) -> None:
        self._on(lambda: self.engine.pull_digest(reference))


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
    deadline = time.monotonic() + PROBE_TIMEOUT_S
    state = engine.state(handle)
    while state.status in ("created", "running", "restarting"):
        if time.monotonic() > deadline:
            engine.kill(handle)
            raise EngineError(f"the host probe {probe.name} on {probe.host} did not finish within {PROBE_TIMEOUT_S:g} s")
        time.sleep(POLL_INTERVAL_S)
        state = engine.state(handle)
    stdout, stderr = engine.logs(handle)
    lines = stdout.strip().splitlines()
    if state.exit_code != 0 or not lines:
        last = (stderr.strip().splitlines() or ["(no output)"])[-1]
        raise EngineError(f"the host probe on {probe.host} exited {state.exit_code}: {last}")
    found = json.loads(lines[-1])
    if not found.get("interface"):
        raise EngineError(f"the host probe on {probe.host} found no interface holding {found.get('address')}")
    facts = {host_fact("socket_ifname", probe.host): str(found["interface"])}
    if first:
        facts.update(facts_for_address(str(found["address"])))
        facts["master_port"], facts["c10d_port"] = (str(port) for port in found["ports"][:2])
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
