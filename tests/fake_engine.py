"""One fake Docker Engine for unit tests, implementing distval.engine_protocol.EngineAPI — the Protocol the
runtime depends on and the real distval.targets.docker.engine.Engine implements. `.ci/run` type-checks this module with
mypy, so the fake cannot drift from the real Engine (the assignment at the bottom is what mypy checks).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from distval.engine_protocol import ContainerState, EngineAPI, EngineFacts, ExecResult, GpuSupport, ImageInfo, Resource
from distval.images import FIXTURES, RECIPE_LABEL, recipe_hash
from distval.plan.specs import ContainerPlan, HelperPlan, NetworkPlan

# The id of every image the fake Engine has (FakeEngine.images aside).
FAKE_IMAGE_ID = "sha256:" + "ab" * 32
NO_GPUS = GpuSupport(0, "no GPUs in the fake Engine")
# What the fake Engine says of itself: a local Linux Engine with runc only, its root a directory that exists.
FACTS = EngineFacts(
    version="27.5.1",
    api_version="1.47",
    os_type="linux",
    root_dir="/",
    runtimes=("io.containerd.runc.v2", "runc"),
    cdi_devices=(),
)


class FakeEngine:
    """Records the calls it gets; creates nothing. ``instances`` lists every one made (the CLI makes its own)."""

    instances: ClassVar[list[FakeEngine]] = []
    holds_reaper = False  # no start_reaper: a run on it goes without a reaper, as the unit tests need
    # What ``distval cleanup`` finds (list_managed) and removes (remove_resources): set by a test, shared by
    # every instance as an Engine's containers are.
    held: ClassVar[list[Resource]] = []
    # Images with an answer of their own (another id, repo digests), by reference; any other is FAKE_IMAGE_ID.
    images: ClassVar[dict[str, ImageInfo]] = {}
    where = "unix:///fake/docker.sock"

    def __init__(
        self,
        run_id: str,
        gpus: GpuSupport = NO_GPUS,
        facts: EngineFacts = FACTS,
        missing: frozenset[str] = frozenset(),
        output: tuple[str, str] = ("out", "err"),
    ) -> None:
        """``facts``: what ``describe`` says; ``missing``: images it lacks; ``output``: every container's
        (stdout, stderr)."""
        self.run_id = run_id
        self.gpus = gpus
        self.facts = facts
        self.missing = missing
        self.output = output
        self.calls: list[str] = []
        self.version_calls = 0
        self.removed = 0
        FakeEngine.instances.append(self)

    def version(self) -> str:
        self.version_calls += 1
        return "27.5.1"

    def describe(self) -> EngineFacts:
        self.calls.append("describe")
        return self.facts

    def image(self, reference: str) -> ImageInfo | None:
        # Every image but the missing ones is there; distval's own (fixtures, the reaper's) as built from today's recipe.
        if reference in self.missing:
            return None
        if reference in FakeEngine.images:
            return FakeEngine.images[reference]
        labels = {RECIPE_LABEL: recipe_hash(reference)} if reference in FIXTURES else {}
        return ImageInfo(id=FAKE_IMAGE_ID, tags=(reference,), labels=labels)

    def create_network(self, network: NetworkPlan) -> None:
        self.calls.append("create_network")

    def network_subnets(self, name: str) -> list[str]:
        return ["172.30.0.0/16"]

    def create_container(self, container: ContainerPlan) -> Any:
        self.calls.append("create_container")
        return container.name

    def connect(self, network: str, container: Any) -> None:
        self.calls.append("connect")

    def put_archive(self, container: Any, path: str, data: bytes) -> None:
        self.calls.append("put_archive")

    def start(self, container: Any) -> None:
        self.calls.append("start")

    def address(self, container: Any, network: str, ipv6: bool = False) -> str:
        return "fd12::2" if ipv6 else "172.30.0.2"

    def state(self, container: Any) -> ContainerState:
        return ContainerState("exited", 0, False)

    def wait_stopped(self, container: Any, timeout_s: float) -> bool:
        return True

    def kill(self, container: Any) -> None:
        self.calls.append("kill")

    def logs(self, container: Any) -> tuple[str, str]:
        return self.output

    def read_files(self, container: Any, path: str) -> dict[str, bytes]:
        return {}

    def run_beside(self, container: Any, arguments: Sequence[str], timeout_s: float) -> ExecResult:
        self.calls.append("run_beside")
        return ExecResult(0, "")

    def exec_run(self, container: Any, argv: Sequence[str]) -> ExecResult:
        self.calls.append("exec_run")
        return ExecResult(0, "")

    def gpu_support(self, image: str, python: str) -> GpuSupport:
        self.gpus_probed_with = python
        return self.gpus

    def pause(self, container: Any) -> None:
        self.calls.append("pause")

    def unpause(self, container: Any) -> None:
        self.calls.append("unpause")

    def disconnect(self, network: str, container: Any) -> None:
        self.calls.append("disconnect")

    def create_helper(self, helper: HelperPlan) -> Any:
        self.calls.append("create_helper")
        return helper.name

    def remove_labelled(self, extra_label: str | None = None) -> tuple[int, int]:
        self.calls.append("remove_labelled")
        self.removed += 1
        return 0, 0

    def list_managed(self, labels: list[str] | None = None) -> list[Resource]:
        wanted = dict(label.split("=", 1) for label in labels or [])
        return [r for r in FakeEngine.held if all(r.labels.get(k) == v for k, v in wanted.items())]

    def remove_resources(self, resources: list[Resource]) -> tuple[int, int]:
        for resource in resources:
            FakeEngine.held.remove(resource)
        return sum(1 for r in resources if r.kind == "container"), sum(1 for r in resources if r.kind == "network")


_CONFORMS: EngineAPI = FakeEngine("mypy")  # mypy: the fake implements every method of the Protocol
FakeEngine.instances.clear()
