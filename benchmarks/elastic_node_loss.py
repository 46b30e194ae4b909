"""What torchrun does when a whole node dies under ``--nnodes=MIN:MAX`` (c10d, max_restarts): do the
survivors re-rendezvous at the smaller size and finish? Measured per fixture image, printed as one line each.

Three containers of the image on an internal network (labelled like distval's, removed at the end), each
running torchrun ``--nnodes=2:3`` with a worker that all-reduces once a second for ITERATIONS seconds.
Once every worker has reported, node 2's container (not node 0, which hosts the c10d store: pytorch#168242)
is killed, and the survivors' exit codes, their last attempt's world size and the time to finish are read.

    python benchmarks/elastic_node_loss.py [--image IMG ...]
"""

from __future__ import annotations

import argparse
import io
import re
import secrets
import sys
import tarfile
import time
from typing import Any

import docker

from distval.labels import LABEL_MANAGED, LABEL_RUN

IMAGES = ("distval-fixtures/torch:1.13-debian", "distval-fixtures/torch:2.6-debian", "distval-fixtures/torch:2.15-pypi")
ITERATIONS = 40
LIMIT_S = 600.0

WORKER = r"""
import os, sys, time, torch, torch.distributed as dist
from datetime import timedelta
dist.init_process_group("gloo", timeout=timedelta(seconds=20))
attempt, world, rank = os.environ.get("TORCHELASTIC_RESTART_COUNT"), dist.get_world_size(), dist.get_rank()
for i in range(int(sys.argv[1])):
    t = torch.ones(1)
    dist.all_reduce(t)
    print("distval-elastic attempt=%s world=%d rank=%d iteration=%d" % (attempt, world, rank, i), flush=True)
    time.sleep(1)
dist.destroy_process_group()
print("distval-elastic done attempt=%s world=%d rank=%d" % (attempt, world, rank), flush=True)
"""


def tar_of(name: str, text: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        data = text.encode()
        info = tarfile.TarInfo(name)
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def measure(client: Any, image: str) -> str:
    run_id = "e" + secrets.token_hex(4)
    labels = {LABEL_MANAGED: "true", LABEL_RUN: run_id}
    network = client.networks.create(f"distval-{run_id}", internal=True, labels=labels)
    containers = []
    try:
        for node in range(3):
            name = f"distval-{run_id}-n{node}"
            argv = [
                "-m", "torch.distributed.run", "--nnodes=2:3", "--nproc_per_node=1", "--rdzv_backend=c10d",
                f"--rdzv_endpoint=distval-{run_id}-n0:29400", f"--rdzv_id={run_id}", "--max_restarts=3",
                "--rdzv_conf=join_timeout=300,last_call_timeout=10,close_timeout=10,read_timeout=300", "/w.py", str(ITERATIONS),
            ]  # fmt: skip
            container = client.containers.create(
                image, argv, entrypoint="python3", name=name, hostname=name, network=network.name, labels=labels,
                environment={"PYTHONUNBUFFERED": "1", "USE_LIBUV": "0"},
            )  # fmt: skip
            container.put_archive("/", tar_of("w.py", WORKER))
            containers.append(container)
        started = time.monotonic()
        for container in containers:
            container.start()
        # Every node's worker has all-reduced in the first attempt: kill node 2.
        while time.monotonic() - started < LIMIT_S:
            logs = [c.logs().decode("utf-8", "replace") for c in containers]
            if all(re.search(r"attempt=0 world=3 rank=\d+ iteration=2\b", text) for text in logs):
                break
            for container in containers:
                container.reload()
            if all(container.status == "exited" for container in containers):
                tails = " | ".join(logs[node].strip().splitlines()[-1][:200] for node in range(3) if logs[node].strip())
                return f"{image}: every node exited before the kill (first rendezvous failed): {tails}"
            time.sleep(1)
        else:
            return f"{image}: the first attempt never ran on all three nodes within {LIMIT_S:g} s"
        killed_at = time.monotonic()
        containers[2].kill()
        codes: dict[int, int | None] = {}
        while time.monotonic() - started < LIMIT_S and len(codes) < 2:
            for node in (0, 1):
                containers[node].reload()
                if containers[node].status == "exited":
                    codes[node] = containers[node].attrs["State"]["ExitCode"]
            time.sleep(1)
        took_s = time.monotonic() - killed_at
        found = []
        for node in (0, 1):
            text = containers[node].logs().decode("utf-8", "replace")
            runs = re.findall(r"distval-elastic (?:done )?attempt=(\d+) world=(\d+)", text)
            done = re.findall(r"distval-elastic done attempt=(\d+) world=(\d+)", text)
            last = runs[-1] if runs else ("-", "-")
            error = next((line.strip() for line in text.splitlines() if "Error" in line), "")
            found.append(
                f"node {node}: exit {codes.get(node, 'still running')}, last attempt {last[0]} at world {last[1]}, "
                f"{'finished' if done else 'did not finish'}" + (f" (first error: {error[:160]})" if error and not done else "")
            )
        return f"{image}: node 2 killed; after {took_s:.0f} s: " + "; ".join(found)
    finally:
        for container in containers:
            container.remove(force=True, v=True)
        network.remove()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", action="append", help="an image (repeatable); default: the three good fixtures")
    args = parser.parse_args(argv)
    client = docker.from_env()
    for image in args.image or IMAGES:
        print(measure(client, image), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
