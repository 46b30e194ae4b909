"""The environment an image bakes in, checked against the names its own libraries read.

A variable set in the image's config (``ENV``), in ``/etc/nccl.conf`` or ``~/.nccl.conf`` decides what every rank
on every cluster does, and nothing reports a misspelt one: ``CCL_NET_GDR_LEVEL`` (podman-hpc #136) or
``NCCL_SOCKET_IFNAM`` is read by nobody, silently. A baked ``NCCL_GRAPH_FILE`` or topology file halved all-reduce
bandwidth and looked like a bad node (nccl #1240, azurehpc-health-checks #142). This module is torch-free (the
``environment`` check in distval_suite/image.py calls it):

- the image's variables: the container's first process's environment (``/proc/1/environ``: the image's ``ENV``
  and what distval passed, nothing a launcher added) less the names distval set, and NCCL's two config files;
- the names the image reads: every ``NCCL_*``, ``GLOO_*``, ``TORCH_*`` … string in the read-only data of the
  libraries the rank mapped (torch, c10, gloo, NCCL, MPI, UCC, OpenMP, the CUDA runtime) and in torch's Python
  files that read the environment, so the list follows each version instead of being typed by hand;
- a variable nobody reads whose name is one or two edits from one that is read fails with the likely intended
  name; a variable that changes which algorithm, protocol, transport or topology a collective takes is called
  out (a failure, or a warning where the scenario says so); every listed variable is in the details.

Python 3.9 and the standard library only.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import re
from typing import Dict, Iterable, List, NamedTuple, Optional, Set, Tuple, Union

from distval_suite import elf, libraries

FAMILIES = ("NCCL", "GLOO", "TORCH", "TORCHELASTIC", "PYTORCH", "OMP", "KMP", "MKL", "CUDA", "CUDNN", "CUBLAS")
PREFIXES = tuple(family + "_" for family in FAMILIES)
# Listed beside them: what decides which libraries load (distval_suite/libraries.py judges the result).
LOADER_NAMES = ("LD_LIBRARY_PATH", "LD_PRELOAD")
NAME = re.compile(rb"(?<![A-Za-z0-9_])(?:%s)_[A-Z0-9_]*[A-Z0-9](?![A-Za-z0-9_])" % "|".join(FAMILIES).encode())
_PREFIX_BYTES = tuple(prefix.encode() for prefix in PREFIXES)
# How much of a file one search covers: each bytes.find holds the GIL, so a survey running beside the checks
# (distval_suite/survey.py) must not hold it for long (1 MiB: about a millisecond).
_CHUNK = 1 << 20
# The libraries whose strings name what they read (by file name): torch's, the backends', OpenMP's, CUDA's runtime.
READERS = re.compile(r"lib(torch|c10|gloo|nccl|mpi|ucc|gomp|iomp|cudart)")
# Variables that choose a collective's algorithm, protocol, transport, channels or topology: baked into an image,
# they decide for every cluster it will run on (NCCL's docs, "Environment Variables"; nccl #1240).
HARMFUL = (
    "NCCL_ALGO",
    "NCCL_PROTO",
    "NCCL_GRAPH_FILE",
    "NCCL_TOPO_FILE",
    "NCCL_P2P_DISABLE",
    "NCCL_P2P_LEVEL",
    "NCCL_SHM_DISABLE",
    "NCCL_IB_DISABLE",
    "NCCL_NET",
    "NCCL_NET_GDR_LEVEL",
    "NCCL_MIN_NCHANNELS",
    "NCCL_MAX_NCHANNELS",
    "NCCL_CROSS_NIC",
    "NCCL_NVLS_ENABLE",
    "NCCL_COLLNET_ENABLE",
    "GLOO_DEVICE_TRANSPORT",
)
# Variables whose value names a file NCCL reads: the file is described (size, sha256) in the details.
FILE_VARIABLES = ("NCCL_TOPO_FILE", "NCCL_GRAPH_FILE")
CONFIG_FILES = ("/etc/nccl.conf", "~/.nccl.conf")
MAX_VALUE = 200  # characters of a value kept in the details
_PYTHON_READS = (b"environ", b"getenv")


class Variable(NamedTuple):
    name: str
    value: str
    source: str  # "image" (its ENV), or the config file's path


class Finding(NamedTuple):
    kind: str  # "misspelt", "harmful", "unread"
    name: str
    source: str
    text: str


def environ_of(path: str) -> Dict[str, str]:
    """A process's environment from /proc/<pid>/environ (undecodable bytes replaced)."""
    with open(path, "rb") as f:
        raw = f.read(1 << 22)
    found: Dict[str, str] = {}
    for entry in raw.split(b"\0"):
        name, sep, value = entry.partition(b"=")
        if sep and name:
            found[name.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return found


def config_file(path: str) -> Dict[str, str]:
    """NCCL's config file: ``NAME=VALUE`` lines, ``#`` comments; {} when absent or unreadable."""
    found: Dict[str, str] = {}
    path = os.path.expanduser(path)
    if not os.path.isfile(path):  # absent, or not a regular file (a FIFO would block the read)
        return found
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f.read(1 << 20).splitlines():
                line = line.strip()
                if line and not line.startswith("#") and "=" in line:
                    name, _, value = line.partition("=")
                    found[name.strip()] = value.strip()
    except OSError:
        pass
    return found


def image_variables(first_process: Dict[str, str], set_by_distval: Iterable[str]) -> List[Variable]:
    """The image's variables (the first process's, less distval's own) and the config files' entries. A name in
    ``set_by_distval`` that ends with '*' is a prefix: the variables a scheduler sets in every step (Slurm's SLURM_*),
    whose names distval cannot list in advance."""
    ours = set(set_by_distval)
    prefixes = tuple(name[:-1] for name in ours if name.endswith("*"))
    found = [
        Variable(name, value, "image")
        for name, value in sorted(first_process.items())
        if name not in ours and not (prefixes and name.startswith(prefixes))
    ]
    for path in CONFIG_FILES:
        found += [Variable(name, value, path) for name, value in sorted(config_file(path).items())]
    return found


def listed(variable: Variable) -> bool:
    """Whether the report lists it: one of the families, a loader variable, or from a config file."""
    return variable.source != "image" or variable.name.startswith(PREFIXES) or variable.name in LOADER_NAMES


def names_in_libraries(paths: Iterable[str]) -> Tuple[Set[str], List[str]]:
    """The family names in the read-only data of the reader libraries among ``paths``; and which were read."""
    names: Set[str] = set()
    scanned: List[str] = []
    for path in sorted(set(paths)):
        if not READERS.match(os.path.basename(path)):
            continue
        found = names_in_library(path)
        if found is None:
            continue
        names |= found
        scanned.append(path)
    return names, scanned


def names_in_library(path: str) -> Optional[Set[str]]:
    """The family names in one library's read-only data; None when it cannot be read."""
    try:
        with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            names: Set[str] = set()
            for offset, size in elf.read_only_data(data):
                names |= names_between(data, offset, offset + size)
            return names
    except (OSError, ValueError):
        return None


def names_between(data: Union[bytes, "mmap.mmap"], start: int, end: int) -> Set[str]:
    """Exactly the names ``NAME.findall(data, start, end)`` gives, found about 5 times faster (measured on the
    2.6 fixture's libtorch_cpu: 45 MB of read-only data): the regex, tried at every byte, is only tried where a
    family's prefix occurs (``bytes.find``, a fast substring search). Nothing is lost: every match begins with
    a prefix, and no match begins inside another (the character before it would be one of the match's, which
    the lookbehind refuses), so the matches at the prefixes' occurrences are findall's matches."""
    names: Set[str] = set()
    for chunk in range(start, end, _CHUNK):
        limit = min(chunk + _CHUNK, end)
        for prefix in _PREFIX_BYTES:
            # Occurrences that begin in this chunk (one may reach into the next).
            at = data.find(prefix, chunk, min(limit + len(prefix) - 1, end))
            while at != -1:
                match = NAME.match(data, at, end)
                if match is not None:
                    names.add(match.group().decode())
                at = data.find(prefix, at + 1, min(limit + len(prefix) - 1, end))
    return names


def unread_libraries(scanned: Iterable[str]) -> Optional[str]:
    """Why the names the image reads are not known (None: they are): none of torch's own libraries (libtorch*,
    libc10*), which every rank maps, could be read. Without them a misspelt name cannot be told from a correct
    one, and a pass would claim what was never judged."""
    if any(libraries.TORCH_OWN.match(os.path.basename(path)) for path in scanned):
        return None
    return "none of torch's own libraries (libtorch*, libc10*) could be read for the names it reads (read: %s)" % (
        ", ".join(os.path.basename(p) for p in sorted(scanned)[:5]) or "nothing"
    )


def names_in_python(package_dir: str) -> Set[str]:
    """The family names in a package's Python files that read the environment."""
    names: Set[str] = set()
    for directory, _dirs, files in os.walk(package_dir):
        for file in files:
            if not file.endswith(".py") or not os.path.isfile(os.path.join(directory, file)):
                continue
            try:
                with open(os.path.join(directory, file), "rb") as f:
                    text = f.read(1 << 22)
            except OSError:
                continue
            if any(word in text for word in _PYTHON_READS):
                names |= names_between(text, 0, len(text))
    return names


def edits(a: str, b: str, limit: int) -> int:
    """Levenshtein distance of a and b, or limit + 1 once it exceeds ``limit``."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    previous = list(range(len(b) + 1))
    for i, char in enumerate(a, 1):
        current = [i]
        for j, other in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char != other)))
        if min(current) > limit:
            return limit + 1
        previous = current
    return previous[-1]


def intended(name: str, known: Iterable[str]) -> Optional[str]:
    """The read name ``name`` most likely meant: one or two edits away (one, for a name outside the families,
    which are the common ones: a dropped letter of the prefix), the nearest, if only one is that near."""
    if len(name) < 6:
        return None
    limit = 2 if name.startswith(PREFIXES) else 1
    best: Dict[int, List[str]] = {}
    for candidate in known:
        distance = edits(name, candidate, limit)
        if 0 < distance <= limit:
            best.setdefault(distance, []).append(candidate)
    for distance in sorted(best):
        return sorted(best[distance])[0] if len(best[distance]) == 1 else None
    return None


def assess(variables: List[Variable], known: Set[str], harmful: Iterable[str], allow: Iterable[str] = ()) -> List[Finding]:
    """What is wrong with the image's variables, given the names its libraries read."""
    findings: List[Finding] = []
    accepted, dangerous = set(allow), set(harmful)
    for variable in variables:
        if variable.name in accepted:
            continue
        if variable.name in dangerous:
            findings.append(
                Finding(
                    "harmful",
                    variable.name,
                    variable.source,
                    "%s=%s (%s) decides the collectives' algorithm, protocol, transport or topology on every cluster"
                    % (variable.name, variable.value[:MAX_VALUE], variable.source),
                )
            )
            continue
        if variable.name in known:
            continue
        meant = intended(variable.name, known)
        if meant is not None:
            findings.append(
                Finding(
                    "misspelt",
                    variable.name,
                    variable.source,
                    "%s (%s) is read by nothing in this image; did you mean %s?" % (variable.name, variable.source, meant),
                )
            )
        elif variable.name.startswith(PREFIXES):
            findings.append(
                Finding(
                    "unread",
                    variable.name,
                    variable.source,
                    "%s (%s) is read by nothing this image loaded" % (variable.name, variable.source),
                )
            )
    return findings


def describe_file(path: str) -> Dict[str, object]:
    """A file a variable names: whether it exists, its size and sha256 (first 64 MiB)."""
    facts: Dict[str, object] = {"path": path[:MAX_VALUE], "exists": os.path.isfile(path)}
    if facts["exists"]:
        try:
            digest = hashlib.sha256()
            with open(path, "rb") as f:
                digest.update(f.read(64 << 20))
            facts.update(size=os.path.getsize(path), sha256=digest.hexdigest())
        except OSError as exc:
            facts["error"] = str(exc)[:MAX_VALUE]
    return facts
