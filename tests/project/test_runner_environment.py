"""The tests run the same on a laptop and on a CI runner: the runner's pipeline variables are not theirs."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.runner_environment import RUNNER_VARIABLES


def test_the_runners_pipeline_variables_reach_no_test_and_no_subprocess() -> None:
    """CI's run of this suite set $CI, and a test's image-less run got the sample-image refusal (exit 2)
    where it expected the Engine's absence (exit 3)."""
    assert set(RUNNER_VARIABLES) == {"CI", "GITHUB_STEP_SUMMARY"}
    assert not set(RUNNER_VARIABLES) & set(os.environ)
    seen = subprocess.run(
        [sys.executable, "-c", f"import os; print(sorted(set({list(RUNNER_VARIABLES)!r}) & set(os.environ)))"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert seen.stdout.strip() == "[]"
