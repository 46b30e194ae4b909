"""``distval run --reference IMAGE``'s options, read into ``ReferenceOptions`` (distval/session/pairs.py runs the
pairs, distval/comparing/judges.py adds each scenario's ``reference`` testcase)."""

from __future__ import annotations

import argparse

from distval.cli import values as cli_values
from distval.comparing.judges import ReferenceOptions
from distval.comparing.reference import (
    DEFAULT_CONFIRM_PAIRS,
    DEFAULT_PAIRED_DURATION_SLACK_S,
    DEFAULT_PAIRS,
    MAX_PAIRS,
    PairedTolerances,
)


def add_reference_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--reference",
        type=cli_values.image_reference,
        metavar="IMAGE",
        help="also run every scenario on this image (the last good one), in pairs with the image under test, one run "
        "after the other in alternating order, and judge the candidate by the pairs: a 'reference' testcase per "
        "scenario says whether a failure or a slower figure is caused by the image or is the machine's "
        "(docs/reports.md, 'Candidate against reference'). Runs one scenario at a time",
    )
    parser.add_argument(
        "--pairs",
        type=cli_values.count,
        metavar="N",
        help=f"with --reference: candidate/reference pairs per scenario, 2..{MAX_PAIRS} (default {DEFAULT_PAIRS}); "
        "more pairs narrow each figure's interval",
    )
    parser.add_argument(
        "--confirm-pairs",
        type=cli_values.count,
        metavar="K",
        help=f"with --reference: where a figure of a scenario regressed after its --pairs pairs, run K more pairs of "
        f"that scenario (default {DEFAULT_CONFIRM_PAIRS}, or what --pairs leaves; 0: none; --pairs + K at most {MAX_PAIRS}) "
        "and judge its "
        "figures on every pair: a figure is called regressed only where it regresses again (docs/reports.md, "
        "'Confirmation pairs')",
    )


def reference_options(args: argparse.Namespace) -> ReferenceOptions:
    """What ``distval run``'s --reference options asked (the tolerances are --baseline's options)."""
    tolerances = PairedTolerances(
        busbw=args.busbw_tolerance, duration=args.duration_tolerance, duration_slack_s=DEFAULT_PAIRED_DURATION_SLACK_S
    )
    pairs = DEFAULT_PAIRS if args.pairs is None else args.pairs
    # Not given: the default, or what --pairs leaves of MAX_PAIRS (--pairs 50 alone stays valid); given: as given, and
    # refused past that bound (distval/session/pairs.py check_reference).
    confirm = max(0, min(DEFAULT_CONFIRM_PAIRS, MAX_PAIRS - pairs)) if args.confirm_pairs is None else args.confirm_pairs
    return ReferenceOptions(
        args.reference,
        pairs,
        tolerances,
        pairs_given=args.pairs is not None,
        confirm_pairs=confirm,
        confirm_pairs_given=args.confirm_pairs is not None,
    )
