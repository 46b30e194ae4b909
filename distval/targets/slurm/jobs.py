"""A Slurm job from submission to its end: ``sbatch``, its state from ``scontrol show job`` (``squeue`` where the
controller has forgotten it, no accounting needed), following it with a deadline, and ``scancel`` until nothing of it
is queued or running.

The commands run through ``Commands``: on this machine (``LocalCommands``, a login node with Slurm's client) or in the
test cluster's controller (distval/targets/slurm/cluster.py). Job states are Slurm's words (squeue(1) JOB STATE
CODES); a job is over once its state is none of the active ones.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from distval.errors import EnvironmentUnusable, one_line
from distval.targets.slurm.collect import JobState

COMMAND_TIMEOUT_S = 30.0
POLL_S = 0.5
# The states of a job that may still run or hold nodes (squeue(1)); every other state is final.
ACTIVE = frozenset(
    {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED"}
)
CANCEL_WAIT_S = 60.0
# A slurmctld that is busy or restarting may answer ``scontrol show job`` with exit code 0 but no job record (a
# message, a cut line), or not at all (scontrol and squeue both exit non-zero, or pass COMMAND_TIMEOUT_S: "Socket
# timed out on send/recv operation"): following asks again, this many answers in all, UNREADABLE_WAIT_S apart, before
# it stops the run with the last answer. Taken for the job's end, it would leave a job that may still run running
# (nothing cancels a job that ended) and blame the image for the records it has not written yet.
UNREADABLE_TRIES = 5
UNREADABLE_WAIT_S = 3.0
_JOB_ID = re.compile(r"^(\d{1,12})(?:;\S+)?$")
_FIELD = re.compile(r"(\w+)=(\S*)")


class Commands(Protocol):
    def run(self, argv: Sequence[str], timeout_s: float = COMMAND_TIMEOUT_S) -> tuple[int, str]:
        """``argv`` on a host with Slurm's client: its exit code and its output (stdout and stderr)."""
        ...


class LocalCommands:
    """Slurm's client on this machine (a login node)."""

    def run(self, argv: Sequence[str], timeout_s: float = COMMAND_TIMEOUT_S) -> tuple[int, str]:
        try:
            done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s, check=False)
        except FileNotFoundError as exc:
            raise EnvironmentUnusable(
                f"{argv[0]}: not found; the slurm target needs Slurm's client (sbatch, scontrol, scancel)"
            ) from exc
        except subprocess.TimeoutExpired:
            return 124, f"{argv[0]} did not answer within {timeout_s:g} s"
        return done.returncode, done.stdout + done.stderr


@dataclass(frozen=True)
class Submitted:
    job_id: str
    submitted_at: float  # time.time()


def submit(commands: Commands, script: str) -> Submitted:
    code, output = commands.run(["sbatch", "--parsable", script])
    line = output.strip().splitlines()[-1] if output.strip() else ""
    match = _JOB_ID.match(line)
    if code != 0 or match is None:
        raise EnvironmentUnusable(f"sbatch {script} failed ({code}): {one_line(output)[:400]}")
    return Submitted(match.group(1), time.time())


@dataclass(frozen=True)
class _Unreadable:
    """An answer without the job's state: ``scontrol show job`` that answered (exit code 0) without a JobState, or
    neither it nor ``squeue`` answering (non-zero exit codes: Slurm says a job it does not know of in words only)."""

    asked: str  # what was asked: "scontrol show job 7", or "scontrol show job 7 and squeue --jobs 7"
    answer: str


def job_state(commands: Commands, job_id: str) -> JobState | None:
    """The job's state and reason (with its nodes), or None where Slurm no longer knows the job; an answer without
    a state is UNKNOWN, with that answer."""
    state = _read_state(commands, job_id)
    if isinstance(state, _Unreadable):
        return JobState("UNKNOWN", f"{state.asked}: {one_line(state.answer)[:400]}")
    return state


def _read_state(commands: Commands, job_id: str) -> JobState | _Unreadable | None:
    """The job's state; None where ``squeue`` answers without it (the controller no longer holds the job: its record
    is kept MinJobAge, 300 s by default, after its end, many polls after following saw that end)."""
    code, output = commands.run(["scontrol", "--oneliner", "show", "job", job_id])
    if code == 0:
        fields = dict(_FIELD.findall(output))
        if "JobState" not in fields:
            return _Unreadable(f"scontrol show job {job_id}", output)
        state = fields["JobState"]
        reason = fields.get("Reason", "")
        nodes = fields.get("NodeList", "")
        detail = ", ".join(
            x
            for x in (
                f"reason {reason}" if reason and reason != "None" else "",
                f"nodes {nodes}" if nodes and nodes != "(null)" else "",
            )
            if x
        )
        return JobState(state, detail)
    queue_code, queue = commands.run(["squeue", "--noheader", "--jobs", job_id, "--format=%T %R"])
    if queue_code == 0 and queue.strip():
        state, _, reason = queue.strip().partition(" ")
        return JobState(state, reason)
    if queue_code == 0:
        return None
    return _Unreadable(
        f"scontrol show job {job_id} and squeue --jobs {job_id}",
        f"scontrol exited {code}: {one_line(output)[:200]}; squeue exited {queue_code}: {one_line(queue)[:200]}",
    )


# sinfo's compact node states (sinfo(1) NODE STATE CODES) of a node that no longer runs jobs as it should.
_LOST_STATES = ("down", "drain", "drng", "drained", "draining", "fail", "failg", "maint", "unk", "npc", "pow")


def lost_nodes(commands: Commands, nodes: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """Which of ``nodes`` Slurm has taken out (down, drained, failing), each with its state and reason."""
    if not nodes:
        return ()
    try:
        code, output = commands.run(["sinfo", "--noheader", "--Node", "--nodes", ",".join(nodes), "--format=%N|%t|%E"])
    except EnvironmentUnusable:
        return ()  # no sinfo here: the nodes' own records and exit codes still say what ran
    found: dict[str, str] = {}
    for line in output.splitlines() if code == 0 else []:
        name, _, rest = line.partition("|")
        state, _, reason = rest.partition("|")
        if name in nodes and state.rstrip("*~#!%$@^-").lower() in _LOST_STATES:
            found[name] = f"{state}: {reason.strip()}" if reason.strip() and reason.strip() != "none" else state
    return tuple(sorted(found.items()))


def started_at(commands: Commands, job_id: str) -> float | None:
    """When Slurm started the job (its StartTime, the controller's clock), None while pending or unknown."""
    code, output = commands.run(["scontrol", "--oneliner", "show", "job", job_id])
    fields = dict(_FIELD.findall(output)) if code == 0 else {}
    text = fields.get("StartTime", "")
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def follow(commands: Commands, job_id: str, deadline: float, stop: threading.Event) -> JobState:
    """Until the job is over, the deadline (time.monotonic()) passes or ``stop`` is set: its last state. Cancelling
    is the caller's (``cancel``), whatever ended the wait. An answer without the job's state is asked again
    (``UNREADABLE_TRIES`` answers in all); the last one of such a row stops the run (EnvironmentUnusable)."""
    last = JobState("UNKNOWN", "never seen")
    unreadable = 0  # such answers in a row
    while True:
        state = _read_state(commands, job_id)
        if isinstance(state, _Unreadable):
            unreadable += 1
            if unreadable >= UNREADABLE_TRIES:
                raise EnvironmentUnusable(
                    f"{state.asked} answered {unreadable} times in a row without the job's state; "
                    f"the last answer: {one_line(state.answer)[:400] or '(nothing)'}"
                )
            if time.monotonic() >= deadline or stop.wait(UNREADABLE_WAIT_S):
                return last
            continue
        unreadable = 0
        if state is None:
            return last if last.state not in ACTIVE else JobState("UNKNOWN", "Slurm no longer knows the job")
        last = state
        if state.state.rstrip("+") not in ACTIVE:
            return state
        if time.monotonic() >= deadline or stop.wait(POLL_S):
            return state


def cancel(commands: Commands, job_id: str, wait_s: float = CANCEL_WAIT_S) -> JobState | None:
    """``scancel`` the job and wait until nothing of it is queued or running (its last state; None: Slurm forgot it)."""
    commands.run(["scancel", job_id])
    end = time.monotonic() + wait_s
    state = job_state(commands, job_id)
    while state is not None and state.state.rstrip("+") in ACTIVE and time.monotonic() < end:
        time.sleep(POLL_S)
        if state.state == "PENDING":
            commands.run(["scancel", job_id])
        state = job_state(commands, job_id)
    return state
