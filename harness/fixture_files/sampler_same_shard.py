# sitecustomize.py of distval-fixtures/broken:sampler-same-shard: DistributedSampler hands every rank
# rank 0's shard (the classic "every worker trains on the same data" bug).
import torch.utils.data.distributed as _distributed

_original_init = _distributed.DistributedSampler.__init__


def _init_as_rank_zero(self, *args, **kwargs):
    _original_init(self, *args, **kwargs)
    self.rank = 0


_distributed.DistributedSampler.__init__ = _init_as_rank_zero
