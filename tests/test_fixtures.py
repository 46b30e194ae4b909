"""distval.fixtures without Docker: recipe hashes, build order, and what a layer build hands the Engine."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

import distval.fixtures.build as build
from distval.engine_protocol import ImageInfo
from distval.errors import EnvironmentUnusable
from distval.fixtures import FILES, FIXTURES, RECIPE_LABEL, ImageBuilder, LayerRecipe, build_fixtures, build_order, recipe_hash
from distval.tarball import regular_files

DEFAULT = "distval-fixtures/torch:2.6-debian"
STOCK = "distval-fixtures/torch:2.6-debian-stock"
NOOP = "distval-fixtures/broken:allreduce-noop"


class FakeBuilder:
    """Which images exist (with their recipe labels) and what was built; imports nothing (no root
    filesystems in unit tests). Type-checked against distval.fixtures.ImageBuilder, the Engine's side."""

    def __init__(self, current: set[str]) -> None:
        self.images = {
            tag: ImageInfo(id=f"sha256:{tag}", tags=(tag,), labels={RECIPE_LABEL: recipe_hash(tag)}) for tag in current
        }
        self.builds: list[tuple[str, dict[str, bytes], dict[str, str]]] = []

    def image(self, reference: str) -> ImageInfo | None:
        return self.images.get(reference)

    def import_rootfs(self, tar_path: str, repository: str, tag: str, changes: list[str]) -> str:
        raise AssertionError(f"unexpected root filesystem import of {repository}:{tag}")

    def build(
        self,
        context: bytes,
        tag: str,
        labels: Mapping[str, str],
        log: Callable[[str], None],
        buildargs: Mapping[str, str] | None = None,
    ) -> str:
        self.builds.append((tag, regular_files(context), dict(labels)))
        return f"sha256:{tag}"


_CONFORMS: ImageBuilder = FakeBuilder(set())  # mypy: the fake has every method build_fixtures may call


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The builders' lock file in a cache of the test's own: a real build elsewhere never holds these up."""
    monkeypatch.setenv("DISTVAL_CACHE_DIR", str(tmp_path / "cache"))


def test_one_builder_at_a_time_and_the_one_that_waited_says_so() -> None:
    import fcntl
    import threading

    lock_path = build.cache_dir() / "fixtures.lock"
    lock_path.parent.mkdir(parents=True)
    lines: list[str] = []
    done = threading.Event()
    with open(lock_path, "a+") as held:  # another builder (an open file of its own: flock is per open file)
        fcntl.flock(held, fcntl.LOCK_EX)

        def build_then_say_so() -> None:
            build_fixtures(FakeBuilder({STOCK, DEFAULT}), [DEFAULT], lines.append)
            done.set()

        waiter = threading.Thread(target=build_then_say_so)
        waiter.start()
        assert not done.wait(0.5), "it built while another builder held the lock"
    waiter.join(10)
    assert done.is_set()
    assert lines[0] == f"fixtures: another process is building fixture images; waiting for it ({lock_path})"
    assert lines[1:] == [f"fixture {tag}: up to date (recipe {recipe_hash(tag)})" for tag in (STOCK, DEFAULT)]


def test_every_layer_parent_is_a_fixture_and_every_layer_file_exists() -> None:
    for tag, fixture in FIXTURES.items():
        assert fixture.tag == tag
        if isinstance(fixture.recipe, LayerRecipe):
            assert fixture.recipe.parent in FIXTURES, tag
            assert fixture.recipe.dockerfile.startswith(f"FROM {fixture.recipe.parent}\n"), tag
            for name in fixture.recipe.files:
                assert (FILES / name).is_file(), (tag, name)


def test_recipe_hashes_do_not_depend_on_where_the_files_are(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = {tag: recipe_hash(tag) for tag in FIXTURES}
    moved = tmp_path / "elsewhere"
    shutil.copytree(FILES, moved)
    monkeypatch.setattr(build, "FILES", moved)
    assert {tag: recipe_hash(tag) for tag in FIXTURES} == before


def test_a_changed_file_changes_its_layer_and_the_layers_above_it_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = {tag: recipe_hash(tag) for tag in FIXTURES}
    moved = tmp_path / "files"
    shutil.copytree(FILES, moved)
    (moved / "libuv_fix.py").write_text((moved / "libuv_fix.py").read_text() + "# changed\n")
    monkeypatch.setattr(build, "FILES", moved)
    changed = {tag for tag in FIXTURES if recipe_hash(tag) != before[tag]}
    on_default = {tag for tag, f in FIXTURES.items() if isinstance(f.recipe, LayerRecipe) and f.recipe.parent == DEFAULT}
    assert changed == {DEFAULT} | on_default
    assert NOOP in changed and STOCK not in changed


def test_build_order_puts_parents_first_each_once() -> None:
    order = build_order([NOOP, DEFAULT, "distval-fixtures/broken:no-numpy"])
    assert order == [STOCK, DEFAULT, NOOP, "distval-fixtures/torch:2.15-pypi", "distval-fixtures/broken:no-numpy"]
    everything = build_order(list(FIXTURES))
    assert sorted(everything) == sorted(FIXTURES)
    for tag, fixture in FIXTURES.items():
        if isinstance(fixture.recipe, LayerRecipe):
            assert everything.index(fixture.recipe.parent) < everything.index(tag)


def test_unknown_fixture_is_refused_naming_it() -> None:
    with pytest.raises(EnvironmentUnusable, match="unknown fixture.*distval-fixtures/torch:9.9"):
        build_fixtures(FakeBuilder(set()), ["distval-fixtures/torch:9.9"], lambda line: None)


def test_current_images_are_not_built_again() -> None:
    engine = FakeBuilder({STOCK, DEFAULT, NOOP})
    lines: list[str] = []
    assert build_fixtures(engine, [NOOP], lines.append) == []
    assert engine.builds == []
    assert lines == [f"fixture {tag}: up to date (recipe {recipe_hash(tag)})" for tag in (STOCK, DEFAULT, NOOP)]


def test_a_stale_layer_is_rebuilt_with_everything_above_it_from_its_context() -> None:
    engine = FakeBuilder({STOCK, NOOP})  # the default image is missing: the broken layer FROM it must follow
    assert build_fixtures(engine, [NOOP], lambda line: None) == [DEFAULT, NOOP]
    (default_tag, default_context, default_labels), (noop_tag, noop_context, _) = engine.builds
    assert (default_tag, noop_tag) == (DEFAULT, NOOP)
    recipe = FIXTURES[DEFAULT].recipe
    assert isinstance(recipe, LayerRecipe)
    assert default_context == {
        "Dockerfile": recipe.dockerfile.encode(),
        "libuv_fix.py": (FILES / "libuv_fix.py").read_bytes(),
    }
    assert default_labels == {RECIPE_LABEL: recipe_hash(DEFAULT), "distval.fixture": DEFAULT}
    assert set(noop_context) == {"Dockerfile", "allreduce_noop.py"}


def test_importing_the_fixtures_imports_no_docker_py() -> None:
    """Host mode's tests take cache_dir from here where docker-py may be missing; only building needs it."""
    code = "import sys, distval.fixtures; sys.exit('docker' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
