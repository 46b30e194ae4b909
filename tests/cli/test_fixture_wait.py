"""A run that waits for another fixture builder says so on stderr even with --quiet: --quiet silences progress,
not a block (a release engineer saw a silent `distval run --quiet` for the 7 minutes a `distval fixtures build`
in another terminal held the lock)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

import distval.targets.docker.target
from distval.cli.main import main
from tests.report_helpers import RUN_ID

WAIT = "fixtures: another process (pid 4242) is building fixture images; waiting for it (/cache/fixtures.lock)"


def test_a_wait_for_the_fixture_builders_lock_is_said_with_quiet(
    fake_docker: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    Say = Callable[[str], None]

    def waits(engine: Any, images: Sequence[str], log: Say, helpers: Any, blocked: Say) -> None:
        log("fixture building: progress, silent with --quiet")
        blocked(WAIT)

    monkeypatch.setattr(distval.targets.docker.target, "ensure_images", waits)
    main(["run", str(fake_docker), "--run-id", RUN_ID, "--quiet", "--json", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert f"distval: {WAIT}" in err.splitlines()
    assert "progress, silent" not in err
