"""Tests of distval.targets.kubernetes: export and collect."""
