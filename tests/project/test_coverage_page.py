"""docs/collectives-coverage.md is written from distval_suite/coverage.py, the declaration the suite runs; the catalog's
probed_dtypes follow its dtypes (torch-free, on the host)."""

from __future__ import annotations

from distval.checks.catalog import CATALOG
from distval.config.coverage_reference import COVERAGE_PAGE, render_coverage_markdown
from distval_suite import coverage
from tests.paths import ROOT


def test_the_collectives_coverage_page_is_current() -> None:
    page = (ROOT / COVERAGE_PAGE).read_text(encoding="utf-8")
    assert page == render_coverage_markdown(), f"run: python -m distval.config.coverage_reference > {COVERAGE_PAGE}"
    for rule in coverage.RULES:
        assert f"| {rule.name} |" in page


def test_the_catalog_probes_the_dtypes_the_coverage_declares() -> None:
    assert set(CATALOG["collectives"].probed_dtypes) == set(coverage.DTYPES)
