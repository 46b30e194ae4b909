"""distval's in-image check suite.

Runs inside the image under test, launched by ``python -m torch.distributed.run ... -m distval_suite.main``.
It imports only the standard library and torch (torch >= 1.13, Python >= 3.9): never harness, yaml
or docker. This package file itself imports nothing, so the harness can locate the suite on the host
without torch.
"""
