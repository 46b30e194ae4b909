"""What to do when the Docker Engine cannot be reached: one clause appended to the one-line error (issue 22:
environment errors say what to do, not only a Python repr).

The advice is chosen from the OS error inside docker-py's exception chain (requests wraps urllib3, which wraps
the socket's OSError in its arguments), never decides a verdict, and is empty where nothing is known. docker-py
reads only DOCKER_HOST (docker.from_env), not the Docker CLI's current context: where a context other
than the default is in use and DOCKER_HOST is unset, the advice says how to hand its address to distval.
"""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path

from distval import strict_json

CHAIN_DEPTH_MAX = 8  # how deep the exception chain is searched: docker-py's is 3-4 deep
CONFIG_BYTES_MAX = 1 << 20  # ~/.docker/config.json read at most this far (it is the user's, but still bounded)
WITHOUT_DOCKER = "or run without Docker: distval run --local (local processes)"


def os_error_in(exc: BaseException) -> OSError | None:
    """The first OSError in the exception, its arguments, causes and contexts (breadth-first, bounded)."""
    queue: list[object] = [exc]
    seen: set[int] = set()
    for _ in range(CHAIN_DEPTH_MAX * 4):
        if not queue:
            return None
        item = queue.pop(0)
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, OSError) and isinstance(item.errno, int):  # OSError("text", x) puts "text" in errno
            return item
        if isinstance(item, BaseException):
            queue += [*item.args, item.__cause__, item.__context__]
    return None


def _docker_config_dir(home: Path | None) -> Path:
    return Path(os.environ.get("DOCKER_CONFIG") or (home or Path.home()) / ".docker")


def _json_file(path: Path) -> object:
    """A JSON file of the Docker CLI's configuration (bounded), None where it is missing or unreadable."""
    try:
        with open(path, "rb") as handle:
            return strict_json.loads(handle.read(CONFIG_BYTES_MAX))
    except (OSError, ValueError):
        return None


def current_context(home: Path | None = None) -> str | None:
    """The Docker CLI's current context when it is not the default one and DOCKER_HOST does not override it."""
    if os.environ.get("DOCKER_HOST") or os.environ.get("DOCKER_CONTEXT") in ("", "default"):
        return None
    named = os.environ.get("DOCKER_CONTEXT")
    if named:
        return named
    data = _json_file(_docker_config_dir(home) / "config.json")
    context = data.get("currentContext") if isinstance(data, dict) else None
    return context if isinstance(context, str) and context not in ("", "default") else None


def context_endpoint(name: str, home: Path | None = None) -> str | None:
    """The Engine address of a Docker CLI context, from the file the CLI keeps it in
    (``contexts/meta/<sha256 of the name>/meta.json``); None where it cannot be read."""
    digest = hashlib.sha256(name.encode()).hexdigest()
    data = _json_file(_docker_config_dir(home) / "contexts" / "meta" / digest / "meta.json")
    endpoints = data.get("Endpoints") if isinstance(data, dict) else None
    docker_endpoint = endpoints.get("docker") if isinstance(endpoints, dict) else None
    host = docker_endpoint.get("Host") if isinstance(docker_endpoint, dict) else None
    return host if isinstance(host, str) and host else None


def export_line(context: str) -> str:
    """The shell line that hands a context's address to distval (docker-py reads DOCKER_HOST only)."""
    return f"export DOCKER_HOST=\"$(docker context inspect {context} --format '{{{{.Endpoints.docker.Host}}}}')\""


def what_to_do(exc: BaseException, where: str, home: Path | None = None) -> str:
    """What to do about an Engine that did not answer at ``where``, or '' where nothing useful is known."""
    context = current_context(home)
    if context is not None:
        return f"the Docker CLI uses context {context!r}, which docker-py does not read: {export_line(context)}"
    error = os_error_in(exc)
    code = error.errno if error is not None else None
    if code in (errno.ENOENT, errno.ECONNREFUSED) and where.startswith("unix://"):
        return (
            "no Engine listens on that socket: start Docker (sudo systemctl start docker, or sudo service docker "
            f"start), or set DOCKER_HOST to a running Engine's address, {WITHOUT_DOCKER}"
        )
    if code in (errno.EACCES, errno.EPERM):
        return "this user may not use the Engine's socket: run as root or as a member of the docker group"
    if code in (errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.ETIMEDOUT):
        return (
            f"nothing answers at that address: check DOCKER_HOST (or --hosts) and that the Engine listens there, {WITHOUT_DOCKER}"
        )
    return ""


def advice(exc: BaseException, where: str, home: Path | None = None) -> str:
    """'; <what to do>' for an Engine that did not answer at ``where``, or '' where nothing useful is known."""
    todo = what_to_do(exc, where, home)
    return f"; {todo}" if todo else ""
