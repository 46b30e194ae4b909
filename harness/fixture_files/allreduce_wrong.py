# sitecustomize.py of distval-fixtures/broken:allreduce-wrong: all_reduce communicates, then adds 1
# to every element of its result: wrong values, not a missing operation.
import torch.distributed as _dist

_original_all_reduce = _dist.all_reduce


def _all_reduce_off_by_one(tensor, op=_dist.ReduceOp.SUM, group=None, async_op=False):
    work = _original_all_reduce(tensor, op=op, group=group, async_op=False)
    tensor.add_(1)
    return work


_dist.all_reduce = _all_reduce_off_by_one
