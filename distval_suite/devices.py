"""Which device a rank's tensors live on, which backends need one, and when a missing device is a skip.

Standard library only (unit-tested on the host without torch); distval_suite.core applies it with torch.
"""

from __future__ import annotations

from typing import Optional

DEVICES = ("cpu", "cuda")
# torch 2.15 maps "nccl" to the torchcomms-based nccl2 and keeps the old ProcessGroupNCCL as
# "nccl-legacy"; earlier torch knows only "nccl".
NCCL_BACKENDS = ("nccl", "nccl-legacy")
BACKENDS = ("gloo", "mpi") + NCCL_BACKENDS


def is_nccl(backend: str) -> bool:
    return backend in NCCL_BACKENDS


def backend_family(backend: str) -> str:
    """The name torch.distributed's ``is_<family>_available()`` uses: nccl-legacy is NCCL too."""
    return "nccl" if is_nccl(backend) else backend


def device_kind(spec_device: Optional[str], backend: str) -> str:
    """Where tensors live: the spec's ``device``; absent, cuda for NCCL (it reduces CUDA tensors only),
    else cpu."""
    if spec_device:
        if spec_device not in DEVICES:
            raise ValueError("the spec's device must be one of %s; got %r" % (", ".join(DEVICES), spec_device))
        return spec_device
    return "cuda" if is_nccl(backend) else "cpu"


def local_device_index(local_rank: int, device_count: int) -> int:
    """The harness gives each container its own GPUs, visible as 0..k-1; LOCAL_RANK picks among them."""
    if device_count <= 0:
        raise ValueError("no CUDA device is visible (device_count %d)" % device_count)
    return local_rank % device_count


def no_device_reason(device_count: int, cuda_version: Optional[str], error: str = "") -> str:
    """The skip reason when tensors must live on a CUDA device and this container has none."""
    if cuda_version is None:
        seen = "this torch is a CPU build (torch.version.cuda is None)"
    else:
        seen = "no CUDA device is visible in this container (torch.cuda.device_count() = %d; CUDA %s build)" % (
            device_count,
            cuda_version,
        )
    return seen + (": %s" % error if error else "")
