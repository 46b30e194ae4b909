"""distval.config: the strict YAML loader, against bad input of every kind and against good input.

Every problem must be ONE line ``FILE:LINE: KEY.PATH: <what was expected / what is wrong>`` and every
problem in a file must be reported, not just the first.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

import distval.cli.main
from distval.checks.catalog import CATALOG, ArgSpec
from distval.config import (
    DEFAULT_CHECK_TIMEOUT_S,
    DEFAULT_COLLECTIVE_TIMEOUT_S,
    DEFAULT_PYTHON,
    DEFAULT_TIMEOUT_S,
    CheckSpec,
    Config,
    load_config,
    parse_config,
)
from distval.config.compose import LOADER
from distval.errors import EXIT_BAD_INPUT, ConfigError
from tests.config_helpers import FILE, line_of, problems_of, yaml_text
from tests.paths import ROOT

TOP_KEYS = (
    "version, backend, device, gpus_per_node, image, timeout_s, collective_timeout_s, check_timeout_s, python, "
    "rendezvous, master_addr, egress, ipv6, cpus, memory, shm_size, env, user, working_dir, distributed_debug, "
    "max_restarts, rdzv_join_timeout_s, rdzv_last_call_timeout_s, rdzv_close_timeout_s, rdzv_read_timeout_s, "
    "share_rdzv_store, hosts, advertise_addr, scenarios"
)
SCENARIO_KEYS = (
    "name, topology, world_size, nodes, nproc_per_node, rendezvous, master_addr, backend, device, gpus_per_node, image, "
    "timeout_s, collective_timeout_s, check_timeout_s, python, egress, extra_networks, ipv6, cpus, memory, shm_size, "
    "env, user, working_dir, distributed_debug, max_restarts, rdzv_join_timeout_s, rdzv_last_call_timeout_s, "
    "rdzv_close_timeout_s, rdzv_read_timeout_s, share_rdzv_store, hosts, placement, advertise_addr, checks, matrix, "
    "exclude, faults, expect"
)
CHECK_NAMES = (
    "a check name (env, identity, cuda_build, bytecode, libraries, environment, launch, all_reduce, collectives, "
    "ddp_sync, ddp_training, ddp_sampler, store, timeout, bandwidth, reconfigure, fsdp2, dtensor, dcp, collective_loop, allocate)"
)


def the_problem(problems: list[str], line: int | None, key_path: str, *fragments: str) -> str:
    """The one problem line for ``key_path`` at ``line``; it must contain every fragment."""
    prefix = f"{FILE}:{line}: " if line is not None else f"{FILE}: "
    prefix += f"{key_path}: " if key_path else ""
    matching = [p for p in problems if p.startswith(prefix)]
    assert len(matching) == 1, f"expected exactly one problem starting {prefix!r}; got {problems}"
    for fragment in fragments:
        assert fragment in matching[0], f"{fragment!r} not in {matching[0]!r}"
    return matching[0]


DEFAULT_CHECKS = [
    "env",
    "identity",
    "launch",
    "all_reduce",
    "collectives",
    "ddp_sync",
    "ddp_sampler",
    "store",
    "timeout",
    "reconfigure",
    "libraries",
    "environment",
]


VALID = yaml_text(
    """
    scenarios:
      - topology: in-container
        world_size: 2
        checks: [env]
    """
)


# --- not YAML, empty, not a mapping ----------------------------------------------------------------


def _pyyaml_says(text: str) -> str:
    """PyYAML's own words for ``text`` with the parser the loader uses (the C one where present): its context
    with the context's line, where it gives one, and the problem."""
    with pytest.raises(yaml.MarkedYAMLError) as caught:
        list(yaml.parse(text, Loader=LOADER))
    error = caught.value
    context = f"{error.context} (line {error.context_mark.line + 1}): " if error.context and error.context_mark else ""
    return f"{context}{error.problem}"


@pytest.mark.parametrize(
    ("text", "line", "key_path"),
    [
        ("scenarios:\n  - name: x\n    topology: in-container: no\n", 3, "scenarios[0]"),
        ("scenarios:\n  - topology: [in-container\n    world_size: 2\n", 3, "scenarios[0].topology[1]"),
        ('scenarios:\n  - name: "unterminated\n', 3, "scenarios[0].name"),
        ("scenarios:\n  - name: x\n   bad: 1\n", 3, "scenarios[1]"),
    ],
    ids=["mapping-in-value", "unclosed-flow-list", "unclosed-quote", "bad-indent"],
)
def test_invalid_yaml_reports_the_line_the_key_path_and_pyyaml_s_own_words(text: str, line: int, key_path: str) -> None:
    """Was: the line only, and PyYAML's context ("while parsing a flow sequence") dropped."""
    (problem,) = problems_of(text)
    assert problem == f"{FILE}:{line}: {key_path}: not valid YAML: {_pyyaml_says(text)}"


def test_two_documents_are_not_valid() -> None:
    assert problems_of("scenarios: []\n---\nscenarios: []\n") == [
        f"{FILE}:2: not valid YAML: expected a single document in the stream; found another document"
    ]


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n"], ids=["empty", "blank", "comment"])
def test_empty_file(text: str) -> None:
    assert problems_of(text) == [f"{FILE}: the file is empty; expected a mapping with a 'scenarios' list"]


@pytest.mark.parametrize(
    ("text", "got"),
    [("- a\n- b\n", "got a list"), ("just a string\n", "got 'just a string'"), ("42\n", "got '42'")],
    ids=["list", "string", "number"],
)
def test_top_level_must_be_a_mapping(text: str, got: str) -> None:
    problems = problems_of(text)
    assert len(problems) == 1
    assert problems[0] == f"{FILE}:1: expected a mapping with keys {TOP_KEYS}; {got}"


# --- unknown keys and checks ----------------------------------------------------------------------


def test_unknown_top_level_key() -> None:
    text = "backend: gloo\nbogus: 1\n" + VALID
    problems = problems_of(text)
    assert problems == [f"{FILE}:2: bogus: unknown key; expected one of {TOP_KEYS}"]


def test_unknown_scenario_key() -> None:
    text = yaml_text(
        """
        scenarios:
          - topology: in-container
            world_size: 2
            wold_size: 3
            checks: [env]
        """
    )
    problems = problems_of(text)
    assert problems == [
        f"{FILE}:4: scenarios[0].wold_size: unknown key; expected one of {SCENARIO_KEYS}; did you mean 'world_size'?"
    ]


def test_unknown_check_name_as_string_and_as_mapping() -> None:
    text = yaml_text(
        """
        scenarios:
          - topology: in-container
            world_size: 2
            checks:
              - env
              - allreduce
              - name: broadcast
        """
    )
    problems = problems_of(text)
    assert len(problems) == 2
    the_problem(problems, line_of(text, "allreduce"), "scenarios[0].checks[1]", f"expected {CHECK_NAMES}", "got 'allreduce'")
    the_problem(problems, line_of(text, "broadcast"), "scenarios[0].checks[2].name", f"expected {CHECK_NAMES}", "got 'broadcast'")


def test_check_mapping_without_name() -> None:
    text = yaml_text(
        """
        scenarios:
          - topology: in-container
            world_size: 2
            checks:
              - args: {numel: 4}
        """
    )
    problems = problems_of(text)
    assert problems == [f"{FILE}:5: scenarios[0].checks[0].name: required key is missing"]


def test_unknown_check_key() -> None:
    text = yaml_text(
        """
        scenarios:
          - topology: in-container
            world_size: 2
            checks:
              - name: env
                arguments: {}
        """
    )
    problems = problems_of(text)
    assert problems == [f"{FILE}:6: scenarios[0].checks[0].arguments: unknown key; expected one of name, args, required"]


def test_unknown_check_arg() -> None:
    text = yaml_text(
        """
        scenarios:
          - topology: in-container
            world_size: 2
            checks:
              - env
              - name: all_reduce
                args:
                  numel: 8
                  foo: 1
        """
    )
    problems = problems_of(text)
    assert problems == [f"{FILE}:{line_of(text, 'foo')}: scenarios[0].checks[1].args.foo: unknown key; expected one of numel"]


def test_arg_for_a_check_without_args() -> None:
    text = yaml_text(
        """
        scenarios:
          - topology: in-container
            world_size: 2
            checks:
              - {name: env, args: {verbose: 1}}
        """
    )
    problems = problems_of(text)
    assert len(problems) == 1
    the_problem(problems, 5, "scenarios[0].checks[0].args.verbose", "unknown key")


def test_check_args_must_be_a_mapping() -> None:
    text = yaml_text(
        """
        scenarios:
          - topology: in-container
            world_size: 2
            checks:
              - name: all_reduce
                args: [numel, 8]
        """
    )
    problems = problems_of(text)
    assert len(problems) == 1
    the_problem(problems, 6, "scenarios[0].checks[0].args", "expected a mapping with keys numel", "got a list")


# --- wrong types and bad values -------------------------------------------------------------------

SCENARIO_TEMPLATE = """\
scenarios:
  - name: typed
    topology: in-container
    world_size: 2
    checks:
      - env
      - name: all_reduce
        args:
          numel: 4
"""


@pytest.mark.parametrize(
    ("old", "new", "key_path", "expected", "got"),
    [
        ("world_size: 2", 'world_size: "two"', "scenarios[0].world_size", "expected an integer >= 1", "got 'two'"),
        ("world_size: 2", "world_size: true", "scenarios[0].world_size", "expected an integer >= 1", "got 'true'"),
        ("world_size: 2", "world_size: no", "scenarios[0].world_size", "expected an integer >= 1", "got 'no'"),
        ("world_size: 2", "world_size: 0", "scenarios[0].world_size", "expected an integer >= 1", "got '0'"),
        ("world_size: 2", "world_size: -3", "scenarios[0].world_size", "expected an integer >= 1", "got '-3'"),
        ("world_size: 2", "world_size: 2.5", "scenarios[0].world_size", "expected an integer >= 1", "got '2.5'"),
        ("world_size: 2", "world_size: [2]", "scenarios[0].world_size", "expected an integer >= 1", "got a list"),
        ("numel: 4", "numel: abc", "scenarios[0].checks[1].args.numel", "expected an integer >= 1", "got 'abc'"),
        ("numel: 4", "numel: 0", "scenarios[0].checks[1].args.numel", "expected an integer >= 1", "got '0'"),
        ("numel: 4", "numel: false", "scenarios[0].checks[1].args.numel", "expected an integer >= 1", "got 'false'"),
        ("numel: 4", "numel: 4.0", "scenarios[0].checks[1].args.numel", "expected an integer >= 1", "got '4.0'"),
        (
            "name: typed",
            "name: typed\n    timeout_s: -1",
            "scenarios[0].timeout_s",
            "expected a number of seconds > 0",
            "got '-1'",
        ),
        ("name: typed", "name: typed\n    timeout_s: 0", "scenarios[0].timeout_s", "expected a number of seconds > 0", "got '0'"),
        (
            "name: typed",
            "name: typed\n    timeout_s: true",
            "scenarios[0].timeout_s",
            "expected a number of seconds > 0",
            "got 'true'",
        ),
        (
            "name: typed",
            "name: typed\n    timeout_s: soon",
            "scenarios[0].timeout_s",
            "expected a number of seconds > 0",
            "got 'soon'",
        ),
        (
            "name: typed",
            "name: typed\n    collective_timeout_s: .nan",
            "scenarios[0].collective_timeout_s",
            "expected a number of seconds > 0",
            "got '.nan'",
        ),
        (
            "name: typed",
            "name: typed\n    check_timeout_s: 0",
            "scenarios[0].check_timeout_s",
            "expected a number of seconds > 0",
            "got '0'",
        ),
        (
            "name: typed",
            "name: typed\n    check_timeout_s: soon",
            "scenarios[0].check_timeout_s",
            "expected a number of seconds > 0",
            "got 'soon'",
        ),
        (
            "name: typed",
            "name: typed\n    check_timeout_s: [60]",
            "scenarios[0].check_timeout_s",
            "expected a number of seconds > 0",
            "got a list",
        ),
        (
            "name: typed",
            "name: typed\n    collective_timeout_s: {s: 1}",
            "scenarios[0].collective_timeout_s",
            "expected a number of seconds > 0",
            "got a mapping",
        ),
        ("name: typed", "name: typed\n    image: ''", "scenarios[0].image", "expected an image reference", "got nothing"),
        ("name: typed", "name: typed\n    image: 7", "scenarios[0].image", "expected an image reference", "got '7'"),
        (
            "name: typed",
            "name: typed\n    python: [python3]",
            "scenarios[0].python",
            "expected the image's Python interpreter",
            "got a list",
        ),
        ("name: typed", "name: 'bad name!'", "scenarios[0].name", "expected a name of letters, digits", "got 'bad name!'"),
        ("name: typed", "name: " + "n" * 81, "scenarios[0].name", "(at most 80 characters)", "got '" + "n" * 81 + "'"),
        ("name: typed", "name: -lead", "scenarios[0].name", "expected a name of letters, digits", "got '-lead'"),
    ],
)
def test_wrong_type_or_value(old: str, new: str, key_path: str, expected: str, got: str) -> None:
    assert old in SCENARIO_TEMPLATE
    text = SCENARIO_TEMPLATE.replace(old, new, 1)
    marker = new.splitlines()[-1].strip()
    problems = problems_of(text)
    assert len(problems) == 1, problems
    line = the_problem(problems, line_of(text, marker), key_path, expected, got)
    # "expected X" comes before "got Y", on the same line.
    assert line.index(expected) < line.index(got)


@pytest.mark.parametrize(
    ("line_text", "key_path", "expected", "got"),
    [
        ("timeout_s: -1", "timeout_s", "expected a number of seconds > 0", "got '-1'"),
        ("collective_timeout_s: off", "collective_timeout_s", "expected a number of seconds > 0", "got 'off'"),
        ("check_timeout_s: 0", "check_timeout_s", "expected a number of seconds > 0", "got '0'"),
        ("check_timeout_s: -2.5", "check_timeout_s", "expected a number of seconds > 0", "got '-2.5'"),
        ("check_timeout_s: true", "check_timeout_s", "expected a number of seconds > 0", "got 'true'"),
        ("backend: tcp", "backend", "expected one of gloo, nccl, nccl-legacy, mpi", "got 'tcp'"),
        ("image: {name: x}", "image", "expected an image reference like name:tag", "got a mapping"),
        ("python: ' '", "python", "expected the image's Python interpreter", "got ' '"),
    ],
)
def test_wrong_top_level_default(line_text: str, key_path: str, expected: str, got: str) -> None:
    text = "version: 1\n" + line_text + "\n" + VALID
    problems = problems_of(text)
    assert len(problems) == 1, problems
    the_problem(problems, 2, key_path, expected, got)


@pytest.mark.parametrize(
    ("old", "new", "key_path", "expected", "got"),
    [
        (
            "topology: in-container",
            "topology: sideways",
            "scenarios[0].topology",
            "expected one of in-container, cross-container",
            "got 'sideways'",
        ),
        (
            "topology: in-container",
            "topology: In-Container",
            "scenarios[0].topology",
            "expected one of in-container, cross-container",
            "got 'In-Container'",
        ),
        (
            "name: typed",
            "name: typed\n    backend: tcp",
            "scenarios[0].backend",
            "expected one of gloo, nccl, nccl-legacy, mpi",
            "got 'tcp'",
        ),
        (
            "name: typed",
            "name: typed\n    backend: [gloo]",
            "scenarios[0].backend",
            "expected one of gloo, nccl, nccl-legacy, mpi",
            "got a list",
        ),
    ],
)
def test_bad_choice(old: str, new: str, key_path: str, expected: str, got: str) -> None:
    text = SCENARIO_TEMPLATE.replace(old, new, 1)
    problems = problems_of(text)
    assert len(problems) == 1, problems
    the_problem(problems, line_of(text, new.splitlines()[-1].strip()), key_path, expected, got)


# --- check arguments of every kind, and required ---------------------------------------------------

ARG_TEMPLATE = """\
scenarios:
  - name: kinds
    topology: in-container
    world_size: 2
    checks:
      - name: {check}
        args:
          {arg}: {value}
      - env
"""
ARG_LINE = 8
VERSION_EXPECTED = "expected a version requirement like '>=2.6,<2.7', '2.15.0' or '13.*'"


def arg_text(check: str, arg: str, value: str) -> str:
    text = ARG_TEMPLATE.format(check=check, arg=arg, value=value)
    assert line_of(text, f"{arg}:") == ARG_LINE
    return text


@pytest.mark.parametrize(
    ("check", "arg", "value", "parsed"),
    [
        ("identity", "torch", "'>=2.6,<2.7'", ">=2.6,<2.7"),
        ("identity", "torch", "2.15.0", "2.15.0"),
        ("identity", "torch", "'==2.6'", "==2.6"),
        ("identity", "torch", "'>= 2.6 , < 3'", ">= 2.6 , < 3"),
        ("identity", "torch", "'!=2.7.1,>2.5,<=2.9'", "!=2.7.1,>2.5,<=2.9"),
        ("identity", "torch", "2", "2"),
        ("identity", "python", "'>=3.11'", ">=3.11"),
        ("identity", "python", "3.11.2", "3.11.2"),
        ("identity", "build", "cpu", "cpu"),
        ("identity", "build", "cuda", "cuda"),
        ("identity", "backends", "[gloo]", ("gloo",)),
        ("identity", "backends", "[gloo, nccl, mpi]", ("gloo", "nccl", "mpi")),
        ("timeout", "deadline_s", "0.5", 0.5),
        ("timeout", "deadline_s", "2", 2.0),
        ("timeout", "margin_s", "10", 10.0),
        ("collectives", "repeat", "3", 3),
        ("collectives", "large_mib", "1", 1),
        ("all_reduce", "numel", "1", 1),
        ("bytecode", "max_stale_fraction", "0.05", 0.05),
        ("bytecode", "max_stale_fraction", "0", 0.0),
        ("bytecode", "max_stale_fraction", "1", 1.0),
    ],
)
def test_arg_of_each_kind_is_accepted(check: str, arg: str, value: str, parsed: object) -> None:
    (scenario,) = parse_config(arg_text(check, arg, value), FILE).scenarios
    spec = scenario.checks[0]
    assert (spec.name, dict(spec.args)) == (check, {arg: parsed})
    assert type(spec.args[arg]) is type(parsed)  # versions are strings, seconds floats, names tuples


@pytest.mark.parametrize(
    ("check", "arg", "value", "message"),
    [
        ("identity", "torch", "abc", f"{VERSION_EXPECTED}; got 'abc'"),
        ("identity", "torch", "'>=2.6,'", f"{VERSION_EXPECTED}; got '>=2.6,'"),
        ("identity", "torch", "'~=2.6'", f"{VERSION_EXPECTED}; got '~=2.6'"),
        ("identity", "torch", "'2.6 2.7'", f"{VERSION_EXPECTED}; got '2.6 2.7'"),
        ("identity", "torch", "v2.6", f"{VERSION_EXPECTED}; got 'v2.6'"),
        ("identity", "torch", "true", f"{VERSION_EXPECTED}; got 'true'"),
        ("identity", "torch", "[2.6]", f"{VERSION_EXPECTED}; got a list"),
        ("identity", "torch", "", f"{VERSION_EXPECTED}; got nothing"),
        ("identity", "python", "'3.x'", f"{VERSION_EXPECTED}; got '3.x'"),
        ("identity", "build", "gpu", "expected one of cpu, cuda; got 'gpu'"),
        ("identity", "build", "CUDA", "expected one of cpu, cuda; got 'CUDA'"),
        ("identity", "build", "[cpu]", "expected one of cpu, cuda; got a list"),
        ("identity", "backends", "gloo", "expected a list of gloo, nccl, mpi; got 'gloo'"),
        ("identity", "backends", "{gloo: true}", "expected a list of gloo, nccl, mpi; got a mapping"),
        ("timeout", "deadline_s", "0", "expected a number of seconds > 0; got '0'"),
        ("timeout", "deadline_s", "-1", "expected a number of seconds > 0; got '-1'"),
        ("timeout", "deadline_s", "true", "expected a number of seconds > 0; got 'true'"),
        ("timeout", "margin_s", ".inf", "expected a number of seconds > 0; got '.inf'"),
        ("timeout", "margin_s", "soon", "expected a number of seconds > 0; got 'soon'"),
        ("collectives", "repeat", "0", "expected an integer >= 1; got '0'"),
        ("collectives", "repeat", "'3'", "expected an integer >= 1; got '3'"),
        ("collectives", "large_mib", "1.5", "expected an integer >= 1; got '1.5'"),
        ("bytecode", "max_stale_fraction", "1.5", "expected a number from 0 to 1; got '1.5'"),
        ("bytecode", "max_stale_fraction", "-0.1", "expected a number from 0 to 1; got '-0.1'"),
        ("bytecode", "max_stale_fraction", ".nan", "expected a number from 0 to 1; got '.nan'"),
        ("bytecode", "max_stale_fraction", "'5%'", "expected a number from 0 to 1; got '5%'"),
        ("bytecode", "max_stale_fraction", "true", "expected a number from 0 to 1; got 'true'"),
    ],
)
def test_arg_of_each_kind_is_rejected_with_its_line_and_key_path(check: str, arg: str, value: str, message: str) -> None:
    problems = problems_of(arg_text(check, arg, value))
    assert problems == [f"{FILE}:{ARG_LINE}: scenarios[0].checks[0].args.{arg}: {message}"]


@pytest.mark.parametrize(
    ("value", "bad"),
    [("[gloo, foo]", {1: "foo"}), ("[foo, gloo, bar]", {0: "foo", 2: "bar"}), ("[gloo, '']", {1: ""})],
    ids=["second", "first-and-third", "empty-name"],
)
def test_names_arg_reports_each_bad_item_by_index(value: str, bad: dict[int, str]) -> None:
    problems = problems_of(arg_text("identity", "backends", value))
    assert problems == [
        f"{FILE}:{ARG_LINE}: scenarios[0].checks[0].args.backends[{index}]: expected one of gloo, nccl, mpi; got "
        + (repr(name) if name else "nothing")
        for index, name in bad.items()
    ]


def test_names_arg_as_block_list_reports_the_item_line() -> None:
    text = yaml_text(
        """
        scenarios:
          - topology: cross-container
            world_size: 2
            checks:
              - name: identity
                args:
                  backends:
                    - gloo
                    - nccl
                    - tcp
        """
    )
    assert problems_of(text) == [
        f"{FILE}:{line_of(text, '- tcp')}: scenarios[0].checks[0].args.backends[2]: expected one of gloo, nccl, mpi; got 'tcp'"
    ]


def test_unknown_identity_arg_lists_the_known_ones() -> None:
    problems = problems_of(arg_text("identity", "cuda", "'12.4'"))
    assert problems == [
        f"{FILE}:{ARG_LINE}: scenarios[0].checks[0].args.cuda: unknown key; expected one of torch, python, build, backends"
    ]


def test_every_problem_in_one_check_args_is_collected() -> None:
    text = yaml_text(
        """
        scenarios:
          - topology: in-container
            world_size: 2
            checks:
              - name: identity
                required: maybe
                args:
                  torch: abc
                  python: '>=3.9'
                  build: gpu
                  backends: [gloo, foo]
              - name: timeout
                args: {deadline_s: 0, margin_s: 1}
        """
    )
    expected = [
        (line_of(text, "required: maybe"), "scenarios[0].checks[0].required", "expected true or false; got 'maybe'"),
        (line_of(text, "torch: abc"), "scenarios[0].checks[0].args.torch", f"{VERSION_EXPECTED}; got 'abc'"),
        (line_of(text, "build: gpu"), "scenarios[0].checks[0].args.build", "expected one of cpu, cuda; got 'gpu'"),
        (line_of(text, "[gloo, foo]"), "scenarios[0].checks[0].args.backends[1]", "expected one of gloo, nccl, mpi; got 'foo'"),
        (line_of(text, "deadline_s: 0"), "scenarios[0].checks[1].args.deadline_s", "expected a number of seconds > 0; got '0'"),
    ]
    problems = problems_of(text)
    assert len(problems) == len(expected), "\n".join(problems)
    for line, key_path, message in expected:
        assert the_problem(problems, line, key_path) == f"{FILE}:{line}: {key_path}: {message}"


def _sample_values(spec: ArgSpec) -> tuple[str, object, str, str]:
    """(good YAML, its parsed value, bad YAML, the key-path suffix of the bad value) for an argument's kind."""
    if spec.kind == "int":
        return str(spec.minimum), spec.minimum, str(spec.minimum - 1), ""
    if spec.kind == "seconds":
        return "1.5", 1.5, "0", ""
    if spec.kind == "fraction":
        return "0.25", 0.25, "2", ""
    if spec.kind == "version":
        return "'>=1.0'", ">=1.0", "'abc'", ""
    if spec.kind == "choice":
        return spec.choices[-1], spec.choices[-1], "nope", ""
    if spec.kind == "names":
        return f"[{', '.join(spec.choices)}]", tuple(spec.choices), f"[{spec.choices[0]}, nope]", "[1]"
    if spec.kind == "paths":
        return "[/opt/hpcx/lib]", ("/opt/hpcx/lib",), "[/opt/a, lib]", "[1]"
    if spec.kind == "variables":
        return "[NCCL_ALGO, NCCL_PROTO]", ("NCCL_ALGO", "NCCL_PROTO"), "[NCCL_ALGO, NCCL ALGO]", "[1]"
    if spec.kind == "sizes":
        return "[1MiB, 4096, 4 KiB]", (4096, 1048576), "[4KiB, 3MB]", "[1]"
    if spec.kind == "busbw":
        return "{4KiB: 0.5, 1048576: 2}", {"4096": 0.5, "1048576": 2.0}, "{4KiB: 0}", ".4KiB"
    if spec.kind == "efficiency":
        return "{4KiB: 0.25, 1048576: 1}", {"4096": 0.25, "1048576": 1.0}, "{4KiB: 1.5}", ".4KiB"
    if spec.kind == "bool":
        return "false", False, "'no'", ""
    pytest.fail(f"no config test for argument kind {spec.kind!r}")


@pytest.mark.parametrize(
    ("check", "arg"), [(name, arg) for name, info in CATALOG.items() for arg in info.args], ids=lambda v: str(v)
)
def test_every_catalog_argument_is_accepted_and_rejected_by_its_kind(check: str, arg: str) -> None:
    good, parsed, bad, suffix = _sample_values(CATALOG[check].args[arg])
    (scenario,) = parse_config(arg_text(check, arg, good), FILE).scenarios
    assert dict(scenario.checks[0].args) == {arg: parsed}
    problems = problems_of(arg_text(check, arg, bad))
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{FILE}:{ARG_LINE}: scenarios[0].checks[0].args.{arg}{suffix}: expected "), problems


def test_min_efficiency_without_the_yardstick_is_refused() -> None:
    """min_efficiency is busbw / raw TCP: with the yardstick off there is nothing to judge it by."""
    text = ARG_TEMPLATE.format(check="bandwidth", arg="min_efficiency", value="0.5\n          yardstick: false")
    assert problems_of(text) == [
        f"{FILE}:{ARG_LINE}: scenarios[0].checks[0].args.min_efficiency: min_efficiency needs yardstick, but yardstick "
        "is false: drop one of them"
    ]
    (scenario,) = parse_config(text.replace("false", "true"), FILE).scenarios
    assert dict(scenario.checks[0].args) == {"min_efficiency": 0.5, "yardstick": True}


def test_a_gloo_only_argument_under_nccl_is_refused_before_anything_runs() -> None:
    """min_efficiency is busbw / raw TCP, the transport gloo uses: under NCCL (NVLink, InfiniBand) it judged nothing
    and the check errored on the GPU machine; the loader refuses it, also where the backend is the top level's or a
    matrix axis', and accepts it under gloo (the guard can pass)."""
    text = yaml_text(
        """
        backend: nccl
        scenarios:
          - name: top
            topology: in-container
            world_size: 2
            checks: [{name: bandwidth, args: {min_efficiency: 0.5}}]
          - name: own
            topology: in-container
            world_size: 2
            backend: gloo
            checks: [{name: bandwidth, args: {min_efficiency: 0.5}}]
          - name: axis
            topology: in-container
            world_size: 2
            matrix: {backend: [gloo, nccl-legacy]}
            checks: [{name: bandwidth, args: {min_efficiency: 0.5, min_busbw_gbps: 1}}]
        """
    )
    problems = problems_of(text)
    assert [line.split(": ", 1)[1] for line in problems] == [
        "scenarios[0].checks[0].args.min_efficiency: expected min_efficiency only with backend gloo; got backend 'nccl': "
        "drop it from this scenario",
        "scenarios[2].checks[0].args.min_efficiency: expected min_efficiency only with backend gloo; got backend "
        "'nccl-legacy': drop it from this scenario (in axis.nccl-legacy)",
    ], problems
    gloo = parse_config(text.replace("backend: nccl\n", "").replace(", nccl-legacy]", "]"), FILE).scenarios
    assert [(s.name, s.backend, dict(s.checks[0].args)["min_efficiency"]) for s in gloo] == [
        ("top", "gloo", 0.5),
        ("own", "gloo", 0.5),
        ("axis.gloo", "gloo", 0.5),
    ]


def test_required_flag_is_parsed() -> None:
    text = yaml_text(
        """
        scenarios:
          - topology: in-container
            world_size: 2
            checks:
              - {name: identity, args: {torch: '>=2.6'}, required: true}
              - {name: reconfigure, required: false}
              - {name: store}
              - all_reduce
        """
    )
    (scenario,) = parse_config(text, FILE).scenarios
    assert [(c.name, c.required) for c in scenario.checks] == [
        ("identity", True),
        ("reconfigure", False),
        ("store", False),
        ("all_reduce", False),
    ]
    assert dict(scenario.checks[0].args) == {"torch": ">=2.6"}
    assert scenario.checks[0] == CheckSpec("identity", scenario.checks[0].args, required=True)


@pytest.mark.parametrize(
    ("value", "got"),
    [
        ("yes-please", "got 'yes-please'"),
        ("1", "got '1'"),
        ("'true'", "got 'true'"),
        ("[true]", "got a list"),
        ("", "got nothing"),
    ],
    ids=["word", "number", "quoted", "list", "empty"],
)
def test_required_must_be_true_or_false(value: str, got: str) -> None:
    text = (
        "scenarios:\n  - topology: in-container\n    world_size: 2\n    checks:\n"
        f"      - name: reconfigure\n        required: {value}\n"
    )
    assert problems_of(text) == [f"{FILE}:6: scenarios[0].checks[0].required: expected true or false; {got}"]


# --- missing and empty ----------------------------------------------------------------------------


@pytest.mark.parametrize("missing", ["topology", "world_size", "checks"])
def test_missing_required_scenario_key(missing: str) -> None:
    lines = ["scenarios:", "  - name: first", "    topology: in-container", "    world_size: 2", "    checks: [env]"]
    text = "\n".join(line for line in lines if not line.strip().startswith(f"{missing}:")) + "\n"
    problems = problems_of(text)
    # Reported at the scenario's mapping (line 2), naming the missing key's full path.
    assert problems == [f"{FILE}:2: scenarios[0].{missing}: required key is missing"]


def test_missing_every_required_scenario_key() -> None:
    text = "scenarios:\n  - name: bare\n"
    assert problems_of(text) == [
        f"{FILE}:2: scenarios[0].topology: required key is missing",
        f"{FILE}:2: scenarios[0].world_size: required key is missing",
        f"{FILE}:2: scenarios[0].checks: required key is missing",
    ]


def test_missing_scenarios() -> None:
    assert problems_of("version: 1\nbackend: gloo\n") == [f"{FILE}:1: scenarios: required key is missing"]


@pytest.mark.parametrize(
    ("value", "got"),
    [("[]", "got a list"), ("", "got nothing"), ("{a: 1}", "got a mapping"), ("all", "got 'all'")],
    ids=["empty-list", "null", "mapping", "string"],
)
def test_scenarios_must_be_a_non_empty_list(value: str, got: str) -> None:
    problems = problems_of(f"version: 1\nscenarios: {value}\n")
    assert problems == [f"{FILE}:2: scenarios: expected a non-empty list of scenarios; {got}"]


@pytest.mark.parametrize(
    ("value", "got"),
    [("[]", "got a list"), ("", "got nothing"), ("env", "got 'env'")],
    ids=["empty-list", "null", "string"],
)
def test_checks_must_be_a_non_empty_list(value: str, got: str) -> None:
    text = f"scenarios:\n  - topology: in-container\n    world_size: 2\n    checks: {value}\n"
    assert problems_of(text) == [f"{FILE}:4: scenarios[0].checks: expected a non-empty list of checks; {got}"]


def test_scenario_must_be_a_mapping() -> None:
    problems = problems_of("scenarios:\n  - in-container\n")
    assert len(problems) == 1
    the_problem(problems, 2, "scenarios[0]", f"expected a mapping with keys {SCENARIO_KEYS}", "got 'in-container'")


# --- duplicates, version --------------------------------------------------------------------------


def test_duplicate_scenario_names() -> None:
    text = yaml_text(
        """
        scenarios:
          - name: same
            topology: in-container
            world_size: 2
            checks: [env]
          - name: other
            topology: in-container
            world_size: 2
            checks: [env]
          - name: same
            topology: cross-container
            world_size: 2
            checks: [env]
        """
    )
    problems = problems_of(text)
    assert problems == [f"{FILE}:10: scenarios[2].name: expected a unique scenario name; 'same' is also scenarios[0]"]


def test_duplicate_default_scenario_names() -> None:
    text = yaml_text(
        """
        scenarios:
          - topology: in-container
            world_size: 2
            checks: [env]
          - topology: in-container
            world_size: 2
            checks: [all_reduce]
        """
    )
    problems = problems_of(text)
    assert len(problems) == 1
    the_problem(problems, 5, "scenarios[1].name", "expected a unique scenario name", "'in-container-2ranks' is also scenarios[0]")


@pytest.mark.parametrize(
    ("text", "key_path", "marker"),
    [
        (VALID + "backend: nccl\nbackend: gloo\n", "backend", "backend: gloo"),
        (VALID + "scenarios: []\n", "scenarios", "scenarios: []"),
        (
            "scenarios:\n  - topology: in-container\n    world_size: 2\n    world_size: 4\n    checks: [env]\n",
            "scenarios[0].world_size",
            "world_size: 4",
        ),
        (
            "scenarios:\n  - topology: in-container\n    world_size: 2\n    checks:\n"
            "      - name: all_reduce\n        args: {numel: 1, numel: 2}\n",
            "scenarios[0].checks[0].args.numel",
            "numel: 1, numel: 2",
        ),
    ],
    ids=["top-level", "top-level-scenarios", "scenario", "check-args"],
)
def test_duplicate_keys(text: str, key_path: str, marker: str) -> None:
    problems = problems_of(text)
    assert len(problems) == 1, problems
    assert problems[0] == f"{FILE}:{line_of(text, marker)}: {key_path}: duplicate key"


@pytest.mark.parametrize("value", ["2", "0", "'1'", "true", "[1]", "v1"])
def test_version_other_than_1(value: str) -> None:
    problems = problems_of(f"version: {value}\n" + VALID)
    assert len(problems) == 1, problems
    the_problem(problems, 1, "version", "expected 1 (the only config version)", "got ")


def test_version_1_is_accepted() -> None:
    assert len(parse_config("version: 1\n" + VALID, FILE).scenarios) == 1


# --- every problem is collected -------------------------------------------------------------------


def test_all_problems_are_collected_one_line_each() -> None:
    text = yaml_text(
        """
        version: 2
        backend: tcp
        color: blue
        scenarios:
          - name: first
            topology: sideways
            world_size: "two"
            timeout_s: -1
            extra: 1
            checks:
              - env
              - name: all_reduce
                args: {foo: 1, numel: abc}
              - nope
          - topology: in-container
            world_size: true
            checks: []
          - name: third
        """
    )
    expected = [
        (line_of(text, "version: 2"), "version", "expected 1"),
        (line_of(text, "backend: tcp"), "backend", "expected one of gloo, nccl, nccl-legacy, mpi"),
        (line_of(text, "color: blue"), "color", "unknown key; expected one of"),
        (line_of(text, "sideways"), "scenarios[0].topology", "expected one of in-container, cross-container"),
        (line_of(text, '"two"'), "scenarios[0].world_size", "expected an integer >= 1"),
        (line_of(text, "timeout_s: -1"), "scenarios[0].timeout_s", "expected a number of seconds > 0"),
        (line_of(text, "extra: 1"), "scenarios[0].extra", "unknown key; expected one of"),
        (line_of(text, "foo: 1"), "scenarios[0].checks[1].args.foo", "unknown key; expected one of numel"),
        (line_of(text, "numel: abc"), "scenarios[0].checks[1].args.numel", "expected an integer >= 1"),
        (line_of(text, "- nope"), "scenarios[0].checks[2]", f"expected {CHECK_NAMES}"),
        (line_of(text, "world_size: true"), "scenarios[1].world_size", "expected an integer >= 1"),
        (line_of(text, "checks: []"), "scenarios[1].checks", "expected a non-empty list of checks"),
        (line_of(text, "name: third"), "scenarios[2].topology", "required key is missing"),
        (line_of(text, "name: third"), "scenarios[2].world_size", "required key is missing"),
        (line_of(text, "name: third"), "scenarios[2].checks", "required key is missing"),
    ]
    problems = problems_of(text)
    assert len(problems) == len(expected), "\n".join(problems)
    for line, key_path, fragment in expected:
        the_problem(problems, line, key_path, fragment)


def test_problem_lines_have_the_documented_shape() -> None:
    text = "version: 3\nscenarios:\n  - topology: x\n    world_size: 0\n    checks: [env]\n"
    shape = re.compile(r"^scen\.yaml:(\d+): ([A-Za-z_][\w.\[\]]*): expected .+; got .+$")
    problems = problems_of(text)
    assert len(problems) == 3
    matches = [shape.match(p) for p in problems]
    assert all(matches), problems
    assert [int(m.group(1)) for m in matches if m] == [1, 3, 4]


# --- load_config ----------------------------------------------------------------------------------


def test_load_config_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.yaml"
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.problems == [f"{path}: no such file; expected a YAML scenario file"]


def test_load_config_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path)
    assert len(caught.value.problems) == 1
    assert caught.value.problems == [f"{tmp_path}: expected a YAML scenario file; got a directory"]


def test_load_config_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"scenarios:\n  - name: caf\xe9\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.problems == [f"{path}:2: scenarios[0].name: not UTF-8: byte 0xe9 is not a UTF-8 character"]


def test_load_config_names_the_file_in_problems(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("scenarios:\n  - topology: in-container\n    world_size: 0\n    checks: [env]\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(str(path))
    assert caught.value.problems == [f"{path}:3: scenarios[0].world_size: expected an integer >= 1; got '0'"]


# --- good input -----------------------------------------------------------------------------------


def test_defaults_when_nothing_is_set() -> None:
    config = parse_config(VALID, FILE)
    assert isinstance(config, Config)
    assert config.path == FILE
    (scenario,) = config.scenarios
    assert scenario.name == "in-container-2ranks"
    assert scenario.backend == "gloo"
    assert scenario.image is None
    assert scenario.timeout_s == DEFAULT_TIMEOUT_S
    assert scenario.collective_timeout_s == DEFAULT_COLLECTIVE_TIMEOUT_S
    assert scenario.check_timeout_s == DEFAULT_CHECK_TIMEOUT_S == 120.0
    assert isinstance(scenario.check_timeout_s, float)
    assert scenario.python == DEFAULT_PYTHON
    assert scenario.checks == (CheckSpec("env"),)
    assert scenario.checks[0].required is False


def test_top_level_defaults_are_inherited_and_overridden() -> None:
    text = yaml_text(
        """
        version: 1
        backend: nccl
        image: example/torch:1
        timeout_s: 90
        collective_timeout_s: 12.5
        check_timeout_s: 45
        python: /opt/venv/bin/python
        scenarios:
          - name: inherits
            topology: in-container
            world_size: 4
            checks: [env]
          - name: overrides
            topology: cross-container
            world_size: 3
            backend: gloo
            image: example/torch:2
            timeout_s: 30.5
            collective_timeout_s: 5
            check_timeout_s: 7.5
            python: python3.9
            checks: [env]
        """
    )
    inherits, overrides = parse_config(text, FILE).scenarios
    assert (inherits.backend, inherits.image, inherits.timeout_s, inherits.collective_timeout_s, inherits.python) == (
        "nccl",
        "example/torch:1",
        90.0,
        12.5,
        "/opt/venv/bin/python",
    )
    assert isinstance(inherits.timeout_s, float)
    assert inherits.check_timeout_s == 45.0 and isinstance(inherits.check_timeout_s, float)
    assert overrides.check_timeout_s == 7.5
    assert (overrides.backend, overrides.image, overrides.timeout_s, overrides.collective_timeout_s, overrides.python) == (
        "gloo",
        "example/torch:2",
        30.5,
        5.0,
        "python3.9",
    )
    assert (overrides.topology, overrides.world_size) == ("cross-container", 3)


def test_check_as_string_and_as_mapping() -> None:
    text = yaml_text(
        """
        scenarios:
          - topology: cross-container
            world_size: 3
            checks:
              - env
              - name: all_reduce
                args:
                  numel: 1024
        """
    )
    (scenario,) = parse_config(text, FILE).scenarios
    assert [c.name for c in scenario.checks] == ["env", "all_reduce"]
    assert dict(scenario.checks[1].args) == {"numel": 1024}


def test_check_listed_twice_is_a_config_error() -> None:
    text = "scenarios:\n  - topology: in-container\n    world_size: 2\n    checks: [env, all_reduce, {name: all_reduce}]\n"
    problems = problems_of(text)
    the_problem(problems, 4, "scenarios[0].checks[2]", "expected each check once per scenario; 'all_reduce' is also checks[1]")


def test_check_args_are_read_only() -> None:
    text = "scenarios:\n  - topology: in-container\n    world_size: 2\n    checks: [{name: all_reduce, args: {numel: 1024}}]\n"
    (scenario,) = parse_config(text, FILE).scenarios
    with pytest.raises(TypeError):
        scenario.checks[0].args["numel"] = 1  # type: ignore[index]


def test_default_scenario_name() -> None:
    text = "scenarios:\n  - topology: cross-container\n    world_size: 5\n    checks: [env]\n"
    assert parse_config(text, FILE).scenarios[0].name == "cross-container-5ranks"


@pytest.mark.parametrize("length", [1, 40, 80])
def test_explicit_scenario_name_of_up_to_80_characters(length: int) -> None:
    name = ("A" + "b-_." * 20)[: length - 1] + "z"
    assert len(name) == length
    text = f"scenarios:\n  - name: {name}\n    topology: in-container\n    world_size: 1\n    checks: [env]\n"
    assert parse_config(text, FILE).scenarios[0].name == name


def test_default_yaml_loads() -> None:
    config = load_config(ROOT / "configs" / "default.yaml")
    assert [(s.name, s.topology, s.world_size, s.nodes, s.nproc_per_node) for s in config.scenarios] == [
        ("in-container-3ranks", "in-container", 3, 1, 3),
        ("cross-container-2ranks", "cross-container", 2, 2, 1),
        ("cross-container-2x2", "cross-container", 4, 2, 2),
    ]
    for scenario in config.scenarios:
        assert scenario.backend == "gloo"
        # The limits grow with the ranks per core (2 cores): 2 ranks the top level's, 3 and 4 ranks their own.
        assert (scenario.timeout_s, scenario.check_timeout_s) == {3: (900.0, 450.0), 4: (1200.0, 600.0)}.get(
            scenario.world_size, (600.0, 300.0)
        )
        assert scenario.collective_timeout_s == 60.0
        # The whole gloo suite, every check once, in every scenario (the others reuse the first's list).
        assert [c.name for c in scenario.checks] == DEFAULT_CHECKS
        # cuda_build's verdict is about the image's build: a config states build/cuda for it. bandwidth
        # measures speed (seconds per scenario): configs/bandwidth.yaml runs it. collective_loop and allocate
        # are the workload and the memory hog of fault scenarios: configs/faults.yaml runs them. bytecode is
        # new and not yet in the default list. libraries and environment run in every scenario, last. ddp_training,
        # fsdp2, dtensor and dcp (DDP as training uses it, the parallelism a training job runs) are the nightly checks:
        # configs/training.yaml runs them.
        assert sorted(DEFAULT_CHECKS) == sorted(
            set(CATALOG)
            - {"cuda_build", "bytecode", "bandwidth", "collective_loop", "allocate", "ddp_training", "fsdp2", "dtensor", "dcp"}
        )
        args = {c.name: dict(c.args) for c in scenario.checks if c.args}
        assert args == {
            "identity": {"backends": ("gloo",)},
            "collectives": {"large_mib": 16},
            "timeout": {"deadline_s": 0.5, "margin_s": 1.0},
        }
        assert not any(c.required for c in scenario.checks)


def test_training_yaml_loads() -> None:
    """The nightly config: the parallelism checks in one container and across containers, with the default's limits."""
    config = load_config(ROOT / "configs" / "training.yaml")
    assert [(s.name, s.topology, s.world_size) for s in config.scenarios] == [
        ("in-container-2ranks", "in-container", 2),
        ("cross-container-2ranks", "cross-container", 2),
    ]
    for scenario in config.scenarios:
        assert scenario.backend == "gloo"
        assert (scenario.timeout_s, scenario.collective_timeout_s, scenario.check_timeout_s) == (600.0, 60.0, 300.0)
        assert [c.name for c in scenario.checks] == ["env", "ddp_training", "fsdp2", "dtensor", "dcp"]


# --- regressions: each of these crashed parse_config or was accepted when these tests were written ---


def test_unknown_yaml_tag_is_a_config_error() -> None:
    """Was: yaml.constructor.ConstructorError escaped parse_config (a traceback from the CLI)."""
    text = "scenarios:\n  - topology: in-container\n    world_size: !custom 3\n    checks: [env]\n"
    problems = problems_of(text)
    the_problem(problems, 3, "scenarios[0].world_size", "expected an integer >= 1")


@pytest.mark.parametrize(
    ("old", "new", "key_path", "expected"),
    [
        ("world_size: 2", "world_size:", "scenarios[0].world_size", "expected an integer >= 1; got nothing"),
        (
            "topology: in-container",
            "topology:",
            "scenarios[0].topology",
            "expected one of in-container, cross-container; got nothing",
        ),
        ("numel: 4", "numel:", "scenarios[0].checks[1].args.numel", "expected an integer >= 1; got nothing"),
        ("name: typed", "name:", "scenarios[0].name", "expected a name of letters, digits"),
        ("name: typed", "name: typed\n    timeout_s:", "scenarios[0].timeout_s", "expected a number of seconds > 0; got nothing"),
        ("      - env", "      -", "scenarios[0].checks[0]", f"expected {CHECK_NAMES}; got nothing"),
    ],
)
def test_key_without_value_is_a_config_error(old: str, new: str, key_path: str, expected: str) -> None:
    """Was: the empty scalar was re-serialized as '...' and yaml.parser.ParserError escaped parse_config."""
    text = SCENARIO_TEMPLATE.replace(old, new, 1)
    problems = problems_of(text)
    assert len(problems) == 1, problems
    assert re.match(rf"^{re.escape(FILE)}:\d+: {re.escape(key_path)}: {re.escape(expected)}", problems[0]), problems


def test_placeholder_arg_name_is_a_config_error() -> None:
    """Was: '(none)', the placeholder for "no arguments", was accepted as an argument name, then KeyError."""
    text = "scenarios:\n  - topology: in-container\n    world_size: 2\n    checks:\n      - {name: env, args: {'(none)': 1}}\n"
    problems = problems_of(text)
    the_problem(problems, 5, "scenarios[0].checks[0].args.(none)", "unknown key")


def test_name_with_a_trailing_newline_is_rejected() -> None:
    """Was accepted: NAME_PATTERN's '$' matched before a final newline ("a\\n" became a scenario name)."""
    text = 'scenarios:\n  - name: "ab\\n"\n    topology: in-container\n    world_size: 2\n    checks: [env]\n'
    problems = problems_of(text)
    the_problem(problems, 2, "scenarios[0].name", "expected a name of letters, digits", "got 'ab\\n'")


@pytest.mark.parametrize("key", ["timeout_s", "collective_timeout_s", "check_timeout_s"])
def test_infinite_timeouts_are_rejected(key: str) -> None:
    """Was accepted: no deadline at all, and timedelta(seconds=inf) -> OverflowError inside every rank."""
    problems = problems_of(f"{key}: .inf\n" + VALID)
    the_problem(problems, 1, key, "expected a number of seconds > 0")


# --- regressions ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("arg", "written"), [("python", "3.10"), ("torch", "2.10"), ("torch", "0")])
def test_unquoted_version_keeps_the_text_as_written(arg: str, written: str) -> None:
    """A version argument is the text written: YAML reads an unquoted 3.10 as 3.1."""
    text = arg_text("identity", arg, written)
    (scenario,) = parse_config(text, FILE).scenarios
    assert scenario.checks[0].args[arg] == written  # a requirement for Python 3.10 must not become one for 3.1


def test_unquoted_version_that_is_no_version_is_rejected_where_it_is() -> None:
    """2_6 is the integer 26 to YAML 1.1, and no version requirement as written."""
    problems = problems_of(arg_text("identity", "torch", "2_6"))
    assert problems == [
        f"{FILE}:{ARG_LINE}: scenarios[0].checks[0].args.torch: expected a version requirement like '>=2.6,<2.7', "
        "'2.15.0' or '13.*'; got '2_6'"
    ]


# --- the CLI on bad input -------------------------------------------------------------------------


def _no_engine(*args: object, **kwargs: object) -> None:
    raise AssertionError("the Docker Engine must not be touched when the config is bad")


def test_cli_run_with_bad_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "backend: tcp\nscenarios:\n  - topology: sideways\n    world_size: two\n    checks: [env, nope]\n",
        encoding="utf-8",
    )
    junit = tmp_path / "reports" / "out.xml"
    # command_run loads the config before it creates an Engine: the run must stop before any Docker call.
    monkeypatch.setattr(distval.cli.main, "Engine", _no_engine)

    code = distval.cli.main.main(["run", str(bad), "--junit", str(junit), "--run-id", "cafe0001"])

    captured = capsys.readouterr()
    assert code == EXIT_BAD_INPUT == 2
    assert "Traceback" not in captured.err + captured.out
    assert captured.err.splitlines() == [
        f"{bad}:1: backend: expected one of gloo, nccl, nccl-legacy, mpi; got 'tcp'",
        f"{bad}:3: scenarios[0].topology: expected one of in-container, cross-container; got 'sideways'",
        f"{bad}:4: scenarios[0].world_size: expected an integer >= 1; got 'two'",
        f"{bad}:5: scenarios[0].checks[1]: expected {CHECK_NAMES}; got 'nope'",
    ]
    assert "exit code 2" in captured.out

    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == "distval run"
    assert (suite.get("tests"), suite.get("errors"), suite.get("failures")) == ("1", "1", "0")
    (case,) = suite.findall("testcase")
    assert (case.get("name"), case.get("classname")) == ("config", "distval.run")
    error = case.find("error")
    assert error is not None
    assert error.get("type") == "config"
    assert "scenarios[0].world_size: expected an integer >= 1" in (error.get("message") or "")
    assert f"{bad}:5: scenarios[0].checks[1]" in (error.text or "")
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["run_id"] == "cafe0001"


def test_cli_run_with_missing_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.yaml"
    junit = tmp_path / "out.xml"
    monkeypatch.setattr(distval.cli.main, "Engine", _no_engine)
    code = distval.cli.main.main(["run", str(missing), "--junit", str(junit), "--quiet"])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.splitlines() == [f"{missing}: no such file; expected a YAML scenario file"]
    assert "Traceback" not in captured.err
    case = ET.parse(junit).getroot().find("testsuite/testcase")
    assert case is not None and case.get("name") == "config"
    assert case.find("error") is not None


def test_cli_plan_with_bad_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("scenarios:\n  - topology: in-container\n    world_size: 0\n    checks: []\n", encoding="utf-8")
    assert distval.cli.main.main(["plan", str(bad)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f"{bad}:3: scenarios[0].world_size: expected an integer >= 1; got '0'",
        f"{bad}:4: scenarios[0].checks: expected a non-empty list of checks; got a list",
    ]


def test_cuda_version_patterns_load_and_a_pattern_with_an_order_is_refused() -> None:
    body = "scenarios:\n  - {name: s, topology: in-container, world_size: 1, checks: [{name: cuda_build, args: {cuda: '%s'}}]}\n"
    (scenario,) = parse_config(body % "13.*", "c.yaml").scenarios
    assert dict(scenario.checks[0].args) == {"cuda": "13.*"}
    with pytest.raises(ConfigError) as caught:
        parse_config(body % ">=13.*", "c.yaml")
    assert caught.value.problems == [
        "c.yaml:2: scenarios[0].checks[0].args.cuda: expected a version requirement like '>=2.6,<2.7', '2.15.0' or '13.*'; "
        "got '>=13.*'"
    ]


def test_a_misspelt_check_or_argument_names_the_closest_and_a_far_one_names_none() -> None:
    text = yaml_text(
        """
        scenarios:
          - topology: in-container
            world_size: 2
            checks:
              - allreduce
              - {name: collectives, args: {large_mb: 1}}
              - zzz
        """
    )
    problems = problems_of(text)
    the_problem(problems, line_of(text, "allreduce"), "scenarios[0].checks[0]", "got 'allreduce'; did you mean 'all_reduce'?")
    the_problem(problems, line_of(text, "large_mb"), "scenarios[0].checks[1].args.large_mb", "did you mean 'large_mib'?")
    (far,) = [p for p in problems if "'zzz'" in p]
    assert "did you mean" not in far, far


def test_the_config_carries_the_sha256_of_its_files_bytes() -> None:
    """The JSON report's config_sha256 (and an attestation's) names the config by its content."""
    path = ROOT / "configs" / "default.yaml"
    assert load_config(path).sha256 == __import__("hashlib").sha256(path.read_bytes()).hexdigest()
