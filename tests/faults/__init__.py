"""Tests of distval.faults: the fault plan, its runtime hook and its results."""
