"""What an unreachable Engine's one line tells the user to do (distval/targets/docker/engine_advice.py)."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

from distval.targets.docker.engine_advice import advice, os_error_in


def wrapped(error: OSError) -> Exception:
    """The shape docker-py raises: an exception whose argument holds another whose argument is the OSError."""
    inner = ConnectionError("Connection aborted.", error)
    outer = RuntimeError("Error while fetching server API version")
    outer.__context__ = inner
    return outer


@pytest.fixture(autouse=True)
def no_context(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("DOCKER_HOST", "DOCKER_CONTEXT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "no-config"))


def test_a_missing_socket_says_start_docker_or_set_docker_host_or_use_host_mode() -> None:
    text = advice(wrapped(FileNotFoundError(errno.ENOENT, "No such file or directory")), "unix:///var/run/docker.sock")
    assert "start Docker" in text and "DOCKER_HOST" in text and "--local" in text


def test_a_socket_this_user_may_not_use_says_so() -> None:
    text = advice(wrapped(PermissionError(errno.EACCES, "Permission denied")), "unix:///var/run/docker.sock")
    assert "docker group" in text


def test_a_refused_tcp_address_says_check_the_address() -> None:
    text = advice(wrapped(ConnectionRefusedError(errno.ECONNREFUSED, "refused")), "tcp://10.0.0.9:2376")
    assert "nothing answers at that address" in text


def test_nothing_known_gives_no_advice() -> None:
    assert advice(RuntimeError("something else"), "unix:///var/run/docker.sock") == ""
    assert os_error_in(RuntimeError("no OSError anywhere", ("nested", 1))) is None


def test_a_cli_context_that_docker_py_does_not_read_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"currentContext": "remote-builder"}))
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    text = advice(wrapped(FileNotFoundError(errno.ENOENT, "gone")), "unix:///var/run/docker.sock")
    assert "context 'remote-builder'" in text and "docker context inspect remote-builder" in text
    monkeypatch.setenv("DOCKER_HOST", "unix:///var/run/docker.sock")  # given explicitly: the context does not apply
    assert "context" not in advice(wrapped(FileNotFoundError(errno.ENOENT, "gone")), "unix:///var/run/docker.sock")


def test_a_self_referencing_chain_ends() -> None:
    looped = RuntimeError("a")
    looped.__context__ = looped
    assert os_error_in(looped) is None
