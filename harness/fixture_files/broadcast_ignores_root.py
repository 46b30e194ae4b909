# sitecustomize.py of distval-fixtures/broken:broadcast-ignores-root: broadcast always sends rank 0's
# tensor, whatever src the caller names.
import torch.distributed as _dist

_original_broadcast = _dist.broadcast


def _broadcast_from_rank_zero(tensor, src=None, group=None, async_op=False, **kwargs):
    return _original_broadcast(tensor, 0, group=group, async_op=async_op)


_dist.broadcast = _broadcast_from_rank_zero
