"""Tests of distval.cli: the command line's exits and its bad input."""
