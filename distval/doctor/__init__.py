"""``distval doctor``: whether this machine can run distval, one check per line: what every kind's doctor shares (each
kind of target declares its own checks in its folder: distval/targets/kind.py's DoctorCommand)."""
