"""The test runner's own pipeline variables, taken out of the tests' environment.

distval reads ``$CI`` (no sample image by accident, tests/cli/test_sample_image.py) and
``$GITHUB_STEP_SUMMARY`` (the step summary, tests/project/test_front_door.py). A test that starts distval
must behave the same on a laptop and on a CI runner: on CI ``$CI`` turned a test's image-less run into
the sample-image refusal (exit 2 where the test expected 3), and a runner's step summary would collect
every test's Markdown. conftest.py imports this module first, so the variables are gone before any test
or subprocess sees them; the tests of those variables set them with ``monkeypatch``. What the runner had
stays readable here (``IN_CI``: test_fuzz.py replays the same examples on CI).
"""

from __future__ import annotations

import os

from distval.reports.markdown import STEP_SUMMARY_ENV
from distval.session.sample import CI_ENV

# The variables distval itself reads from a pipeline; a test that checks them sets its own value.
RUNNER_VARIABLES = (CI_ENV, STEP_SUMMARY_ENV)

TAKEN: dict[str, str] = {name: os.environ.pop(name) for name in RUNNER_VARIABLES if name in os.environ}

IN_CI = bool(TAKEN.get(CI_ENV, "").strip())
