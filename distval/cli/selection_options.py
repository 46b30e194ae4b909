"""The options that choose what runs, shared by ``distval run``, ``distval plan`` and ``distval export kubernetes``:
--filter (scenarios, by name) and --check, --skip-check, -k (checks, distval/plan/selection.py)."""

from __future__ import annotations

import argparse

from distval.errors import SelectionError
from distval.plan.selection import Expression, Selection, check_name, parse_expression


def _check_name(value: str) -> str:
    """argparse type: a check of the catalog (a typo gets the closest name)."""
    try:
        return check_name(value)
    except SelectionError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _expression(value: str) -> Expression:
    """argparse type: -k's expression, parsed (a parse error names where)."""
    try:
        return parse_expression(value)
    except SelectionError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_selection_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--filter",
        metavar="PATTERN",
        action="append",
        help="only the scenarios whose name matches this glob (fnmatch; repeatable); one that matches none is refused",
    )
    parser.add_argument(
        "--check",
        metavar="NAME",
        action="append",
        type=_check_name,
        help="only this check in every scenario that lists it (repeatable; `distval checks` lists them); a scenario left "
        "with no check is reported skipped, never passed",
    )
    parser.add_argument(
        "--skip-check",
        metavar="NAME",
        action="append",
        type=_check_name,
        help="leave this check out of every scenario (repeatable)",
    )
    parser.add_argument(
        "-k",
        metavar="EXPR",
        type=_expression,
        help="only the checks whose names match this expression: words (part of a check's name), and, or, not, "
        "parentheses, e.g. -k 'ddp or collectives', -k 'not bandwidth'",
    )


def selection(args: argparse.Namespace) -> Selection:
    """The check selection of parsed options."""
    return Selection(tuple(args.check or ()), tuple(args.skip_check or ()), args.k)
