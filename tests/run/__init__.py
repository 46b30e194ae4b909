"""Tests of distval.run: the step loop, progress and interrupts."""
