# sitecustomize.py of distval-fixtures/broken:allreduce-hangs: torch.distributed.all_reduce never
# returns and ignores the process group's timeout, like a collective stuck in a driver.
import time as _time

import torch.distributed as _dist


def _all_reduce_that_never_returns(tensor, op=None, group=None, async_op=False):
    while True:
        _time.sleep(3600)


_dist.all_reduce = _all_reduce_that_never_returns
