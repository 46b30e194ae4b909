"""A rank's result record, checked as it is read: the image under test writes it, so it is untrusted data.

distval_suite/records.py writes one JSON object per line (check, case, rank, status, message, duration_s,
ended_at, hostname, attempt, started_at, details). Python's json module reads ``NaN``, ``Infinity`` and
``1e999`` (infinity) as floats and integers of any length, and a report writer that meets one later
fails (JSON has no NaN; ``math.floor(inf)`` raises), losing every report. So a record is refused here,
before anything uses it, unless each field has its type and each number is finite and in its range;
strings and nesting are bounded so that one record cannot make a report of any size; a bandwidth figure's busbw must
be a measurement (distval/results/bandwidth.py ``busbw_problem``: above 0). A refused record
becomes an error of its rank's testcase with the reason (``error_record``) where its rank and testcase
can be told, else only a problem of the scenario's results. ``read_records`` reads a container's record files
so, once per scenario.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from distval import strict_json, text_caps
from distval.config.layout import WORLD_SIZE_MAX
from distval.plan.rank_files import RECORDS
from distval.results import bandwidth
from distval.results.outcome import ContainerOutcome

NAME_MAX_CHARS = 256  # check, case, status, hostname
MESSAGE_MAX_CHARS = 100_000  # a long traceback fits
DETAIL_STRING_MAX_CHARS = 100_000
DETAILS_MAX_ITEMS = 100_000  # values in ``details``, all levels together
DETAILS_MAX_DEPTH = 16
NUMBER_MAX = 1e30  # any number in ``details``: far above a byte count, a 64-bit id or a bandwidth
DURATION_MAX_S = 1e7  # distval's deadlines are at most a week (6.05e5 s)
TIME_MAX_S = 1e10  # ended_at, started_at: seconds since 1970, up to the year 2286
ATTEMPT_MAX = 1_000_000

_NAMES = ("check", "case", "status", "hostname")


def _number(value: object, low: float, high: float) -> bool:
    """A JSON number (not a bool) that is finite and within [low, high]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value) and low <= value <= high
    except OverflowError:  # an int too large for a float
        return False


def _integer(value: object, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _value_problem(
    value: object, path: str, depth: int, budget: list[int], strings_max: int | None, depth_max: int = DETAILS_MAX_DEPTH
) -> str | None:
    """Why a parsed JSON value is unusable (a number not finite or past ±NUMBER_MAX, nested past ``depth_max``,
    too many values, a string longer than ``strings_max``); None when it is fine. ``budget``: values still
    allowed (a list, so that every level counts down the same one)."""
    budget[0] -= 1
    if budget[0] < 0:
        return f"{path.split('.')[0].split('[')[0]} holds too many values"
    if depth > depth_max:
        return f"{path} is nested deeper than {depth_max} levels"
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        if _number(value, -NUMBER_MAX, NUMBER_MAX):
            return None
        return f"{path} is {_shown(value)}, not a finite number within ±{NUMBER_MAX:g}"
    if isinstance(value, str):
        if strings_max is None or len(value) <= strings_max:
            return None
        return f"{path} is a string longer than {strings_max} characters"
    if isinstance(value, list):
        items: list[tuple[str, object]] = [(f"{path}[{index}]", item) for index, item in enumerate(value)]
    elif isinstance(value, dict):
        if strings_max is not None and any(len(str(key)) > NAME_MAX_CHARS for key in value):
            return f"{path} has a key longer than {NAME_MAX_CHARS} characters"
        items = [(f"{path}.{str(key)[:40]}", item) for key, item in value.items()]
    else:
        return f"{path} is a {type(value).__name__}"  # json.loads makes no other type; a caller's object might
    for where, item in items:
        problem = _value_problem(item, where, depth + 1, budget, strings_max, depth_max)
        if problem is not None:
            return problem
    return None


# A whole document (a diagnosis file, a JSON report that holds records' details a few levels down).
DOCUMENT_MAX_VALUES = 10 * DETAILS_MAX_ITEMS
DOCUMENT_MAX_DEPTH = 64


def json_problem(value: object, what: str = "the file") -> str | None:
    """Why a parsed JSON document (a diagnosis file of the image's, a JSON report) is unusable: a number that
    is not finite or is past ±NUMBER_MAX, more than DOCUMENT_MAX_VALUES values or DOCUMENT_MAX_DEPTH levels;
    None when usable."""
    return _value_problem(value, what, 0, [DOCUMENT_MAX_VALUES], None, DOCUMENT_MAX_DEPTH)


def _shown(value: object) -> str:
    """A number for a message: a 5,000-digit integer is not repeated whole."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**20:
        return "an integer of more than 20 digits"
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:40]}..."


def validate_record(obj: object) -> str | None:
    """Why ``obj`` (one parsed JSON line of a rank's results file) is not a usable record; None when it is."""
    if not isinstance(obj, dict):
        return f"expected a JSON object; got a {type(obj).__name__}"
    if not _integer(obj.get("rank"), 0, WORLD_SIZE_MAX - 1):
        return f"rank: expected an integer from 0 to {WORLD_SIZE_MAX - 1}; got {_shown(obj.get('rank'))}"
    for key in _NAMES:
        value = obj.get(key)
        if key in ("case", "hostname") and value is None:
            continue  # optional: a missing or empty case is the check's, hostname is only shown
        if not isinstance(value, str) or (key in ("check", "status") and not value) or len(value) > NAME_MAX_CHARS:
            return f"{key}: expected a string of at most {NAME_MAX_CHARS} characters; got {_shown(value)}"
    message = obj.get("message", "")
    if not isinstance(message, str) or len(message) > MESSAGE_MAX_CHARS:
        what = f"{len(message)} characters" if isinstance(message, str) else _shown(message)
        return f"message: expected a string of at most {MESSAGE_MAX_CHARS} characters; got {what}"
    ranges = (("duration_s", DURATION_MAX_S), ("ended_at", TIME_MAX_S), ("started_at", TIME_MAX_S))
    for key, high in ranges:
        value = obj.get(key)
        if value is not None and not _number(value, 0.0, high):
            return f"{key}: expected a finite number from 0 to {high:g}; got {_shown(value)}"
    attempt = obj.get("attempt")
    if attempt is not None and not _integer(attempt, 0, ATTEMPT_MAX):
        return f"attempt: expected an integer from 0 to {ATTEMPT_MAX}; got {_shown(attempt)}"
    details = obj.get("details")
    if details is not None:
        if not isinstance(details, dict):
            return f"details: expected a JSON object; got a {type(details).__name__}"
        problem = _value_problem(details, "details", 0, [DETAILS_MAX_ITEMS], DETAIL_STRING_MAX_CHARS)
        if problem is not None:
            return problem
        # A busbw of 0 or below is no measurement: refused like any impossible number, never a figure or a pass.
        return bandwidth.record_problem(str(obj.get("case") or obj["check"]), details)
    return None


def error_record(obj: object, problem: str) -> dict[str, Any] | None:
    """The error record that stands for a refused one, so that its rank's testcase fails with ``problem``;
    None when even its rank or testcase cannot be told (the scenario's results problem says it then)."""
    if not isinstance(obj, Mapping) or not _integer(obj.get("rank"), 0, WORLD_SIZE_MAX - 1):
        return None
    check, case = obj.get("check"), obj.get("case")
    if not isinstance(check, str) or not 0 < len(check) <= NAME_MAX_CHARS:
        return None
    if case is not None and (not isinstance(case, str) or len(case) > NAME_MAX_CHARS):
        return None
    record: dict[str, Any] = {
        "rank": obj["rank"],
        "check": check,
        "case": case or check,
        "status": "error",
        "message": f"distval refused this rank's record (written by the image under test): {problem}",
        "duration_s": 0.0,
        "details": {},
    }
    # Kept when valid, so that the refused record still belongs to its attempt (diagnosis.last_attempt).
    if _integer(obj.get("attempt"), 0, ATTEMPT_MAX):
        record["attempt"] = obj["attempt"]
    if _number(obj.get("started_at"), 0.0, TIME_MAX_S):
        record["started_at"] = obj["started_at"]
    return record


# A rank's records by rank, in the order its files and lines hold them.
RecordsByRank = dict[int, list[dict[str, object]]]


def read_records(outcome: ContainerOutcome) -> tuple[RecordsByRank, list[str]]:
    """The records of the container's record files (its stacks, flight-recorder dumps and error files are the
    diagnosis's: distval/results/diagnosis.py), each checked as it is read, by rank; and a line for each one that
    could not be read or told apart (a problem of the scenario's results)."""
    by_rank: RecordsByRank = {}
    problems: list[str] = []
    for file_name, data in sorted(outcome.result_files.items()):
        if RECORDS.match(file_name) is None:
            continue
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                record = strict_json.loads(line)
                if isinstance(record, dict) and "message" in record:
                    record["message"] = text_caps.capped(str(record["message"]), text_caps.MESSAGE_MAX_CHARS)
                record = text_caps.capped_strings(record)  # the image's text: capped before it is checked and kept
                problem = validate_record(record)
                if problem is not None:  # written by the image under test: its rank's error, not a crash later
                    record = error_record(record, problem)
                    if record is None:  # not even its rank and check can be told
                        raise ValueError(problem)
                    problems.append(f"{outcome.name}:{file_name}:{number}: {problem}")
                rank = int(record["rank"])
                record["check"] = str(record["check"])
                record["duration_s"] = float(record.get("duration_s") or 0.0)
            except (strict_json.DuplicateKey, strict_json.TooDeep) as exc:  # read two ways, or not at all: never kept
                problems.append(f"{outcome.name}:{file_name}:{number}: unreadable result line ({exc})")
                continue
            except (ValueError, KeyError, TypeError, RecursionError):  # RecursionError: "[[[[..." past json's depth
                problems.append(f"{outcome.name}:{file_name}:{number}: unreadable result line (cut by a crash?)")
                continue
            by_rank.setdefault(rank, []).append(record)
    return by_rank, problems
