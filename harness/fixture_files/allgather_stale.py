# sitecustomize.py of distval-fixtures/broken:allgather-stale: all_gather returns without writing its
# output tensors, so the caller reads whatever they held before (stale data).
import torch.distributed as _dist


def _all_gather_that_writes_nothing(tensor_list, tensor, group=None, async_op=False):
    return None


_dist.all_gather = _all_gather_that_writes_nothing
