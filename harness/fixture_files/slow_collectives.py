# sitecustomize.py of distval-fixtures/broken:slow-collectives: all_reduce, all_gather and broadcast
# give the right answer, 5 ms late on every call: an image as correct as the good one and much slower,
# which the bandwidth check's thresholds and a last-known-good baseline must catch.
import time as _time

import torch.distributed as _dist

DELAY_S = 0.005


def _slowed(original):
    def collective(*args, **kwargs):
        _time.sleep(DELAY_S)
        return original(*args, **kwargs)

    collective.__name__ = original.__name__
    collective.__doc__ = original.__doc__
    return collective


_dist.all_reduce = _slowed(_dist.all_reduce)
_dist.all_gather = _slowed(_dist.all_gather)
_dist.broadcast = _slowed(_dist.broadcast)
