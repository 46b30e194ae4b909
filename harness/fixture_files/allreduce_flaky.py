# sitecustomize.py of distval-fixtures/broken:allreduce-flaky: all_reduce is unreliable. It always
# communicates (the ranks stay in step), but then every 4th call raises and the other even calls add
# 1 to their result: of calls 1..4, call 2 is wrong, call 4 raises, calls 1 and 3 are right.
import torch.distributed as _dist

_original_all_reduce = _dist.all_reduce
_calls = [0]


def _all_reduce_unreliable(tensor, op=_dist.ReduceOp.SUM, group=None, async_op=False):
    work = _original_all_reduce(tensor, op=op, group=group, async_op=False)
    _calls[0] += 1
    if _calls[0] % 4 == 0:
        raise RuntimeError("distval-broken: all_reduce call %d failed after communicating" % _calls[0])
    if _calls[0] % 2 == 0:
        tensor.add_(1)
    return work


_dist.all_reduce = _all_reduce_unreliable
