# sitecustomize.py of distval-fixtures/broken:ddp-no-broadcast-rank1: on rank 1 only,
# DistributedDataParallel does not take rank 0's parameters and buffers from its initial broadcast: rank
# 1 trains from its own initial weights. It still takes part in the broadcast, so the ranks' collectives
# stay in step, as when a rank's copy of the received state is lost.
import torch
import torch.nn.parallel.distributed as _ddp_module

_original_sync = _ddp_module._sync_module_states


def _sync_ignored_on_rank_one(module, process_group, *args, **kwargs):
    if process_group.rank() != 1:
        return _original_sync(module, process_group, *args, **kwargs)
    own = [tensor.detach().clone() for tensor in list(module.parameters()) + list(module.buffers())]
    _original_sync(module, process_group, *args, **kwargs)
    with torch.no_grad():
        for tensor, saved in zip(list(module.parameters()) + list(module.buffers()), own):
            tensor.copy_(saved)


_ddp_module._sync_module_states = _sync_ignored_on_rank_one
