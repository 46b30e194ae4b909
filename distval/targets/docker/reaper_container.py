"""What the run's reaper container is (distval/targets/docker/reaper.py): its image, entrypoint, user, privileges, mounts and
network, in one place for the Engine that creates it (distval/targets/docker/engine.py ``start_reaper``) and for the plan
that shows it (distval/cli/plan_render.py), so that what ``distval plan`` says is what runs.

The reaper is the one container distval starts beside the ranks with the Engine's socket: as root (the
socket's owner), so it runs distval's own reaper image, never the image under test (issue 19).
"""

from __future__ import annotations

from typing import Any

from distval.image_names import REAPER_ENTRYPOINT, REAPER_IMAGE

# Where the Engine's socket appears inside the reaper (distval/targets/docker/reaper_daemon.py's default).
SOCKET_INSIDE = "/var/run/docker.sock"
# Everything but the per-run pieces (name, labels, environment, the socket's path on the host, the network):
# root for the socket, nothing else allowed.
SETTINGS: dict[str, Any] = {
    "user": "0:0",
    "working_dir": "/",
    "cap_drop": ["ALL"],
    "read_only": True,
    "mem_limit": "64m",
    "auto_remove": True,
}
ENVIRONMENT = (
    "DISTVAL_REAPER_RUN",
    "DISTVAL_REAPER_KEY",
    "DISTVAL_REAPER_GRACE_S",
    "DISTVAL_REAPER_FIRST_S",
    "DISTVAL_REAPER_PORT",
    "DISTVAL_REAPER_BIND",
)
NETWORK = (
    "the host's network, listening on a loopback port distval picks, where distval shares the local Engine's "
    "network; else a network of its own with its port published on 127.0.0.1 (0.0.0.0 for a remote Engine), "
    "joined to the networks of distval's own container when distval runs in one"
)


def description() -> dict[str, Any]:
    """The reaper as the plan shows it (text and JSON): deterministic, whatever the Engine."""
    return {
        "role": "reaper",
        "name": "distval-<run id>-reaper",
        "when": "once per run and Docker Engine, before any container of the run starts",
        "image": REAPER_IMAGE,
        "image_origin": "distval's own fixture image (Debian's python3 and distval/targets/docker/reaper_daemon.py), "
        "built by `distval fixtures build`; never the image under test",
        "entrypoint": list(REAPER_ENTRYPOINT),
        "user": SETTINGS["user"],
        "privileges": {
            "cap_drop": SETTINGS["cap_drop"],
            "read_only": SETTINGS["read_only"],
            "mem_limit": SETTINGS["mem_limit"],
        },
        "mounts": [
            {
                "source": "the Engine's socket (DOCKER_HOST's unix:// path, else /var/run/docker.sock)",
                "target": SOCKET_INSIDE,
                "mode": "rw",
            }
        ],
        "network": NETWORK,
        "environment": list(ENVIRONMENT),
    }
