"""Tests of distval_suite, the in-image suite: its torch-free parts on the host, the rest in Docker."""
