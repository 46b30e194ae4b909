# all_reduce with ReduceOp.AVG a fifth too large: the SUM of inputs pre-multiplied by 1.2 / world (NCCL's
# ncclAvg pre-multiplies by 1 / world; here the factor is wrong). Every element is 20 % off: far outside the
# rounding the check allows AVG (distval_suite/collectives.py), inside a tolerance widened to 50 %.
# gloo has AVG only from torch 2.8 on, and the suite never calls it on an older torch (its version gate,
# distval_suite/support.py), so this torch also says it is 2.8.0; AVG itself never reaches gloo.
import torch as _torch
import torch.distributed as _dist
from torch.torch_version import TorchVersion as _TorchVersion

_torch.__version__ = _TorchVersion("2.8.0")
_FACTOR = 1.2
_original_all_reduce = _dist.all_reduce


def _all_reduce_avg_off(tensor, op=_dist.ReduceOp.SUM, group=None, async_op=False):
    if op == _dist.ReduceOp.AVG:
        tensor.mul_(_FACTOR / _dist.get_world_size(group))
        op = _dist.ReduceOp.SUM
    return _original_all_reduce(tensor, op=op, group=group, async_op=async_op)


_dist.all_reduce = _all_reduce_avg_off
