# sitecustomize.py of distval-fixtures/broken:store-get-corrupt: in the workers (not the launcher),
# every value read back from the distributed key-value store comes back with its last byte changed.
import os as _os

import torch.distributed as _dist

if _os.environ.get("RANK") is not None:
    _original_get = _dist.Store.get

    def _corrupt_get(self, key):
        value = _original_get(self, key)
        return value[:-1] + bytes([(value[-1] + 1) % 256]) if value else value

    _dist.Store.get = _corrupt_get
