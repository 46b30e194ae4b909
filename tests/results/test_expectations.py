"""The classification of errors (with the real messages measured across containers) and the verdict on a
fault scenario: it passes when exactly the expected happens, and fails naming what was expected and seen."""

from __future__ import annotations

import dataclasses

import pytest

from distval.config.faults import Expectation
from distval.results.expectations import (
    CONNECTION_CLOSED,
    KILLED,
    OOM,
    OTHER,
    TIMEOUT,
    ContainerExit,
    FaultLog,
    Injected,
    Verdict,
    classify,
    decided,
    evaluate,
)

# Real texts: collective_loop's records and launcher lines seen on torch 2.6 and 2.15 (docs/measurements.md, "Faults").
CLOSED = (
    "all_reduce iteration 355 raised after 3.63 s in the loop: RuntimeError: [./gloo/transport/tcp/pair.cc:534] "
    "Connection closed by peer [192.168.64.2]:23952"
)
RESET = "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection reset by peer"
TIMED_OUT = (
    "all_reduce iteration 12 raised after 12.1 s in the loop: RuntimeError: [../third_party/gloo/gloo/transport/tcp/"
    "unbound_buffer.cc:81] Timed out waiting 10000ms for recv operation to complete"
)
BROKEN_PIPE = "DistNetworkError: Broken pipe"
SIGKILL_LINE = "torch.distributed.elastic.multiprocessing.api: failed (exitcode: -9) local_rank: 0 (pid: 61) of binary"


@pytest.mark.parametrize(
    ("text", "exit_code", "oom", "kind"),
    [
        (CLOSED, None, False, CONNECTION_CLOSED),
        (RESET, None, False, CONNECTION_CLOSED),
        (BROKEN_PIPE, None, False, CONNECTION_CLOSED),
        (TIMED_OUT, None, False, TIMEOUT),
        ("RuntimeError: Application timeout caused pair closure", None, False, TIMEOUT),
        (SIGKILL_LINE, 1, False, KILLED),
        (None, 137, False, KILLED),
        (None, -9, False, KILLED),
        (None, -8, False, OTHER),
        (None, -10, False, OTHER),
        (None, 136, False, OTHER),
        (None, 138, False, OTHER),
        # The order decides when a text says two things: the timeout before the closed connection it caused,
        # the rank's own error before the SIGKILL exit code of its container.
        (f"{TIMED_OUT}; then: {RESET}", None, False, TIMEOUT),
        (f"{TIMED_OUT}; {SIGKILL_LINE}", 137, False, TIMEOUT),
        (CLOSED, 137, False, CONNECTION_CLOSED),
        (f"{BROKEN_PIPE}; Killed", -9, False, CONNECTION_CLOSED),
        ("whatever it printed", 1, True, OOM),
        ("ValueError: wrong answer", 1, False, OTHER),
        (None, None, False, OTHER),
        # Only the rank's own error counts, not what distval_suite/main.py adds about the others.
        (
            "cut off in collective_loop (after rank 1 had left the check: rank 1 error: Connection closed by peer)",
            0,
            False,
            OTHER,
        ),
    ],
)
def test_classify(text: str | None, exit_code: int | None, oom: bool, kind: str) -> None:
    assert classify(text, exit_code, oom) == kind


FAULT_AT = 1000.0
KILL = Injected(0, "kill", 1, (1,), FAULT_AT, "kill container n1", kills=True)
FREEZE = Injected(0, "freeze", 1, (1,), FAULT_AT, "pause container n1", kills=False)


def record(status: str, at: float, message: str = "", case: str = "collective_loop.all_reduce") -> dict[str, object]:
    return {"check": case.split(".")[0], "case": case, "status": status, "ended_at": at, "message": message}


SURVIVORS_CLOSED = (
    Expectation("survivors", (CONNECTION_CLOSED,), (0.0, 5.0)),
    Expectation("victims", (KILLED,), (0.0, 1.0)),
)


def test_a_kill_as_expected_passes_and_names_the_first_survivor_to_fail() -> None:
    records = {0: [record("passed", FAULT_AT - 5, case="all_reduce"), record("error", FAULT_AT + 0.25, CLOSED)]}
    verdict = evaluate(SURVIVORS_CLOSED, FaultLog(injected=(KILL,)), records, 2)
    assert verdict.ok, verdict.message
    assert verdict.message.startswith("kill of node 1: as expected (first to fail: rank 0 after 0.25 s (connection_closed)")
    assert "Connection closed by peer" in verdict.message
    assert [(v.rank, v.after_s) for v in verdict.ranks] == [(0, 0.25), (1, 0.0)]


def test_wrong_kind_of_error_fails_with_expected_and_seen() -> None:
    records = {0: [record("error", FAULT_AT + 10.1, TIMED_OUT)]}
    verdict = evaluate(SURVIVORS_CLOSED, FaultLog(injected=(KILL,)), records, 2)
    assert not verdict.ok
    assert (
        "rank 0: expected connection_closed 0..5 s after the fault; seen timeout after 10.10 s: all_reduce iteration 12"
        in verdict.message
    )


def test_a_survivor_that_hangs_past_the_window_fails() -> None:
    verdict = evaluate(SURVIVORS_CLOSED, FaultLog(injected=(KILL,)), {0: []}, 2)
    assert not verdict.ok
    assert "rank 0: expected connection_closed 0..5 s after the fault; seen no failure within 5 s" in verdict.message


def test_a_survivor_that_succeeds_wrongly_fails() -> None:
    records = {0: [record("passed", FAULT_AT + 3, "60 iterations, every one correct")]}
    verdict = evaluate(SURVIVORS_CLOSED, FaultLog(injected=(KILL,)), records, 2)
    assert not verdict.ok
    assert "rank 0: expected connection_closed 0..5 s after the fault; seen succeeded: passed after the fault" in verdict.message


def test_too_early_is_wrong_too() -> None:
    expect = (Expectation("survivors", (TIMEOUT,), (8.0, 16.0)),)
    records = {0: [record("error", FAULT_AT + 0.5, TIMED_OUT)]}
    verdict = evaluate(expect, FaultLog(injected=(FREEZE,)), records, 2)
    assert not verdict.ok and "seen timeout after 0.50 s" in verdict.message


def test_a_rank_not_named_must_not_fail() -> None:
    expect = (Expectation("survivors", (TIMEOUT,), (8.0, 16.0)),)
    records = {0: [record("error", FAULT_AT + 10, TIMED_OUT)], 1: [record("error", FAULT_AT + 11, TIMED_OUT)]}
    verdict = evaluate(expect, FaultLog(injected=(FREEZE,)), records, 2)
    assert not verdict.ok
    assert "rank 1: expected no failure; seen timeout after 11.00 s" in verdict.message


def test_failures_after_the_runtime_decided_do_not_count() -> None:
    expect = (Expectation("survivors", (TIMEOUT,), (8.0, 16.0)),)
    records = {0: [record("error", FAULT_AT + 10, TIMED_OUT)], 1: [record("error", FAULT_AT + 17, CLOSED)]}
    verdict = evaluate(expect, FaultLog(injected=(FREEZE,), decided_at=FAULT_AT + 16.5), records, 2)
    assert verdict.ok, verdict.message


def test_failures_before_the_fault_are_not_its_effect() -> None:
    records = {0: [record("error", FAULT_AT - 1, CLOSED)]}
    verdict = evaluate(SURVIVORS_CLOSED, FaultLog(injected=(KILL,)), records, 2)
    assert not verdict.ok and "rank 0: expected connection_closed" in verdict.message


def test_oom_comes_from_the_engine_not_the_exit_code() -> None:
    expect = (Expectation("victims", (OOM,), (0.0, 10.0)),)
    mark = Injected(0, "oom", 1, (1,), FAULT_AT, "mark", kills=False)
    gone = ContainerExit("n1", (1,), FAULT_AT + 1.5, 1, True, "exitcode: -9")
    verdict = evaluate(expect, FaultLog(injected=(mark,), exits=(gone,)), {}, 2)
    assert verdict.ok, verdict.message
    assert "rank 1 after 1.50 s (oom): OOM-killed (the Engine reports OOMKilled for n1)" in verdict.message
    not_oom = evaluate(expect, FaultLog(injected=(mark,), exits=(ContainerExit("n1", (1,), FAULT_AT + 1.5, 137, False),)), {}, 2)
    assert not not_oom.ok and "seen killed after 1.50 s" in not_oom.message


def test_no_rank_may_fail_with_an_empty_expectation() -> None:
    slow = Injected(0, "slow", 1, (1,), FAULT_AT, "tc qdisc add", kills=False)
    assert evaluate((), FaultLog(injected=(slow,)), {0: [record("passed", FAULT_AT + 8)]}, 2).ok
    failed = evaluate((), FaultLog(injected=(slow,)), {1: [record("error", FAULT_AT + 3, TIMED_OUT)]}, 2)
    assert not failed.ok and "rank 1: expected no failure; seen timeout after 3.00 s" in failed.message


def test_a_fault_that_could_not_be_carried_out_fails_the_verdict() -> None:
    broken = Injected(0, "partition", 1, (1,), FAULT_AT, "iptables", kills=False, error="exit 2: iptables: not found")
    verdict = evaluate(SURVIVORS_CLOSED, FaultLog(injected=(broken,)), {}, 2)
    assert not verdict.ok and verdict.message == "fault 0 (partition) could not be carried out: exit 2: iptables: not found"
    never = evaluate(SURVIVORS_CLOSED, FaultLog(), {}, 2)
    assert not never.ok and "none was" in never.message


def test_decided_when_every_named_rank_failed_or_the_window_closed() -> None:
    log = FaultLog(injected=(KILL,))
    assert not decided(SURVIVORS_CLOSED, log, {}, 2, FAULT_AT + 1)  # rank 0 may still fail in its window
    assert decided(SURVIVORS_CLOSED, log, {0: [record("error", FAULT_AT + 0.3, CLOSED)]}, 2, FAULT_AT + 1)
    assert decided(SURVIVORS_CLOSED, log, {}, 2, FAULT_AT + 5.1)
    assert not decided((), log, {}, 2, FAULT_AT + 100), "no rank may fail: only the end of the scenario decides"
    only_victims = (Expectation("victims", (KILLED,), (0.0, 10.0)),)
    assert not decided(only_victims, log, {}, 2, FAULT_AT + 1), "rank 0 (not named) must not fail during the window"


def test_finishing_is_not_failing() -> None:
    slow = Injected(0, "slow", 1, (1,), FAULT_AT, "tc qdisc add", kills=False)
    done = (
        ContainerExit("n0", (0,), FAULT_AT + 9, None, False),  # its worker ended after passing: done
        ContainerExit("n1", (1,), FAULT_AT + 10, 0, False),  # exited 0
    )
    records = {0: [record("passed", FAULT_AT + 8)], 1: [record("passed", FAULT_AT + 8)]}
    verdict = evaluate((), FaultLog(injected=(slow,), exits=done), records, 2)
    assert verdict.ok, verdict.message


# The boundaries and the order of evaluate/first_failures/decided (each test below kills mutants of
# distval/results/expectations.py that tools/mutation_pass.py found surviving).
def seen(verdict: Verdict) -> dict[int, str]:
    return {v.rank: v.seen for v in verdict.ranks}


def test_ranks_named_by_number_are_expected_to_fail() -> None:
    expect = (Expectation((1, 0), (CONNECTION_CLOSED,), (0.0, 5.0)),)
    records = {0: [record("error", FAULT_AT + 1, CLOSED)], 1: [record("error", FAULT_AT + 2, RESET)]}
    verdict = evaluate(expect, FaultLog(injected=(FREEZE,)), records, 3)
    assert [v.expected for v in verdict.ranks] == ["connection_closed 0..5 s after the fault"] * 2 + ["no failure"]
    assert verdict.ok, verdict.message


def test_records_before_the_fault_or_without_an_end_are_not_its_effect() -> None:
    records = {
        0: [record("error", FAULT_AT - 1, CLOSED), {"check": "x", "status": "error", "message": TIMED_OUT}],
        1: [{"check": "x", "status": "failed", "ended_at": "soon", "message": TIMED_OUT}],
    }
    verdict = evaluate((), FaultLog(injected=(FREEZE,)), records, 2)
    assert verdict.ok and seen(verdict) == {0: "no failure", 1: "no failure"}, verdict.message


def test_the_faults_own_instant_and_the_decision_instant_are_inside() -> None:
    """A failure at exactly the fault's time, at exactly the runtime's decision, or at the window's end counts;
    a pass at exactly the fault's time is its trigger, not a pass after it."""
    expect = (Expectation("survivors", (CONNECTION_CLOSED,), (0.0, 5.0)),)
    log = FaultLog(injected=(FREEZE,), decided_at=FAULT_AT + 5)
    at_fault = evaluate(expect, log, {0: [record("error", FAULT_AT, CLOSED)], 2: [record("error", FAULT_AT + 5, CLOSED)]}, 3)
    assert at_fault.ok, at_fault.message
    assert [v.after_s for v in at_fault.ranks] == [0.0, None, 5.0]
    trigger = evaluate(expect, log, {0: [record("passed", FAULT_AT)], 2: [record("passed", FAULT_AT + 0.5)]}, 3)
    assert seen(trigger)[0] == "no failure within 5 s"
    assert seen(trigger)[2] == "succeeded: passed after the fault within 5 s"


def test_a_ranks_first_failure_counts_not_a_later_one() -> None:
    records = {0: [record("error", FAULT_AT + 0.25, CLOSED), record("error", FAULT_AT + 3, TIMED_OUT)]}
    verdict = evaluate(SURVIVORS_CLOSED, FaultLog(injected=(KILL,)), records, 2)
    assert verdict.ok and seen(verdict)[0].startswith("connection_closed after 0.25 s"), verdict.message
    gone = ContainerExit("n0", (0,), FAULT_AT + 1, 1, False, "RuntimeError: Timed out")
    with_exit = evaluate(SURVIVORS_CLOSED, FaultLog(injected=(KILL,), exits=(gone,)), records, 2)
    assert seen(with_exit)[0].startswith("connection_closed after 0.25 s"), "the exit came after the rank's own failure"


def test_the_kill_replaces_a_victims_later_record_but_not_one_at_or_before_it() -> None:
    victims = (Expectation("victims", (KILLED,), (0.0, 1.0)),)
    later = evaluate(victims, FaultLog(injected=(KILL,)), {1: [record("error", FAULT_AT + 0.5, CLOSED)]}, 2)
    assert later.ok and seen(later)[1] == "killed after 0.00 s: killed by the fault (kill container n1)", later.message
    same = evaluate(victims, FaultLog(injected=(KILL,)), {1: [record("error", FAULT_AT, CLOSED)]}, 2)
    assert not same.ok and seen(same)[1].startswith("connection_closed after 0.00 s")
    second = dataclasses.replace(KILL, index=1, at=FAULT_AT + 2)
    both = evaluate(victims, FaultLog(injected=(FREEZE, second)), {1: [record("error", FAULT_AT + 1, CLOSED)]}, 2)
    assert seen(both)[1].startswith("connection_closed after 1.00 s"), "it failed before the second fault killed it"


def test_container_exits_at_the_boundaries() -> None:
    expect = (Expectation("survivors", (KILLED,), (0.0, 5.0)),)
    exits = (
        ContainerExit("n0", (0,), FAULT_AT, 137, False),  # at the fault: counts
        ContainerExit("n2", (2,), FAULT_AT + 4, 137, False),  # at the decision: counts
        ContainerExit("n3", (3,), FAULT_AT + 4.5, 137, False),  # after the decision: does not
    )
    verdict = evaluate(expect, FaultLog(injected=(FREEZE,), exits=exits, decided_at=FAULT_AT + 4), {}, 4)
    assert [v.after_s for v in verdict.ranks] == [0.0, None, 4.0, None]
    assert seen(verdict)[3] == "no failure within 5 s"


def test_a_worker_gone_without_a_pass_after_the_fault_is_a_failure_in_those_words() -> None:
    gone = ContainerExit("n0", (0,), FAULT_AT + 2, None, False)
    verdict = evaluate((), FaultLog(injected=(FREEZE,), exits=(gone,)), {0: [record("passed", FAULT_AT)]}, 2)
    assert seen(verdict)[0] == (
        "other after 2.00 s: the container was seen without its worker process (the launcher still ran) (exit code None)"
    )


def test_ranks_not_named_say_whether_they_passed_after_the_fault() -> None:
    verdict = evaluate((), FaultLog(injected=(FREEZE,)), {0: [record("passed", FAULT_AT + 1)]}, 2)
    assert seen(verdict) == {0: "passed after the fault", 1: "no failure"}


def test_the_first_fault_is_the_fault_time() -> None:
    later = Injected(1, "kill", 2, (2,), FAULT_AT + 3, "kill container n2", kills=True)
    expect = (Expectation("victims", (KILLED,), (0.0, 3.0)),)
    verdict = evaluate(expect, FaultLog(injected=(later, KILL)), {}, 3)
    assert verdict.fault_at == FAULT_AT and verdict.ok, verdict.message
    assert [v.after_s for v in verdict.ranks] == [None, 0.0, 3.0]
    log = FaultLog(injected=(later, KILL))
    assert not decided(expect, log, {}, 3, FAULT_AT + 3), "the window of the first fault is still open"
    assert decided(expect, log, {}, 3, FAULT_AT + 3.1)


def test_decided_waits_for_the_latest_window_including_its_last_instant() -> None:
    log = FaultLog(injected=(KILL,))
    assert not decided(SURVIVORS_CLOSED, log, {}, 2, FAULT_AT + 1.5), "the victims' window closed, the survivors' did not"
    assert not decided(SURVIVORS_CLOSED, log, {}, 2, FAULT_AT + 5), "a failure now is still inside 0..5 s"


def test_texts_are_cut_at_300_characters() -> None:
    long = "RuntimeError: Connection closed by peer " + "x" * 400
    verdict = evaluate((), FaultLog(injected=(FREEZE,)), {0: [record("error", FAULT_AT + 1, long)]}, 2)
    assert seen(verdict)[0] == f"connection_closed after 1.00 s: {long[:300]}"
    assert verdict.message.endswith(f"(first to fail: rank 0 after 1.00 s (connection_closed): {long[:300]})")


def test_the_first_to_fail_is_the_earliest_then_the_lowest_rank() -> None:
    records = {2: [record("error", FAULT_AT + 1, CLOSED)], 1: [record("error", FAULT_AT + 1, RESET)]}
    records[0] = [record("error", FAULT_AT + 2, TIMED_OUT)]
    verdict = evaluate((), FaultLog(injected=(FREEZE,)), records, 3)
    assert "(first to fail: rank 1 after 1.00 s (connection_closed): RuntimeError: [../third_party" in verdict.message
    later_rank_first = {1: [record("error", FAULT_AT + 0.5, RESET)], 0: [record("error", FAULT_AT + 2, CLOSED)]}
    verdict = evaluate((), FaultLog(injected=(FREEZE,)), later_rank_first, 2)
    assert "(first to fail: rank 1 after 0.50 s" in verdict.message


def test_a_survivor_failing_long_after_its_window_is_not_as_expected() -> None:
    # Closed connection, the right kind, but 30 s into a 0..5 s window: not the reaction the scenario expects.
    records = {0: [record("error", FAULT_AT + 30, CLOSED)]}
    verdict = evaluate(SURVIVORS_CLOSED, FaultLog(injected=(KILL,)), records, 2)
    assert not verdict.ok and "as expected" not in verdict.message
    assert "rank 0: expected connection_closed 0..5 s after the fault; seen connection_closed after 30.00 s" in verdict.message
    assert [v.ok for v in verdict.ranks] == [False, True]
    # The window's ends are inside it.
    for at in (0.0, 5.0):
        inside = evaluate(SURVIVORS_CLOSED, FaultLog(injected=(KILL,)), {0: [record("error", FAULT_AT + at, CLOSED)]}, 2)
        assert inside.ok, (at, inside.message)
