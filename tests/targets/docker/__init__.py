"""Tests of distval.targets.docker (and distval.tarball, the archives it hands the Engine)."""
