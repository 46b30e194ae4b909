"""Device rules: where the ranks' tensors live (device) and how many GPUs each node's container gets
(gpus_per_node), from the backend and the layout.

NCCL runs on CUDA tensors only, and does not allow two ranks on one GPU; a rank on CUDA needs a GPU.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Any

from distval.config.layout import Issue

# torch 2.15 maps nccl to the torchcomms-based nccl2 and keeps the old one as nccl-legacy.
NCCL_BACKENDS = ("nccl", "nccl-legacy")
DEVICES = ("cpu", "cuda")
# The keys nproc_per_node follows from: an issue about it involves them all, so that a matrix axis
# among them makes a combination invalid rather than the whole entry.
_LAYOUT = frozenset(("topology", "world_size", "nodes", "nproc_per_node"))


def default_device(backend: str) -> str:
    return "cuda" if backend in NCCL_BACKENDS else "cpu"


def default_gpus(backend: str, device: str, nproc_per_node: int) -> int:
    """One GPU per rank for NCCL; one for the container's ranks to share on CUDA otherwise; none on CPU."""
    if backend in NCCL_BACKENDS:
        return nproc_per_node
    return 1 if device == "cuda" else 0


def _from(key: str, own: Set[str]) -> str:
    return "" if key in own else " (the top level's)"


def device_issues(backend: str, device: str, gpus: int | None, nproc_per_node: int | None, own: Set[str]) -> list[Issue]:
    """The device rules ``backend``, ``device`` and ``gpus`` break; ``own``: the keys the scenario itself gives
    (the rest came from the top level). None: not known (the top level alone knows no layout).
    """
    if backend in NCCL_BACKENDS and device != "cuda":
        return [
            Issue(
                "device",
                f"expected cuda with backend {backend} (NCCL runs on CUDA tensors); got {device!r}{_from('device', own)}",
                frozenset(("backend", "device")),
            )
        ]
    if gpus is None:
        return []
    if backend in NCCL_BACKENDS and nproc_per_node is not None and gpus < nproc_per_node:
        return [
            Issue(
                "gpus_per_node",
                f"expected an integer >= {nproc_per_node}: NCCL does not allow two ranks on one GPU: nproc_per_node "
                f"{nproc_per_node} needs gpus_per_node >= {nproc_per_node}; got {gpus}{_from('gpus_per_node', own)}",
                frozenset(("backend", "device", "gpus_per_node")) | _LAYOUT,
            )
        ]
    if device == "cuda" and gpus == 0:
        return [
            Issue(
                "gpus_per_node",
                f"expected an integer >= 1 with device cuda (the ranks' tensors live on a GPU); "
                f"got 0{_from('gpus_per_node', own)}",
                frozenset(("backend", "device", "gpus_per_node")),
            )
        ]
    return []


def resolve_devices(
    values: Mapping[str, Any], defaults: Mapping[str, Any], nproc_per_node: int | None
) -> tuple[dict[str, Any], list[Issue]]:
    """device and gpus_per_node of a scenario (or, with ``nproc_per_node`` None, of the top level alone).

    ``defaults`` holds every key's default under the top level's values. An issue whose keys all come
    from the top level is the top level's, reported there once: a scenario leaves it out.
    """
    backend: str = values.get("backend", defaults["backend"])
    device: str = values.get("device", defaults.get("device") or default_device(backend))
    gpus: int | None = values.get("gpus_per_node", defaults.get("gpus_per_node"))
    if gpus is None and nproc_per_node is not None:
        gpus = default_gpus(backend, device, nproc_per_node)
    own = set(values)
    issues = device_issues(backend, device, gpus, nproc_per_node, own)
    if nproc_per_node is not None:
        issues = [issue for issue in issues if issue.involved & (own | _LAYOUT)]
    return {"device": device, "gpus_per_node": gpus}, issues
