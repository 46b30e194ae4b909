"""The same image on every host before a run across several Engines.

``transfer`` (the default: no registry needed): ``docker save`` from host 0 (or, where no host has the image,
from the local Engine, where a fixture is built), streamed chunk by chunk
through the harness into ``docker load`` on each Engine that lacks the image or has another image under its
name; progress every ~256 MiB. ``pull``: an image with a RepoDigest on the first Engine is pulled by that
digest on the others (the registry serves the same bytes). Either way the image id is then compared on every
host, and a mismatch refuses the run with one line naming the hosts and ids.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from distval.engine_protocol import ImageInfo
from distval.errors import EnvironmentUnusable, ImageMissing, RunStopped

MODES = ("transfer", "pull")
PROGRESS_EVERY_BYTES = 256 * 2**20
Progress = Callable[[str], None]


class ImageHost(Protocol):
    """What moving an image asks of an Engine (distval.targets.docker.engine.Engine is one)."""

    where: str

    def image(self, reference: str) -> ImageInfo | None: ...

    def save_image(self, reference: str) -> Iterator[bytes]: ...

    def load_image(self, chunks: Iterable[bytes]) -> list[str]: ...

    def pull_digest(self, reference: str) -> None: ...


class ImageMismatch(EnvironmentUnusable):
    """The hosts hold different images under the run's image name."""


@dataclass(frozen=True)
class Moved:
    host: int
    how: str  # "present", "transfer", "pull"
    bytes: int
    seconds: float


def same_image(
    engines: Sequence[ImageHost], image: str, mode: str, progress: Progress, origin: ImageHost | None = None
) -> list[Moved]:
    """Make ``image`` as ``origin`` has it (default: host 0; else e.g. the local Engine that built it) present on
    every host; refuse a mismatch. Returns what moved, per host."""
    if mode not in MODES:
        raise EnvironmentUnusable(f"image distribution: expected one of {', '.join(MODES)}; got {mode!r}")
    origin = origin or engines[0]
    named = next((f"host {i}" for i, engine in enumerate(engines) if engine is origin), "the local Engine")
    source = origin.image(image)
    if source is None:
        raise ImageMissing(f"image {image} is not on {named} ({origin.where}); distval copies it from there to the others")

    stopping = threading.Event()

    def one(index: int) -> Moved:
        engine = engines[index]
        present = engine.image(image)
        if present is not None and present.id == source.id:
            return Moved(index, "present", 0, 0.0)
        started = time.monotonic()
        if mode == "pull" and source.repo_digests:
            digest = source.repo_digests[0]
            progress(f"image {image}: pulling {digest} on host {index} ({engine.where})")
            engine.pull_digest(digest)
            return Moved(index, "pull", 0, time.monotonic() - started)
        counted = _Counter(origin.save_image(source.id if not source.tags else image), image, index, progress, stopping)
        progress(f"image {image}: copying it from {named} to host {index} ({engine.where}): docker save | docker load")
        engine.load_image(iter(counted))
        seconds = time.monotonic() - started
        progress(f"image {image}: {counted.total / 2**30:.2f} GiB to host {index} in {seconds:.1f} s")
        return Moved(index, "transfer", counted.total, seconds)

    # One stream per host at once: each is one thread waiting on two sockets, so hosts overlap.
    targets = [i for i, engine in enumerate(engines) if engine is not origin]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(targets)), thread_name_prefix="distval-transfer") as pool:
        try:
            moved = list(pool.map(one, targets))
        except BaseException:
            # Ctrl-C or SIGTERM (raised here, in the main thread): each stream ends at its next chunk instead
            # of the pool's exit waiting for gigabytes still to be copied (issue 20).
            stopping.set()
            raise
    check_same(engines, image, source, f"{named}, {origin.where}")
    return moved


def check_same(engines: Sequence[ImageHost], image: str, source: ImageInfo, origin: str) -> None:
    """Every host has ``image`` with the origin's id; else one line naming the first host that differs."""
    for index, engine in enumerate(engines):
        found = engine.image(image)
        seen = found.id if found is not None else "no such image"
        if seen != source.id:
            raise ImageMismatch(
                f"image {image} differs between hosts: expected {source.id} ({origin}) on every host; "
                f"host {index} ({engine.where}) has {seen}"
            )


class _Counter:
    """The save stream, counted as it passes, with a progress line every PROGRESS_EVERY_BYTES."""

    def __init__(
        self, chunks: Iterator[bytes], image: str, host: int, progress: Progress, stopping: threading.Event | None = None
    ) -> None:
        self.chunks, self.image, self.host, self.progress = chunks, image, host, progress
        self.stopping = stopping or threading.Event()
        self.total = 0

    def __iter__(self) -> Iterator[bytes]:
        next_report = PROGRESS_EVERY_BYTES
        for chunk in self.chunks:
            if self.stopping.is_set():
                raise RunStopped()  # the load fails on a cut stream: the Engine keeps no partial image
            self.total += len(chunk)
            if self.total >= next_report:
                self.progress(f"image {self.image}: {self.total / 2**20:.0f} MiB sent to host {self.host}")
                next_report += PROGRESS_EVERY_BYTES
            yield chunk
