# sitecustomize.py of distval-fixtures/broken:allreduce-noop: torch.distributed.all_reduce returns
# without communicating, so every rank keeps its own contribution. Only all_reduce is broken.
import torch.distributed as _dist


def _all_reduce_that_does_nothing(tensor, op=None, group=None, async_op=False):
    return None


_dist.all_reduce = _all_reduce_that_does_nothing
