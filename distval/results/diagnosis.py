"""Why a scenario hung or crashed, from what its ranks left in their results directories.

What the ranks leave is asked for before a deadline's kill by distval/targets/docker/stacks.py (stacks and
flight-recorder dumps) and copied out with the results. This module is pure: it parses the stacks, the flight
recorder's entries (torch 2.15 records gloo collectives with sequence numbers), torchrun's error file
(``TORCHELASTIC_ERROR_FILE``: the first failing worker's traceback) and the launch facts (restart count, which
rendezvous store the workers used), and says what they show in a few lines for the reports. Bad input never
raises: an unreadable file is named as such.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from distval import strict_json
from distval.plan.rank_files import ERROR_FILE, FLIGHT_RECORDER, LAUNCH, RECORDS, STACKS
from distval.results.outcome import ContainerOutcome
from distval.results.records import json_problem
from distval.text_caps import STACKS_MAX_CHARS, capped_end_bytes

FR_SHOWN = 5  # the last collectives shown per rank
STACK_LINES_MAX = 60  # per rank, in the reports


# -- parsing (pure) -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ThreadStack:
    thread: str  # faulthandler's "Thread 0x..." or "Current thread 0x..."
    frames: tuple[str, ...]  # most recent call first, as faulthandler prints them


_THREAD_LINE = re.compile(r"^(Current thread|Thread) (0x[0-9a-fA-F]+)")
_FRAME_LINE = re.compile(r'^\s+File "(?P<file>[^"]*)", line (?P<line>\d+) in (?P<func>.*)$')


def parse_stacks(text: str) -> tuple[ThreadStack, ...]:
    """The threads of the last faulthandler dump in ``text`` (one dump per SIGUSR1, appended). A thread id
    seen again starts a new dump. Lines that are no thread header or frame are left out."""
    dumps: list[list[ThreadStack]] = [[]]
    current: tuple[str, list[str]] | None = None

    def close() -> None:
        if current is not None:
            dumps[-1].append(ThreadStack(current[0], tuple(current[1])))

    for line in text.splitlines():
        header = _THREAD_LINE.match(line)
        if header:
            close()
            if any(t.thread.split()[-1] == header.group(2) for t in dumps[-1]):
                dumps.append([])
            current = (f"{header.group(1)} {header.group(2)}", [])
        elif current is not None and _FRAME_LINE.match(line):
            current[1].append(line.strip())
    close()
    return tuple(dumps[-1])


def innermost(stack: ThreadStack) -> str:
    """``func (file:line)`` of the thread's most recent call, or "no Python frame"."""
    if not stack.frames:
        return "no Python frame"
    frame = _FRAME_LINE.match("  " + stack.frames[0])
    if frame is None:
        return stack.frames[0]
    file_name = frame.group("file").rsplit("/", 1)[-1]
    return f"{frame.group('func')} ({file_name}:{frame.group('line')})"


def stacks_summary(threads: Iterable[ThreadStack]) -> str:
    """One line: where each thread is; the check threads (the suite runs each check in a thread of its
    own) and the current thread first."""
    threads = list(threads)
    if not threads:
        return "no stack in the file"
    shown = [f"{'current thread' if t.thread.startswith('Current') else 'thread'} in {innermost(t)}" for t in threads]
    return f"{len(threads)} thread(s): " + "; ".join(shown)


@dataclass(frozen=True)
class Collective:
    name: str  # the recorder's profiling_name, e.g. gloo:all_reduce
    seq: int | None  # collective_seq_id (p2p_seq_id for point-to-point)
    pg: str  # the process group's id
    state: str
    record_id: int


@dataclass(frozen=True)
class FlightRecorder:
    available: bool
    reason: str  # why not available, or "" when it is
    entries: tuple[Collective, ...] = ()


def _int(value: object) -> int | None:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


def parse_flight_recorder(data: bytes) -> FlightRecorder:
    """A rank's flight-recorder file (distval_suite/diagnostics.py): its entries oldest first, or why none."""
    dump = json_object(data.decode("utf-8", "replace"))
    if dump is None:
        return FlightRecorder(False, "the flight-recorder file is not a JSON object (cut by the kill?)")
    if not dump.get("available"):
        return FlightRecorder(False, str(dump.get("reason") or "the flight recorder is not available"))
    entries: list[Collective] = []
    raw = dump.get("entries")
    for index, entry in enumerate(raw if isinstance(raw, list) else []):
        if not isinstance(entry, dict):
            continue
        p2p = bool(entry.get("is_p2p"))
        seq = _int(entry.get("p2p_seq_id" if p2p else "collective_seq_id"))
        record_id = _int(entry.get("record_id"))
        entries.append(
            Collective(
                name=str(entry.get("profiling_name") or entry.get("op_id") or "?"),
                seq=seq,
                pg=str(entry.get("pg_id", "?")),
                state=str(entry.get("state") or "?"),
                record_id=record_id if record_id is not None else index,
            )
        )
    entries.sort(key=lambda c: c.record_id)
    if not entries:
        return FlightRecorder(True, "", ())
    return FlightRecorder(True, "", tuple(entries))


def describe_collective(c: Collective) -> str:
    return f"{c.name} #{c.seq if c.seq is not None else '?'}"


def last_collectives(recorder: FlightRecorder, count: int = FR_SHOWN) -> str:
    if not recorder.available:
        return f"no flight recorder: {recorder.reason}"
    if not recorder.entries:
        return "the flight recorder holds no collective"
    shown = recorder.entries[-count:]
    return ", ".join(f"{describe_collective(c)} (pg {c.pg}, {c.state})" for c in shown)


def mismatch_summary(recorders: Mapping[int, FlightRecorder]) -> str | None:
    """One line comparing each rank's last collective: "rank 1 is at gloo:all_reduce #41, rank 0 at
    gloo:barrier #42", or that every rank is at the same one. None when no rank has a recorder."""
    last = {rank: r.entries[-1] for rank, r in sorted(recorders.items()) if r.available and r.entries}
    if not last:
        return None
    keys = {(c.pg, c.seq, c.name) for c in last.values()}
    if len(keys) == 1 and len(last) == len(recorders):
        c = next(iter(last.values()))
        return f"every rank is at {describe_collective(c)} (pg {c.pg}, {c.state})"
    # The rank furthest behind first: it is the one the others wait for.
    order = sorted(last.items(), key=lambda item: (item[1].seq if item[1].seq is not None else -1, item[0]))
    parts = [
        f"rank {rank} is at {describe_collective(c)}" if i == 0 else f"rank {rank} at {describe_collective(c)}"
        for i, (rank, c) in enumerate(order)
    ]
    without = [rank for rank in sorted(recorders) if rank not in last]
    if without:
        parts.append(f"rank(s) {', '.join(map(str, without))} recorded none")
    return ", ".join(parts)


@dataclass(frozen=True)
class RootCause:
    message: str  # the exception's last line
    traceback: str  # the worker's Python traceback, "" when the file holds none
    source: str  # the container the file came from


def parse_error_file(data: bytes, source: str) -> RootCause | None:
    """torchelastic's error file (``record`` writes it; torchrun copies the first failure's into its own)."""
    top = json_object(data.decode("utf-8", "replace"))
    if top is None:
        return None
    message = top.get("message")
    text, trace = "", ""
    if isinstance(message, dict):
        text = str(message.get("message") or "")
        extra = message.get("extraInfo")
        if isinstance(extra, dict):
            trace = str(extra.get("py_callstack") or "")
    elif message is not None:
        text = str(message)
    if not text and not trace:
        return None
    last = text.strip().splitlines()[-1] if text.strip() else (trace.strip().splitlines()[-1] if trace.strip() else "")
    inner = innermost_exception(trace)
    if inner and inner not in last:
        # A chained error (torchrun's RendezvousConnectionError over the store's own error): the innermost one
        # says what went wrong (e.g. "use_libuv was requested but PyTorch was build without libuv support").
        last = f"{last[:300]} (caused by {inner[:300]})"
    return RootCause(last[:700], trace, source)


_CHAIN_MARKERS = (
    "The above exception was the direct cause of the following exception:",
    "During handling of the above exception, another exception occurred:",
)


def innermost_exception(trace: str) -> str:
    """The exception line of the first traceback of a chain (Python prints the innermost cause first); ""
    when the trace holds no chain."""
    cut = min((trace.find(marker) for marker in _CHAIN_MARKERS if marker in trace), default=-1)
    if cut < 0:
        return ""
    lines = [line.strip() for line in trace[:cut].strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


@dataclass(frozen=True)
class RankDiagnosis:
    rank: int
    stacks: tuple[ThreadStack, ...] | None = None  # None: no stack file
    stacks_text: str = ""
    flight_recorder: FlightRecorder | None = None  # None: no dump

    def as_dict(self) -> dict[str, Any]:
        fr = self.flight_recorder
        return {
            "rank": self.rank,
            "stacks": None if self.stacks is None else stacks_summary(self.stacks),
            "stacks_text": self.stacks_text,
            "flight_recorder": None
            if fr is None
            else {
                "available": fr.available,
                "reason": fr.reason,
                "last": [{"name": c.name, "seq": c.seq, "pg": c.pg, "state": c.state} for c in fr.entries[-FR_SHOWN:]],
            },
        }


@dataclass(frozen=True)
class Diagnosis:
    ranks: Mapping[int, RankDiagnosis] = field(default_factory=dict)
    flight_recorder_summary: str | None = None
    root_cause: RootCause | None = None
    restarts: int | None = None  # how often torchrun restarted the workers; None: no launch facts were read
    store_path: str | None = None  # which rendezvous store the workers used, from their environment
    notes: tuple[str, ...] = ()  # what before_kill measured, and unreadable files

    @property
    def empty(self) -> bool:
        return not self.ranks and self.root_cause is None and not self.notes

    def as_dict(self) -> dict[str, Any]:
        cause = self.root_cause
        return {
            "ranks": [d.as_dict() for _, d in sorted(self.ranks.items())],
            "flight_recorder_summary": self.flight_recorder_summary,
            "root_cause": None
            if cause is None
            else {"message": cause.message, "traceback": cause.traceback, "source": cause.source},
            "restarts": self.restarts,
            "rendezvous_store": self.store_path,
            "notes": list(self.notes),
        }

    def lines(self) -> list[str]:
        """A few plain lines for the Markdown summary: root cause, flight recorder, where each rank was."""
        lines = []
        if self.root_cause is not None:
            lines.append(f"root cause ({self.root_cause.source}): {self.root_cause.message}")
        if self.flight_recorder_summary:
            lines.append(f"flight recorder: {self.flight_recorder_summary}")
        lines += [f"rank {rank}: {stacks_summary(d.stacks)}" for rank, d in sorted(self.ranks.items()) if d.stacks]
        if self.restarts:
            lines.append(f"torchrun restarted the workers {self.restarts} time(s); the store: {self.store_path}")
        return lines

    def headline(self) -> str:
        """One line for a deadline's or a crash's message: the flight recorder's comparison and where each
        rank's threads were."""
        parts = []
        if self.flight_recorder_summary:
            parts.append(f"flight recorder: {self.flight_recorder_summary}")
        for rank, d in sorted(self.ranks.items()):
            if d.stacks:
                parts.append(f"rank {rank} stacks: {stacks_summary(d.stacks)}")
        return "; ".join(parts)

    def text(self, ranks: Iterable[int] | None = None) -> str:
        """The blocks a JUnit failure and the JSON report's case output show: root cause, the flight
        recorder's comparison, and each rank's stacks (of ``ranks``; None: all)."""
        wanted = set(self.ranks) if ranks is None else set(ranks)
        blocks: list[str] = []
        if self.root_cause is not None:
            cause = self.root_cause
            blocks.append(f"--- root cause (torchelastic error file, {cause.source}) ---\n{cause.traceback or cause.message}")
        if self.flight_recorder_summary:
            lines = [f"--- flight recorder: {self.flight_recorder_summary} ---"]
            for rank, d in sorted(self.ranks.items()):
                if rank in wanted and d.flight_recorder is not None:
                    lines.append(f"rank {rank}: {last_collectives(d.flight_recorder)}")
            blocks.append("\n".join(lines))
        for rank, d in sorted(self.ranks.items()):
            if rank in wanted and d.stacks is not None:
                shown = "\n".join(d.stacks_text.rstrip("\n").splitlines()[-STACK_LINES_MAX:])
                blocks.append(f"--- rank {rank}: Python stacks at SIGUSR1 before the kill ---\n{shown}")
        return "\n\n".join(blocks)


def json_object(text: str) -> dict[str, Any] | None:
    """A JSON object the image under test wrote, or None where it is not one a report can hold."""
    try:
        value = strict_json.loads(text)
    except (ValueError, RecursionError):
        return None
    # Written by the image under test: NaN, Infinity or a 400-digit number would break a report writer later.
    return value if isinstance(value, dict) and json_problem(value) is None else None


# -- a scenario's files -> its diagnosis --------------------------------------------------------------
def is_record_file(name: str) -> bool:
    """Whether a results-directory file holds result records (the others are diagnosis files)."""
    return RECORDS.match(name) is not None


def diagnose(containers: Iterable[ContainerOutcome]) -> Diagnosis:
    """What the containers' diagnosis files show (no such file: an empty Diagnosis)."""
    ranks: dict[int, RankDiagnosis] = {}
    notes: list[str] = []
    causes: list[RootCause] = []
    launches: list[dict[str, Any]] = []
    for container in containers:
        for name, data in sorted(container.result_files.items()):
            stacks, fr, launch = STACKS.match(name), FLIGHT_RECORDER.match(name), LAUNCH.match(name)
            if stacks and data.strip():
                rank = int(stacks.group(1))
                text = capped_end_bytes(data, STACKS_MAX_CHARS)  # the image wrote it: its end is kept
                current = ranks.get(rank, RankDiagnosis(rank))
                ranks[rank] = RankDiagnosis(rank, parse_stacks(text), text, current.flight_recorder)
            elif fr:
                rank = int(fr.group(1))
                current = ranks.get(rank, RankDiagnosis(rank))
                ranks[rank] = RankDiagnosis(rank, current.stacks, current.stacks_text, parse_flight_recorder(data))
            elif launch:
                parsed = json_object(data.decode("utf-8", "replace"))
                if parsed is None:
                    notes.append(f"{container.name}:{name}: unreadable launch facts")
                else:
                    launches.append(parsed)
            elif name == ERROR_FILE:
                cause = parse_error_file(data, container.name)
                if cause is None:
                    notes.append(f"{container.name}:{name}: unreadable torchelastic error file")
                else:
                    causes.append(cause)
            elif name.startswith("diagnosis-node-"):
                parsed = json_object(data.decode("utf-8", "replace"))
                if parsed is not None:
                    notes.append(
                        f"{container.name}: signalled rank(s) {parsed.get('signalled')}, stacks from {parsed.get('stacks')}, "
                        f"flight-recorder dumps from {parsed.get('flight_recorder')} within {parsed.get('waited_s')} s"
                    )
    recorders = {rank: d.flight_recorder for rank, d in ranks.items() if d.flight_recorder is not None}
    summary = mismatch_summary(recorders)
    if summary is None and recorders:
        reasons = sorted({r.reason for r in recorders.values() if not r.available})
        summary = f"not available: {'; '.join(reasons)}" if reasons else "no rank recorded a collective"
    return Diagnosis(
        ranks=ranks,
        flight_recorder_summary=summary,
        root_cause=causes[0] if causes else None,
        restarts=max((_int(launch.get("restart_count")) or 0 for launch in launches), default=None),
        store_path=store_path(launches),
        notes=tuple(notes),
    )


def store_path(launches: Iterable[Mapping[str, Any]]) -> str | None:
    """Which store the workers of the last attempt used (torchrun tells them: TORCHELASTIC_USE_AGENT_STORE)."""
    launches = list(launches)
    if not launches:
        return None
    newest = max(_int(launch.get("restart_count")) or 0 for launch in launches)
    values = {str(launch.get("use_agent_store")) for launch in launches if (_int(launch.get("restart_count")) or 0) == newest}
    disabled = any(str(launch.get("share_store_disabled") or "") not in ("", "None", "0") for launch in launches)
    if values == {"None"}:
        return "no launcher store (the ranks rendezvous without torchrun)"
    if values == {"True"}:
        return "the agent's store, shared with the workers (TORCHELASTIC_USE_AGENT_STORE=True)"
    if values == {"False"}:
        how = " (TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1)" if disabled else ""
        return f"a store of the workers' own, not the agent's (TORCHELASTIC_USE_AGENT_STORE=False){how}"
    return f"mixed: TORCHELASTIC_USE_AGENT_STORE={', '.join(sorted(values))}"


def last_attempt(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One rank's records in ONE container (one torchrun agent): those of its newest worker process only.
    After a restart the rank's file holds the failed attempt's records first, and those must neither count
    twice nor turn the verdict red. Within one agent the restart count never goes down, and the rank's
    processes ran one after the other on one clock, so (restart count, process start) orders them. Across
    agents neither is comparable: see ``current_attempts``."""
    records = list(records)

    def order(record: Mapping[str, Any]) -> tuple[int, float]:
        attempt, started_at = _process(record)
        return (attempt, float("-inf") if started_at is None else started_at)

    newest = max((order(r) for r in records), default=(0, 0.0))
    return [r for r in records if order(r) == newest]


def _float(value: object) -> float | None:
    try:
        number = float(str(value))
    except ValueError:
        return None
    return number if number == number else None  # NaN orders nothing


def _process(record: Mapping[str, Any]) -> tuple[int, float | None]:
    """The worker process a record came from, within one agent: (restart count, process start)."""
    return (_int(record.get("attempt")) or 0, _float(record.get("started_at")))


@dataclass(frozen=True)
class _Process:
    rank: int
    attempt: int
    started_at: float | None
    last_ended_at: float | None  # when it wrote its last record; None: no record said
    records: tuple[dict[str, Any], ...]

    def older_than(self, other: _Process) -> bool:
        """Provably an earlier round than ``other``, a process of the SAME agent (container): a higher restart
        count there, or ``other`` started after this one had written its last record. An agent stops all its
        workers before it starts the next round's, so the second never holds within one round: ``started_at``
        is the kernel's spawn time (distval_suite/records.py), and an agent spawns a round's workers within
        milliseconds, long before any of them can write a record; unknown times prove nothing (the process
        then stays, and the worse outcome decides)."""
        if other.attempt != self.attempt:
            return other.attempt > self.attempt
        return other.started_at is not None and self.last_ended_at is not None and other.started_at >= self.last_ended_at


def current_attempts(
    by_container: Iterable[tuple[str, Mapping[int, Iterable[dict[str, Any]]]]],
) -> dict[int, list[tuple[str, list[dict[str, Any]]]]]:
    """Each rank's records of the last attempt, as (container, records) pairs: one pair unless the last
    attempt cannot be told.

    Nothing that all ranks agree on reaches the workers in every rendezvous form: TORCHELASTIC_RESTART_COUNT
    is per agent (an agent whose own workers did not fail restarts them without counting), the static
    rendezvous has no rounds, c10d's round lives only in the agents' store, and clocks of separate hosts may
    disagree. So attempts are ordered only where one clock and one counter hold: within a container (one
    agent, one host). With fixed membership every agent takes part in every round, so a container's newest
    processes are the last round's, and any process of that container that is provably older (``older_than``)
    is stale, whichever rank it ran: this drops the records a rank left on a node it has since moved away from
    (c10d sorts its participants anew each round; torch 2.6 and 2.15 keep the order, measured, but a
    replaced node, or a launcher that assigns ranks itself, moves a rank: tests/plan/test_restart_docker.py). A
    rank whose records remain in several containers (a node that ran nothing after it, unknown times) has
    attempts that cannot be ordered: every one is returned, and the caller lets the worse outcome win
    (distval/results/scenario.py) rather than guess which is newer.
    """
    found: dict[int, list[tuple[str, list[dict[str, Any]]]]] = {}
    for container, by_rank in by_container:
        processes: list[_Process] = []
        for rank, rank_records in sorted(by_rank.items()):
            grouped: dict[tuple[int, float | None], list[dict[str, Any]]] = {}
            for record in rank_records:
                grouped.setdefault(_process(record), []).append(record)
            for (attempt, started_at), records in grouped.items():
                ends = [e for e in (_float(r.get("ended_at")) for r in records) if e is not None]
                processes.append(_Process(rank, attempt, started_at, max(ends) if ends else None, tuple(records)))
        current = [p for p in processes if not any(o is not p and p.older_than(o) for o in processes)]
        for rank in sorted({p.rank for p in current}):
            records = last_attempt(r for p in current if p.rank == rank for r in p.records)
            found.setdefault(rank, []).append((container, records))
    return found
