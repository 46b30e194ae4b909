"""benchmarks/bench_suite.py's view of the time budgets (the catalog's ``budget_s``): each check's share of its
scenario's time, and the checks over their budget; and the budgets themselves, declared for what the default config runs."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from distval.checks.catalog import CATALOG
from distval.config import load_config
from tests.paths import ROOT


def _load_bench_suite() -> ModuleType:
    # bench_suite imports ``common`` from its own directory, as when it runs as a script.
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location("bench_suite_script", ROOT / "benchmarks" / "bench_suite.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look their module up there
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


bench_suite = _load_bench_suite()


def test_each_checks_share_and_whether_it_is_over_its_budget() -> None:
    shares = bench_suite.check_shares({"timeout": 0.5, "collectives": 8.0, "bandwidth": 0.4}, 10.0)
    assert [(s.name, s.seconds, s.share, s.budget_s, s.over) for s in shares] == [
        ("collectives", 8.0, 0.8, CATALOG["collectives"].budget_s, True),
        ("timeout", 0.5, 0.05, CATALOG["timeout"].budget_s, False),
        ("bandwidth", 0.4, 0.04, None, False),  # no budget declared (its arguments set its time): never flagged
    ]
    assert shares[0].text() == f"collectives 8.00 (80%) OVER its {CATALOG['collectives'].budget_s:g} s budget"
    assert shares[1].text() == "timeout 0.50 (5%)"
    assert bench_suite.check_shares({"env": 0.0}, 0.0)[0].share == 0.0  # a scenario that took no time: no division


def test_every_check_has_a_budget_but_those_whose_arguments_set_their_time() -> None:
    config = load_config(ROOT / "configs" / "default.yaml")
    names = {check.name for scenario in config.scenarios for check in scenario.checks}
    assert {name for name in names if CATALOG[name].budget_s is None} == set()
    # bandwidth's sizes and iterations, collective_loop's duration and allocate's MiB are what the config asks for.
    assert {name for name, info in CATALOG.items() if info.budget_s is None} == {"bandwidth", "collective_loop", "allocate"}
    assert all(info.budget_s is None or info.budget_s > 0 for info in CATALOG.values())
