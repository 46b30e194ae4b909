# sitecustomize.py of distval-fixtures/broken:reconfigure-unsupported: the gloo group says it cannot
# be reconfigured, as a torch built without the (experimental) reconfigure support would.
import torch.distributed.distributed_c10d as _c10d

_c10d._supports_reconfigure = lambda group=None: False
