"""What ``distval doctor`` learns of a Python's torch: ``python -m distval_suite.image_probe`` prints one JSON line.

In an image it runs as the ranks run (the suite copied in, no network, no privileges, a deadline); with
``--local`` as the local Python. The facts are the ``env`` check's (distval_suite.image.image_facts), so the
doctor reports what a run would see. A torch that cannot be imported is a finding, not a crash: the line then
says ``"torch": false`` with the error. The harness validates every value before it shows one.
Standard library only until torch is imported; Python >= 3.9.
"""

import json
import platform
import sys
from typing import Any, Callable, Dict, Optional

# The error's text is the image's: kept short here, escaped by the harness.
ERROR_MAX_CHARS = 500

facts_of: Optional[Callable[[], Dict[str, Any]]]
try:
    from distval_suite.image import image_facts as facts_of
except Exception as exc:  # noqa: BLE001 - torch missing or broken, whatever it raises: that is the finding
    facts_of = None
    IMPORT_ERROR = ("%s: %s" % (type(exc).__name__, exc))[:ERROR_MAX_CHARS]

KEYS = ("torch_version", "distributed_available", "gloo_available", "nccl_available", "cuda_version")


def probe() -> Dict[str, Any]:
    found: Dict[str, Any] = {"python_version": platform.python_version()}
    if facts_of is None:
        found.update({"torch": False, "error": IMPORT_ERROR})
        return found
    facts = facts_of()
    found["torch"] = True
    found.update({key: facts[key] for key in KEYS})
    return found


def main() -> int:
    print(json.dumps(probe(), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
