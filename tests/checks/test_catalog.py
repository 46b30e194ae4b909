"""The harness's check catalog and the in-image suite stay in step, and the suite stays portable.

distval_suite/ runs inside the image under test (Python >= 3.9, torch, nothing else), so it is read here with
``ast`` only: importing the check modules would need torch, which the host does not have.
"""

from __future__ import annotations

import ast
import sys
import textwrap
from pathlib import Path

import pytest

from distval.checks.catalog import CATALOG
from tests.paths import ROOT

SUITE_DIR = ROOT / "distval_suite"
SUITE_FILES = sorted(SUITE_DIR.glob("*.py"))
ALLOWED_THIRD_PARTY = {"torch"}


def _tree(path: Path, feature_version: tuple[int, int] | None = None) -> ast.Module:
    source = path.read_text(encoding="utf-8")
    if feature_version is None:
        return ast.parse(source, filename=str(path))
    return ast.parse(source, filename=str(path), feature_version=feature_version)


def registered_name(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The name in the function's ``@check("...")`` decorator, if it has one."""
    for decorator in function.decorator_list:
        if isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Name) and decorator.func.id == "check":
            assert len(decorator.args) == 1 and not decorator.keywords, ast.dump(decorator)
            argument = decorator.args[0]
            assert isinstance(argument, ast.Constant) and isinstance(argument.value, str), (
                f"line {decorator.lineno}: @check() needs a literal name"
            )
            return argument.value
    return None


def registered_checks(path: Path) -> list[str]:
    """Names passed to ``@check("...")`` decorators on module-level functions, in file order."""
    functions = [n for n in _tree(path).body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return [name for name in map(registered_name, functions) if name is not None]


def imported_top_levels(tree: ast.Module) -> set[str]:
    """Top-level package of every absolute import anywhere in the module (inside functions too)."""
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: inside suite itself
                modules.add("distval_suite")
            elif node.module:
                modules.add(node.module.split(".")[0])
    return modules


def test_suite_files_exist() -> None:
    assert {p.name for p in SUITE_FILES} >= {
        "__init__.py",
        "collectives.py",
        "core.py",
        "cudabuild.py",
        "ddp.py",
        "devices.py",
        "group.py",
        "image.py",
        "launch.py",
        "main.py",
        "network.py",
        "records.py",
        "requirements.py",
        "store.py",
        "versions.py",
    }
    assert not (SUITE_DIR / "checks.py").exists(), "each suite module names its concern (issue 8)"


def test_main_imports_every_module_that_registers_checks() -> None:
    """distval_suite.main imports CHECK_MODULES to register the checks: a module missing there is a check that never runs."""
    main = _tree(SUITE_DIR / "main.py")
    listed: list[str] = []
    for node in ast.walk(main):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "CHECK_MODULES" for t in node.targets):
            listed = [ast.literal_eval(e) for e in node.value.elts]  # type: ignore[attr-defined]
    registering = {f"distval_suite.{p.stem}" for p in SUITE_FILES if registered_checks(p)}
    assert set(listed) == registering


def test_registered_checks_equal_the_catalog() -> None:
    names = [name for path in SUITE_FILES for name in registered_checks(path)]
    assert names, "no @check registrations found in distval_suite/"
    assert len(names) == len(set(names)), f"a check is registered twice: {names}"
    assert set(names) == set(CATALOG)


# The kinds distval.config knows how to validate (and tests/config/test_config.py tests one by one).
ARG_KINDS = (
    "int",
    "seconds",
    "fraction",
    "version",
    "choice",
    "names",
    "paths",
    "variables",
    "sizes",
    "busbw",
    "efficiency",
    "bool",
)


def test_catalog_entries_are_consistent() -> None:
    for name, info in CATALOG.items():
        assert info.name == name
        assert info.description
        for arg_name, spec in info.args.items():
            assert spec.kind in ARG_KINDS, (name, arg_name, spec.kind)
            assert spec.description, (name, arg_name)
            assert isinstance(spec.minimum, int) and not isinstance(spec.minimum, bool), (name, arg_name)
            if spec.kind == "int":
                assert spec.minimum >= 0, (name, arg_name)
            else:
                assert spec.minimum == 0, (name, arg_name, "minimum only applies to int arguments")
            if spec.kind in ("choice", "names"):
                assert spec.choices, (name, arg_name, "a choice needs choices")
                assert all(isinstance(c, str) and c for c in spec.choices), (name, arg_name)
                assert len(set(spec.choices)) == len(spec.choices), (name, arg_name)
            else:
                assert spec.choices == (), (name, arg_name, "choices only apply to choice and names arguments")


CATALOG_KINDS: dict[str, dict[str, str]] = {
    "env": {},
    "identity": {"torch": "version", "python": "version", "build": "choice", "backends": "names"},
    "cuda_build": {"build": "choice", "cuda": "version"},
    "bytecode": {"max_stale_fraction": "fraction"},
    "libraries": {"allow_dirs": "paths"},
    "environment": {"harmful": "variables", "allow": "variables", "harmful_verdict": "choice"},
    "launch": {},
    "all_reduce": {"numel": "int"},
    "collectives": {"repeat": "int", "large_mib": "int"},
    "ddp_sync": {},
    "ddp_training": {"steps": "int", "parts": "names"},
    "ddp_sampler": {},
    "store": {},
    "timeout": {"deadline_s": "seconds", "margin_s": "seconds"},
    "bandwidth": {
        "sizes": "sizes",
        "iterations": "int",
        "min_time_s": "seconds",
        "warmup": "int",
        "ops": "names",
        "min_busbw_gbps": "busbw",
        "yardstick": "bool",
        "min_efficiency": "efficiency",
    },
    "reconfigure": {},
    "fsdp2": {},
    "dtensor": {},
    "dcp": {},
    "collective_loop": {"duration_s": "seconds", "numel": "int", "timeout_s": "seconds"},
    "allocate": {"mib": "int", "rank": "int"},
}


def test_catalog_names_and_arguments() -> None:
    """The catalog as configs see it: check names in order (they appear in messages) and their arguments' kinds."""
    assert {name: {arg: spec.kind for arg, spec in info.args.items()} for name, info in CATALOG.items()} == CATALOG_KINDS
    # Insertion order is the order "expected a check name (...)" lists them in.
    assert list(CATALOG) == list(CATALOG_KINDS)
    identity = CATALOG["identity"].args
    assert identity["build"].choices == ("cpu", "cuda")
    assert identity["backends"].choices == ("gloo", "nccl", "mpi")
    assert CATALOG["all_reduce"].args["numel"].minimum == 1
    assert {arg: spec.minimum for arg, spec in CATALOG["collectives"].args.items()} == {"repeat": 1, "large_mib": 1}


def args_read(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Names in ``args.get("x")``, ``args["x"]`` and ``"x" in args`` inside the function."""
    used: set[str] = set()
    for node in ast.walk(function):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "args"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            used.add(str(node.args[0].value))
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "args":
            if isinstance(node.slice, ast.Constant):
                used.add(str(node.slice.value))
        if (
            isinstance(node, ast.Compare)
            and isinstance(node.left, ast.Constant)
            and len(node.ops) == 1
            and isinstance(node.ops[0], (ast.In, ast.NotIn))
            and isinstance(node.comparators[0], ast.Name)
            and node.comparators[0].id == "args"
        ):
            used.add(str(node.left.value))
    return used


def test_check_args_read_by_the_suite_are_in_the_catalog() -> None:
    """Every argument a registered check reads, in any suite file, is an argument the catalog declares."""
    seen: dict[str, set[str]] = {}
    for path in SUITE_FILES:
        for function in _tree(path).body:
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            registered = registered_name(function)
            if registered is not None:
                seen[registered] = args_read(function)
                assert seen[registered] <= set(CATALOG[registered].args), (path.name, registered, seen[registered])
    assert set(seen) == set(CATALOG)
    # The reader finds what is there (so the subset check above is not vacuous).
    assert seen["identity"] == {"torch", "python", "build", "backends"}
    assert seen["timeout"] == {"deadline_s", "margin_s"}
    assert seen["cuda_build"] == {"build", "cuda"}
    assert seen["bytecode"] == {"max_stale_fraction"}


def test_args_reader_finds_every_form() -> None:
    source = textwrap.dedent(
        """
        def f(ctx, args):
            a = args.get("x", 1)
            b = args["y"]
            return "z" in args, "w" not in args, other["v"]
        """
    )
    function = ast.parse(source).body[0]
    assert isinstance(function, ast.FunctionDef)
    assert args_read(function) == {"x", "y", "z", "w"}


@pytest.mark.parametrize("path", SUITE_FILES, ids=[p.name for p in SUITE_FILES])
def test_suite_imports_only_stdlib_torch_and_itself(path: Path) -> None:
    allowed = set(sys.stdlib_module_names) | ALLOWED_THIRD_PARTY | {"distval_suite"}
    imported = imported_top_levels(_tree(path))
    assert imported <= allowed, f"{path.name} imports {sorted(imported - allowed)}"
    assert "harness" not in imported


@pytest.mark.parametrize("path", SUITE_FILES, ids=[p.name for p in SUITE_FILES])
def test_suite_parses_with_python_3_9_grammar(path: Path) -> None:
    _tree(path, feature_version=(3, 9))


def test_grammar_check_can_fail() -> None:
    # The feature_version guard is real: a 3.10 match statement does not parse as 3.9.
    source = "match x:\n    case 1:\n        pass\n"
    ast.parse(source, feature_version=(3, 10))
    with pytest.raises(SyntaxError):
        ast.parse(source, feature_version=(3, 9))


def test_import_check_can_fail() -> None:
    tree = ast.parse("import yaml\nfrom docker import errors\nfrom . import records\nimport torch.distributed as dist\n")
    assert imported_top_levels(tree) == {"yaml", "docker", "distval_suite", "torch"}


def test_suite_package_imports_nothing() -> None:
    """suite/__init__.py is imported by the harness on the host (to locate the suite): no torch there."""
    tree = _tree(SUITE_DIR / "__init__.py")
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]


def torch_minimums(path: Path) -> dict[str, tuple[int, int]]:
    """check name -> (major, minor) of each ``require_torch(major, minor, ...)`` called in that check's function."""
    found = {}
    for function in _tree(path).body:
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        name = registered_name(function)
        for node in ast.walk(function):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "require_torch":
                major, minor = node.args[0], node.args[1]
                assert isinstance(major, ast.Constant) and isinstance(minor, ast.Constant), ast.dump(node)
                assert name is not None, f"{path.name}:{node.lineno}: require_torch outside a check"
                found[name] = (major.value, minor.value)
    return found


def test_the_catalog_s_torch_minimum_is_the_suite_s_require_torch() -> None:
    in_suite = {name: version for path in SUITE_FILES for name, version in torch_minimums(path).items()}
    declared = {name: info.torch_minimum for name, info in CATALOG.items() if info.torch_minimum is not None}
    assert declared == in_suite
    assert in_suite  # else the comparison above says nothing


def calls_support_table(path: Path) -> bool:
    """Whether the module calls distval_suite/support.py's ``support(...)``."""
    calls = (node for node in ast.walk(_tree(path)) if isinstance(node, ast.Call))
    return any(isinstance(call.func, ast.Name) and call.func.id == "support" for call in calls)


def test_the_checks_with_probed_dtypes_are_the_ones_that_ask_the_support_table() -> None:
    """A check declaring probed_dtypes is registered in a module that asks distval_suite/support.py, and each such module
    registers one (distval checks lists the table's gates for those checks)."""
    asking = [path for path in SUITE_FILES if path.name != "support.py" and calls_support_table(path)]
    assert asking
    probed = {name for name, info in CATALOG.items() if info.probed_dtypes}
    for path in asking:
        assert set(registered_checks(path)) & probed, path.name
    registered_in_asking = {name for path in asking for name in registered_checks(path)}
    assert probed <= registered_in_asking
