# sitecustomize.py of distval-fixtures/broken:timeout-ignored: process-group timeouts are dropped:
# new_group() ignores its timeout argument (so gloo's 30-minute default applies) and set_timeout(),
# where it exists, does nothing.
import torch.distributed as _dist

_original_new_group = _dist.new_group


def _new_group_without_timeout(*args, **kwargs):
    kwargs.pop("timeout", None)
    return _original_new_group(*args, **kwargs)


_dist.new_group = _new_group_without_timeout
if hasattr(_dist, "set_timeout"):
    _dist.set_timeout = lambda timeout, group=None: None
