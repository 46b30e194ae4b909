"""What a scenario or a run option can ask of a target, and what each target can give: one declaration, from
which every refusal and every capability skip is derived, with one message form.

A target lists only what it lacks (``Lacking``), with why; everything else it provides. What it lacks is either
refused before anything runs (exit 2: the scenario must never run without what it asks for, e.g. faults that no
one injects) or, where the scenario can still say something true on another target, reported as that scenario's
skip with the declared reason (a capability skip, like a GPU probe's: host mode cannot make an IPv6 network).
The model is container-structure-test's drivers and TorchX's schedulers: each declares what it runs, and the
front end refuses the rest instead of each back end dropping it quietly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from distval.config import Scenario
from distval.config.engine_hosts import FROM_CONFIG_FLAG
from distval.config.shipped import SAMPLE_IMAGE_FLAG
from distval.errors import BadInput


@dataclass(frozen=True)
class Capability:
    """Something a scenario (``asked``) or a run option (``option``) can ask of a target."""

    name: str
    what: str  # in words, as the refusal says it
    asked_by: str  # the config key or the option that asks for it
    asked: Callable[[Scenario], bool] | None = None  # None: a run option asks for it, not a scenario
    said_only: bool = False  # nothing asks for it: what a target lacks of it is only said (docs/targets.md)


FAULTS = Capability("faults", "injected faults", "faults:", lambda s: bool(s.faults))
IPV6 = Capability("ipv6", "an IPv6 network", "ipv6: true", lambda s: s.ipv6)
EXTRA_NETWORKS = Capability("extra_networks", "multi-homed nodes", "extra_networks:", lambda s: s.extra_networks > 0)
GPUS = Capability("gpus", "GPUs", "device: cuda", lambda s: s.gpus_per_node > 0)
ELASTIC = Capability("elastic", "elastic restarts", "max_restarts:", lambda s: s.max_restarts > 0)
KEEP_ON_FAILURE = Capability("keep_on_failure", "the failed scenarios' resources kept", "--keep-on-failure")
REAPER = Capability("reaper", "a reaper that removes the run's resources if distval is killed", "(every run)", said_only=True)
REFERENCE = Capability("reference", "a reference image run in pairs with the candidate", "--reference")
# The environment check judges what the image bakes in; a target whose ranks do not start from an image has none:
# that check alone is skipped there, with this declaration's reason in the spec (distval/plan/nodes.py).
IMAGE_ENVIRONMENT = Capability(
    "image_environment", "the image's own baked-in environment", "the environment check", said_only=True
)

# What a run's own options name for a target to take (NAMING_OPTIONS): a target that lacks it refuses the option.
CONTAINER_IMAGE = Capability("container_image", "a container image to run", "--image, " + SAMPLE_IMAGE_FLAG)
DOCKER_ENGINES = Capability("docker_engines", "Docker Engines to run on", f"--hosts, {FROM_CONFIG_FLAG}")

CAPABILITIES: tuple[Capability, ...] = (
    FAULTS,
    IPV6,
    EXTRA_NETWORKS,
    GPUS,
    ELASTIC,
    KEEP_ON_FAILURE,
    REFERENCE,
    REAPER,
    IMAGE_ENVIRONMENT,
    CONTAINER_IMAGE,
    DOCKER_ENGINES,
)
BY_NAME: Mapping[str, Capability] = {c.name: c for c in CAPABILITIES}


@dataclass(frozen=True)
class NamingOption:
    """An option of a run (and a plan) that names what a target is to take: given to a target that lacks its
    capability, it is refused, saying what each does ("--hosts names Docker Engines, --local runs local processes
    without Docker: give one, not both")."""

    dest: str
    flag: str
    names: str
    capability: Capability


# In the order they are asked.
NAMING_OPTIONS = (
    NamingOption("image", "--image", "names a container image", CONTAINER_IMAGE),
    NamingOption("hosts", "--hosts", "names Docker Engines", DOCKER_ENGINES),
    NamingOption("hosts_from_config", FROM_CONFIG_FLAG, "lets the config's hosts keys name Docker Engines", DOCKER_ENGINES),
    NamingOption("sample_image", SAMPLE_IMAGE_FLAG, "names a container image", CONTAINER_IMAGE),
)


@dataclass(frozen=True)
class Way:
    """How distval serves a target's scenarios: ``command`` (NAME: the target's name) does ``what``."""

    name: str
    what: str
    command: str


# A target that distval runs itself (start, follow, stop: ``distval run``, planned by ``distval plan``), or whose
# scenarios it writes out for you to run (``distval export NAME``) and whose results it judges (``distval collect
# NAME``), or both. A kind has the callables of the ways its declaration names (distval/targets/kind.py holds it to
# that); choosing one that distval does not run is refused with the ways it has instead.
RUN = Way("run", "a run distval starts, follows and stops itself", "distval run")
EXPORT = Way("export", "its scenarios written out, to be run by hand", "distval export NAME")
COLLECT = Way("collect", "what ran by hand judged into the reports", "distval collect NAME")
WAYS: tuple[Way, ...] = (RUN, EXPORT, COLLECT)


@dataclass(frozen=True)
class Lacking:
    """A capability a target does not have: ``why`` in words; ``skip`` True when a scenario asking for it is
    reported skipped with that reason instead of refused."""

    why: str
    skip: bool = False


@dataclass(frozen=True)
class TargetDeclaration:
    """A target's name (what ``--target`` and the reports call it), what it runs on, and what it lacks."""

    name: str
    runs: str
    chosen_with: str  # the option (or command) that selects it
    lacks: Mapping[str, Lacking] = field(default_factory=dict)
    ways: tuple[Way, ...] = (RUN,)

    def __post_init__(self) -> None:
        unknown = set(self.lacks) - set(BY_NAME)
        if unknown:  # a typo here would be a capability no refusal ever derives from
            raise ValueError(f"target {self.name}: unknown capabilities {sorted(unknown)}")

    def serves(self, way: Way) -> bool:
        return way in self.ways

    def option_refusal(self, option: NamingOption, chosen_with: str) -> str | None:
        """Why ``option`` is refused beside this target (``chosen_with``: how it was chosen); None where it takes it."""
        lacking = self.lacks.get(option.capability.name)
        if lacking is None:
            return None
        return f"{option.flag} {option.names}, {chosen_with} {lacking.why}: give one, not both"

    def not_run(self, subject: str) -> str | None:
        """Why ``subject`` (the option that chose it) is refused: distval does not run this target's scenarios,
        and what it does instead (its other ways); None where it runs them."""
        if self.serves(RUN):
            return None
        instead = ", then ".join(f"{w.command.replace('NAME', self.name)} ({w.what})" for w in self.ways)
        return f"{subject} asks for {RUN.what} ({RUN.command}); the {self.name} target cannot give it: use {instead}"

    def has(self, capability: Capability) -> bool:
        return capability.name not in self.lacks

    def provides(self) -> tuple[str, ...]:
        return tuple(c.name for c in CAPABILITIES if self.has(c))

    def message(self, capability: Capability, subject: str) -> str:
        """The one form of every refusal and capability skip."""
        asks = "ask" if subject.startswith("scenarios ") else "asks"
        return (
            f"{subject} {asks} for {capability.what} ({capability.asked_by}); "
            f"the {self.name} target cannot give it: {self.lacks[capability.name].why}"
        )

    def refusals(self, scenarios: Iterable[Scenario], options: Iterable[str] = ()) -> list[str]:
        """One line per capability that would be refused, naming the scenarios that ask for it, then one per run
        option; empty when it all runs."""
        chosen = tuple(scenarios)
        lines = []
        for capability in CAPABILITIES:
            lacking = self.lacks.get(capability.name)
            if lacking is None or lacking.skip or capability.asked is None:
                continue
            asking = [s.name for s in chosen if capability.asked(s)]
            if asking:
                lines.append(self.message(capability, _scenarios_subject(asking)))
        for option in options:
            capability = BY_NAME[option]
            if not self.has(capability):
                lines.append(self.message(capability, capability.asked_by))
        return lines

    def refuse(self, scenarios: Iterable[Scenario], options: Iterable[str] = ()) -> None:
        """BadInput naming every refusal (one line each) when there is any."""
        lines = self.refusals(scenarios, options)
        if lines:
            raise BadInput("; ".join(lines))

    def skip_reason(self, scenario: Scenario) -> str | None:
        """Why this target skips the scenario (a declared capability it lacks), or None."""
        for capability in CAPABILITIES:
            lacking = self.lacks.get(capability.name)
            if lacking is not None and lacking.skip and capability.asked is not None and capability.asked(scenario):
                return self.message(capability, f"scenario {scenario.name}")
        return None


# Scenario names one refusal lists, at most (a matrix may expand to thousands).
NAMES_LISTED_MAX = 5


def _scenarios_subject(names: list[str]) -> str:
    if len(names) == 1:
        return f"scenario {names[0]}"
    listed = ", ".join(names[:NAMES_LISTED_MAX])
    more = f" and {len(names) - NAMES_LISTED_MAX} more" if len(names) > NAMES_LISTED_MAX else ""
    return f"scenarios {listed}{more}"
