# sitecustomize.py of distval-fixtures/broken:launch-wrong-world-size: the worker with RANK=1 sees
# WORLD_SIZE=3 in its environment, as if the launcher had miscounted. The launcher itself (no RANK)
# is untouched.
import os as _os

if _os.environ.get("RANK") == "1":
    _os.environ["WORLD_SIZE"] = "3"
