"""Tests of distval.comparing: runs compared with earlier runs (baseline, compare, reference, history)."""
