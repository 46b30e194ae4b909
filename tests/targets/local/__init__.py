"""Tests of distval.targets.local: host mode."""
