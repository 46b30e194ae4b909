"""An OCI bundle's config.json, read for distval export slurm and --target slurm: the image's environment, user and
working directory as ``umoci unpack`` wrote them, which each node's bundle config starts from
(distval/targets/slurm/export.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from distval import strict_json
from distval.bounded_read import FileRefused, read_regular_file
from distval.errors import BadInput, one_line
from distval.targets.slurm.integrations import OCI

BUNDLE_CONFIG_MAX_BYTES = 1024 * 1024


def read_bundle_config(bundle: str) -> dict[str, Any]:
    """``bundle``/config.json as a dict; BadInput (one line) for anything that is no OCI runtime config."""
    path = Path(bundle) / "config.json"
    try:
        config = strict_json.loads(read_regular_file(path, BUNDLE_CONFIG_MAX_BYTES))
    except FileRefused as exc:
        raise BadInput(f"--bundle {bundle}: expected an OCI bundle (umoci unpack's config.json and rootfs): {exc}") from exc
    except ValueError as exc:
        raise BadInput(f"--bundle {bundle}: {path} is not JSON: {one_line(str(exc))[:200]}") from exc
    if not isinstance(config, dict) or not isinstance(config.get("process"), dict):
        raise BadInput(f"--bundle {bundle}: {path} is not an OCI runtime config (no process object)")
    return config


def chosen_bundle(integration: str, bundle: str | None, command: str) -> tuple[str | None, dict[str, Any] | None]:
    """--bundle as ``command`` (``export slurm``, ``--target slurm``) takes it: required with the OCI integration,
    refused with the others (they start from the image itself); returns the absolute bundle and its config."""
    if integration == OCI and not bundle:
        raise BadInput(f"{command} --integration oci: expected --bundle DIR, the image unpacked as an OCI bundle")
    if integration != OCI and bundle:
        raise BadInput(f"{command} --integration {integration}: --bundle is for --integration oci only")
    if not bundle:
        return None, None
    absolute = str(Path(bundle).resolve())
    return absolute, read_bundle_config(absolute)
