"""Where distval's own helper images come from: the base the Engine builds them FROM, or mmdebstrap offline.

distval builds two kinds of image for a user's run when the Engine lacks them: the reaper's (always) and the sample
image (a run without --image). Their recipes (distval/images/recipes.py) name a Debian suite and packages; how the
Debian root under them is made is chosen here, once, and shown by ``distval plan``:

- pulled (the default): the Engine pulls Debian's official slim image of the recipe's suite, pinned by digest
  (``DEFAULT_BASES``), and builds the image FROM it with a generated Dockerfile (apt-get inside the build). No root
  and no package on the host: the docker group is enough.
- another base, pinned by digest: ``--helper-base NAME@sha256:...`` or ``$DISTVAL_HELPER_BASE`` (a mirror in a
  registry of one's own), used for every helper image.
- ``harness``: the image of the container distval runs in (the harness image, whose Dockerfile sets it); nothing
  is pulled. It serves the helpers that need only a Python (the reaper); the sample image needs its Debian suite's
  own python3-torch and keeps Debian's base.
- ``mmdebstrap``: offline, from Debian's archive on the host (root and mmdebstrap), as the test fixtures are made.
  Chosen explicitly, or where the base cannot be pulled (one line says so).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from distval.config.yaml_nodes import shown
from distval.errors import BadInput
from distval.image_names import REAPER_IMAGE
from distval.images.recipes import FIXTURES, HELPER_ROOTS, LayerRecipe, RootfsRecipe

HELPER_BASE_ENV = "DISTVAL_HELPER_BASE"
HELPER_BASE_FLAG = "--helper-base"
HELPER_BASE_DEST = "helper_base"
MMDEBSTRAP = "mmdebstrap"
HARNESS = "harness"
# Debian's official slim images, each pinned to the digest of its multi-architecture index (the Docker Official
# Images' debian repository), so that every host builds from the same bytes whatever the tag points at today.
DEFAULT_BASES: dict[str, str] = {
    "bookworm": "debian:bookworm-slim@sha256:7c7b2c966bc9ee8cedfeef67e0e279108992c77681fa595db4a9d65c06ccc587",
    "trixie": "debian:trixie-slim@sha256:a29215f6a35e51e22adffa17f89e9d2ef06214e64a2bad10d765c46aea49f11f",
}
_PINNED = re.compile(r"[a-z0-9][a-z0-9._/:-]*@sha256:[0-9a-f]{64}")


def base_problem(value: str) -> str | None:
    """Why ``value`` is not a helper base (None when it is): a reference pinned by digest or one of the keywords."""
    if value in (MMDEBSTRAP, HARNESS) or _PINNED.fullmatch(value):
        return None
    return f"expected an image pinned by digest (NAME@sha256:<64 hex digits>), {HARNESS!r} or {MMDEBSTRAP!r}"


# The option's help, for the commands that may build distval's own images (run and plan through the containers
# target's options, distval/targets/engines/kind.py; ``distval fixtures build``).
HELPER_BASE_HELP = (
    f"what distval's own images (the reaper's, the sample) are built FROM where the Engine lacks them: an image pinned "
    f"by digest (NAME@sha256:...), {HARNESS!r} (the image distval runs in) or {MMDEBSTRAP!r} (offline, needs root); "
    f"default ${HELPER_BASE_ENV}, else Debian's slim images pinned by digest"
)


@dataclass(frozen=True)
class HelperBase:
    """The choice: ``image`` is a pinned reference, HARNESS, MMDEBSTRAP, or None for Debian's default per suite;
    ``source`` says who chose it (the flag, the variable, or the default)."""

    image: str | None
    source: str

    @property
    def offline(self) -> bool:
        return self.image == MMDEBSTRAP

    def base_for(self, suite: str, python_only: bool) -> str | None:
        """The base of a helper root filesystem of this Debian suite; None: mmdebstrap. HARNESS stays HARNESS (the
        Engine knows which image that is, distval/images/build.py asks it) for a Python-only helper."""
        if self.image == MMDEBSTRAP:
            return None
        if self.image is None or (self.image == HARNESS and not python_only):
            return DEFAULT_BASES[suite]
        return self.image

    def describe(self) -> str:
        """One line for the plan and the build's progress."""
        if self.image == MMDEBSTRAP:
            return f"built offline with mmdebstrap from Debian's archive (needs root and mmdebstrap on the host; {self.source})"
        if self.image == HARNESS:
            return (
                "built by the Engine FROM the image of the container distval runs in (the harness; nothing pulled) for the "
                f"reaper, FROM Debian's pinned slim image for the sample ({self.source})"
            )
        if self.image is None:
            bases = ", ".join(DEFAULT_BASES.values())
            return (
                f"built by the Engine FROM Debian's slim image of the recipe's suite, pulled by digest ({bases}); "
                f"mmdebstrap on the host where it cannot be pulled ({self.source})"
            )
        return (
            f"built by the Engine FROM {self.image}, pulled by digest; mmdebstrap on the host where it cannot be pulled "
            f"({self.source})"
        )

    def as_data(self) -> dict[str, object]:
        return {
            "base": self.image or "default",
            "source": self.source,
            "default_bases": dict(DEFAULT_BASES),
            "how": self.describe(),
        }


# Debian's pinned slim images, mmdebstrap where they cannot be pulled: what a run without a choice uses.
DEFAULT = HelperBase(None, "the default")


def choose(option: str | None, environ: Mapping[str, str]) -> HelperBase:
    """--helper-base, else $DISTVAL_HELPER_BASE, else Debian's pinned slim images. The option's value was checked
    by its argparse type; the variable's is checked here (BadInput names it)."""
    if option:
        return HelperBase(option, HELPER_BASE_FLAG)
    value = environ.get(HELPER_BASE_ENV, "")
    if value:
        problem = base_problem(value)
        if problem is not None:
            raise BadInput(f"${HELPER_BASE_ENV}: {problem}; got {shown(value)}")
        return HelperBase(value, f"${HELPER_BASE_ENV}")
    return DEFAULT


def _root_of(tag: str) -> str:
    """The root filesystem under a fixture: the tag itself, or the first non-layer below it."""
    recipe = FIXTURES[tag].recipe
    return _root_of(recipe.parent) if isinstance(recipe, LayerRecipe) else tag


def planned_builds(helpers: HelperBase, images: Iterable[str]) -> list[dict[str, str]]:
    """What ``distval plan`` shows of distval's own images: the reaper's always, and each of ``images`` that is a
    helper (the sample image), with the root it stands on and what that root is built FROM where the Engine lacks it."""
    shown = [REAPER_IMAGE, *sorted({image for image in images if image in FIXTURES and _root_of(image) in HELPER_ROOTS})]
    planned = []
    for image in dict.fromkeys(shown):
        root = _root_of(image)
        recipe = FIXTURES[root].recipe
        assert isinstance(recipe, RootfsRecipe), root
        base = helpers.base_for(recipe.suite, python_only=recipe.present_if is not None)
        if base == HARNESS:
            base = "the image of the container distval runs in"
        planned.append({"image": image, "root": root, "from": base or MMDEBSTRAP, "debian_suite": recipe.suite})
    return planned
