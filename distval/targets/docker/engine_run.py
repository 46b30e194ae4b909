"""One Engine's part of a run: the images there, the run's reaper on it, and its cleanup at the end. The docker target
has one of these, the engines target one per host.

The order matters: the reaper's container is created before anything of the scenarios (``created``) and runs
before any of their containers start (``ready``, the runtime's ``before_start``); at the end everything of the run is
removed but what --keep-on-failure keeps, and the reaper is disarmed last (it covers a distval killed meanwhile).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from distval.engine_protocol import EngineAPI
from distval.errors import EngineError, ImageMissing
from distval.image_names import REAPER_IMAGE
from distval.images import FIXTURES, build_fixtures, is_current
from distval.images.helper_base import HelperBase
from distval.owner import current_owner
from distval.targets.docker.keep import Keeper
from distval.targets.docker.reaper import Reaper, ReaperLaunch

if TYPE_CHECKING:  # docker-py is imported with the Engine only where a run uses Docker (never in host mode)
    from distval.targets.docker.engine import Engine

Log = Callable[[str], None]


def ensure_images(engine: Engine, images: Sequence[str], log: Log, helpers: HelperBase, blocked: Log) -> None:
    """Every image is in the Engine: a missing or stale fixture is built (distval's helper images FROM ``helpers``'
    base, pulled by digest; the others with mmdebstrap); any other missing image stops the run (distval never pulls
    an image under test). ``blocked``: where a wait for another fixture builder is said (the run's lines said
    even with --quiet: minutes of silence look like a hang)."""
    for image in images:
        if image in FIXTURES and not is_current(engine, image):
            log(f"image {image} is missing or stale: building it now")
            build_fixtures(engine, [image], log, helpers=helpers, blocked=blocked)
        elif engine.image(image) is None:
            raise ImageMissing(f"image {image} is not in the Docker Engine; distval never pulls: build, load or pull it first")


def engine_version(engine: Engine) -> str | None:
    try:
        return engine.version()
    except EngineError:
        return None  # only a property of the reports: not a reason to stop the run


def announce_run(run_id: str) -> str:
    """The line a run starts with (stderr, not with --quiet): what to clean up by hand if distval is killed."""
    owner = current_owner()
    return (
        f"run {run_id} (pid {owner.pid} on {owner.host}): if distval is killed, "
        f"`distval cleanup --run-id {run_id}` removes its containers and networks"
    )


class EngineRun:
    """The run on one Engine. ``reaper``: whether this Engine can hold a reaper (distval's Engine can; the unit
    tests' stand-in Engine declares it cannot). ``warn``: the one line of a run without a reaper."""

    def __init__(
        self, engine: Engine, keeper: Keeper | None = None, url: str | None = None, remover: EngineAPI | None = None
    ) -> None:
        """``url``: the --hosts URL of this Engine (None: the one Engine of a docker run); ``remover``: what removes
        the run's resources at the end when no reaper holds them (a host's Engine that names its host in errors)."""
        self.engine = engine
        self.keeper = keeper or Keeper(None, False)
        self.url = url
        self.remover: EngineAPI = remover or engine
        self.launch: ReaperLaunch | None = None

    def start_reaper(self, warn: Log, log: Log) -> None:
        """The run's reaper, being started beside the first scenario's setup; returns once its container exists
        (or could not be created). It runs in distval's reaper image (ensured before), never an image under test."""
        if not self.engine.holds_reaper:
            return
        engine, url = self.engine, self.url
        self.launch = ReaperLaunch(lambda created: Reaper.start(engine, warn, url, log, created), warn, engine.run_id)
        self.launch.created()

    def reaper_ready(self) -> None:
        if self.launch is not None:
            self.launch.ready()

    def close(self) -> None:
        """Everything of the run on this Engine but what is kept; the reaper last, once it is running or failed."""
        held = self.launch.ready() if self.launch is not None else None
        try:
            if held is not None or self.keeper.kept:
                self.keeper.remove_run(self.engine)
            else:
                self.remover.remove_labelled()
        except EngineError as exc:
            print(f"distval: cleanup failed: {exc}", file=sys.stderr)
        if held is not None:
            held.disarm()  # a normal end: it exits without removing anything, so what is kept stays


def reaper_images(engine: Engine) -> list[str]:
    """The images distval itself runs on this Engine beside the scenarios."""
    return [REAPER_IMAGE] if engine.holds_reaper else []
