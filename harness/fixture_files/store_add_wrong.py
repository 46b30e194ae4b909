# sitecustomize.py of distval-fixtures/broken:store-add-wrong: in the workers (not the launcher), the
# key-value store's atomic add() counts one too many, as a store that double-applies an increment.
import os as _os

import torch.distributed as _dist

if _os.environ.get("RANK") is not None:
    _original_add = _dist.Store.add

    def _add_one_too_many(self, key, amount):
        return _original_add(self, key, amount + 1 if amount else amount)

    _dist.Store.add = _add_one_too_many
