"""Tests of distval.results: outcomes, records, diagnosis, bandwidth and baselines."""
