"""Where a skip may come from: which collective operation and dtype an image may lack, by backend and
torch version (standard library only, tested on the host).

A skip never comes from the words of an error. For an (operation, dtype) this table lists as possibly
missing on this torch version, the suite first makes a capability probe: one call on a few elements,
before the real calls, on every rank; when it raises on every rank, the operation (or dtype) is skipped
with the probe's result as the reason. Everything the table does not list must work: an exception
there, or later in a real call of a probed operation, is an error, whatever it says.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

from distval_suite.versions import version_tuple

ANY = "*"
MUST, PROBE, ABSENT, UNDEFINED = "must", "probe", "absent", "undefined"
NEVER = (999,)  # no torch version has it: not part of what the check covers (no variant, no skip)
# (backend family, operation, dtype or ANY) -> (first torch version known to have it, what may be missing,
# what to do below that version: PROBE, or ABSENT where calling it is known to do harm).
# Versions are the ones measured (docs/checks.md, "collectives"; tests/docker_helpers.py GOOD lists each fixture's
# skips): gloo on torch 2.14.1 runs reduce_scatter, all_to_all and AVG; Debian's 1.13 and 2.6 do not have them all.
# Their gloo refuses reduce_scatter and all_to_all when called (a probe is harmless), but refuses AVG inside the
# work (2.6, 3 ranks): the error comes back again from the next barrier, so AVG is declared absent before 2.8 (PR
# #149781) and never called.
MAY_LACK: Dict[Tuple[str, str, str], Tuple[Tuple[int, ...], str, str]] = {
    ("gloo", "all_gather_into_tensor", ANY): ((2, 14), "gloo's all_gather_into_tensor (_allgather_base)", PROBE),
    ("gloo", "reduce_scatter", ANY): ((2, 14), "gloo's reduce_scatter", PROBE),
    ("gloo", "all_to_all", ANY): ((2, 14), "gloo's all_to_all", PROBE),
    ("gloo", "all_reduce.avg", ANY): ((2, 8), "gloo's ReduceOp.AVG", ABSENT),
    # Gloo's AVG divides in floating point: on int64 torch 2.15 raises "result type Float can't be cast to
    # the desired output type Long" (measured, 3 ranks). No version defines it, so it is no variant.
    ("gloo", "all_reduce.avg", "int64"): (NEVER, "gloo's ReduceOp.AVG on integer tensors", UNDEFINED),
    ("gloo", "all_reduce.avg", "int32"): (NEVER, "gloo's ReduceOp.AVG on integer tensors", UNDEFINED),
    ("gloo", "all_reduce.avg", "int8"): (NEVER, "gloo's ReduceOp.AVG on integer tensors", UNDEFINED),
    ("gloo", "all_reduce.avg", "uint8"): (NEVER, "gloo's ReduceOp.AVG on integer tensors", UNDEFINED),
    ("gloo", "all_reduce.avg", "bool"): (NEVER, "ReduceOp.AVG on bool tensors", UNDEFINED),
    ("nccl", "all_reduce.avg", "bool"): (NEVER, "ReduceOp.AVG on bool tensors", UNDEFINED),
    ("gloo", ANY, "bfloat16"): ((2, 14), "gloo's bfloat16 support in every operation", PROBE),
    ("gloo", ANY, "float16"): ((2, 14), "gloo's float16 support in every operation", PROBE),
    # Debian's torch 1.13 gloo raises "Invalid scalar type" for bool; 2.6 reduces it (measured), as 2.15 does.
    ("gloo", ANY, "bool"): ((2, 14), "gloo's bool support in every operation", PROBE),
}


# (backend family, device type, operation) -> what the backend does not take on that device in any torch version:
# skipped without a call. Gloo's send and recv take CPU tensors only (torch's docs, "Backends": send/recv on GPU
# with gloo is not supported): on a CUDA tensor its TCP pair writes from the device pointer and fails with EFAULT
# ("writev ... Bad address", measured: torch 2.11, H200), and the broken connection then fails every later
# collective of the group, so a probe would do harm.
DEVICE_LACKS: Dict[Tuple[str, str, str], str] = {
    ("gloo", "cuda", "send_recv_ring"): "gloo's send and recv on CUDA tensors (gloo takes CPU tensors only)",
}


def support(family: str, operation: str, dtype: str, torch_version: str, device: str = "cpu") -> Tuple[str, str]:
    """(MUST, "") when ``operation`` on ``dtype`` must work with this backend and torch version (no probe:
    any exception is an error); (PROBE, why) when it may be missing, so that a capability probe decides;
    (ABSENT, why) when this version (or the backend on this ``device`` type) is known not to have it (skipped
    without a call); (UNDEFINED, why) when no version defines it (not a variant of the check at all)."""
    lacking = DEVICE_LACKS.get((family, device, operation))
    if lacking is not None:
        return ABSENT, "%s is not supported by the backend in any torch version (declared, distval_suite/support.py)" % lacking
    have = version_tuple(torch_version)
    for key in ((family, operation, dtype), (family, operation, ANY), (family, ANY, dtype)):
        entry = MAY_LACK.get(key)
        if entry is not None and have < entry[0]:
            first = ".".join(map(str, entry[0]))
            if entry[2] == UNDEFINED:
                return UNDEFINED, "%s is not defined in any torch version" % entry[1]
            if entry[2] == ABSENT:
                return ABSENT, "%s is missing before torch %s; the image has %s (version gate)" % (entry[1], first, torch_version)
            return PROBE, "%s may be missing in torch %s (known from torch %s on)" % (entry[1], torch_version, first)
    return MUST, ""


def probe_verdict(outcomes: Dict[int, Optional[str]]) -> Tuple[str, str]:
    """Every rank's probe outcome (None: the call returned; else what it raised) -> ("run", ""),
    ("skip", reason) when it raised on every rank, or ("error", why) when the ranks disagree."""
    raised = {rank: text for rank, text in outcomes.items() if text is not None}
    if not raised:
        return "run", ""
    if len(raised) == len(outcomes):
        first = min(raised)
        return "skip", "the capability probe raised on every rank (rank %d: %s)" % (first, raised[first])
    ran = sorted(set(outcomes) - set(raised))
    first = min(raised)
    text = raised[first]
    return "error", "the capability probe raised on rank(s) %s but not on %s (rank %d: %s)" % (sorted(raised), ran, first, text)
