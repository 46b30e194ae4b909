"""Real PyTorch images built without any registry: Debian packages -> mmdebstrap -> docker import.

Each fixture has a recipe; its hash is stored in the image label ``distval.fixture.recipe``, so a build
is skipped when the tag exists with the same recipe (seconds), and redone when the recipe changes.
Downloaded .deb files are cached under the cache directory, so a rebuild does not download them again.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.engine import Engine
from harness.errors import EnvironmentUnusable

RECIPE_LABEL = "distval.fixture.recipe"
FIXTURE_LABEL = "distval.fixture"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
FILES = Path(__file__).resolve().parent / "fixture_files"
Progress = Callable[[str], None]


@dataclass(frozen=True)
class RootfsRecipe:
    """A Debian root filesystem with the given packages, imported as an image."""

    suite: str
    packages: tuple[str, ...]
    changes: tuple[str, ...]


@dataclass(frozen=True)
class LayerRecipe:
    """A small Dockerfile on top of another fixture (COPY/ENV/RUN only; FROM is always local)."""

    parent: str
    dockerfile: str
    files: tuple[str, ...]  # names under fixture_files/, copied into the build context


@dataclass(frozen=True)
class Fixture:
    tag: str
    description: str
    recipe: RootfsRecipe | LayerRecipe


def _broken(name: str, description: str) -> Fixture:
    return Fixture(
        tag=f"distval-fixtures/broken:{name.replace('_', '-')}",
        description=description,
        recipe=LayerRecipe(
            parent="distval-fixtures/torch:2.6-debian",
            dockerfile=(
                "FROM distval-fixtures/torch:2.6-debian\n"
                f"COPY {name}.py /opt/distval-broken/sitecustomize.py\n"
                # PYTHONPATH comes before the standard library on sys.path, so this sitecustomize
                # shadows Debian's own in /usr/lib/python3.X.
                "ENV PYTHONPATH=/opt/distval-broken\n"
            ),
            files=(f"{name}.py",),
        ),
    )


FIXTURES: dict[str, Fixture] = {
    f.tag: f
    for f in (
        Fixture(
            tag="distval-fixtures/torch:2.6-debian-stock",
            description="Debian trixie's python3-torch 2.6 exactly as Debian ships it (torchrun cannot create its store)",
            recipe=RootfsRecipe(
                suite="trixie",
                packages=("python3-torch", "ca-certificates"),
                changes=('CMD ["python3"]', "ENV LANG=C.UTF-8"),
            ),
        ),
        Fixture(
            tag="distval-fixtures/torch:2.6-debian",
            description="Debian trixie's python3-torch 2.6 with distval's libuv fix (the default image)",
            recipe=LayerRecipe(
                parent="distval-fixtures/torch:2.6-debian-stock",
                dockerfile=(
                    "FROM distval-fixtures/torch:2.6-debian-stock\n"
                    "COPY libuv_fix.py /tmp/libuv_fix.py\n"
                    "RUN set -e; target=$(python3 -c 'import torch.distributed as d; print(d.__file__)'); "
                    'cat /tmp/libuv_fix.py >> "$target"; rm /tmp/libuv_fix.py\n'
                    "ENV USE_LIBUV=0\n"
                ),
                files=("libuv_fix.py",),
            ),
        ),
        _broken("allreduce_noop", "torch.distributed.all_reduce does nothing"),
        _broken("allreduce_hangs", "torch.distributed.all_reduce never returns"),
    )
}


def cache_dir() -> Path:
    base = os.environ.get("DISTVAL_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "distval"
    )
    return Path(base)


def recipe_hash(tag: str) -> str:
    fixture = FIXTURES[tag]
    recipe = fixture.recipe
    payload: dict[str, object] = {"tag": tag, "format": 1}
    if isinstance(recipe, RootfsRecipe):
        payload.update(suite=recipe.suite, packages=list(recipe.packages), changes=list(recipe.changes), mirror=DEBIAN_MIRROR)
    else:
        payload.update(
            parent=recipe_hash(recipe.parent),
            dockerfile=recipe.dockerfile,
            files={name: hashlib.sha256((FILES / name).read_bytes()).hexdigest() for name in recipe.files},
        )
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def is_current(engine: Engine, tag: str) -> bool:
    image = engine.image(tag)
    return image is not None and image.labels.get(RECIPE_LABEL) == recipe_hash(tag)


def build_order(tags: list[str]) -> list[str]:
    """Parents before children, each once."""
    order: list[str] = []

    def visit(tag: str) -> None:
        recipe = FIXTURES[tag].recipe
        if isinstance(recipe, LayerRecipe):
            visit(recipe.parent)
        if tag not in order:
            order.append(tag)

    for tag in tags:
        visit(tag)
    return order


def build_fixtures(engine: Engine, tags: list[str], progress: Progress, force: bool = False) -> list[str]:
    """Build the fixtures (and their parents) that are missing or stale; returns the tags built."""
    unknown = [t for t in tags if t not in FIXTURES]
    if unknown:
        raise EnvironmentUnusable(f"unknown fixture(s) {', '.join(unknown)}; known: {', '.join(FIXTURES)}")
    built: list[str] = []
    for tag in build_order(tags):
        rebuild_parent = any(isinstance(FIXTURES[tag].recipe, LayerRecipe) and FIXTURES[tag].recipe.parent == b for b in built)  # type: ignore[union-attr]
        if not force and not rebuild_parent and is_current(engine, tag):
            progress(f"fixture {tag}: up to date (recipe {recipe_hash(tag)})")
            continue
        progress(f"fixture {tag}: building (recipe {recipe_hash(tag)})")
        recipe = FIXTURES[tag].recipe
        if isinstance(recipe, RootfsRecipe):
            _build_rootfs(engine, tag, recipe, progress)
        else:
            _build_layer(engine, tag, recipe, progress)
        built.append(tag)
    return built


def _labels(tag: str) -> dict[str, str]:
    return {RECIPE_LABEL: recipe_hash(tag), FIXTURE_LABEL: tag}


def _build_rootfs(engine: Engine, tag: str, recipe: RootfsRecipe, progress: Progress) -> None:
    mmdebstrap = _mmdebstrap(progress)
    debs = cache_dir() / "debs" / recipe.suite
    debs.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="distval-rootfs-", dir=cache_dir()) as work:
        tar_path = os.path.join(work, "rootfs.tar")
        command = [
            mmdebstrap,
            "--variant=apt",
            f"--include={','.join(recipe.packages)}",
            # Keep downloaded .debs between builds (mmdebstrap's documented cache recipe).
            "--skip=essential/unlink",
            '--setup-hook=mkdir -p "$1"/var/cache/apt/archives/',
            f"--setup-hook=sync-in {debs} /var/cache/apt/archives/",
            f"--customize-hook=sync-out /var/cache/apt/archives {debs}",
            '--customize-hook=rm -f "$1"/var/cache/apt/archives/*.deb',
            recipe.suite,
            tar_path,
            DEBIAN_MIRROR,
        ]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert process.stdout is not None
        tail: list[str] = []
        try:
            for line in process.stdout:
                line = line.rstrip()
                tail = (tail + [line])[-20:]
                progress(f"  mmdebstrap: {line}")
        finally:
            # Interrupted (Ctrl-C, SIGTERM): stop mmdebstrap before its work directory is removed.
            if process.poll() is None:
                process.terminate()
            process.wait()
        if process.returncode != 0:
            raise EnvironmentUnusable(f"mmdebstrap failed for {tag} (exit {process.returncode}): " + " | ".join(tail[-5:]))
        labels = _labels(tag)
        changes = list(recipe.changes) + [f'LABEL {key}="{value}"' for key, value in labels.items()]
        repository, _, version = tag.partition(":")
        progress(f"fixture {tag}: importing {os.path.getsize(tar_path) // 2**20} MiB root filesystem")
        engine.import_rootfs(tar_path, repository, version, changes)


def _mmdebstrap(progress: Progress) -> str:
    """mmdebstrap's path; on a Debian host where distval runs as root, install it with apt-get first,
    so that the first ``distval run`` works on a bare machine as the README says."""
    found = shutil.which("mmdebstrap")
    if found is not None:
        return found
    apt_get = shutil.which("apt-get")
    if apt_get is None or os.geteuid() != 0 or os.environ.get("DISTVAL_NO_APT"):
        raise EnvironmentUnusable("building the fixture images needs mmdebstrap (Debian/Ubuntu: apt-get install mmdebstrap)")
    progress("mmdebstrap is missing: installing it with apt-get (set DISTVAL_NO_APT=1 to forbid this)")
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    # Some configured third-party lists may be unreachable; Debian's own lists are enough.
    subprocess.run([apt_get, "update", "-qq"], env=environment, check=False)
    install = subprocess.run([apt_get, "install", "-y", "-qq", "mmdebstrap"], env=environment, capture_output=True, text=True)
    found = shutil.which("mmdebstrap")
    if install.returncode != 0 or found is None:
        raise EnvironmentUnusable(f"apt-get install mmdebstrap failed: {install.stderr.strip()[-300:]}")
    return found


def _build_layer(engine: Engine, tag: str, recipe: LayerRecipe, progress: Progress) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, data in [("Dockerfile", recipe.dockerfile.encode())] + [(n, (FILES / n).read_bytes()) for n in recipe.files]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            archive.addfile(info, io.BytesIO(data))
    engine.build(buffer.getvalue(), tag, _labels(tag), lambda line: progress(f"  build: {line}"))
