"""Whether a package's bytecode (.pyc) still matches its sources: standard library only.

A timestamp-based .pyc (PEP 552, flags 0) holds its source's mtime and size; when an image build
changes the sources' mtimes afterwards (mmdebstrap's or BuildKit's mtime clamping, SOURCE_DATE_EPOCH,
``touch``, a COPY of a venv) or drops __pycache__, every .pyc is stale or missing and Python compiles
every module again on import: measured on torch 2.15, ``import torch`` 9.9 s instead of 2.4 s, in every
fresh container, on every rank of a job. distval_suite.image runs this on torch's package; everything that
reads headers and decides lives here, so it is unit-tested on the host without torch.

Only the 16-byte header of each .pyc is read (and, for a checked hash-based .pyc, its source), so
torch's ~2,500 modules take a fraction of a second.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from typing import Dict, List, NamedTuple, Optional

from distval_suite.records import started_at_epoch, stat_fields

FRESH = "fresh"
STALE = "stale"
MISSING = "missing"
UNREADABLE = "unreadable"
# Fresh now, but written after this launch started: its import found it stale or missing and compiled
# the module again (only where the directory is writable and writing bytecode is allowed).
RECOMPILED = "recompiled"
STATES = (FRESH, STALE, MISSING, UNREADABLE, RECOMPILED)
# What Python cannot use as it is in the image: each costs a compile of that module.
NOT_FRESH = (STALE, MISSING, UNREADABLE, RECOMPILED)

HEADER_BYTES = 16
_FLAG_HASH_BASED = 0b01
_FLAG_CHECK_SOURCE = 0b10
EXAMPLES_KEPT = 3


class PycState(NamedTuple):
    """One module's bytecode: its state and, for a stale one, why (with both mtimes where they differ)."""

    source: str  # the .py path (in a survey's examples: relative to the package's parent, torch/nn/functional.py)
    state: str
    reason: str = ""
    source_mtime: Optional[int] = None  # the source's mtime as a .pyc header holds it (whole seconds)
    header_mtime: Optional[int] = None  # the mtime in the .pyc header


def classify(source_path: str, written_since: Optional[float] = None) -> PycState:
    """The state of ``source_path``'s .pyc (where importlib.util.cache_from_source puts it for this
    interpreter: its cache tag, optimization level and PYTHONPYCACHEPREFIX).

    ``written_since`` (seconds since the epoch): a .pyc whose header matches but whose file was written
    at or after this time counts as RECOMPILED, not FRESH (it was stale or missing before this launch).
    """
    try:
        pyc_path = importlib.util.cache_from_source(source_path)
    except (NotImplementedError, ValueError) as exc:  # no cache tag (sys.implementation.cache_tag is None)
        return PycState(source_path, UNREADABLE, "no .pyc path: %s" % exc)
    try:
        with open(pyc_path, "rb") as pyc:
            header = pyc.read(HEADER_BYTES)
            pyc_written = os.fstat(pyc.fileno()).st_mtime
    except FileNotFoundError:
        return PycState(source_path, MISSING, "no %s" % os.path.basename(pyc_path))
    except OSError as exc:
        return PycState(source_path, UNREADABLE, "cannot read %s: %s" % (os.path.basename(pyc_path), exc.strerror or exc))
    if len(header) < HEADER_BYTES:
        return PycState(source_path, UNREADABLE, "its header is %d bytes, not %d" % (len(header), HEADER_BYTES))
    if header[:4] != importlib.util.MAGIC_NUMBER:
        # Python recompiles it as it would a stale one ("bad magic number").
        return PycState(
            source_path,
            STALE,
            "compiled by another Python (magic number %s, this Python's %s)"
            % (header[:4].hex(), importlib.util.MAGIC_NUMBER.hex()),
        )
    flags = int.from_bytes(header[4:8], "little")
    if flags & ~(_FLAG_HASH_BASED | _FLAG_CHECK_SOURCE):
        return PycState(source_path, UNREADABLE, "its header has invalid flags %#x" % flags)
    if flags & _FLAG_HASH_BASED:
        if flags & _FLAG_CHECK_SOURCE:
            try:
                with open(source_path, "rb") as source:
                    expected = importlib.util.source_hash(source.read())
            except OSError as exc:
                return PycState(source_path, UNREADABLE, "cannot read the source: %s" % (exc.strerror or exc))
            if header[8:16] != expected:
                return PycState(source_path, STALE, "its source's hash differs from the one in the .pyc header")
        # An unchecked hash-based .pyc is used as it is (unless --check-hash-based-pycs always).
    else:  # timestamp-based; importlib ignores check_source without hash_based, and so does this
        try:
            stat = os.stat(source_path)
        except OSError as exc:
            return PycState(source_path, UNREADABLE, "cannot stat the source: %s" % (exc.strerror or exc))
        # The comparison importlib makes: whole seconds and size, each modulo 2**32.
        source_mtime = int(stat.st_mtime) & 0xFFFFFFFF
        header_mtime = int.from_bytes(header[8:12], "little")
        if header_mtime != source_mtime:
            return PycState(source_path, STALE, "mtime", source_mtime, header_mtime)
        if int.from_bytes(header[12:16], "little") != stat.st_size & 0xFFFFFFFF:
            return PycState(source_path, STALE, "its source's size differs from the one in the .pyc header")
    if written_since is not None and pyc_written >= written_since:
        return PycState(source_path, RECOMPILED, "written %s, after this launch started" % _utc(pyc_written))
    return PycState(source_path, FRESH)


class Survey(NamedTuple):
    directory: str
    counts: Dict[str, int]  # every state in STATES -> modules in it
    examples: Dict[str, List[PycState]]  # the first few modules of each state other than fresh
    mtime_stale: int  # stale ones whose header holds another mtime than the source's
    elapsed_s: float

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def not_fresh(self) -> int:
        return sum(self.counts[state] for state in NOT_FRESH)


def survey(directory: str, written_since: Optional[float] = None) -> Survey:
    """Every .py file under ``directory`` (a package), classified; __pycache__ itself is not walked."""
    started = time.monotonic()
    counts = {state: 0 for state in STATES}
    examples: Dict[str, List[PycState]] = {state: [] for state in NOT_FRESH}
    mtime_stale = 0
    base = os.path.dirname(os.path.abspath(directory))
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(root, name)
            state = classify(path, written_since)
            counts[state.state] += 1
            if state.state == STALE and state.reason == "mtime":
                mtime_stale += 1
            if state.state in examples and len(examples[state.state]) < EXAMPLES_KEPT:
                examples[state.state].append(state._replace(source=os.path.relpath(path, base)))
    return Survey(directory, counts, examples, mtime_stale, time.monotonic() - started)


def _utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds))


def describe(state: PycState) -> str:
    """One module's state in words, e.g. ``torch/x.py (stale: source mtime ..., .pyc header says ...)``."""
    if state.state == STALE and state.reason == "mtime" and state.source_mtime is not None and state.header_mtime is not None:
        why = "source mtime %s, its .pyc header says %s" % (_utc(state.source_mtime), _utc(state.header_mtime))
    else:
        why = state.reason
    return "%s (%s%s)" % (state.source, state.state, ": " + why if why else "")


def _breakdown(result: Survey) -> str:
    parts = []
    if result.counts[STALE]:
        parts.append(
            "%d stale (%s)"
            % (
                result.counts[STALE],
                "their source's mtime differs" if result.mtime_stale == result.counts[STALE] else "the header does not match",
            )
        )
    if result.counts[MISSING]:
        parts.append("%d missing" % result.counts[MISSING])
    if result.counts[RECOMPILED]:
        parts.append("%d recompiled by this launch's own imports (stale or missing in the image)" % result.counts[RECOMPILED])
    if result.counts[UNREADABLE]:
        parts.append("%d unreadable" % result.counts[UNREADABLE])
    return ", ".join(parts)


def _example(result: Survey) -> str:
    # A stale one with both mtimes says most: what the image's build did to the sources.
    for state in (STALE, MISSING, RECOMPILED, UNREADABLE):
        if result.examples[state]:
            return describe(result.examples[state][0])
    return ""


def verdict(result: Survey, package: str, max_stale_fraction: float, unwritable: Optional[str] = None) -> Optional[str]:
    """None when at most ``max_stale_fraction`` of the package's modules are not fresh; otherwise the
    failure message: what was expected, what was seen, one example, what it costs.

    ``unwritable``: why Python cannot write the .pyc files it compiles here (PYTHONDONTWRITEBYTECODE,
    a read-only directory), or None. Where it can, only the first process of a fresh container pays.
    """
    if result.total == 0:
        return "expected %s's Python sources under %s; found no .py file" % (package, result.directory)
    if result.not_fresh <= max_stale_fraction * result.total:
        return None
    cost = "every fresh container compiles %s's Python again on import" % package
    if unwritable:
        cost += " (here every process does: %s)" % unwritable
    return (
        "expected %s's bytecode to match its sources (at most %g%% stale or missing); %d of %d .pyc files are not: %s; "
        "e.g. %s: %s"
        % (package, max_stale_fraction * 100, result.not_fresh, result.total, _breakdown(result), _example(result), cost)
    )


def unwritable_reason(directory: str) -> Optional[str]:
    """Why Python cannot write ``directory``'s .pyc files in this process, or None."""
    reasons = []
    # importlib consults sys.dont_write_bytecode (set from -B or PYTHONDONTWRITEBYTECODE at startup).
    if sys.dont_write_bytecode:
        set_by = "PYTHONDONTWRITEBYTECODE is set" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "sys.dont_write_bytecode"
        reasons.append(set_by)
    cache_dir = os.path.join(directory, "__pycache__")
    if not os.access(cache_dir if os.path.isdir(cache_dir) else directory, os.W_OK):
        reasons.append("%s is not writable" % (cache_dir if os.path.isdir(cache_dir) else directory))
    return ", ".join(reasons) or None


def summary(result: Survey, package: str) -> str:
    """The passing message: ``2475 of 2476 .pyc fresh (1 recompiled ...: torch/distributed/__init__.py)``."""
    text = "%d of %d %s .pyc fresh" % (result.counts[FRESH], result.total, package)
    if result.not_fresh:
        text += " (%s: %s)" % (_breakdown(result), _example(result))
    return text + " in %.2f s" % result.elapsed_s


def details(result: Survey) -> Dict[str, object]:
    """The survey as JSON-able facts for the record."""
    return {
        "directory": result.directory,
        "modules": result.total,
        "counts": dict(result.counts),
        "examples": {state: [describe(s) for s in found] for state, found in result.examples.items() if found},
        "elapsed_s": round(result.elapsed_s, 3),
        "dont_write_bytecode": bool(sys.dont_write_bytecode),
        "flags_dont_write_bytecode": bool(sys.flags.dont_write_bytecode),
        "pycache_prefix": getattr(sys, "pycache_prefix", None),
        "optimize": sys.flags.optimize,
    }


# -- when this launch started ------------------------------------------------------------------------
# How a launcher that imports torch before starting the workers shows on its command line.
LAUNCHER_WORDS = ("torch.distributed.run", "torch.distributed.launch", "torchrun")


def launch_started_at() -> Optional[float]:
    """When this launch started, in seconds since the epoch: the parent's start when it is a torch
    launcher on the same interpreter (torchrun's agent imports torch before it starts the workers,
    which are its children), else this process's own. None where /proc cannot say (then no .pyc
    counts as recompiled by this launch). Older ancestors are never taken: a long-lived Python that
    started a launcher-less run (a test runner, a notebook) may predate a torch installed since."""
    try:
        pid = os.getpid()
        parent = int(stat_fields(pid)[1])  # field 4: ppid
        if parent > 0 and _is_launcher(parent, os.readlink("/proc/self/exe")):
            pid = parent
        return started_at_epoch(pid)
    except (OSError, ValueError, IndexError):
        return None


def _is_launcher(pid: int, executable: str) -> bool:
    try:
        if os.readlink("/proc/%d/exe" % pid) != executable:
            return False
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            words = handle.read().decode("utf-8", "replace").split("\0")
    except OSError:  # another user's process
        return False
    # "-m torch.distributed.run" or a torchrun script, after at most a few interpreter options.
    return any(os.path.basename(word) in LAUNCHER_WORDS for word in words[1:5])
