# sitecustomize.py of distval-fixtures/broken:ddp-no-grad-sync: DistributedDataParallel behaves as if
# always inside no_sync(): gradients are never all-reduced, so the ranks' models drift apart.
import torch.nn.parallel as _parallel

_DDP = _parallel.DistributedDataParallel
_original_forward = _DDP.forward


def _forward_without_grad_sync(self, *inputs, **kwargs):
    self.require_backward_grad_sync = False
    return _original_forward(self, *inputs, **kwargs)


_DDP.forward = _forward_without_grad_sync
