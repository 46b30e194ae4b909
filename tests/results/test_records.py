"""Rank records are the image's text and numbers: validated when read (distval/results/records.py), so that NaN,
Infinity, 400-digit integers or megabytes of text become that rank's error instead of crashing every
report writer (tests/reports/test_report_writers.py runs them end to end)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from distval.results.outcome import ERROR, PASSED
from distval.results.records import MESSAGE_MAX_CHARS, error_record, json_problem, validate_record


def good(rank: int = 0, **changes: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "check": "bandwidth",
        "case": "bandwidth.all_reduce",
        "rank": rank,
        "status": PASSED,
        "message": "ok",
        "duration_s": 0.5,
        "ended_at": 1.7e9,
        "started_at": 1.7e9,
        "hostname": "n0",
        "attempt": 0,
        "details": {
            "iterations": 5,
            "world_size": 2,
            "figures": [
                {"size": 1024, "label": "1KiB", "time_us": 10.0, "algbw_gbps": 0.1, "busbw_gbps": 0.1},
                {"size": 2048, "label": "2KiB", "time_us": 11.0, "algbw_gbps": 0.2, "busbw_gbps": 0.2},
            ],
        },
    }
    record.update(changes)
    return record


def with_figure(**figure: Any) -> dict[str, Any]:
    record = good(1)
    record["details"]["figures"][1].update(figure)
    return record


def test_a_record_as_the_suite_writes_it_is_accepted() -> None:
    assert validate_record(good()) is None
    assert validate_record(good(case=None, hostname=None, attempt=None, details=None)) is None


@pytest.mark.parametrize(
    ("record", "words"),
    [
        ([1, 2], "expected a JSON object"),
        (good(rank=-1), "rank: expected an integer from 0"),
        (good(rank=10**400), "more than 20 digits"),
        (good(rank=True), "rank: expected an integer"),
        (good(check=""), "check: expected a string"),
        (good(status=7), "status: expected a string"),
        (good(message="x" * (MESSAGE_MAX_CHARS + 1)), f"got {MESSAGE_MAX_CHARS + 1} characters"),
        (good(duration_s=math.nan), "duration_s: expected a finite number"),
        (good(duration_s=math.inf), "duration_s: expected a finite number"),
        (good(duration_s=10**400), "duration_s: expected a finite number"),
        (good(started_at=-1.0), "started_at: expected a finite number from 0"),
        (good(attempt=1.5), "attempt: expected an integer"),
        (good(details=[1]), "details: expected a JSON object"),
        (with_figure(busbw_gbps=math.nan), "details.figures[1].busbw_gbps is nan, not a finite number"),
        (with_figure(busbw_gbps=-math.inf), "details.figures[1].busbw_gbps is -inf"),
        (with_figure(size=10**400), "details.figures[1].size is an integer of more than 20 digits"),
        (with_figure(busbw_gbps=0.0), "details.figures[1].busbw_gbps is 0.0: all_reduce over 2 ranks moves bytes"),
        (with_figure(busbw_gbps=-1.5), "details.figures[1].busbw_gbps is -1.5, not a finite number of 0 or more"),
        (with_figure(busbw_gbps="2.0"), "details.figures[1].busbw_gbps is '2.0', not a finite number"),
        (with_figure(best_busbw_gbps=-0.1), "details.figures[1].best_busbw_gbps is -0.1, not a finite number"),
        (with_figure(label="x" * 200_000), "details.figures[1].label is a string longer than"),
        (good(details={"a": json.loads("[" * 20 + "1" + "]" * 20)}), "nested deeper than"),
        (good(details={"many": list(range(200_000))}), "details holds too many values"),
    ],
)
def test_a_bad_record_is_refused_with_the_reason(record: Any, words: str) -> None:
    problem = validate_record(record)
    assert problem is not None and words in problem, problem


def test_the_refused_record_becomes_its_ranks_error_in_its_attempt() -> None:
    bad = with_figure(busbw_gbps=math.nan)
    bad.update(attempt=2, started_at=1.8e9)
    replaced = error_record(bad, "the reason")
    assert replaced is not None
    assert (replaced["rank"], replaced["check"], replaced["case"], replaced["status"]) == (
        1,
        "bandwidth",
        "bandwidth.all_reduce",
        ERROR,
    )
    assert (replaced["attempt"], replaced["started_at"]) == (2, 1.8e9) and "the reason" in replaced["message"]
    assert validate_record(replaced) is None
    assert error_record(good(rank=10**400), "x") is None and error_record("text", "x") is None


def test_json_problem_finds_what_a_report_writer_cannot_write() -> None:
    assert json_problem({"a": [1, 2.5, "x", None, True]}) is None
    assert json_problem({"restart_count": math.nan}) == "the file.restart_count is nan, not a finite number within ±1e+30"


@pytest.mark.parametrize(
    ("case", "world_size", "refused"),
    [
        ("bandwidth.all_reduce", 1, False),  # one rank: all_reduce's bus factor 2(n-1)/n is 0, so is its busbw
        ("bandwidth.all_gather", 1, False),
        ("bandwidth.broadcast", 1, True),  # its factor is 1 on any world: 0 GB/s is no measurement
        ("bandwidth.all_reduce", 3, True),
    ],
)
def test_a_busbw_of_zero_is_a_measurement_only_where_the_bus_factor_is_zero(case: str, world_size: int, refused: bool) -> None:
    record = good(case=case)
    record["details"]["world_size"] = world_size
    for figure in record["details"]["figures"]:
        figure.update(busbw_gbps=0.0, best_busbw_gbps=0.0)
    assert (validate_record(record) is not None) == refused


def test_the_yardsticks_record_is_not_read_as_figures() -> None:
    record = good(case="bandwidth.yardstick", details={"tcp": [{"size": 1024, "tcp_gbps": 0.5}], "world_size": 2})
    assert validate_record(record) is None
