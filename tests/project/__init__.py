"""Whole-project checks: the docs, the import graph, the front door, CI examples, fuzzing, benchmarks."""
