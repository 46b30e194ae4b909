"""What every check shares: the context (rank, spec, the process group), the registry, outcomes.

A check is ``function(ctx, args)``. It returns ``(message, details)`` for one result named after the
check, or reports several results with ``ctx.report(part, status, message)`` and returns None. It
raises CheckFailed for a wrong answer, Skip for an unmet need; anything else is the check's error.
"""

from __future__ import annotations

import gc
import json
import os
import threading
import time
from datetime import timedelta
from typing import Any, Callable, Dict, List, Optional, Tuple, TypeVar

import torch
import torch.distributed as dist

from distval_suite.devices import device_kind, is_nccl, local_device_index, no_device_reason
from distval_suite.network import parse_subnets, select_socket_interfaces
from distval_suite.records import ERROR, FAILED, PASSED, SKIPPED, RecordWriter
from distval_suite.survey import Survey
from distval_suite.watchdog import Watchdog

T = TypeVar("T")

CheckOutcome = Optional[Tuple[str, Dict[str, Any]]]


class CheckFailed(Exception):
    """The check ran and saw a wrong answer; the message says what was expected and what was seen."""

    def __init__(self, message: str, details: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.details = details or {}


class Skip(Exception):
    """An unmet need (torch version, backend, world size): the result is skipped with this reason."""


class GroupSkipped(Skip):
    """The scenario's group cannot exist in this container for a measured reason (no CUDA device is
    visible, the backend name is unknown to this torch): process_group and every check needing the
    group are skipped with it, never failed."""


class ProcessGroupUnavailable(Exception):
    """init_process_group failed earlier; every later check that needs the group reports this."""


class PeerLeft(Exception):
    """Another rank ended the running check (failed or errored) before sharing what this rank waits for."""


class Abandoned(BaseException):
    """Raised in a check's thread after the rank gave up on it (another rank had left the check while this
    one was stuck in a collective): that thread must not report or communicate any more. A
    BaseException, so that no check's ``except Exception`` keeps it going."""


def torch_version() -> Tuple[int, int]:
    parts = torch.__version__.split("+")[0].split(".")
    return int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or 0)


def require_torch(major: int, minor: int, what: str) -> None:
    if torch_version() < (major, minor):
        raise Skip("%s needs torch >= %d.%d; image has %s" % (what, major, minor, torch.__version__))


def require_world(minimum: int, world: int, what: str) -> None:
    if world < minimum:
        raise Skip("%s needs at least %d ranks; the scenario has %d" % (what, minimum, world))


# How a rank polls the store for what the other ranks share (an exchange, the outcomes after each check): first after
# POLL_FIRST_S, the pause doubling up to POLL_MAX_S. Not a blocking wait on the key: the rank must also see a peer that
# left the check instead of sharing. The cap bounds what a rank oversleeps after the last peer shared: with 0.05 s up
# to 0.05 s per round, and a scenario makes ~40 rounds after the collectives' probes (each check's agreement, launch's
# and the DDP checks' exchanges, the collectives' probes and refusals); at 0.01 s a waiting rank makes at most ~100
# store calls a second (two small messages each).
POLL_FIRST_S = 0.001
POLL_MAX_S = 0.01


class Context:
    def __init__(self, spec: Dict[str, Any], writer: RecordWriter, watchdog: Watchdog) -> None:
        self.spec = spec
        self.writer = writer
        self.watchdog = watchdog
        self.backend: str = spec["backend"]
        self.collective_timeout_s = float(spec["collective_timeout_s"])
        self.check_timeout_s = float(spec["check_timeout_s"])
        # The harness states the layout; without a harness (docker compose) the launcher's word is taken.
        self.expected_world_size = int(spec.get("world_size") or os.environ["WORLD_SIZE"])
        self.expected_nproc_per_node = int(spec.get("nproc_per_node") or os.environ.get("LOCAL_WORLD_SIZE", "1"))
        self.rank = int(os.environ["RANK"])
        self.world_size = int(os.environ["WORLD_SIZE"])
        self.launcher: str = spec.get("launcher", "torchrun")
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        # "cpu" or "cuda": where every check's tensors live (the spec's device; NCCL implies cuda).
        self.device_kind = device_kind(spec.get("device"), self.backend)
        self.socket_interfaces = select_socket_interfaces(parse_subnets(spec.get("subnets")), os.environ)
        self.gloo_interface = self.socket_interfaces.get("GLOO_SOCKET_IFNAME")
        self._device: Optional[torch.device] = torch.device("cpu") if self.device_kind == "cpu" else None
        self._skip_reason: Optional[str] = None
        self.current_check = ""
        self.current_case = ""
        self.check_sequence = 0
        self.reported: List[str] = []
        self.worst_reported = PASSED
        # The rendezvous store of the first group, and how often the group was formed again after a
        # check that did not pass (0: the first group); reset_cause names the last such check.
        self._store: Optional[Any] = None
        # Why the rendezvous store stopped answering a coordination call (its host died): from then on the
        # ranks no longer coordinate through it, and each rank's checks end on their own errors.
        self.store_lost: Optional[str] = None
        self._generation = 0
        self.reset_cause = ""
        # The threads of checks this rank gave up on while they were blocked in a collective.
        self.abandoned_threads: List[threading.Thread] = []
        self._init_error: Optional[str] = None
        self._init_kwargs: Dict[str, Any] = {}
        self._reported_init = False
        self._exchanges = 0
        # The survey of the image's files started beside the checks (distval_suite/main.py), or None.
        self.survey: Optional[Survey] = None

    # -- results ---------------------------------------------------------------------------------
    def report(
        self, part: str, status: str, message: str, duration_s: float = 0.0, details: Optional[Dict[str, Any]] = None
    ) -> None:
        """A separate result of the current check, testcase ``<check>.<part>``."""
        self.still_running()
        case = "%s.%s" % (self.current_check, part)
        self.writer.write(self.current_check, case, status, message, duration_s, details)
        self.reported.append(case)
        if status in (FAILED, ERROR) and self.worst_reported != ERROR:
            self.worst_reported = status

    def step(self, part: str, variant: str = "") -> None:
        """Name what the check does now, so that a watchdog record says where it was. The check's
        time limit keeps running: check_timeout_s bounds the whole check, not each step."""
        self.still_running()
        self.current_case = "%s.%s" % (self.current_check, part) if part else self.current_check
        self.watchdog.step(self.current_case, variant)

    def still_running(self) -> None:
        """Raise Abandoned in the thread of a check this rank has given up on (see distval_suite.main)."""
        if threading.current_thread() in self.abandoned_threads:
            raise Abandoned()

    def adopt_thread(self) -> None:
        """A check runs in a thread of its own: give it this rank's CUDA device (the current device is
        per thread)."""
        if self._device is not None and self._device.type == "cuda":
            torch.cuda.set_device(self._device)

    def begin_check(self, sequence: int, name: str) -> None:
        """The check at position ``sequence`` of the run starts: its clock, its store keys."""
        self.check_sequence = sequence
        self.current_check = self.current_case = name
        self.reported = []
        self.worst_reported = PASSED
        self._exchanges = 0
        self.watchdog.start(name, self.check_timeout_s)

    def _key(self, kind: str, *parts: Any) -> str:
        # The position of the check, not a running count: a rank that left a check early has made
        # fewer exchanges than the others, and the next check's keys must still match across ranks.
        return "distval/%s/%s/%d/%s" % (kind, self.spec["scenario"], self.check_sequence, "/".join(map(str, parts)))

    def exchange(self, label: str, value: Any) -> List[Any]:
        """Every rank's ``value`` (JSON-able), in rank order, through the rendezvous store.

        Checks verify their collectives with this, not with another collective: a broken all_gather
        must fail the all_gather check, not every check that happens to compare results with it. A rank
        that left the check before sharing its value (its outcome is in the store) is reported at
        once as PeerLeft, instead of after the store's timeout.
        """
        self.still_running()
        store = self.store()
        key = self._key("exchange", self._exchanges, label)
        self._exchanges += 1
        _publish(store, "%s/%d" % (key, self.rank), json.dumps(value))
        values = []
        for r in range(self.world_size):
            if not self._await_key(store, "%s/%d" % (key, r), r, label):
                outcome = json.loads(store.get(self._key("outcome", r)))
                raise PeerLeft(
                    "rank %d left %s with %s before sharing %r: %s"
                    % (r, self.current_check, outcome["status"], label, outcome["message"])
                )
            values.append(json.loads(store.get("%s/%d" % (key, r))))
        return values

    def _await_key(self, store: Any, key: str, rank: int, what: str) -> bool:
        """Wait until ``key`` exists (True) or ``rank`` has published this check's outcome (False)."""
        outcome = self._key("outcome", rank)
        deadline = time.monotonic() + self.collective_timeout_s
        pause = POLL_FIRST_S
        while True:
            if _exists(store, key):
                return True
            if rank != self.rank and _exists(store, outcome):
                return _exists(store, key)
            if time.monotonic() > deadline:
                raise RuntimeError(
                    "rank %d did not share %r within %g s (collective_timeout_s) through the store"
                    % (rank, what, self.collective_timeout_s)
                )
            time.sleep(pause)
            pause = min(pause * 2, POLL_MAX_S)

    def store_known(self) -> bool:
        return self._store is not None

    def store(self) -> Any:
        """The rendezvous store, kept from the first process group: it outlives every later group."""
        if self._store is None:
            raise ProcessGroupUnavailable("the rendezvous store is not known: no process group has formed yet")
        return self._store

    # -- agreement between ranks --------------------------------------------------------------------
    def _coordinate(self, what: str, default: T, call: Callable[[Any], T]) -> T:
        """A store call by which the ranks coordinate (not a check's own), or ``default`` once the store is
        gone. These run in the rank's main thread, outside any check: where the store's host died (the
        kill-store fault), an unguarded call raised DistNetworkError there and the worker died without
        writing the record of the check it was in (its agent then never exits: pytorch#168242)."""
        if self._store is None or self.store_lost is not None:
            return default
        try:
            return call(self._store)
        except Exception as exc:  # noqa: BLE001 - whatever the store raises, it no longer coordinates anything
            first_line = (str(exc).strip().splitlines() or [""])[0][:300]
            self.store_lost = "%s: %s" % (type(exc).__name__, first_line)
            print(
                "distval: rank %d: the rendezvous store stopped answering (%s, while %s); the ranks no longer "
                "coordinate through it" % (self.rank, self.store_lost, what),
                flush=True,
            )
            return default

    def peer_outcomes(self) -> Dict[int, Dict[str, str]]:
        """The outcomes of the running check that other ranks have published so far (no waiting)."""

        def read(store: Any) -> Dict[int, Dict[str, str]]:
            found = {}
            for r in range(self.world_size):
                key = self._key("outcome", r)
                if r != self.rank and _exists(store, key):
                    found[r] = json.loads(store.get(key))
            return found

        return self._coordinate("reading the other ranks' outcomes", {}, read)

    def publish_outcome(self, status: str, message: str) -> None:
        """Tell the other ranks how this check ended here (a rank still inside it stops waiting for
        this one: see distval_suite.main)."""

        def publish(store: Any) -> None:
            _publish(store, self._key("outcome", self.rank), json.dumps({"status": status, "message": message[:500]}))
            if status in (FAILED, ERROR):
                store.add(self._key("left"), 1)

        self._coordinate("publishing this rank's outcome", None, publish)

    def someone_left(self) -> bool:
        """Whether a rank has already left the running check failed or errored: one cheap store call, so
        that ranks still inside a check can ask it often."""
        return self._coordinate("asking whether a rank left", False, lambda store: int(store.add(self._key("left"), 0)) > 0)

    def await_outcomes(self, limit_s: float) -> Optional[Dict[int, Dict[str, str]]]:
        """Every rank's outcome of the running check, or None when some rank has not published one
        within ``limit_s`` (it is stuck; the watchdog ends it), or the store is gone."""
        return self._coordinate("waiting for the other ranks' outcomes", None, lambda store: self._await_outcomes(store, limit_s))

    def _await_outcomes(self, store: Any, limit_s: float) -> Optional[Dict[int, Dict[str, str]]]:
        keys = [self._key("outcome", r) for r in range(self.world_size)]
        deadline = time.monotonic() + max(limit_s, 0.0)
        pause = POLL_FIRST_S
        while not all(_exists(store, key) for key in keys):
            if time.monotonic() > deadline:
                return None
            time.sleep(pause)
            pause = min(pause * 2, POLL_MAX_S)
        return {r: json.loads(store.get(key)) for r, key in enumerate(keys)}

    def reset_group(self, cause: str) -> None:
        """``cause`` (a check) did not pass on every rank, so its collectives may have left the ranks out
        of step: the next check that needs the group gets a fresh one, formed through the store."""
        self._drop_group()
        if self._store is not None:
            self._generation += 1
            self.reset_cause = cause

    def _drop_group(self) -> None:
        # What the failed check left in reference cycles (a DDP model holding the group) goes first, so
        # that the old group is not kept alive beside the fresh one. (It does not unblock a peer stuck in
        # the old group's collective: measured on 2.6, gloo keeps the connections; see distval_suite.main.)
        gc.collect()
        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
        self._init_kwargs = {}

    # -- the process group ------------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        """The device of this rank's tensors: cpu, or cuda:(LOCAL_RANK % visible devices) once the group formed."""
        if self._device is None:
            raise RuntimeError("the CUDA device is chosen when the process group forms; call ctx.process_group() first")
        return self._device

    def device_ids(self) -> Optional[List[int]]:
        """DistributedDataParallel's device_ids: the local device on CUDA, None on the CPU."""
        return None if self._device is None or self._device.type == "cpu" else [int(self._device.index or 0)]

    def process_group(self, **init_kwargs: Any) -> None:
        """Create the default process group once; the first creation is reported as ``process_group``."""
        self.still_running()
        if self._skip_reason is not None:
            raise GroupSkipped(self._skip_reason)
        if self._init_error is not None:
            raise ProcessGroupUnavailable(self._init_error)
        if dist.is_available() and dist.is_initialized():
            if init_kwargs == self._init_kwargs:
                return
            dist.destroy_process_group()
        started = time.monotonic()
        unknown = backend_unknown_reason(self.backend)
        if unknown is not None:
            self._skip(unknown, started)
        no_device = False
        if self.device_kind == "cuda" and self._device is None:
            count = int(torch.cuda.device_count()) if torch.version.cuda is not None else 0
            if count > 0:
                index = local_device_index(self.local_rank, count)
                # Before the group exists, so NCCL builds its communicator on this rank's own device.
                torch.cuda.set_device(index)
                self._device = torch.device("cuda", index)
            elif is_nccl(self.backend):
                no_device = True  # try anyway: torch's own words are the measured reason
            else:
                self._skip(
                    "device cuda: %s; torch.cuda.is_available() is %s"
                    % (no_device_reason(count, torch.version.cuda), torch.cuda.is_available()),
                    started,
                )
        try:
            if not dist.is_available():
                raise RuntimeError("torch.distributed is not available in this torch build")
            kwargs = dict(init_kwargs)
            if self._generation > 0 and self._store is not None:
                # A fresh group after a check that did not pass on every rank: its own key prefix in the
                # same rendezvous store, so that nothing the previous group left there is read again.
                prefixed = dist.PrefixStore("distval/group/%d/" % self._generation, self._store)
                kwargs.update(store=prefixed, rank=self.rank, world_size=self.world_size)
            elif self.spec.get("init_method"):
                # Launcher-less forms: env:// or tcp://HOST:PORT with the rank and world size the harness set.
                kwargs.update(init_method=self.spec["init_method"], rank=self.rank, world_size=self.world_size)
            dist.init_process_group(backend=self.backend, timeout=timedelta(seconds=self.collective_timeout_s), **kwargs)
        except Exception as exc:  # noqa: BLE001 - any init failure is reported, never raised past here
            if no_device:
                # torch 2.15: "nccl2 requires at least one CUDA device"; nccl-legacy: "ProcessGroupNCCL is
                # only supported with GPUs, no GPUs found!"; a CPU build: "... doesn't have NCCL built in".
                error = "%s: %s" % (type(exc).__name__, str(exc).strip().splitlines()[0][:300] if str(exc).strip() else "")
                self._skip(no_device_reason(0, torch.version.cuda, error), started)
            self._init_error = "init_process_group(backend=%r) failed: %s: %s%s" % (
                self.backend,
                type(exc).__name__,
                exc,
                _init_hint(str(exc)),
            )
            if self._generation > 0:
                # The first group formed and was reported; this is the fresh one after a failed check.
                self._init_error = (
                    "not run: %s did not pass on every rank, and a fresh process group could not form after it: %s"
                    % (
                        self.reset_cause,
                        self._init_error,
                    )
                )
                raise ProcessGroupUnavailable(self._init_error) from exc
            self.writer.write(
                "process_group",
                "process_group",
                FAILED,
                "expected %s to succeed; %s" % (_init_call(self), self._init_error),
                time.monotonic() - started,
            )
            raise ProcessGroupUnavailable(self._init_error) from exc
        if no_device:
            # The group formed (a communicator created lazily), but no tensor can live on a CUDA device here.
            dist.destroy_process_group()
            self._skip(
                no_device_reason(
                    0,
                    torch.version.cuda,
                    "init_process_group succeeded, but %s" % ("torch.cuda.is_available() is %s" % torch.cuda.is_available()),
                ),
                started,
            )
        self._init_kwargs = dict(init_kwargs)
        if self._store is None:
            from torch.distributed import distributed_c10d

            self._store = distributed_c10d._get_default_store()
        if not self._reported_init:
            self._reported_init = True
            self.writer.write(
                "process_group",
                "process_group",
                "passed",
                "%s formed a group of %d ranks in %.2f s%s"
                % (
                    _init_call(self),
                    dist.get_world_size(),
                    time.monotonic() - started,
                    "" if self.device_kind == "cpu" else " (tensors on %s)" % self.device,
                ),
                time.monotonic() - started,
            )

    def _skip(self, reason: str, started: float) -> None:
        """Record process_group as skipped with ``reason`` (once) and skip the calling check too."""
        self._skip_reason = reason
        if not self._reported_init:
            self._reported_init = True
            self.writer.write("process_group", "process_group", SKIPPED, reason, time.monotonic() - started)
        raise GroupSkipped(reason)

    def release_process_group(self) -> None:
        """Destroy the default group (a check that needs its own group calls this first)."""
        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
        self._init_kwargs = {}


def _publish(store: Any, key: str, value: str) -> None:
    """Set ``key``, then count it as set: torch 1.13's PrefixStore has no check(), but every store's
    add(key, 0) answers at once whether the count is there, so a rank can poll without blocking."""
    store.set(key, value)
    store.add(key + "/set", 1)


def _exists(store: Any, key: str) -> bool:
    """Whether ``key`` was set with _publish, without waiting for it."""
    return int(store.add(key + "/set", 0)) > 0


def backend_unknown_reason(backend: str) -> Optional[str]:
    """Why this torch cannot even name ``backend`` (nccl-legacy before torch 2.15), or None."""
    if not dist.is_available() or backend in ("gloo", "nccl", "mpi"):
        return None
    known = getattr(dist.Backend, "backend_list", None)
    if known is None:
        try:
            dist.Backend(backend)  # torch 1.x: ValueError "Invalid backend" for a name it does not know
        except ValueError as exc:
            return "torch %s does not know the backend name %r (%s)" % (torch.__version__, backend, exc)
        return None
    # torch 2.x accepts any name in Backend(); it knows those in backend_list and, from 2.15 on (measured),
    # those its dist-info registers as torch.distributed.backends entry points (nccl-legacy, nccl2, ...).
    names = set(known) | set(_backend_entry_points())
    if backend.lower() in names:
        return None
    return "torch %s does not know the backend name %r (it knows: %s)" % (torch.__version__, backend, ", ".join(sorted(names)))


def _backend_entry_points() -> List[str]:
    from importlib import metadata

    try:
        found: Any = metadata.entry_points()
        group = "torch.distributed.backends"
        # Python 3.9 returns a dict of groups; 3.10+ an EntryPoints object with select().
        entries = found.select(group=group) if hasattr(found, "select") else found.get(group, [])
        return [entry.name for entry in entries]
    except Exception:  # noqa: BLE001 - unreadable metadata: only the built-in list counts
        return []


def _init_call(ctx: Context) -> str:
    return "init_process_group(backend=%r)" % ctx.backend


def _init_hint(message: str) -> str:
    if "Unknown c10d backend" in message:
        try:
            from importlib import metadata

            metadata.distribution("torch")
        except Exception:  # noqa: BLE001 - any failure to read it means the metadata is gone
            return (
                " (torch's dist-info metadata is missing from the image: torch >= 2.14 finds its built-in "
                "backends through its package entry points, so a slimmed image without torch-*.dist-info "
                "loses gloo; pytorch PR #187388)"
            )
    return ""


CheckFunction = Callable[[Context, Dict[str, Any]], CheckOutcome]
CHECKS: Dict[str, CheckFunction] = {}
# Checks that break a process group (timeout: a subgroup with a rank that never came) or replace the
# default one (reconfigure: a new default group with enable_reconfigure, so nothing the timeout left
# behind can spoil it) run after all the others, in this order, whatever the scenario's order.
RUN_LAST = ("timeout", "reconfigure")
# Checks whose verdict is a time (the timeout's elapsed time, bandwidth's figures, when a fault's error came in
# collective_loop): nothing of the suite's own may run beside them (distval_suite/main.py waits for the survey of the
# image's files before one).
TIMED = ("timeout", "bandwidth", "collective_loop")


def check(name: str) -> Callable[[CheckFunction], CheckFunction]:
    def register(function: CheckFunction) -> CheckFunction:
        CHECKS[name] = function
        return function

    return register
