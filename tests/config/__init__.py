"""Tests of distval.config: the loader, its keys, matrices and the schema."""
