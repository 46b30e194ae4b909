# sitecustomize.py of distval-fixtures/broken:gloo-unavailable: torch behaves as if built without
# gloo: is_gloo_available() is False and creating a gloo process group fails.
import torch.distributed as _dist
import torch.distributed.distributed_c10d as _c10d


class _NoGloo:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("ProcessGroupGloo is not available: this torch was built without gloo")


_dist.is_gloo_available = lambda: False
_c10d.is_gloo_available = _dist.is_gloo_available
_c10d._GLOO_AVAILABLE = False
_c10d.ProcessGroupGloo = _NoGloo
