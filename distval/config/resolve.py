"""A scenario's fields from its own keys and the top level's defaults, after the rules between keys."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from distval.config.devices import resolve_devices
from distval.config.keys import KEYS, VALUE
from distval.config.layout import Issue, resolve_layout


def resolve(values: Mapping[str, Any], defaults: Mapping[str, Any]) -> tuple[dict[str, Any] | None, list[Issue]]:
    """Scenario's fields (all but name, checks and the matrix's) from a scenario's keys and the defaults."""
    # The top level's defaults over the keys' own, so that the layout rules see every default too.
    defaults = {**{key.name: key.default for key in KEYS if key.top is not None}, **defaults}
    layout, issues = resolve_layout(values, defaults)
    if layout is None:
        return None, issues
    # The device rules read the layout (one GPU per rank for NCCL): checked once it is valid.
    devices, issues = resolve_devices(values, defaults, layout["nproc_per_node"])
    if issues:
        return None, issues
    fields = {**layout, **devices}
    for key in KEYS:
        if key.kind != VALUE:
            continue
        if key.name == "env":
            # A scenario's variables add to the top level's (and win), rather than replace them all.
            fields["env"] = tuple(sorted({**defaults["env"], **values.get("env", {})}.items()))
        elif key.name in values:
            fields[key.name] = values[key.name]
        else:
            fields[key.name] = defaults.get(key.name, key.default)  # not every key may be a default
    return fields, []
