"""The scenario files distval ships (configs/, inside the package as distval/configs, a link to it, so that an
installed distval has them without a checkout), the default one ``distval run`` and ``distval plan`` use when
given none, and ``distval init``'s starter config."""

from __future__ import annotations

from pathlib import Path

from distval.config.keys import BY_NAME, DEFAULT_CHECK_TIMEOUT_S, DEFAULT_COLLECTIVE_TIMEOUT_S, DEFAULT_TIMEOUT_S
from distval.errors import BadInput

# The image under test when neither --image nor the scenario names one: distval's sample image (a run on it says so).
DEFAULT_IMAGE = "distval-fixtures/torch:2.6-debian"
# The option that asks for the sample image on purpose (refused in a pipeline without it: distval/session/sample.py).
SAMPLE_IMAGE_FLAG = "--sample-image"
CONFIGS_DIR = Path(__file__).resolve().parent.parent / "configs"
DEFAULT_CONFIG = CONFIGS_DIR / "default.yaml"
SCHEMA_FILE = CONFIGS_DIR / "distval.schema.json"
STARTER_NAME = "distval.yaml"
SCHEMA_COMMENT_PREFIX = "# yaml-language-server: $schema="


def _seconds(value: float) -> str:
    return f"{value:g}"


def starter_config() -> str:
    """A commented scenario file for ``distval init``: the quick check in one container and across two, each key's
    comment its declared description (distval/config/keys.py). The schema line names the schema of this distval by
    its absolute path: a starter file lives anywhere, so a path relative to it would lead nowhere."""

    def doc(key: str) -> str:
        return BY_NAME[key].doc

    return f"""{SCHEMA_COMMENT_PREFIX}{SCHEMA_FILE}
# A distval scenario file, written by `distval init`. Run it with
#   distval run {STARTER_NAME} --image <your image> --junit results.xml
# Every key: docs/scenarios.md; every check and its arguments: `distval checks`.
version: 1
backend: gloo  # {doc("backend")}
# image: my/torch:candidate  # {doc("image")} ({DEFAULT_IMAGE})
# timeout_s: {_seconds(DEFAULT_TIMEOUT_S)}  # {doc("timeout_s")}
# collective_timeout_s: {_seconds(DEFAULT_COLLECTIVE_TIMEOUT_S)}  # {doc("collective_timeout_s")}
# check_timeout_s: {_seconds(DEFAULT_CHECK_TIMEOUT_S)}  # {doc("check_timeout_s")}
scenarios:
  - name: in-container-2ranks  # {doc("name")}
    topology: in-container  # {doc("topology")}
    world_size: 2  # {doc("world_size")}
    # {doc("checks")}
    checks: &checks
      - env
      # State what the image must be; the check fails when it is not.
      - {{name: identity, args: {{backends: [gloo]}}}}  # e.g. also torch: '>=2.6,<2.7', build: cpu
      - launch
      - all_reduce
      - collectives
      - ddp_sync
      - store
  - name: cross-container-2ranks
    topology: cross-container
    world_size: 2
    checks: *checks
"""


def write_starter(path: str) -> None:
    """Write the starter config to ``path``; an existing file is never overwritten (bad input)."""
    try:
        with open(path, "x", encoding="utf-8") as file:  # "x": fails if it exists, with no window for a race
            file.write(starter_config())
    except FileExistsError:
        raise BadInput(f"{path} exists; not overwriting it (give another path: distval init PATH)") from None
    except OSError as exc:
        raise BadInput(f"cannot write {path}: {exc.strerror or exc}") from None
