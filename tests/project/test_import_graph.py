"""distval's modules import one another in one direction: no circle of imports, TYPE_CHECKING-only ones included,
and no import of distval placed inside a function to dodge one (only ones that keep docker-py out of host mode)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.paths import ROOT

PACKAGE = ROOT / "distval"

# plan/model.py plans across hosts through targets/engines/plan.py, which builds on plan/model.py's helpers: that
# circle is being taken apart on its own. No other circle may appear.
KNOWN_CYCLES: list[set[str]] = []
# Imports inside a function that are there for a reason other than a cycle: each target imports docker-py, which
# host mode, ``distval plan`` and the modules they load must never need.
DOCKER_PY_LAZY = {
    ("distval.targets.engines.kind", "distval.targets.docker.engine"),
    ("distval.targets.engines.kind", "distval.targets.engines.dind"),
    ("distval.targets.engines.kind", "distval.targets.engines.target"),
}
KNOWN_HIDDEN: set[tuple[str, str]] = set()


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        if "images/files" in path.as_posix():  # the fixture images' own programs
            continue
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def imports(mods: dict[str, Path]) -> tuple[dict[str, set[str]], set[tuple[str, str]]]:
    """Every module's imports of other distval modules (anywhere in it), and those placed inside a function."""

    def resolve(name: str) -> str | None:
        while name not in mods and "." in name:
            name = name.rsplit(".", 1)[0]
        return name if name in mods else None

    edges: dict[str, set[str]] = {m: set() for m in mods}
    hidden: set[tuple[str, str]] = set()
    for module, path in mods.items():
        tree = ast.parse(path.read_text())
        in_functions = {
            id(node)
            for function in ast.walk(tree)
            if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
            for node in ast.walk(function)
        }
        for node in ast.walk(tree):
            targets: list[str | None] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.startswith("distval."):
                targets = [resolve(f"{node.module}.{alias.name}") for alias in node.names]
            elif isinstance(node, ast.Import):
                targets = [resolve(alias.name) for alias in node.names if alias.name.startswith("distval.")]
            for target in targets:
                if target is not None and target != module:
                    edges[module].add(target)
                    if id(node) in in_functions:
                        hidden.add((module, target))
    return edges, hidden


def cycles(edges: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_circle_of_imports() -> None:
    edges, _ = imports(modules())
    assert [c for c in cycles(edges) if c not in KNOWN_CYCLES] == []


def test_the_results_events_and_plan_types_import_downward_only() -> None:
    """The modules that once formed a circle of seven: none reaches back to the one that imports it."""
    edges, _ = imports(modules())
    below = {
        "distval.plan.model": set(),
        "distval.plan.identity": {"distval.plan.model"},
        "distval.plan.rank_files": set(),
        "distval.results.outcome": {"distval.plan.model"},
        "distval.results.diagnosis": {"distval.plan.model", "distval.results.outcome", "distval.plan.rank_files"},
    }
    watched = {
        "distval.plan.model",
        "distval.plan.identity",
        "distval.plan.rank_files",
        "distval.results.outcome",
        "distval.results.diagnosis",
        "distval.results.scenario",
        "distval.results.faults",
        "distval.run.events",
        "distval.targets.local.plan",
    }
    for module, allowed in below.items():
        assert edges[module] & watched <= allowed, module
    assert "distval.results.scenario" not in edges["distval.results.faults"]
    assert "distval.run.events" not in edges["distval.results.diagnosis"]
    assert "distval.targets.local.plan" not in edges["distval.results.scenario"]  # results never plan again


def test_imports_inside_functions_only_keep_docker_py_out() -> None:
    _, hidden = imports(modules())
    assert hidden - KNOWN_HIDDEN - DOCKER_PY_LAZY == set()
    for target in sorted({target for _, target in DOCKER_PY_LAZY}):
        code = f"import sys, {target}; sys.exit(0 if 'docker' in sys.modules else 1)"
        assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=False).returncode == 0, target
    for importer in sorted({importer for importer, _ in DOCKER_PY_LAZY}):
        code = f"import sys, {importer}; sys.exit(1 if 'docker' in sys.modules else 0)"
        assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=False).returncode == 0, importer
