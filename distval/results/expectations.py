"""How the ranks reacted to a scenario's faults, judged against its ``expect:`` -- pure functions over what
the runtime observed (distval/targets/docker/faults.py) and what the ranks recorded.

``classify`` turns an error into a kind from its text (the rank's record, or the launcher's last error
line), the exit code and the Engine's OOMKilled. The texts are the ones measured across containers
(docs/measurements.md, "Faults"): gloo's ``Connection closed by peer`` / ``Connection reset by peer`` when a peer's
process is gone, ``Timed out waiting Nms for recv operation to complete`` at the process-group timeout
when a peer is frozen or cut off (gloo sets no TCP keepalive, so never earlier), ``Broken pipe`` from
the store after its host died.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from distval.config.faults import Expectation

TIMEOUT, CONNECTION_CLOSED, KILLED, OOM, OTHER = "timeout", "connection_closed", "killed", "oom", "other"
_TIMEOUT = re.compile(r"(?i)timed out|timeout|deadline exceeded|pair closure")
_CLOSED = re.compile(
    r"(?i)connection (closed|reset) by peer|broken pipe|connection refused|econnreset|epipe|"
    r"socket closed|end of file|unexpected eof|DistNetworkError"
)
KILLED_BY_FAULT = "killed by the fault"
_KILLED = re.compile(r"(?i)signal 9\b|SIGKILL|exitcode\s*:\s*-9\b|killed")
# distval_suite/main.py appends what the other ranks said to a failed check's message; only the rank's own counts.
_PEERS_NOTE = re.compile(r" \(after ranks? [0-9, ]+ had left the check: .*$", re.S)


def classify(text: str | None, exit_code: int | None = None, oom_killed: bool = False) -> str:
    """The kind of an error: ``oom`` (the Engine says OOMKilled, whatever the text), ``timeout``,
    ``connection_closed``, ``killed`` (SIGKILL: exit 137 or -9, or the launcher's words), else ``other``."""
    if oom_killed:
        return OOM
    own = _PEERS_NOTE.sub("", text or "")
    if _TIMEOUT.search(own):
        return TIMEOUT
    if _CLOSED.search(own):
        return CONNECTION_CLOSED
    if exit_code in (137, -9) or _KILLED.search(own):
        return KILLED
    return OTHER


@dataclass(frozen=True)
class Injected:
    """A fault the runtime carried out: when (wall clock, seconds since the epoch) and what."""

    index: int
    kind: str
    node: int
    victims: tuple[int, ...]
    at: float
    action: str  # what was done, in words
    kills: bool  # the fault itself ends the victims' processes (kill, kill-store, a worker's SIGKILL)
    error: str | None = None  # why it could not be carried out (the scenario's verdict then fails)
    took_s: float = 0.0  # how long the Engine took to carry it out (``at`` is when the runtime asked)


@dataclass(frozen=True)
class ContainerExit:
    """A container the runtime saw exit while it watched the faults (first seen at ``at``)."""

    container: str
    ranks: tuple[int, ...]
    at: float
    exit_code: int | None  # None: the rank's worker process was seen gone while its container still ran
    oom_killed: bool
    error_line: str | None = None  # filled in after the logs were read


@dataclass(frozen=True)
class FaultLog:
    injected: tuple[Injected, ...] = ()
    exits: tuple[ContainerExit, ...] = ()
    skip_reason: str | None = None  # the scenario could not run its faults here (no sch_netem): measured reason
    ended: str | None = None  # why the runtime stopped the containers before the deadline
    # When the runtime decided the verdict and stopped the containers: nothing later counts (a frozen rank
    # resumed for the kill must not add a failure the verdict did not see).
    decided_at: float | None = None


@dataclass(frozen=True)
class Failure:
    rank: int
    at: float  # wall clock
    kind: str
    text: str


@dataclass(frozen=True)
class RankVerdict:
    rank: int
    expected: str  # in words: "connection_closed 0..5 s" or "no failure"
    seen: str  # in words
    after_s: float | None  # fault-to-failure time; None: no failure seen
    ok: bool


@dataclass(frozen=True)
class Verdict:
    ok: bool
    message: str
    ranks: tuple[RankVerdict, ...]
    fault_at: float | None


def resolve_ranks(expectation: Expectation, victims: set[int], world_size: int) -> list[int]:
    if expectation.ranks == "victims":
        return sorted(victims)
    if expectation.ranks == "survivors":
        return [r for r in range(world_size) if r not in victims]
    return sorted(set(expectation.ranks)) if isinstance(expectation.ranks, tuple) else []


def first_failures(
    records: Mapping[int, Iterable[Mapping[str, object]]], log: FaultLog, fault_at: float
) -> tuple[dict[int, Failure], set[int]]:
    """Each rank's first failure at or after the fault, and the ranks that recorded a pass after it.

    A failure is a failed or errored record (its ``ended_at``), the fault itself for the ranks it killed,
    or the exit of the rank's container (seen by the runtime) for a rank that recorded nothing."""
    failures: dict[int, Failure] = {}
    passed: set[int] = set()
    for rank, rank_records in records.items():
        for record in rank_records:
            ended = record.get("ended_at")
            if not isinstance(ended, (int, float)) or ended < fault_at:
                continue
            if log.decided_at is not None and ended > log.decided_at:
                continue
            status = record.get("status")
            if status == "passed" and ended > fault_at:  # a record at the fault's own time is its trigger
                passed.add(rank)
            elif status in ("failed", "error") and rank not in failures:
                text = str(record.get("message", ""))
                failures[rank] = Failure(rank, float(ended), classify(text), text)
    for fault in log.injected:
        if fault.kills and fault.error is None:
            for rank in fault.victims:
                earlier = failures.get(rank)
                if earlier is None or earlier.at > fault.at:
                    failures[rank] = Failure(rank, fault.at, KILLED, f"{KILLED_BY_FAULT} ({fault.action})")
    for gone in log.exits:
        if gone.exit_code == 0 and not gone.oom_killed:
            continue  # a container that finished its checks
        for rank in gone.ranks:
            if gone.exit_code is None and rank in passed:
                continue  # its worker finished after passing a check after the fault: done, not dead
            if rank not in failures and gone.at >= fault_at and (log.decided_at is None or gone.at <= log.decided_at):
                how = "exited" if gone.exit_code is not None else "was seen without its worker process (the launcher still ran)"
                text = gone.error_line or f"the container {how} (exit code {gone.exit_code})"
                if gone.oom_killed:
                    text = f"OOM-killed (the Engine reports OOMKilled for {gone.container}); {text}"
                failures[rank] = Failure(rank, gone.at, classify(text, gone.exit_code, gone.oom_killed), text)
    return failures, passed


def _window_text(expectation: Expectation) -> str:
    lo, hi = expectation.within_s
    return f"{' or '.join(expectation.errors)} {lo:g}..{hi:g} s after the fault"


def evaluate(
    expect: tuple[Expectation, ...],
    log: FaultLog,
    records: Mapping[int, Iterable[Mapping[str, object]]],
    world_size: int,
) -> Verdict:
    """Whether exactly the expected happened: every named rank failed with one of its kinds inside its
    window; every other rank did not fail. The message names the first rank that failed, its
    fault-to-failure time and error text; a failed verdict also says what was expected and what was seen."""
    done = [f for f in log.injected if f.error is None]
    undone = [f for f in log.injected if f.error is not None]
    if not log.injected or undone:
        why = "; ".join(f"fault {f.index} ({f.kind}) could not be carried out: {f.error}" for f in undone)
        return Verdict(False, why or "expected the faults to be carried out; none was (its trigger never came)", (), None)
    fault_at = min(f.at for f in done)
    victims = {rank for f in done for rank in f.victims}
    failures, passed = first_failures(records, log, fault_at)
    named: dict[int, Expectation] = {}
    for expectation in expect:
        for rank in resolve_ranks(expectation, victims, world_size):
            named.setdefault(rank, expectation)
    verdicts = []
    for rank in range(world_size):
        failure = failures.get(rank)
        after = None if failure is None else failure.at - fault_at
        seen = (
            f"{failure.kind} after {after:.2f} s: {failure.text[:300]}"
            if failure is not None and after is not None
            else ("passed after the fault" if rank in passed else "no failure")
        )
        wanted = named.get(rank)
        if wanted is None:
            verdicts.append(RankVerdict(rank, "no failure", seen, after, failure is None))
            continue
        lo, hi = wanted.within_s
        ok = failure is not None and after is not None and failure.kind in wanted.errors and lo <= after <= hi
        if failure is None:
            seen = ("succeeded: passed after the fault" if rank in passed else "no failure") + f" within {hi:g} s"
        verdicts.append(RankVerdict(rank, _window_text(wanted), seen, after, ok))
    # The first rank that failed on its own: a rank the fault itself killed is named only when no other failed.
    ordered = sorted(failures.values(), key=lambda f: (f.text.startswith(KILLED_BY_FAULT), f.at, f.rank))
    first = (
        f"first to fail: rank {ordered[0].rank} after {ordered[0].at - fault_at:.2f} s ({ordered[0].kind}): "
        f"{ordered[0].text[:300]}"
        if ordered
        else "no rank failed"
    )
    faults = ", ".join(f"{f.kind} of node {f.node}" for f in done)
    ok = all(v.ok for v in verdicts)
    if ok:
        message = f"{faults}: as expected ({first})"
    else:
        wrong = "; ".join(f"rank {v.rank}: expected {v.expected}; seen {v.seen}" for v in verdicts if not v.ok)
        message = f"{faults}: {wrong} ({first})"
    return Verdict(ok, message, tuple(verdicts), fault_at)


def decided(
    expect: tuple[Expectation, ...],
    log: FaultLog,
    records: Mapping[int, Iterable[Mapping[str, object]]],
    world_size: int,
    now: float,
) -> bool:
    """Whether more waiting cannot change the verdict: every named rank has failed, or the latest window
    has closed (plus nothing: a failure after it is too late either way). With no expectation (no rank
    may fail) only the end of the scenario decides."""
    done = [f for f in log.injected if f.error is None]
    if not expect or not done:
        return False
    fault_at = min(f.at for f in done)
    if now > fault_at + max(e.within_s[1] for e in expect):
        return True
    failures, _ = first_failures(records, log, fault_at)
    # Every rank has failed: named ones may still be in or out of their windows, but nothing can change.
    return set(range(world_size)) <= set(failures)
