"""The names of distval's own images (the fixture images distval/images/recipes.py describes and
distval/images/build.py builds): a leaf, so that what only names one of them (the fault plan, the reaper's
container, the node Engines) need not import how they are built."""

from __future__ import annotations

# The tags of the broken fixtures start with it: images for distval's own tests, which `distval fixtures list`
# shows only with --all.
BROKEN_PREFIX = "distval-fixtures/broken:"


# A separate Docker Engine in a container (Docker-in-Docker), for tests across several Engines
# (distval/targets/engines/dind.py starts it with the capabilities and mounts it needs; --privileged fails on hosts without
# CAP_SYS_RESOURCE). openssl makes the TLS node's certificates inside the node; iproute2 lets distval read
# which interface holds a route (distval/targets/engines/hosts.py).
NODE_ENGINE = "distval-fixtures/node:bookworm-docker"
# A Slurm node for the tests of the slurm target (tests/slurm_cluster.py starts a controller and compute nodes of it):
# Debian bookworm's Slurm 22.05 and munge, runc for Slurm's OCI containers (srun --container), skopeo and umoci to
# make an OCI bundle of the image under test (docker save -> skopeo copy -> umoci unpack).
SLURM_NODE = "distval-fixtures/slurm-node:bookworm"
TORCH_PYPI = "distval-fixtures/torch:2.15-pypi"
HARNESS_BASE = "distval-fixtures/harness-base:trixie"
# Partition and slow faults run iptables and tc in a container of this image that shares the victim's
# network namespace (network_mode container:<id>, NET_ADMIN): the image under test needs no tool.
FAULT_HELPER = "distval-fixtures/fault-helper:bookworm"
# The run's reaper (distval/targets/docker/reaper.py) runs in this image, never in the image under test: it holds the Engine's
# socket as root, so what runs there must be distval's code on Debian's Python, nothing an image under test
# could plant (a sitecustomize or hmac.py on its PYTHONPATH, a python3 that is a script, LD_PRELOAD). Debian's
# python3 (bookworm's 3.11): python3-minimal lacks json, http.client and concurrent.futures, which the
# program uses. The program is baked in (so the recipe hash covers it) and run with a fixed entrypoint in
# isolated mode (-I: no PYTHON* variables, no user site, not the script's directory on sys.path; -S: no site).
REAPER_BASE = "distval-fixtures/reaper-base:bookworm"
REAPER_IMAGE = "distval-fixtures/reaper:bookworm"
REAPER_PROGRAM = "/opt/distval/reaper_daemon.py"
REAPER_ENTRYPOINT = ("/usr/bin/python3.11", "-I", "-S", "-u", REAPER_PROGRAM)
