"""How a part that ran several times (``repeat``, several dtypes and sizes) is summed up: one status
and one message counting every run once. Standard library only, so that it is tested on the host."""

from __future__ import annotations

from typing import Dict, List, Tuple

from distval_suite.records import ERROR, FAILED, PASSED, SKIPPED


def summarize_runs(runs: int, failures: List[str], errors: List[str], skipped: List[str], repeat: int) -> Tuple[str, str]:
    """``runs`` counts every run that was not skipped: the wrong ones (``failures``), the ones that
    raised (``errors``) and the correct ones, each once. Wrong answers make the part failed, with the
    runs that raised counted beside them; runs that only raised make it an error. Variants skipped beside
    correct runs make the part skipped ("partially skipped"), never passed: a skip must stay visible to
    --fail-on-skip and ``required: true``, which read the status, not the message. The wire format is
    unchanged (status "skipped"); the message and ``details.partial`` say that some variants ran."""
    skip_note = "; skipped: %s" % skipped_summary(skipped) if skipped else ""
    raised = "%d of %d runs raised; first: %s" % (len(errors), runs, errors[0]) if errors else ""
    if failures:
        wrong = "%d of %d runs wrong; first: %s" % (len(failures), runs, failures[0])
        return FAILED, wrong + ("; " + raised if raised else "") + skip_note
    if errors:
        return ERROR, raised + skip_note
    if runs == 0:
        return SKIPPED, "not supported by this image: %s" % skipped_summary(skipped)
    if skipped:
        return SKIPPED, "partially skipped: %s correct (repeat %d); not supported by this image: %s" % (
            _runs(runs),
            repeat,
            skipped_summary(skipped),
        )
    return PASSED, "%s correct (repeat %d)" % (_runs(runs), repeat)


def _runs(count: int) -> str:
    """'1 run', '4 runs'."""
    return "%d run%s" % (count, "" if count == 1 else "s")


def skipped_summary(skipped: List[str]) -> str:
    """'float32, small, 5 elements (reason)' entries, grouped by reason: one line per distinct reason."""
    by_reason: Dict[str, List[str]] = {}
    for entry in skipped:
        variant, _, reason = entry.partition(" (")
        by_reason.setdefault(reason.rstrip(")") or entry, []).append(variant.split(",")[0])
    return "; ".join("%s [%s]" % (reason, ", ".join(dict.fromkeys(variants))) for reason, variants in by_reason.items())
