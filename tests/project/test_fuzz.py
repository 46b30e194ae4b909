"""Property-based fuzzing of the config loader and the command line (Hypothesis), so that new classes of bad
input are found automatically.

Properties, for any input:
- the loader returns a Config (which then plans without an exception) or raises ConfigError, whose every
  problem is one line ``FILE:LINE: KEY.PATH: ...`` (or one of the documented file-level forms) of a
  readable length;
- ``distval plan`` exits 0 or 2 (``distval run`` against an unreachable Engine: 2 or 3), never with a
  traceback or an internal error, every stderr line in a documented form;
- each input takes a bounded time.

Cost: DISTVAL_FUZZ_EXAMPLES examples per property (default 50: a few seconds in all). With CI set (GitHub
Actions and GitLab set it), examples are derandomized: the same inputs every run, no example database.
Locally, a higher DISTVAL_FUZZ_EXAMPLES and no CI search wider.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import distval.cli.main
import distval.cli.run
import distval.targets.local.target
from distval.config import parse_config
from distval.config.keys import MATRIX_AXES, SCENARIO_KEYS
from distval.config.loader import TOP_KEYS
from distval.errors import ConfigError, EnvironmentUnusable
from distval.reports.markdown import STEP_SUMMARY_ENV
from distval.targets.docker.engine import EngineError
from distval.targets.engines.planning import plan_run
from tests.paths import ROOT
from tests.runner_environment import IN_CI

FILE = "fuzz.yaml"
EXAMPLES = int(os.environ.get("DISTVAL_FUZZ_EXAMPLES", "50"))
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=IN_CI,
    database=None if IN_CI else settings.default.database,
    deadline=None,  # Hypothesis' deadline is wall time: the bound is asserted per input below, in CPU time
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# CPU seconds one input may take: the loader reads a 10,000-scenario matrix in well under one. This process's CPU
# time, not the wall clock's: on a shared runner at a load of 30 an input waits for a core longer than it runs.
TIME_BOUND_S = 5.0
# A problem line, at most (a value is echoed cut to 100 characters; key paths are cut too).
LINE_MAX = 2000

PROBLEM = re.compile(r"^(?P<file>[^\n]+?):(?P<line>\d+): (?P<rest>.+)$")
FILE_LEVEL = re.compile(
    r"^[^\n]+?: (the file is empty|no such file|cannot read the file|expected a YAML scenario file|\d+ more problems)"
)
USAGE = re.compile(r"^distval( [a-z]+)?: error: .+ \(see distval( [a-z]+)? --help\)$")
DISTVAL = re.compile(r"^distval: (?!internal error).+$")
SHIPPED = [path.read_text(encoding="utf-8") for path in sorted((ROOT / "configs").glob("*.yaml"))]
VALID = "scenarios:\n  - name: one\n    topology: cross-container\n    world_size: 2\n    checks: [env, all_reduce]\n"


def assert_problem_lines(lines: list[str], file: str) -> None:
    assert lines, "a ConfigError must say what is wrong"
    for line in lines:
        assert "\n" not in line and len(line) <= LINE_MAX, line[:300]
        assert line.startswith(file), line[:300]
        assert PROBLEM.match(line) or FILE_LEVEL.match(line), line[:300]


def check_loader(text: str) -> None:
    started = time.process_time()
    try:
        config = parse_config(text, FILE)
    except ConfigError as exc:
        assert_problem_lines(exc.problems, FILE)
    else:
        plan_run(config, "fuzz0001")  # what the loader accepts, the planner takes
    assert time.process_time() - started < TIME_BOUND_S


# --- generated YAML documents ---------------------------------------------------------------------------

_KEYS = st.sampled_from([*TOP_KEYS, *SCENARIO_KEYS, *MATRIX_AXES, "name", "args", "required", "numel", "<<", "x-a", "a b"])
_SCALARS = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from([0, 1, 2, 3, 4, 8, 1024, 1025, 10**100, -1]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.sampled_from(
        [
            "in-container",
            "cross-container",
            "gloo",
            "nccl",
            "static",
            "c10d",
            "env",
            "tcp",
            "all_reduce",
            "collectives",
            "2024-02-30",
            "torch:2.6",
            "Torch:2.6",
            "1000:1000",
            "512m",
            "<<",
            "",
            " ",
            "a\x00b",
            "a\nb",
            "\u2028",
            "x" * 300,
        ]
    ),
    st.text(max_size=20),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(_KEYS, children, max_size=4)),
    max_leaves=12,
)
_SCENARIO = st.fixed_dictionaries(
    {"topology": st.sampled_from(["in-container", "cross-container"]), "checks": st.just(["env"])},
    optional={key: _VALUES for key in SCENARIO_KEYS if key not in ("topology", "checks")},
)
_DOCUMENTS = st.one_of(
    st.dictionaries(_KEYS, _VALUES, max_size=6),
    st.fixed_dictionaries(
        {"scenarios": st.lists(_SCENARIO, min_size=1, max_size=3)}, optional={k: _VALUES for k in TOP_KEYS if k != "scenarios"}
    ),
)


@FUZZ
@given(_DOCUMENTS, st.sampled_from([None, True, False]))
def test_generated_documents(document: Any, flow: bool | None) -> None:
    check_loader(yaml.safe_dump(document, default_flow_style=flow, allow_unicode=True))


# --- YAML-ish text: the parser's and composer's paths ---------------------------------------------------

_PIECES = st.sampled_from(
    [
        "scenarios:",
        "\n",
        "\n  - ",
        "\n    ",
        "- ",
        ": ",
        "{",
        "}",
        "[",
        "]",
        ",",
        "&a ",
        "*a",
        "&b ",
        "*b",
        "<<: ",
        "!!int ",
        "!!bool ",
        "!!timestamp ",
        "!!binary ",
        "!!python/object ",
        "!foo ",
        "? ",
        '"',
        "'",
        "\\",
        "#",
        "---\n",
        "...\n",
        "%YAML 1.1\n",
        "\t",
        "\x00",
        "\x01",
        "\ufeff",
        "\udcff",
        "|\n  ",
        ">-\n  ",
        "topology: in-container",
        "world_size: 2",
        "checks: [env]",
        "name: x",
        "matrix: {nodes: [2, 4]}",
        "exclude: [{nodes: 2}]",
        "env: {A: b}",
        "image: torch:2.6",
        "2024-02-30",
        "0x1F",
        "1:00",
        ".inf",
        "~",
    ]
)


@FUZZ
@given(st.lists(st.one_of(_PIECES, st.text(max_size=5)), max_size=40))
def test_yaml_like_text(pieces: list[str]) -> None:
    check_loader("".join(pieces))


# --- mutated valid configs -----------------------------------------------------------------------------


@st.composite
def _mutated(draw: st.DrawFn) -> str:
    text: str = draw(st.sampled_from([*SHIPPED, VALID]))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        lines = text.splitlines(keepends=True) or [""]
        at = draw(st.integers(min_value=0, max_value=len(lines) - 1))
        kind = draw(st.sampled_from(["insert", "delete", "duplicate", "indent", "dedent", "replace-char", "move"]))
        if kind == "insert":
            lines.insert(at, draw(_PIECES) + draw(st.sampled_from(["", "\n"])))
        elif kind == "delete":
            del lines[at]
        elif kind == "duplicate":
            lines.insert(at, lines[at])
        elif kind == "indent":
            lines[at] = "  " + lines[at]
        elif kind == "dedent":
            lines[at] = lines[at][2:] if lines[at].startswith("  ") else lines[at]
        elif kind == "move":
            lines.insert(draw(st.integers(min_value=0, max_value=len(lines))), lines.pop(at))
        else:
            line = lines[at]
            if line:
                column = draw(st.integers(min_value=0, max_value=len(line) - 1))
                lines[at] = (
                    line[:column]
                    + draw(st.sampled_from(["0", "-1", "x", " ", ":", "[", "{", "\x00", "9" * 40]))
                    + line[column + 1 :]
                )
        text = "".join(lines)
    return text


@FUZZ
@given(_mutated())
def test_mutated_valid_configs(text: str) -> None:
    check_loader(text)


# --- the command line ----------------------------------------------------------------------------------

_WORKDIR = tempfile.TemporaryDirectory(prefix="distval-fuzz-")
_DIR = Path(_WORKDIR.name)
(_DIR / "cwd").mkdir()
(_DIR / "bad.yaml").write_text("scenarios:\n  - topology: sideways\n    world_size: 0\n    checks: [nope]\n", encoding="utf-8")
(_DIR / "empty.yaml").write_text("", encoding="utf-8")
(_DIR / "valid.yaml").write_text(VALID, encoding="utf-8")
# Copies: a fuzzed --junit or --json names any of these paths, and must not overwrite the shipped config.
(_DIR / "default.yaml").write_text((ROOT / "configs" / "default.yaml").read_text(encoding="utf-8"), encoding="utf-8")
_CONFIGS = [
    str(_DIR / "default.yaml"),
    str(_DIR / "valid.yaml"),
    str(_DIR / "bad.yaml"),
    str(_DIR / "empty.yaml"),
    str(_DIR / "missing.yaml"),
    # No device here: a fuzzed --junit naming one would replace it (the report writer's own issue).
    str(_DIR),
    "",
    "-",
]
_TOKENS = st.one_of(
    st.sampled_from(
        [
            *_CONFIGS,
            "--image",
            "--run-id",
            "--format",
            "--filter",
            "--jobs",
            "--junit",
            "--json",
            "--markdown",
            "--quiet",
            "--require-gpu",
            "--",
            "json",
            "text",
            "yaml",
            "0",
            "1",
            "-1",
            "abc",
            "torch:2.6",
            "Torch",
            "",
            "*",
            "cross-*",
            "in-container-2ranks",
            "run01",
            "UPPER",
            "x" * 200,
            "a\x00b",
            str(_DIR / "out" / "r.xml"),
        ]
    ),
    # Relative: a token may become a report path, written in the temporary working directory and nowhere else
    # (an absolute one would be written, wherever it points).
    st.text(max_size=8).map(lambda text: text.replace("/", "_")),
)


def _unreachable(*args: object, **kwargs: object) -> None:
    raise EngineError("cannot reach the Docker Engine (fuzzing: no Engine)")


def _no_host(*args: object, **kwargs: object) -> None:
    raise EnvironmentUnusable("no local Python with torch (fuzzing: host mode is not run)")


@contextlib.contextmanager
def _isolated() -> Iterator[io.StringIO]:
    """Output captured (stderr returned), the working directory a temporary one (reports named by random
    tokens land there) and no $GITHUB_STEP_SUMMARY (a CI job's real summary must not get the fuzzed runs)."""
    out, err = io.StringIO(), io.StringIO()
    before = os.getcwd()
    environment = {k: v for k, v in os.environ.items() if k != STEP_SUMMARY_ENV}
    os.chdir(_DIR / "cwd")
    try:
        with (
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
            mock.patch.dict(os.environ, environment, clear=True),
            mock.patch.object(distval.cli.main, "Engine", _unreachable),
            mock.patch.object(distval.targets.local.target, "LocalSession", _no_host),  # --lo abbreviates --local: no local torch
        ):
            yield err
    finally:
        os.chdir(before)


def check_cli(arguments: list[str], allowed: set[int]) -> None:
    started = time.process_time()
    with _isolated() as err:
        try:
            code = distval.cli.main.main(arguments)
        except SystemExit as exc:  # --help and --version only
            assert exc.code == 0, (arguments, exc.code)
            return
    assert time.process_time() - started < TIME_BOUND_S
    assert code in allowed, (arguments, code, err.getvalue()[:500])
    for line in err.getvalue().splitlines():
        assert "Traceback" not in line and len(line) <= LINE_MAX, (arguments, line[:300])
        assert PROBLEM.match(line) or FILE_LEVEL.match(line) or USAGE.match(line) or DISTVAL.match(line), (
            arguments,
            line[:300],
        )


@FUZZ
@given(st.lists(_TOKENS, max_size=8))
def test_cli_plan_arguments(tokens: list[str]) -> None:
    check_cli(["plan", *tokens], {0, 2})


@FUZZ
@given(st.lists(_TOKENS, max_size=8))
def test_cli_run_arguments_without_an_engine(tokens: list[str]) -> None:
    """Without an Engine (or a local torch for --host) a run ends in bad input (2) or an unusable environment (3)."""
    check_cli(["run", "--quiet", *tokens], {2, 3})


@FUZZ
@given(st.one_of(_DOCUMENTS.map(lambda d: yaml.safe_dump(d)), _mutated()), st.sampled_from([[], ["--format", "json"]]))
def test_cli_plan_of_fuzzed_files(text: str, extra: list[str]) -> None:
    path = _DIR / "fuzzed.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    check_cli(["plan", str(path), *extra], {0, 2})


# --- numbers as YAML writes them: any length, any base (issue 19) -----------------------------------------


def _long(alphabet: str) -> st.SearchStrategy[str]:
    """Text of 1 to 6000 characters of ``alphabet``: a short random pattern repeated to a random length (plain
    st.text rarely reaches the lengths that matter here: 309 digits overflow a float, 4301 pass Python's cap)."""
    return st.tuples(st.integers(min_value=1, max_value=6000), st.text(alphabet=alphabet, min_size=1, max_size=8)).map(
        lambda t: (t[1] * t[0])[: t[0]]
    )


_DIGITS = _long("0123456789")
_NUMBER_TEXTS = st.one_of(
    _DIGITS,
    _DIGITS.map(lambda d: f"-{d}"),
    _long("0123456789abcdef").map(lambda d: f"0x{d}"),
    _long("01").map(lambda d: f"0b{d}"),
    _long("01234567").map(lambda d: f"0{d}"),
    st.tuples(st.integers(min_value=1, max_value=3000), st.integers(min_value=0, max_value=59)).map(
        lambda t: "1" + f":{t[1]}" * t[0]
    ),
    st.tuples(_DIGITS, st.sampled_from(["", "b", "k", "m", "g", "B", "KiB", "MiB", "GiB"])).map("".join),
    st.tuples(_DIGITS, _DIGITS, st.sampled_from(["", "e+400", "e-400", "e-10"])).map(lambda t: f"{t[0]}.{t[1]}{t[2]}"),
)
_NUMBER_KEYS = st.sampled_from(
    [
        "timeout_s",
        "collective_timeout_s",
        "cpus",
        "memory",
        "shm_size",
        "extra_networks",
        "max_restarts",
        "scenarios[0].world_size",
        "scenarios[0].nodes",
        "scenarios[0].checks[0].args.sizes[0]",
        "scenarios[0].env.A",
    ]
)


@FUZZ
@given(_NUMBER_KEYS, _NUMBER_TEXTS)
def test_numbers_of_any_length_and_base(key: str, number: str) -> None:
    """Was: a 400-digit integer (float overflow), a 4300-digit hex one (Python's digit cap) or a long
    sexagesimal one (quadratic) was an internal error or took seconds: now a value or one problem line, fast."""
    if key == "scenarios[0].checks[0].args.sizes[0]":
        text = VALID.replace("checks: [env, all_reduce]", f"checks: [{{name: bandwidth, args: {{sizes: [{number}]}}}}]")
    elif key == "scenarios[0].env.A":
        text = VALID.replace("    checks:", f"    env: {{A: {number}}}\n    checks:")
    elif key.startswith("scenarios[0]."):
        name = key.removeprefix("scenarios[0].")
        text = VALID.replace("world_size: 2", "world_size: 2" if name != "world_size" else "") + f"    {name}: {number}\n"
    else:
        text = f"{key}: {number}\n{VALID}"
    check_loader(text)
