"""Tests of distval.targets: the target layer, one subpackage per target."""
