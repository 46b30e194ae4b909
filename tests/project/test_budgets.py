"""Every file of Docker or host tests has a time budget (tests/budgets.py), no budget names a file that is gone, and
the budgets fit CI's: what a new Docker test costs is declared where it is added, and the sum is judged at once. A
file with tests marked ``waits`` declares the part of its budget they spend (WAITING_S), and only such a file does:
each of CI's two processes is then judged on its own, since CI takes as long as the longer one.

A file counts as one of Docker or host tests when it uses the ``docker`` or ``host`` marker anywhere (a module's
``pytestmark``, a decorator, a ``pytest.param``'s marks), or is named ``*_docker.py``: found in the source, so that
the guard costs no collection of the whole suite (tests/project/test_waiting_tests.py collects for its own
reasons); on 2026-12-06 it found the same 24 files as ``pytest --collect-only -m "docker or host"``."""

from __future__ import annotations

import ast
from collections.abc import Collection, Mapping
from pathlib import Path

import pytest

from tests.budget_report import BudgetReport, budget_lines, file_of
from tests.budgets import BUDGETS_S, CI_DOCKER_WALL_S, CI_LIMIT_S, WAITING_S, process_budgets
from tests.fake_clock import FakeClock
from tests.paths import TESTS

MARKERS = ("docker", "host")


def _uses_marker(tree: ast.AST, markers: Collection[str] = MARKERS) -> bool:
    """``pytest.mark.docker``, ``mark.host`` (from pytest import mark) and the like, anywhere in the module."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in markers:
            owner = node.value
            named = owner.attr if isinstance(owner, ast.Attribute) else owner.id if isinstance(owner, ast.Name) else ""
            if named == "mark":
                return True
    return False


def docker_test_files(tests: Path = TESTS) -> list[str]:
    """The files of Docker or host tests under ``tests``, as paths from the repository root."""
    found = []
    for path in sorted(tests.rglob("test_*.py")):
        if path.name.endswith("_docker.py") or _uses_marker(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            found.append(path.relative_to(tests.parent).as_posix())
    return found


def waiting_test_files(files: Collection[str], root: Path = TESTS.parent) -> list[str]:
    """Those of ``files`` (paths from ``root``) that mark a test ``waits``."""
    return [path for path in files if _uses_marker(ast.parse((root / path).read_text(encoding="utf-8"), path), ("waits",))]


def waiting_problems(files: Collection[str], waiting_files: Collection[str], waiting: Mapping[str, int]) -> list[str]:
    """What is wrong with the waiting parts (WAITING_S) for these Docker test ``files``, of which ``waiting_files``
    mark tests ``waits``: one line each."""
    problems = [f"{path}: tests marked waits without a line in WAITING_S" for path in sorted(set(waiting_files) - set(waiting))]
    problems += [
        f"{path}: a line in WAITING_S for a file with no test marked waits"
        for path in sorted(set(waiting) - set(waiting_files))
        if path in files
    ]
    problems += [f"{path}: a line in WAITING_S for a file of no Docker tests" for path in sorted(set(waiting) - set(files))]
    return problems


def process_problems(budgets: Mapping[str, int], waiting: Mapping[str, int], wall_s: int) -> list[str]:
    """Each of CI's two processes against ``wall_s``, and each file's waiting part within its budget."""
    main, waits = process_budgets(budgets, waiting)
    problems = [
        f"{path}: waiting part {s} s is not within its budget" for path, s in waits.items() if not 0 < s <= budgets.get(path, 0)
    ]
    for name, parts in (("main", main), ("waiting", waits)):
        if sum(parts.values()) > wall_s:
            problems.append(
                f"the {name} process's budgets sum to {sum(parts.values())} s, over CI's {wall_s} s (CI_DOCKER_WALL_S)"
            )
    return problems


def budget_problems(files: Collection[str], budgets: Mapping[str, int], limit_s: int) -> list[str]:
    """What is wrong with ``budgets`` for these Docker test ``files``: one line each."""
    missing, stale = sorted(set(files) - set(budgets)), sorted(set(budgets) - set(files))
    problems = [f"{path}: Docker or host tests without a budget in tests/budgets.py" for path in missing]
    problems += [f"{path}: a budget in tests/budgets.py for a file of no Docker tests" for path in stale]
    problems += [f"{path}: budget {s} s is not a positive number of seconds" for path, s in budgets.items() if s <= 0]
    total = sum(budgets.values())
    if total > limit_s:
        problems.append(f"the budgets sum to {total} s, over CI's {limit_s} s (tests/budgets.py CI_LIMIT_S)")
    return problems


def test_every_docker_test_file_has_a_budget_and_every_budget_a_file() -> None:
    files = docker_test_files()
    assert len(files) >= 20  # the finder finds them (24 on 2026-12-06)
    assert budget_problems(files, BUDGETS_S, limit_s=10**9) == []


def test_every_file_with_waiting_tests_declares_their_part_and_only_those() -> None:
    files = docker_test_files()
    waiting_files = waiting_test_files(files)
    assert len(waiting_files) >= 5  # the finder finds them (7 on 2026-12-06)
    assert waiting_problems(files, waiting_files, WAITING_S) == []
    assert process_problems(BUDGETS_S, WAITING_S, 10**9) == []


def test_the_waiting_process_is_not_the_long_pole() -> None:
    """Its tests leave a core idle much of their time, beside the main process's: what is moved there must leave it
    shorter than the main process, or CI waits on it instead (whether either fits CI_DOCKER_WALL_S is
    test_the_budgets_fit_ci's question)."""
    main, waiting = process_budgets(BUDGETS_S, WAITING_S)
    assert sum(waiting.values()) <= sum(main.values())


@pytest.mark.xfail(
    strict=True,
    reason="the budgets (warm CI runs' per-file figures of 2026-12-06 at load 1.7, x 1.3, some raised since) sum to "
    "4,791 s against CI_LIMIT_S (3,000 s); the main process's part is 2,641 s and the waiting process's 2,150 s, both "
    "over CI_DOCKER_WALL_S (1,500 s). A CI run of 2026-12-07 on an empty Engine (the processes balanced) took 3,338 s in "
    "the main process and 2,646 s in the waiting one, the 2 cores 88 % busy: 97.5 CPU-minutes, 49 minutes of the 2 cores. "
    "Strict: once under, this passes and the mark goes.",
)
def test_the_budgets_fit_ci() -> None:
    assert budget_problems(BUDGETS_S, BUDGETS_S, CI_LIMIT_S) == []
    assert process_problems(BUDGETS_S, WAITING_S, CI_DOCKER_WALL_S) == []


def test_the_guard_fails_on_a_missing_budget_a_stale_one_and_a_sum_over_the_limit() -> None:
    files = ["tests/a/test_a_docker.py", "tests/b/test_b.py"]
    assert budget_problems(files, {"tests/a/test_a_docker.py": 10, "tests/b/test_b.py": 20}, 30) == []
    assert budget_problems(files, {"tests/a/test_a_docker.py": 10}, 30) == [
        "tests/b/test_b.py: Docker or host tests without a budget in tests/budgets.py"
    ]
    assert budget_problems(files, {**dict.fromkeys(files, 10), "tests/gone_docker.py": 5}, 30) == [
        "tests/gone_docker.py: a budget in tests/budgets.py for a file of no Docker tests"
    ]
    assert budget_problems(files, {"tests/a/test_a_docker.py": 10, "tests/b/test_b.py": 21}, 30) == [
        "the budgets sum to 31 s, over CI's 30 s (tests/budgets.py CI_LIMIT_S)"
    ]
    assert budget_problems(files, {"tests/a/test_a_docker.py": 0, "tests/b/test_b.py": 1}, 30) == [
        "tests/a/test_a_docker.py: budget 0 s is not a positive number of seconds"
    ]


def test_the_process_guard_fails_on_a_process_over_the_wall_and_a_part_over_its_budget() -> None:
    budgets = {"tests/a_docker.py": 30, "tests/b_docker.py": 20}
    assert process_problems(budgets, {"tests/a_docker.py": 10}, 40) == []
    assert process_problems(budgets, {"tests/a_docker.py": 5}, 40) == [
        "the main process's budgets sum to 45 s, over CI's 40 s (CI_DOCKER_WALL_S)"
    ]
    assert process_problems(budgets, {"tests/a_docker.py": 30, "tests/b_docker.py": 15}, 40) == [
        "the waiting process's budgets sum to 45 s, over CI's 40 s (CI_DOCKER_WALL_S)"
    ]
    assert process_problems(budgets, {"tests/a_docker.py": 31, "tests/c_docker.py": 1}, 100) == [
        "tests/a_docker.py: waiting part 31 s is not within its budget",
        "tests/c_docker.py: waiting part 1 s is not within its budget",
    ]


def test_the_waiting_guard_fails_on_a_missing_part_and_a_stale_one() -> None:
    files = ["tests/a_docker.py", "tests/b_docker.py"]
    assert waiting_problems(files, ["tests/a_docker.py"], {"tests/a_docker.py": 5}) == []
    assert waiting_problems(files, ["tests/a_docker.py"], {}) == [
        "tests/a_docker.py: tests marked waits without a line in WAITING_S"
    ]
    assert waiting_problems(files, [], {"tests/b_docker.py": 5, "tests/gone_docker.py": 5}) == [
        "tests/b_docker.py: a line in WAITING_S for a file with no test marked waits",
        "tests/gone_docker.py: a line in WAITING_S for a file of no Docker tests",
    ]


def test_the_finder_sees_a_marker_wherever_it_is_used(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    (tests / "x").mkdir(parents=True)
    (tests / "x" / "test_module_mark.py").write_text("import pytest\npytestmark = [pytest.mark.docker]\n")
    (tests / "x" / "test_decorated.py").write_text("from pytest import mark\n@mark.host\ndef test_a(): pass\n")
    (tests / "x" / "test_param.py").write_text(
        "import pytest\n@pytest.mark.parametrize('a', [pytest.param(1, marks=pytest.mark.docker)])\ndef test_a(a): pass\n"
    )
    (tests / "x" / "test_by_name_docker.py").write_text("def test_a(): pass\n")
    (tests / "x" / "test_quick.py").write_text("import pytest\n@pytest.mark.waits\ndef test_a(): pass\n# pytest.mark.docker\n")
    assert docker_test_files(tests) == [
        "tests/x/test_by_name_docker.py",
        "tests/x/test_decorated.py",
        "tests/x/test_module_mark.py",
        "tests/x/test_param.py",
    ]
    assert waiting_test_files(["x/test_quick.py", "x/test_decorated.py"], tests) == ["x/test_quick.py"]


def test_the_budgets_are_one_line_per_file_in_path_order() -> None:
    """A new file's line goes in its place, not at the end, so that two appends rarely touch the same lines."""
    assert list(BUDGETS_S) == sorted(BUDGETS_S)
    assert list(WAITING_S) == sorted(WAITING_S)


def test_the_budget_report_flags_a_file_over_its_budget_and_only_that() -> None:
    spent = {"tests/a_docker.py": 31.0, "tests/b_docker.py": 30.0, "tests/quick.py": 99.0}
    budgets = {"tests/a_docker.py": 30, "tests/b_docker.py": 30}
    assert budget_lines(spent, budgets) == [
        "    31.0 s of    30 s  tests/a_docker.py  OVER",
        "    30.0 s of    30 s  tests/b_docker.py",
    ]
    assert file_of("tests/a_docker.py::test_x[y::z]") == "tests/a_docker.py"


def test_the_budget_report_sums_a_files_waiting_tests_apart_from_its_others() -> None:
    report = BudgetReport()
    path = next(iter(WAITING_S))
    for keywords, duration in (({"waits": 1}, 2.0), ({}, 3.0), ({"waits": 1}, 0.5)):
        report.pytest_runtest_logreport(
            pytest.TestReport(f"{path}::test_x", (path, 0, "test_x"), keywords, "passed", None, "call", [], duration)
        )
    assert (report.spent, report.waiting) == ({path: 3.0}, {path: 2.5})


def test_the_time_having_fixture_images_built_is_beside_a_files_figure_not_in_it() -> None:
    clock = FakeClock()
    report = BudgetReport(clock)
    path = next(p for p in BUDGETS_S if p not in WAITING_S)

    def phase(when: str, duration: float, build_s: float = 0.0) -> None:
        if build_s:
            with report.building():
                clock.advance(build_s)
        report.pytest_runtest_logreport(
            pytest.TestReport(f"{path}::test_x", (path, 0, "test_x"), {}, "passed", None, when, [], duration)
        )

    phase("setup", 540.0, build_s=537.0)  # the first test to ask for an image pays for it
    phase("call", 20.0)
    phase("setup", 1.0, build_s=0.2)  # an image found current: the check alone
    assert report.spent == {path: pytest.approx(23.8)} and report.built == {path: pytest.approx(537.2)}
    lines = budget_lines(report.spent, {path: 30}, report.built)
    assert lines == [f"    23.8 s of    30 s  {path}  (+537.2 s having fixture images built)"]
    # Without the split, the same phases read as a file far over its budget.
    assert "OVER" in budget_lines({path: 561.0}, {path: 30})[0]
