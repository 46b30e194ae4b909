"""``distval doctor``: whether this machine can run distval, one check per line (checks.py declares them)."""
