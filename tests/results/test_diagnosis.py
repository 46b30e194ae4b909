"""distval.results.diagnosis without Docker: stacks, flight-recorder dumps, error files and launch facts, good and bad,
and how results and reports carry them (restarted ranks keep their last attempt only)."""

from __future__ import annotations

import json
from typing import Any

from distval.config import Scenario
from distval.engine_protocol import ContainerState, ExecResult
from distval.plan.identity import with_hashes
from distval.results.diagnosis import (
    Diagnosis,
    FlightRecorder,
    current_attempts,
    diagnose,
    is_record_file,
    last_attempt,
    mismatch_summary,
    parse_error_file,
    parse_flight_recorder,
    parse_stacks,
    stacks_summary,
)
from distval.results.outcome import ERROR, FAILED, PASSED, ContainerOutcome, ScenarioOutcome
from distval.results.scenario import summarize_scenario
from distval.targets.engines.planning import plan_scenario

HUNG = """Thread 0x00007f1c2a1ff6c0 (most recent call first):
  File "/opt/distval-broken/sitecustomize.py", line 9 in _all_reduce_that_never_returns
  File "/distval/suite/collectives.py", line 45 in check_all_reduce
  File "/distval/suite/main.py", line 118 in _run_one
  File "/usr/lib/python3.13/threading.py", line 1012 in run

Current thread 0x00007f1c3b2c4740 (most recent call first):
  File "/distval/suite/main.py", line 84 in _run_in_thread
  File "/distval/suite/main.py", line 45 in run
"""


def test_stacks_name_the_innermost_frame_of_each_thread() -> None:
    threads = parse_stacks(HUNG)
    assert [t.thread for t in threads] == ["Thread 0x00007f1c2a1ff6c0", "Current thread 0x00007f1c3b2c4740"]
    assert stacks_summary(threads) == (
        "2 thread(s): thread in _all_reduce_that_never_returns (sitecustomize.py:9); "
        "current thread in _run_in_thread (main.py:84)"
    )


def test_a_second_dump_replaces_the_first_and_garbage_is_left_out() -> None:
    second = HUNG.replace("line 9 in", "line 10 in")
    threads = parse_stacks("noise\n" + HUNG + "\n<truncated by the kill\n" + second)
    assert len(threads) == 2 and 'sitecustomize.py", line 10 in' in threads[0].frames[0]
    assert parse_stacks("") == () and stacks_summary(()) == "no stack in the file"
    assert parse_stacks("\x00\x01 binary\nFile nowhere") == ()
    # A header without frames (the kill cut the dump short) is a thread with no Python frame.
    assert stacks_summary(parse_stacks("Thread 0x1 (most recent call first):\n")) == "1 thread(s): thread in no Python frame"


def dump(entries: list[dict[str, Any]] | None = None, **extra: Any) -> bytes:
    return json.dumps({"available": True, "entries": entries or [], **extra}).encode()


def entry(record_id: int, name: str, seq: int, state: str = "scheduled", pg: int = 0) -> dict[str, Any]:
    return {"record_id": record_id, "profiling_name": name, "collective_seq_id": seq, "state": state, "pg_id": pg}


def test_flight_recorder_mismatch_names_the_rank_behind_first() -> None:
    rank0 = parse_flight_recorder(dump([entry(0, "gloo:barrier", 41), entry(1, "gloo:all_reduce", 42)]))
    rank1 = parse_flight_recorder(dump([entry(0, "gloo:barrier", 41, "completed")]))
    assert mismatch_summary({0: rank0, 1: rank1}) == "rank 1 is at gloo:barrier #41, rank 0 at gloo:all_reduce #42"
    assert mismatch_summary({0: rank0, 1: rank0}) == "every rank is at gloo:all_reduce #42 (pg 0, scheduled)"
    empty = parse_flight_recorder(dump([]))
    assert mismatch_summary({0: rank0, 1: empty}) == "rank 0 is at gloo:all_reduce #42, rank(s) 1 recorded none"


def test_flight_recorder_bad_inputs_are_named_never_raised() -> None:
    assert parse_flight_recorder(b"{not json") == FlightRecorder(
        False, "the flight-recorder file is not a JSON object (cut by the kill?)"
    )
    assert parse_flight_recorder(b"[1, 2]").available is False
    missing = parse_flight_recorder(json.dumps({"available": False, "reason": "torch 2.6.0 has no flight recorder"}).encode())
    assert missing == FlightRecorder(False, "torch 2.6.0 has no flight recorder")
    odd = parse_flight_recorder(
        dump([{"record_id": "x", "collective_seq_id": None}, "not an entry", entry(5, "gloo:barrier", 3)])
    )
    assert [c.name for c in odd.entries] == ["?", "gloo:barrier"] and odd.entries[0].seq is None
    assert mismatch_summary({}) is None
    assert mismatch_summary({0: missing}) is None


ERROR_FILE = {
    "message": {
        "message": "RuntimeError: distval-broken: destroy_process_group failed on rank 1",
        "extraInfo": {"py_callstack": "Traceback (most recent call last):\n  File ...\nRuntimeError: ...", "timestamp": "1"},
    },
    "errorCode": 1,
}


def test_error_file_gives_the_last_line_and_the_traceback() -> None:
    cause = parse_error_file(json.dumps(ERROR_FILE).encode(), "n0")
    assert cause is not None and cause.message == "RuntimeError: distval-broken: destroy_process_group failed on rank 1"
    assert cause.traceback.startswith("Traceback") and cause.source == "n0"
    plain = parse_error_file(json.dumps({"message": "Signal 9 (SIGKILL) received"}).encode(), "n1")
    assert plain is not None and (plain.message, plain.traceback) == ("Signal 9 (SIGKILL) received", "")
    for bad in (b"", b"null", b"{}", b'{"message": {}}', b"\xff\xfe"):
        assert parse_error_file(bad, "n0") is None, bad


def test_only_rank_files_are_records() -> None:
    assert is_record_file("rank-0.jsonl") and is_record_file("rank-12.jsonl")
    for name in ("stacks-rank-0.txt", "flight-recorder-rank-0.json", "launch-rank-0.json", "torchelastic-error.json", "x.jsonl"):
        assert not is_record_file(name)


def test_last_attempt_keeps_the_restarted_records_only() -> None:
    records: list[dict[str, Any]] = [
        {"check": "env", "attempt": 0},
        {"check": "all_reduce", "attempt": 0},
        {"check": "env", "attempt": 1},
    ]
    assert last_attempt(records) == [{"check": "env", "attempt": 1}]
    assert last_attempt([{"check": "env"}]) == [{"check": "env"}]  # records of a suite without attempts
    # An agent that did not count the restart: the same attempt number, a later process.
    same_count = [{"check": "env", "attempt": 0, "started_at": 10.0}, {"check": "env", "attempt": 0, "started_at": 99.5}]
    assert last_attempt(same_count) == [same_count[1]]
    assert last_attempt([{"check": "env", "started_at": "garbage"}]) == [{"check": "env", "started_at": "garbage"}]
    assert last_attempt([]) == []


def timed(rank: int, check: str, status: str, attempt: int, started_at: float, ended_at: float) -> dict[str, Any]:
    """A record as distval_suite/records.py writes it: the agent's restart count, the process's start, the write time."""
    return {
        "check": check,
        "rank": rank,
        "status": status,
        "message": f"{check} {status} on attempt {attempt}",
        "attempt": attempt,
        "started_at": started_at,
        "ended_at": ended_at,
    }


def moved_rank() -> dict[str, list[dict[str, Any]]]:
    """Two agents, one worker each, four rounds (max_restarts 3); c10d hands node ranks out anew each round, so
    the ranks swap nodes every round. n1's clock is 1000 s ahead of n0's. The agent whose worker failed counts
    the restart, the other does not: n1 counts 0, 1, 2, 3; n0 stays at 0.
    round 0: n0 rank 0, n1 rank 1 (rank 1 crashes) | round 1: n0 rank 1, n1 rank 0 (rank 0 crashes)
    round 2: n0 rank 0, n1 rank 1 (all_reduce passes, then rank 1 crashes)
    round 3: n0 rank 1 (all_reduce FAILS: the newest verdict), n1 rank 0 (passes)."""
    return {
        "n0": [
            timed(0, "env", "passed", 0, 10.0, 11.0),
            timed(0, "all_reduce", "passed", 0, 10.0, 12.0),
            timed(1, "env", "passed", 0, 20.0, 21.0),
            timed(0, "env", "passed", 0, 30.0, 31.0),
            timed(0, "all_reduce", "passed", 0, 30.0, 32.0),
            timed(1, "env", "passed", 0, 40.0, 41.0),
            timed(1, "all_reduce", "failed", 0, 40.0, 42.0),
        ],
        "n1": [
            timed(1, "env", "passed", 0, 1010.0, 1011.0),
            timed(0, "env", "passed", 1, 1020.0, 1021.0),
            timed(1, "env", "passed", 2, 1030.0, 1031.0),
            timed(1, "all_reduce", "passed", 2, 1030.0, 1032.0),
            timed(0, "env", "passed", 3, 1040.0, 1041.0),
            timed(0, "all_reduce", "passed", 3, 1040.0, 1042.0),
        ],
    }


def by_rank(records: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    grouped: dict[int, list[dict[str, Any]]] = {}
    for r in records:
        grouped.setdefault(int(r["rank"]), []).append(r)
    return grouped


def cross_outcome(records: dict[str, list[dict[str, Any]]]) -> ScenarioOutcome:
    scenario = Scenario("s", "cross-container", 2, "gloo", None, 60.0, 30.0, 30.0, "python3", ())
    plan = with_hashes(plan_scenario(scenario, "r1", None))
    containers = []
    for node, (name, node_records) in enumerate(sorted(records.items())):
        files = {
            f"rank-{rank}.jsonl": "".join(json.dumps(r) + "\n" for r in rank_records).encode()
            for rank, rank_records in by_rank(node_records).items()
        }
        containers.append(ContainerOutcome(name, node, (node,), 0, False, "", "", files))
    return ScenarioOutcome(plan, None, 1.0, tuple(containers))


def test_a_rank_that_moved_between_nodes_keeps_its_newest_attempt_not_the_highest_count() -> None:
    """Restart counts of different agents and clocks of different hosts are not comparable: the old rule, the
    highest (count, start) per rank, took rank 1's round-2 pass on n1 (count 2, later clock) over its round-3
    failure on n0 (count 0). Each container's newest round makes its older processes stale, whichever rank."""
    records = moved_rank()
    current = current_attempts((name, by_rank(node_records)) for name, node_records in sorted(records.items()))
    assert current == {0: [("n1", records["n1"][4:])], 1: [("n0", records["n0"][5:])]}
    result = summarize_scenario(cross_outcome(records))
    cases = {c.name: c for c in result.cases}
    assert (cases["env"].status, cases["all_reduce"].status) == (PASSED, FAILED)
    assert cases["all_reduce"].message == "rank 1: all_reduce failed on attempt 0"
    assert result.status == FAILED


def test_one_round_of_one_agent_keeps_every_local_rank() -> None:
    """Local ranks of one round start a few milliseconds apart: none is older than another."""
    records = [timed(0, "env", "passed", 0, 10.0, 12.0), timed(1, "env", "passed", 0, 10.05, 12.5)]
    assert current_attempts([("n0", by_rank(records))]) == {0: [("n0", records[:1])], 1: [("n0", records[1:])]}


def test_times_that_prove_nothing_leave_every_attempt_in_place() -> None:
    """Missing, unreadable or NaN times prove no process older: records stay, and across containers they are
    attempts that cannot be ordered (the caller lets the worse win), never a guess."""
    old = {"check": "env", "rank": 1, "status": "failed", "attempt": 0, "started_at": "garbage"}
    new = {"check": "env", "rank": 1, "status": "passed", "attempt": 0, "started_at": float("nan")}
    other = {"check": "env", "rank": 0, "status": "passed", "attempt": 0, "started_at": 5.0, "ended_at": float("nan")}
    current = current_attempts([("n0", {0: [other], 1: [old]}), ("n1", {1: [new]})])
    assert current == {0: [("n0", [other])], 1: [("n0", [old]), ("n1", [new])]}
    # Within one agent a higher restart count is newer, whatever the times say.
    counted = {**old, "attempt": 1, "started_at": 1.0}
    assert current_attempts([("n0", {1: [old, counted]})]) == {1: [("n0", [counted])]}


def test_attempts_that_cannot_be_ordered_let_the_worse_outcome_win() -> None:
    """Rank 1 left records on two nodes and nothing on either proves which is newer (n1 ran nothing after it):
    a pass is never preferred over a failure, and a case that only one of them wrote cannot pass."""
    records = {
        "n0": [
            timed(0, "env", "passed", 0, 10.0, 11.0),
            timed(1, "env", "passed", 0, 10.01, 11.0),
            timed(0, "all_reduce", "passed", 0, 10.0, 12.0),
            timed(1, "all_reduce", "failed", 0, 10.01, 12.0),
            timed(0, "store", "passed", 0, 10.0, 13.0),
        ],
        "n1": [
            timed(1, "env", "passed", 0, 1010.0, 1011.0),
            timed(1, "all_reduce", "passed", 0, 1010.0, 1012.0),
            timed(1, "store", "passed", 0, 1010.0, 1013.0),
        ],
    }
    current = current_attempts((name, by_rank(node_records)) for name, node_records in sorted(records.items()))
    assert [where for where, _ in current[1]] == ["n0", "n1"]
    cases = {c.name: c for c in summarize_scenario(cross_outcome(records)).cases}
    assert cases["all_reduce"].status == FAILED
    assert cases["all_reduce"].message == (
        "rank 1: all_reduce failed on attempt 0 (rank 1 left records on n0, n1 from attempts that cannot be "
        "ordered: failed, passed; the worse counts)"
    )
    assert cases["store"].status == ERROR
    assert cases["store"].message == (
        "rank 1: store passed on attempt 0 (rank 1 left records on n0, n1 from attempts that cannot be ordered; the one "
        "on n0, which may be the newer, has no store record, so it cannot pass)"
    )
    assert cases["env"].status == PASSED


def record(rank: int, check: str, status: str, attempt: int) -> str:
    return json.dumps({"check": check, "rank": rank, "status": status, "message": f"{check} {status}", "attempt": attempt})


def launch(rank: int, restarts: int, agent_store: str | None) -> bytes:
    return json.dumps({"rank": rank, "restart_count": restarts, "use_agent_store": agent_store}).encode()


def outcome(files: dict[str, bytes], exit_code: int = 0, killed: bool = False) -> ScenarioOutcome:
    scenario = Scenario("s", "in-container", 2, "gloo", None, 60.0, 30.0, 30.0, "python3", ())
    plan = with_hashes(plan_scenario(scenario, "r1", None))
    container = ContainerOutcome("n0", 0, (0, 1), exit_code, killed, "", "", files)
    return ScenarioOutcome(plan, None, 1.0, (container,))


def test_a_restart_counts_once_and_its_failed_attempt_does_not_turn_the_verdict_red() -> None:
    files = {
        "rank-0.jsonl": "\n".join([record(0, "process_group", "passed", 0), record(0, "process_group", "passed", 1)]).encode(),
        # Rank 1 was killed in attempt 0 after an error record; attempt 1 passed.
        "rank-1.jsonl": "\n".join([record(1, "process_group", "error", 0), record(1, "process_group", "passed", 1)]).encode(),
        "launch-rank-0.json": launch(0, 1, "False"),
        "launch-rank-1.json": launch(1, 1, "False"),
    }
    result = summarize_scenario(outcome(files))
    assert [(c.name, c.status) for c in result.cases] == [("process_group", "passed"), ("exit_status", "passed")]
    assert result.cases[-1].message.endswith("after 1 torchrun restart(s) (the last attempt's records count)")
    properties = dict(result.properties)
    assert properties["restarts"] == "1"
    assert properties["rendezvous_store"].startswith("a store of the workers' own")
    assert result.diagnosis.lines() == [
        "torchrun restarted the workers 1 time(s); the store: a store of the workers' own, not the agent's "
        "(TORCHELASTIC_USE_AGENT_STORE=False)"
    ]


def test_diagnosis_files_reach_the_exit_status_case_and_bad_ones_are_noted() -> None:
    files = {
        "rank-0.jsonl": record(0, "all_reduce", "passed", 0).encode(),
        "stacks-rank-1.txt": HUNG.encode(),
        "flight-recorder-rank-0.json": dump([entry(1, "gloo:all_reduce", 2)]),
        "flight-recorder-rank-1.json": dump([entry(1, "gloo:all_reduce", 1)]),
        "launch-rank-0.json": b"{cut",
        "torchelastic-error.json": b"garbage",
    }
    result = summarize_scenario(outcome(files, exit_code=None, killed=True))
    exit_case = next(c for c in result.cases if c.name == "exit_status")
    assert "flight recorder: rank 1 is at gloo:all_reduce #1, rank 0 at gloo:all_reduce #2" in exit_case.message
    assert "rank 1 stacks: 2 thread(s): thread in _all_reduce_that_never_returns" in exit_case.message
    assert "--- rank 1: Python stacks at SIGUSR1 before the kill ---" in exit_case.output
    assert "rank 0: gloo:all_reduce #2 (pg 0, scheduled)" in exit_case.output
    assert result.diagnosis.notes == (
        "n0:launch-rank-0.json: unreadable launch facts",
        "n0:torchelastic-error.json: unreadable torchelastic error file",
    )
    # The diagnosis files are no records: no "unreadable result line" testcase.
    assert [c.name for c in result.cases] == ["all_reduce", "exit_status"]


def test_an_empty_outcome_has_an_empty_diagnosis() -> None:
    assert diagnose(()) == Diagnosis()
    assert Diagnosis().as_dict()["ranks"] == [] and Diagnosis().text() == "" and Diagnosis().lines() == []


class ExecEngine:
    """Just what before_kill calls: exec_run, answering each argv with a canned result (or raising)."""

    def __init__(self, answers: list[ExecResult | Exception], status: str = "running") -> None:
        self.answers = answers
        self.calls: list[list[str]] = []
        self.status = status

    def state(self, container: Any) -> ContainerState:
        return ContainerState(self.status, None, False)

    def run_beside(self, container: Any, arguments: Any, timeout_s: float) -> ExecResult:
        self.calls.append(["beside", *arguments])
        answer = self.answers.pop(0)
        assert isinstance(answer, ExecResult)
        return answer

    def unpause(self, container: Any) -> None:
        self.calls.append(["unpause"])
        self.status = "running"

    def exec_run(self, container: Any, argv: Any) -> ExecResult:
        self.calls.append(list(argv))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_before_kill_signals_then_waits_and_never_raises() -> None:
    import signal

    from distval.errors import EngineError
    from distval.targets.docker.stacks import before_kill

    scenario = Scenario("s", "in-container", 2, "gloo", None, 60.0, 30.0, 30.0, "python3", ())
    plan = with_hashes(plan_scenario(scenario, "r1", None))
    name = plan.containers[0].name
    workers = json.dumps([{"pid": 7, "rank": 0, "local_rank": 0}, {"pid": 8, "rank": 1, "local_rank": 1}])
    waited = json.dumps({"node": 0, "signalled": [0, 1], "stacks": [0, 1], "flight_recorder": [0, 1], "waited_s": 0.2})
    engine = ExecEngine([ExecResult(0, workers), ExecResult(0, waited)])
    notes: list[str] = []

    class Events:
        def note(self, plan: object, line: str) -> None:
            notes.append(line)

    took_s = before_kill(engine, {name: object()}, plan, Events())  # type: ignore[arg-type]
    assert engine.calls[0][4] == str(int(signal.SIGUSR1)) and engine.calls[1][5] == "0:7,1:8"
    assert took_s < 5 and "stacks of rank(s) [0, 1] and flight-recorder dumps of rank(s) [0, 1]" in notes[0]
    failing = ExecEngine([EngineError("container is paused")])
    notes.clear()
    before_kill(failing, {name: object()}, plan, Events())  # type: ignore[arg-type]
    assert notes == [f"{name}: no stacks: the workers could not be signalled (container is paused)"]
    # A frozen node (freeze fault) runs no exec: it is thawed first, and the note says so.
    frozen = ExecEngine([ExecResult(0, workers), ExecResult(0, waited)], status="paused")
    notes.clear()
    before_kill(frozen, {name: object()}, plan, Events())  # type: ignore[arg-type]
    assert [c[0] for c in frozen.calls] == ["beside", "unpause", "python3"], frozen.calls
    # The beside-helper gets only the signal and "all": its image and program are distval's (distval/targets/docker/beside.py).
    assert frozen.calls[0] == ["beside", str(int(signal.SIGUSR1)), "all"], frozen.calls
    assert notes[0].startswith(f"{name}: frozen: signalled from beside it, then unpaused; stacks of rank(s)")


def test_a_chained_root_cause_names_its_innermost_exception() -> None:
    from distval.results.diagnosis import parse_error_file

    trace = (
        'Traceback (most recent call last):\n  File "api.py", line 1, in create\n'
        "RuntimeError: use_libuv was requested but PyTorch was build without libuv support\n\n"
        "The above exception was the direct cause of the following exception:\n\n"
        'Traceback (most recent call last):\n  File "run.py", line 9, in main\n'
        "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has failed.\n"
    )
    data = json.dumps(
        {
            "message": {
                "message": "RendezvousConnectionError: The connection to the C10d store has failed.",
                "extraInfo": {"py_callstack": trace},
            }
        }
    ).encode()
    cause = parse_error_file(data, "n0")
    assert cause is not None
    assert cause.message == (
        "RendezvousConnectionError: The connection to the C10d store has failed. (caused by RuntimeError: use_libuv "
        "was requested but PyTorch was build without libuv support)"
    )
    plain = json.dumps({"message": {"message": "ValueError: x", "extraInfo": {"py_callstack": "Traceback\nValueError: x"}}})
    assert parse_error_file(plain.encode(), "n0").message == "ValueError: x"  # type: ignore[union-attr]
