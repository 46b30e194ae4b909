# The loader of tests/suite/test_suite_on_torch.py's "image implementations": what a broken fixture image does
# with its one sitecustomize.py, chosen per scenario. distval's local target gives every node the same host
# PYTHONPATH (after the suite's own directory), so a scenario cannot get a directory of its own; it names its
# implementation's files in its environment instead (SUITE_IMPLEMENTATION, separated by os.pathsep), and this
# runs each in order, as that image's sitecustomize.py would run. Unset (the distval process itself, a scenario
# on the plain torch): nothing happens. Runs on the ranks' Python (3.9 and later).
import os
import runpy
import sys

for _path in filter(None, os.environ.get("SUITE_IMPLEMENTATION", "").split(os.pathsep)):
    runpy.run_path(_path, run_name="suite_implementation")
    # Seen in the scenario's logs: the test proves that what it meant to run did run.
    print(f"suite implementation loaded: {os.path.basename(_path)}", file=sys.stderr, flush=True)
