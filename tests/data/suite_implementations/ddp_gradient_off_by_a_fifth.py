# DistributedDataParallel averages the ranks' gradients a fifth too large (a communication hook that
# all-reduces each bucket and divides by world / 1.2). The ranks agree and the parameters change; after the
# ddp_sync check's step (its model and data, 2 ranks) they are 15 to 21 % off the reference (computed with
# Debian's torch 1.13): far outside float32 rounding (distval_suite/ddp.py's tolerance), inside one widened to 50 %.
import torch.distributed as _dist
from torch.nn.parallel import DistributedDataParallel as _DDP

_FACTOR = 1.2
_original_init = _DDP.__init__


def _hook_off(state, bucket):
    scale = _FACTOR / _dist.get_world_size()
    future = _dist.all_reduce(bucket.buffer(), async_op=True).get_future()
    return future.then(lambda done: done.value()[0].mul_(scale))


def _init_off(self, *args, **kwargs):
    _original_init(self, *args, **kwargs)
    self.register_comm_hook(None, _hook_off)


_DDP.__init__ = _init_off
