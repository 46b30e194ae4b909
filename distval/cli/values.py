"""The argparse value types of every ``distval`` option and the parser that turns a usage error into one line
(UsageError, exit code 2) instead of printing usage and exiting."""

from __future__ import annotations

import argparse
import ast
import math
import re
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from distval.comparing.reading import BadReport, read_report
from distval.config.durations import parse_duration
from distval.config.engine_hosts import parse_hosts
from distval.config.values import image_problem
from distval.config.yaml_nodes import did_you_mean, shown
from distval.errors import BadInput, UsageError

# argparse's (3.11) words for a value outside an argument's choices: the value given, then the choices' reprs.
_INVALID_CHOICE = re.compile(r"invalid choice: (?P<given>'[^']*'|\"[^\"]*\") \(choose from (?P<choices>.*)\)$")
# Where the (innermost) subcommand's parser leaves itself on the namespace, for parse_args to name its options.
_PARSER_ATTRIBUTE = "_distval_parser"


class UsageParser(argparse.ArgumentParser):
    """argparse's parser, raising UsageError instead of printing usage and exiting (subcommands inherit it); a
    misspelt command, choice or option gets "did you mean" the closest one (argparse 3.11 says neither)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(self.prog, message + _closest_choice(message))

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        # argparse offers every command, the hidden ones (no help line: `nodes`) too; a hidden command still works,
        # but a misspelt one is offered (and matched for "did you mean") among the visible ones only.
        if isinstance(action, argparse._SubParsersAction) and value not in action.choices:
            offered = ", ".join(map(repr, visible_commands(action)))
            raise argparse.ArgumentError(action, f"invalid choice: {value!r} (choose from {offered})")
        super()._check_value(action, value)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if not hasattr(parsed, _PARSER_ATTRIBUTE):  # the innermost (sub)command's parser finishes first
            setattr(parsed, _PARSER_ATTRIBUTE, self)
        return parsed, extras

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        command: argparse.ArgumentParser = getattr(parsed, _PARSER_ATTRIBUTE)
        delattr(parsed, _PARSER_ATTRIBUTE)
        if extras:
            # Said by the parser that saw them (argparse's own words, "unrecognized arguments"), with the
            # closest option of the command they were given to.
            command.error(f"unrecognized arguments: {' '.join(extras)}{_closest_option(extras, command)}")
        return parsed


def visible_commands(action: argparse._SubParsersAction[Any]) -> list[str]:
    """The commands a subcommand list offers: those with a help line (the usage line, the error, completion)."""
    return [choice.dest for choice in action._choices_actions]


def _closest_option(extras: list[str], command: argparse.ArgumentParser) -> str:
    """'; did you mean '--json'?' for the first unrecognized option close to a visible option of ``command``."""
    options = [o for action in command._actions if action.help != argparse.SUPPRESS for o in action.option_strings]
    for extra in extras:
        hint = did_you_mean(extra.split("=")[0], options) if extra.startswith("-") else ""
        if hint:
            return hint
    return ""


def _closest_choice(message: str) -> str:
    """'; did you mean 'run'?' for argparse's "invalid choice" message, when a choice is close; else ''."""
    found = _INVALID_CHOICE.search(message)
    if found is None:
        return ""
    try:
        given = ast.literal_eval(found.group("given"))
        choices = ast.literal_eval(f"[{found.group('choices')}]")
    except (ValueError, SyntaxError):
        return ""
    return did_you_mean(given, [str(choice) for choice in choices])


RUN_ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,15}$")


def run_id(value: str) -> str:
    """argparse type: the run id goes into container names and hostnames, so keep it short and plain."""
    # fullmatch: with match, '$' also matches before a final line break ("abc\n" was accepted).
    if not RUN_ID_PATTERN.fullmatch(value):
        raise argparse.ArgumentTypeError(
            f"expected 1-16 lowercase letters, digits or '-' (starting with a letter or digit); got {shown(value)}"
        )
    return value


SUITE_PREFIX_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


def suite_prefix(value: str) -> str:
    """argparse type of --suite-prefix: it goes into JUnit classnames, where Jenkins reads each dot as a package
    separator and tools take the name apart: letters, digits, '-' and '_' only."""
    if not SUITE_PREFIX_PATTERN.fullmatch(value):
        raise argparse.ArgumentTypeError(
            f"expected 1-64 letters, digits, '-' or '_' (starting with a letter or digit; no '.', which Jenkins reads "
            f"as a package separator in classnames); got {shown(value)}"
        )
    return value


def suite_prefix_if_valid(value: str) -> str | None:
    """--suite-prefix for the reports of a command line that was refused: a bad one is left out, not a reason
    to write no report (the usage error names it)."""
    return value if SUITE_PREFIX_PATTERN.fullmatch(value) else None


class FilePath:
    """argparse type: a file path, not empty (it names no file) and without NUL (no path holds one). A class, so
    that shell completion (cli/completion.py) can tell an option that takes a path."""

    def __init__(self, what: str) -> None:
        self.what = what

    def __call__(self, value: str) -> str:
        if not value:
            raise argparse.ArgumentTypeError(f"expected the path of {self.what}; got nothing")
        if "\x00" in value:
            raise argparse.ArgumentTypeError(f"expected the path of {self.what}; got {shown(value)} (a path holds no NUL)")
        return value


def file_path(what: str) -> FilePath:
    """argparse type: a file path (FilePath); ``what`` names it in the message."""
    return FilePath(what)


def image_reference(value: str) -> str:
    """argparse type: --image is checked against Docker's reference grammar like the config's image."""
    if not value:
        raise argparse.ArgumentTypeError("expected an image reference; got nothing")
    why = image_problem(value)
    if why is not None:
        raise argparse.ArgumentTypeError(f"{why}; got {shown(value)}")
    return value


JOBS_MAX = 256


def _whole_number(value: str, minimum: int) -> int:
    """ASCII digits (str.isdigit() takes '²', which int() refuses), minimum to JOBS_MAX."""
    if not (value.isascii() and value.isdigit()) or int(value) < minimum:
        raise argparse.ArgumentTypeError(f"expected a whole number >= {minimum}; got {shown(value)}")
    if int(value) > JOBS_MAX:
        raise argparse.ArgumentTypeError(f"expected a whole number <= {JOBS_MAX}; got {shown(value)}")
    return int(value)


def jobs_count(value: str) -> int:
    """argparse type of --jobs: a whole number, 1 to JOBS_MAX."""
    return _whole_number(value, 1)


def count(value: str) -> int:
    """argparse type: a whole number, 0 to JOBS_MAX."""
    return _whole_number(value, 0)


def microseconds(value: str) -> float:
    """argparse type: a number of microseconds >= 0 (100, 12.5)."""
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not 0 <= number < 1e9:
        raise argparse.ArgumentTypeError(f"expected a number of microseconds >= 0, e.g. 100; got {shown(value)}")
    return number


DURATION_MAX_S = 100 * 365 * 86400  # a century: far past any run's age, far below what a timedelta takes


def duration(value: str) -> float:
    """argparse type: a duration such as 30m or 2h, in seconds, at most DURATION_MAX_S (400 digits of days
    were an infinite float, which timedelta and the clock arithmetic refuse with an internal error)."""
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not math.isfinite(seconds) or seconds > DURATION_MAX_S:
        raise argparse.ArgumentTypeError(f"expected a duration of at most 100 years (36500d); got {shown(value)}")
    return seconds


def _fraction(value: str, below: float, bound: str) -> float:
    """A tolerance as a fraction (0.2) or a percentage (20%), at least 0 and below ``below`` (``bound`` in words)."""
    text = value.strip()
    try:
        number = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        number = -1.0
    if not 0 <= number < below:  # NaN and infinity fail this too
        raise argparse.ArgumentTypeError(
            f"expected a fraction like 0.2 or a percentage like 20%, at least 0 and {bound}; got {shown(value)}"
        )
    return number


def fraction_of_drop(value: str) -> float:
    """argparse type of a tolerated drop (--busbw-tolerance: a regression is new < old x (1 - tolerance)): below
    100%, since a drop of 100% or more is no figure at all, and with such a tolerance nothing could ever regress."""
    return _fraction(value, 1.0, "below 100%")


# A tolerated growth past this (new > old x (1 + tolerance)) is a hundredfold: no comparison a pipeline means.
GROWTH_MAX = 100.0


def fraction_of_growth(value: str) -> float:
    """argparse type of a tolerated growth (--duration-tolerance: a regression is new > old x (1 + tolerance)):
    more than 100% is meaningful here (150%: two and a half times as long), so the bound is GROWTH_MAX."""
    return _fraction(value, GROWTH_MAX, f"below {GROWTH_MAX * 100:.0f}%")


def report_file(path: str) -> tuple[str, dict[str, Any]]:
    """argparse type: a readable distval JSON report, read before anything runs (else exit code 2)."""
    try:
        return path, read_report(path)
    except BadReport as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def hosts_list(value: str) -> tuple[str, ...]:
    """argparse type: ``--hosts URL[,URL...]`` (distval/targets/engines/hosts.py says which URLs)."""
    try:
        return parse_hosts(value)
    except BadInput as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--hosts: ")) from None


class Parsed:
    """argparse type: the value ``parse`` makes of the text; its ValueError's one line is the usage error (a target
    option's own reader, distval/targets/kind.py ``TargetOption.parse``)."""

    def __init__(self, parse: Callable[[str], Any]) -> None:
        self.parse = parse

    def __call__(self, value: str) -> Any:
        try:
            return self.parse(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None


class CheckedText:
    """argparse type: text that ``problem`` accepts (it says why a value is not one, None when it is): a target
    option's own check (distval/targets/kind.py ``TargetOption.problem``), --helper-base's."""

    def __init__(self, problem: Callable[[str], str | None]) -> None:
        self.problem = problem

    def __call__(self, value: str) -> str:
        why = self.problem(value)
        if why is not None:
            raise argparse.ArgumentTypeError(f"{why}; got {shown(value)}")
        return value
