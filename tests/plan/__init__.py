"""Tests of distval.plan: the launch plan, its identity, and the runs that must match it."""
