# A correct torch.distributed whose asynchronous collectives are lazy: with async_op=True the call returns a work
# handle at once and the collective runs when wait() is called. That is the documented contract (an async
# result is defined only after wait(); NCCL and gloo finish in the background, at any time before it), so
# the collectives check must pass; a suite that reads an async result before wait() sees the input
# unchanged and fails. Every rank calls wait() right after the call, so the ranks still meet in order.
import torch.distributed as _dist


class _LazyWork:
    def __init__(self, run):
        self._run = run
        self._done = False

    def wait(self, timeout=None):
        if not self._done:
            self._done = True
            self._run()
        return True

    def is_completed(self):
        return self._done

    def is_success(self):
        return self._done


def _lazy(original):
    def call(*args, async_op=False, **kwargs):
        if async_op:
            return _LazyWork(lambda: original(*args, **kwargs))
        return original(*args, **kwargs)

    return call


# Every collective that takes async_op, in the torch versions that have it.
for _name in (
    "all_reduce",
    "broadcast",
    "reduce",
    "all_gather",
    "all_gather_into_tensor",
    "_all_gather_base",
    "gather",
    "scatter",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "all_to_all",
    "all_to_all_single",
):
    if hasattr(_dist, _name):
        setattr(_dist, _name, _lazy(getattr(_dist, _name)))
