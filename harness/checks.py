"""The harness's catalog of suite checks: names and arguments, used to validate configs strictly.

suite/checks.py registers the implementations under the same names; tests/test_catalog.py keeps the
two in step without importing torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class ArgSpec:
    kind: type
    default: object
    minimum: int | None
    description: str


@dataclass(frozen=True)
class CheckInfo:
    name: str
    description: str
    args: Mapping[str, ArgSpec]


CATALOG: Mapping[str, CheckInfo] = MappingProxyType(
    {
        "env": CheckInfo(
            name="env",
            description="torch and Python versions, torch.distributed and backend availability, CUDA devices",
            args=MappingProxyType({}),
        ),
        "all_reduce": CheckInfo(
            name="all_reduce",
            description="every rank contributes rank+1; every rank must see world*(world+1)/2",
            args=MappingProxyType(
                {
                    "numel": ArgSpec(
                        kind=int,
                        default=1,
                        minimum=1,
                        description="number of float32 elements reduced",
                    ),
                }
            ),
        ),
    }
)
