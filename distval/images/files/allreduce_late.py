# sitecustomize.py of distval-fixtures/broken:allreduce-late-40ms and of its twin broken:allreduce-late-0ms: every
# torch.distributed.all_reduce gives the right answer, ALLREDUCE_DELAY_MS milliseconds late: a transport with a
# fixed cost per call, whatever its size (40 ms is Linux's shortest delayed ACK, what a small message waits for
# where a transport lost TCP_NODELAY). No check's answer changes, so only a figure (a check's duration, a busbw)
# can tell it from its twin, which is the same layer with 0 ms: the same file and the same wrapper on every call.
# The delay comes before the call, so an async_op=True call's work is returned as the backend made it.
import os as _os
import time as _time

import torch.distributed as _dist

DELAY_S = float(_os.environ.get("ALLREDUCE_DELAY_MS", "40")) / 1000.0


def _late(original):
    def all_reduce(*args, **kwargs):
        _time.sleep(DELAY_S)
        return original(*args, **kwargs)

    all_reduce.__name__ = original.__name__
    all_reduce.__doc__ = original.__doc__
    return all_reduce


_dist.all_reduce = _late(_dist.all_reduce)
