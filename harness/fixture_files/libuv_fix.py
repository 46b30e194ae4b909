
# --- appended by distval's fixture recipe (distval-fixtures/torch:2.6-debian) ---
# Debian builds torch without libuv, yet the TCPStores that torch.distributed.run creates (static,
# c10d and agent stores) ask for it and fail with "use_libuv was requested but PyTorch was build
# without libuv support" (pytorch#148283). Default use_libuv to the USE_LIBUV environment variable,
# which torch's own env:// path already reads; the image sets USE_LIBUV=0.
if is_available():
    import sys as _distval_sys

    _distval_BuiltinTCPStore = TCPStore

    class TCPStore(_distval_BuiltinTCPStore):  # type: ignore[no-redef]
        def __init__(self, *args, **kwargs):
            import os as _os

            kwargs.setdefault("use_libuv", _os.environ.get("USE_LIBUV", "1") == "1")
            super().__init__(*args, **kwargs)

    for _distval_module in list(_distval_sys.modules.values()):
        if getattr(_distval_module, "__name__", "").startswith("torch.distributed") and getattr(
            _distval_module, "TCPStore", None
        ) is _distval_BuiltinTCPStore:
            _distval_module.TCPStore = TCPStore
