# sitecustomize.py of distval-fixtures/broken:sampler-raises-rank1: on rank 1 only, iterating a
# DistributedSampler raises, as a custom sampler with a bug in one rank's branch would: rank 1 leaves
# the training loop while rank 0 waits for it in DDP's gradient all_reduce.
import torch.utils.data.distributed as _distributed

_original_iter = _distributed.DistributedSampler.__iter__


def _iter_that_fails_on_rank_one(self):
    if self.rank == 1:
        raise IndexError("distval-broken: DistributedSampler has no shard for rank 1")
    return _original_iter(self)


_distributed.DistributedSampler.__iter__ = _iter_that_fails_on_rank_one
