"""What the beside-helper is: the short-lived container that signals the worker processes of a paused rank
container (distval/targets/docker/processes.py ``signal_workers_beside``; a paused container runs no exec) from its PID
namespace. Its image, entrypoint, user, privileges, mounts and network are declared here once, for the Engine
that creates it (distval/targets/docker/engine.py ``run_beside``) and for the plan that shows it (distval/cli/plan_render.py).

It runs distval's own image (the reaper's: Debian's python3, ensured on every Engine before a run), never the
image under test: an image's PYTHONPATH, LD_PRELOAD or python would otherwise run as root beside the ranks
with more than the ranks have (issue 19).
"""

from __future__ import annotations

from typing import Any

from distval.image_names import REAPER_ENTRYPOINT, REAPER_IMAGE
from distval.labels import LABEL_NODE, LABEL_SCENARIO
from distval.targets.docker.processes import WORKER_SCRIPT

IMAGE = REAPER_IMAGE
# The reaper image's python3; -I: no PYTHON* variables, no user site, no script directory on the path; -S: no
# site module. The worker script is fixed: only its arguments (the signal, the ranks) vary per call.
PYTHON = REAPER_ENTRYPOINT[0]
ENTRYPOINT = (PYTHON, "-I", "-S", "-c", WORKER_SCRIPT)
# What the script needs, measured (Linux 6.x, docker-default AppArmor): root and
#   SYS_PTRACE: /proc/<pid>/environ (the rank's RANK) opens only for a reader whose permitted capabilities
#     include the process's (a rank run as root has Docker's default set) or who has SYS_PTRACE;
#   DAC_READ_SEARCH: that file is 0400, owned by the rank's user (a non-root scenario.user);
#   KILL: signalling processes of another user.
# Nothing else: no network, no mounts, a read-only root file system, no new privileges, a few processes.
# The ranks lack SYS_PTRACE and DAC_READ_SEARCH, so they cannot reach into this container either.
CAP_ADD = ("DAC_READ_SEARCH", "KILL", "SYS_PTRACE")
SETTINGS: dict[str, Any] = {
    "user": "0:0",
    "working_dir": "/",
    "network_mode": "none",
    "cap_drop": ["ALL"],
    "cap_add": list(CAP_ADD),
    "read_only": True,
    "security_opt": ["no-new-privileges"],
    "mem_limit": "64m",
    "pids_limit": 16,
    "environment": {},
}


# The rank container's labels the helper takes (the scenario's cleanup then removes it if the Engine call cannot):
# only distval's own, which the Engine sets on every rank container. Its other labels may come from the image
# under test (a LABEL distval.role=reaper would exempt the helper from the reaper).
COPIED_LABELS = (LABEL_SCENARIO, LABEL_NODE)


def labels_of(rank_labels: dict[str, str]) -> dict[str, str]:
    return {key: rank_labels[key] for key in COPIED_LABELS if key in rank_labels}


def create_kwargs(name: str, container_id: str, arguments: list[str]) -> dict[str, Any]:
    """docker-py's ``containers.create`` arguments for the beside-helper ``name`` of the rank container
    ``container_id``, running the worker script with ``arguments``; the caller adds the labels."""
    return {
        "image": IMAGE,
        "entrypoint": list(ENTRYPOINT),
        "command": list(arguments),
        "name": name,
        "pid_mode": f"container:{container_id}",
        "detach": True,
        **SETTINGS,
    }


def description() -> dict[str, Any]:
    """The beside-helper as the plan shows it (text and JSON): deterministic, whatever the Engine."""
    return {
        "role": "beside-helper",
        "name": "<rank container>-beside-<6 hex digits>",
        "when": "when the diagnosis before a kill finds a rank container paused (a freeze fault): once per "
        "such container, removed once it exits",
        "image": IMAGE,
        "image_origin": "distval's own fixture image (the reaper's: Debian's python3), built by "
        "`distval fixtures build`; never the image under test",
        "entrypoint": [*ENTRYPOINT[:-1], "<distval/targets/docker/processes.py WORKER_SCRIPT>"],
        "command": ["<signal number>", "all"],
        "user": SETTINGS["user"],
        "privileges": {
            "cap_drop": SETTINGS["cap_drop"],
            "cap_add": SETTINGS["cap_add"],
            "read_only": SETTINGS["read_only"],
            "security_opt": SETTINGS["security_opt"],
            "mem_limit": SETTINGS["mem_limit"],
            "pids_limit": SETTINGS["pids_limit"],
        },
        "pid_mode": "container:<rank container>",
        "mounts": [],
        "network": SETTINGS["network_mode"],
        "environment": [],
    }
