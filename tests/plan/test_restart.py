"""The restart and diagnosis keys in the plan, without Docker: what each key puts on the launcher's command
line and into the environment, their defaults, and one-line errors for bad values."""

from __future__ import annotations

from pathlib import Path

import pytest

from distval.config import load_config
from distval.errors import ConfigError
from distval.targets.engines.planning import plan_run

CROSS = """scenarios:
  - {{topology: cross-container, world_size: 2, rendezvous: {rdzv}, checks: [env]{extra}}}
"""


def plan_of(tmp_path: Path, rdzv: str = "c10d", extra: str = "", top: str = "") -> tuple[tuple[str, ...], dict[str, str]]:
    config = tmp_path / "c.yaml"
    config.write_text(top + CROSS.format(rdzv=rdzv, extra=extra))
    (plan,) = plan_run(load_config(config), "r1").scenarios
    node = plan.containers[0]
    return node.argv, dict(node.env)


def test_defaults_no_restarts_a_short_join_and_the_diagnosis_environment(tmp_path: Path) -> None:
    argv, env = plan_of(tmp_path)
    assert "--max_restarts=0" in argv and "--rdzv_conf=join_timeout=60" in argv
    assert env["TORCHELASTIC_ERROR_FILE"] == "/distval/results/torchelastic-error.json"
    assert env["TORCH_FR_BUFFER_SIZE"] == "2000"
    assert "TORCH_DISTRIBUTED_DEBUG" not in env and "TORCH_DISABLE_SHARE_RDZV_TCP_STORE" not in env
    # static rendezvous has no c10d timeouts to pass; the error file and the recorder are everywhere.
    argv, env = plan_of(tmp_path, "static")
    assert not any(a.startswith("--rdzv_conf") for a in argv) and "TORCHELASTIC_ERROR_FILE" in env


def test_each_key_reaches_the_command_line_or_the_environment(tmp_path: Path) -> None:
    extra = (
        ", max_restarts: 2, rdzv_join_timeout_s: 30, rdzv_last_call_timeout_s: 5, rdzv_close_timeout_s: 7,"
        " rdzv_read_timeout_s: 120,"
        " share_rdzv_store: false, distributed_debug: detail"
    )
    argv, env = plan_of(tmp_path, extra=extra)
    assert "--max_restarts=2" in argv
    assert "--rdzv_conf=join_timeout=30,last_call_timeout=5,close_timeout=7,read_timeout=120" in argv
    assert env["TORCH_DISTRIBUTED_DEBUG"] == "DETAIL" and env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
    # A top-level default, and the scenario's own env wins over distval's.
    argv, env = plan_of(tmp_path, extra=", env: {TORCH_DISTRIBUTED_DEBUG: OFF}", top="distributed_debug: info\n")
    assert env["TORCH_DISTRIBUTED_DEBUG"] == "OFF"
    argv, env = plan_of(tmp_path, top="distributed_debug: info\n")
    assert env["TORCH_DISTRIBUTED_DEBUG"] == "INFO"


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (", max_restarts: -1", "max_restarts"),
        (", max_restarts: 11", "max_restarts"),
        (", rdzv_join_timeout_s: 0", "rdzv_join_timeout_s"),
        (", rdzv_join_timeout_s: 1.5", "rdzv_join_timeout_s"),
        (", distributed_debug: verbose", "one of off, info, detail"),
        (", share_rdzv_store: maybe", "true or false"),
    ],
)
def test_bad_values_are_one_line_errors(tmp_path: Path, extra: str, expected: str) -> None:
    with pytest.raises(ConfigError) as raised:
        plan_of(tmp_path, extra=extra)
    message = str(raised.value)
    assert "c.yaml:2" in message and expected in message and "\n" not in message.strip(), message
