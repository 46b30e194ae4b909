"""The names of the files a scenario's ranks leave in their results directory, besides distval's own.

distval_suite/ writes them inside the image and cannot import the harness, so the names are spelled there again;
torchrun writes ``ERROR_FILE`` where the plan's ``TORCHELASTIC_ERROR_FILE`` points (distval/plan/model.py). A leaf
module: the planner (which names the error file) and the diagnosis (which reads them all) both import it.
"""

from __future__ import annotations

import re

STACKS = re.compile(r"^stacks-rank-(\d+)\.txt$")
FLIGHT_RECORDER = re.compile(r"^flight-recorder-rank-(\d+)\.json$")
LAUNCH = re.compile(r"^launch-rank-(\d+)\.json$")
RECORDS = re.compile(r"^rank-(\d+)\.jsonl$")
REQUEST_FILE = "diagnose.request"
ERROR_FILE = "torchelastic-error.json"  # TORCHELASTIC_ERROR_FILE, in the results directory
