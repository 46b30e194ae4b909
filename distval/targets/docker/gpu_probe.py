"""What the GPU probe is: the short container that asks the Engine for every GPU and counts the NVIDIA devices
it sees (distval/targets/docker/engine.py ``gpu_support``), once per image under test and run. Declared here once, for the
Engine that creates it and for the plan that shows it (distval/cli/plan_render.py).

It runs the image under test on purpose (it probes what that image gets), so it gets less than the ranks:
no capability, no new privileges, no network, no mounts, a few processes (issue 19).
"""

from __future__ import annotations

from typing import Any

COUNT_DEVICES = "import glob; print(len(glob.glob('/dev/nvidia[0-9]*')))"
# Every GPU (count -1), the form the NVIDIA runtime answers; an Engine without it refuses the request.
DEVICE_REQUESTS = [{"Driver": "", "Count": -1, "Capabilities": [["gpu"]], "Options": {}}]
# Listing /dev needs no capability. No read-only root: the NVIDIA runtime's hook mounts its files into it.
SETTINGS: dict[str, Any] = {
    "network_mode": "none",
    "cap_drop": ["ALL"],
    "security_opt": ["no-new-privileges"],
    "pids_limit": 64,
}


def entrypoint(python: str) -> list[str]:
    return [python, "-c", COUNT_DEVICES]


def create_kwargs(image: str, python: str, name: str) -> dict[str, Any]:
    """docker-py's ``containers.create`` arguments for the probe; the caller adds the labels."""
    return {
        "image": image,
        "entrypoint": entrypoint(python),
        "name": name,
        "device_requests": DEVICE_REQUESTS,
        "detach": True,
        **SETTINGS,
    }


def description() -> dict[str, Any]:
    """The GPU probe as the plan shows it (text and JSON): deterministic, whatever the Engine."""
    return {
        "role": "gpu-probe",
        "name": "distval-<run id>-gpu-probe-<8 hex digits of the image>",
        "when": "once per image and run, before a scenario that needs GPUs; removed once it exits",
        "image": "<the image under test>",
        "image_origin": "the image under test on purpose: it probes which GPUs that image gets",
        "entrypoint": entrypoint("<the scenario's python>"),
        "user": "<the image's own>",
        "privileges": {
            "cap_drop": SETTINGS["cap_drop"],
            "security_opt": SETTINGS["security_opt"],
            "pids_limit": SETTINGS["pids_limit"],
            "device_requests": "every GPU",
        },
        "mounts": [],
        "network": SETTINGS["network_mode"],
        "environment": [],
    }
