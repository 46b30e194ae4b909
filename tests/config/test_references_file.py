"""The references file's bounds, each at its edge (distval/config/references.py): a floor no figure can pass
refused (a tolerance of 1, a busbw of 0), a floor a typo makes (past GBPS_MAX) refused, a size or key given twice
refused, names and reasons within their lengths; a good file's floors are gbps x (1 - tolerance). Running against
the file: tests/comparing/test_system_references.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from distval.config.references import (
    GBPS_MAX,
    REASON_MAX,
    FigureReference,
    ScenarioReferences,
    load_references,
    parse_references,
    system_problem,
)
from distval.errors import ConfigError


def one_figure(value: str, size: str = "64KiB") -> str:
    return f"version: 1\nsystems:\n  s:\n    bw:\n      busbw:\n        all_reduce:\n          {size}: {value}\n"


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_references(text, "r.yaml")
    return list(caught.value.problems)


def scenario(text: str) -> ScenarioReferences:
    return parse_references(text, "r.yaml").systems["s"]["bw"]


@pytest.mark.parametrize(
    "value",
    [
        "{gbps: 1, tolerance: 0}",
        "{gbps: 1, tolerance: 0.999}",
        "{gbps: 0.001, tolerance: 0.5}",
        f"{{gbps: {GBPS_MAX:.0f}, tolerance: 0.1}}",
    ],
)
def test_a_figure_within_its_bounds_is_read(value: str) -> None:
    (figure,) = scenario(one_figure(value)).busbw
    assert figure.operation == "all_reduce" and figure.size == 65536 and figure.label == "64KiB"


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("{gbps: 1, tolerance: 1}", "64KiB.tolerance: expected a tolerance from 0 up to (not including) 1"),
        ("{gbps: 1, tolerance: -0.001}", "64KiB.tolerance: expected a tolerance"),
        ("{gbps: 1, tolerance: .nan}", "64KiB.tolerance: expected a tolerance"),
        ("{gbps: 1, tolerance: true}", "64KiB.tolerance: expected a tolerance"),
        ("{gbps: 0, tolerance: 0.1}", "64KiB.gbps: expected a busbw in GB/s > 0"),
        (f"{{gbps: {GBPS_MAX * 1.001:.0f}, tolerance: 0.1}}", "64KiB.gbps: expected a busbw in GB/s > 0 and <= 1e+06"),
        ("{gbps: .inf, tolerance: 0.1}", "64KiB.gbps: expected a busbw"),
        ("{gbps: 1000000.0000005, tolerance: 0.1}", "64KiB.gbps: expected a busbw"),
        ("{gbps: fast, tolerance: 0.1}", "64KiB.gbps: expected a busbw"),
        ("{gbps: 1}", "64KiB.tolerance: required key is missing"),
        ("{tolerance: 0.1}", "64KiB.gbps: required key is missing"),
        ("{gbps: 1, tolerance: 0.1, floor: 0.5}", "64KiB.floor: unknown key"),
    ],
)
def test_a_figure_past_its_bounds_is_one_problem(value: str, said: str) -> None:
    found = problems(one_figure(value))
    assert len(found) == 1 and said in found[0], found


def test_a_floor_is_gbps_less_its_tolerance() -> None:
    (figure,) = scenario(one_figure("{gbps: 2.0, tolerance: 0.25}")).busbw
    assert figure == FigureReference("all_reduce", 65536, "64KiB", 2.0, 0.25) and figure.floor == 1.5


def test_a_size_written_twice_in_two_ways_is_refused_once() -> None:
    text = one_figure("{gbps: 1, tolerance: 0.1}") + "          65536: {gbps: 2, tolerance: 0.1}\n"
    (found,) = problems(text)
    assert "all_reduce.65536: expected each message size once; 65536 is 64KiB again" in found
    # Another operation at the same size is another figure.
    other = text.replace("          65536:", "        broadcast:\n          65536:")
    assert [f.operation for f in scenario(other).busbw] == ["all_reduce", "broadcast"]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("version: 1\nsystems:\n  s: {}\n  s: {}\n", "systems.s: duplicate key"),
        ("version: 1\nsystems:\n  'bad name': {}\n", "expected a system label"),
        ("version: 1\nsystems:\n  s:\n    bw:\n      busbw:\n        All-Reduce: {}\n", "expected an operation"),
        ("version: 1\nsystems:\n  s:\n    bw:\n      busbw: [all_reduce]\n", "expected a mapping of operations"),
        ("version: 1\nsystems:\n  s:\n    bw:\n      expected_failures:\n        store: ''\n", "1..500 characters"),
        ("version: 1\nsystems:\n  s:\n    bw:\n      expected_failures:\n        store: 3\n", "1..500 characters"),
        ("version: true\nsystems: {}\n", "version: expected 1"),
        ("version: 1\n", "systems: required key is missing"),
    ],
)
def test_a_bad_name_key_or_reason_is_one_problem(text: str, said: str) -> None:
    found = problems(text)
    assert len(found) == 1 and said in found[0], found


def test_a_reason_and_a_scenario_name_within_their_lengths() -> None:
    def with_reason(reason: str) -> str:
        return f"version: 1\nsystems:\n  s:\n    bw:\n      expected_failures:\n        store: '{reason}'\n"

    assert scenario(with_reason("x" * REASON_MAX)).expected_failures == {"store": "x" * REASON_MAX}
    assert scenario(with_reason("x")).expected_failures == {"store": "x"}
    assert len(problems(with_reason("x" * (REASON_MAX + 1)))) == 1
    # A matrix's scenario names are longer than one name: up to 400 characters, the first 80 a name.
    longest = "a" * 80 + ".b" * 160
    assert longest in parse_references(f"version: 1\nsystems:\n  s:\n    {longest}: {{}}\n", "r.yaml").systems["s"]
    assert len(problems(f"version: 1\nsystems:\n  s:\n    {longest}c: {{}}\n")) == 1
    assert len(problems(f"version: 1\nsystems:\n  s:\n    -{longest[1:]}: {{}}\n")) == 1  # not a name's start


def test_an_empty_file_and_an_unknown_system_are_one_line_each() -> None:
    assert problems("") == ["r.yaml: the file is empty; expected a mapping with 'version' and 'systems'"]
    refs = parse_references("version: 1\nsystems:\n  b: {}\n  a: {}\n", "r.yaml")
    assert system_problem(refs, "a") is None
    assert system_problem(refs, "c") == "--system c: not in r.yaml (its systems: a, b)"
    assert system_problem(parse_references("version: 1\nsystems: {}\n", "r.yaml"), "c") == (
        "--system c: not in r.yaml (its systems: none)"
    )


def test_a_references_file_is_read_from_its_path(tmp_path: Path) -> None:
    path = tmp_path / "refs.yaml"
    path.write_text(one_figure("{gbps: 1, tolerance: 0.1}"))
    assert load_references(path).path == str(path)


def test_a_references_file_of_up_to_16_mib_is_read_and_one_byte_more_refused(tmp_path: Path) -> None:
    # A byte YAML refuses at once stands for the content: the file is read, then refused by the YAML reader.
    path = tmp_path / "refs.yaml"
    path.write_bytes(b"\x01" * 16 * 2**20)
    with pytest.raises(ConfigError) as read:
        load_references(path)
    assert "not valid YAML" in read.value.problems[0]
    path.write_bytes(b"\x01" * (16 * 2**20 + 1))
    with pytest.raises(ConfigError) as refused:
        load_references(path)
    assert refused.value.problems == [f"{path}: expected a YAML references file; it has 16777217 bytes, more than 16 MiB"]
