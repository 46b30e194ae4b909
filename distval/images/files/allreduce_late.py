# sitecustomize.py of distval-fixtures/broken:allreduce-late-200ms and of its twin broken:allreduce-late-0ms: every
# torch.distributed.all_reduce gives the right answer, ALLREDUCE_DELAY_MS milliseconds late: a transport with a
# fixed cost per call, whatever its size. No check's answer changes, so only a figure can tell it from its twin,
# the same layer with 0 ms (the same file and the same wrapper on every call). The default config has no busbw
# figure, only each check's duration: 40 ms (Linux's shortest delayed ACK) made its all_reduce parts 1.67x slower
# (90% interval 1.13..2.46x) at a load of 11-20 and was missed, as 50 % and 1 s past the pairs' noise require;
# 200 ms is several times any part's duration. The delay comes before the call, so an async_op=True call's work is
# returned as the backend made it.
import os as _os
import time as _time

import torch.distributed as _dist

DELAY_S = float(_os.environ.get("ALLREDUCE_DELAY_MS", "200")) / 1000.0


def _late(original):
    def all_reduce(*args, **kwargs):
        _time.sleep(DELAY_S)
        return original(*args, **kwargs)

    all_reduce.__name__ = original.__name__
    all_reduce.__doc__ = original.__doc__
    return all_reduce


_dist.all_reduce = _late(_dist.all_reduce)
