"""Tests of distval.checks: the catalog and the fault expectations."""
