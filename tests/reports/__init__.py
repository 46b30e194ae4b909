"""Tests of distval.reports: every report format and how it is written."""
