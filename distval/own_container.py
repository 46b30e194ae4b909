"""Which container distval itself runs in (the harness image), read from its own mounts: the reaper joins that
container's networks (distval/targets/docker/reaper.py), and the helper base ``harness`` is its image
(distval/images/build.py)."""

from __future__ import annotations

import re

# A container's own files (/etc/hostname, ...) are mounted from /var/lib/docker/containers/<id>/.
_CONTAINER_MOUNT = re.compile(r"/containers/([0-9a-f]{64})/")


def own_container(mountinfo: str = "/proc/self/mountinfo") -> str | None:
    """The id of the container distval runs in (the harness image), from its mounts; None on a host."""
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as handle:
            found = _CONTAINER_MOUNT.search(handle.read())
    except OSError:
        return None
    return found.group(1) if found else None
