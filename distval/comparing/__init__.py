"""Runs compared with other runs: a run against its last-known-good report (--baseline, ``distval compare``),
against a reference image run in pairs (--reference), and many runs as a history page."""
