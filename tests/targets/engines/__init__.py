"""Tests of distval.targets.engines: several Docker hosts and node Engines."""
