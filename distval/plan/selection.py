"""Which of a scenario's checks run: ``--check NAME`` (only these), ``--skip-check NAME`` and ``-k EXPR`` (a small
boolean expression over check names, as pytest's ``-k``), applied to every scenario's check list before it is planned,
so that the plan shows the selection and the scenario hash covers it.

A name that is not a check, and a ``-k`` word that is in no check's name, are bad input (a typo must not quietly
select something else). A check that the scenario's faults land after (``faults[].after.check``) is kept with the
checks selected beside it: without it the fault never lands, and the scenario's verdict is the faults'. The catalog
declares no check that needs another (each check runs on its own, with a fresh group after a failed one), so a
scenario's faults are the only dependency. A scenario the selection leaves no check is not run: it is reported
skipped (NO_CHECK_SELECTED), which never counts as validated.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from distval.checks.catalog import CATALOG
from distval.config.model import Config, Scenario
from distval.config.yaml_nodes import did_you_mean, shown
from distval.errors import SelectionError

NO_CHECK_SELECTED = "no check selected"
KEYWORDS = ("and", "or", "not")
_TOKEN = re.compile(r"\s*(?:(\()|(\))|([A-Za-z0-9_]+)|(\S))")


def check_name(value: str) -> str:
    """A check of the catalog, else SelectionError with the closest name."""
    if value not in CATALOG:
        raise SelectionError(f"expected a check name ({', '.join(CATALOG)}); got {shown(value)}{did_you_mean(value, CATALOG)}")
    return value


Matcher = Callable[[str], bool]


@dataclass(frozen=True)
class Expression:
    """A parsed ``-k`` expression: ``text`` as given (the reproduce command repeats it), ``matches`` a check name.
    A word matches the names it is part of, case-insensitively (``-k ddp`` is ddp_sync and ddp_sampler)."""

    text: str
    matches: Matcher


def parse_expression(text: str) -> Expression:
    """``-k``'s grammar (pytest's): or_expr := and_expr ('or' and_expr)*; and_expr := not_expr ('and' not_expr)*;
    not_expr := 'not' not_expr | '(' or_expr ')' | WORD. SelectionError names what was expected where."""
    tokens: list[tuple[str, str, int]] = []  # (kind, text, position)
    position = 0
    while position < len(text):
        found = _TOKEN.match(text, position)
        if found is None:  # only blanks are left
            break
        opening, closing, word, other = found.groups()
        start = found.end() - len(opening or closing or word or other)
        if other is not None:
            raise SelectionError(f"-k {shown(text)}: unexpected {other!r} at column {start + 1}; expected a check name")
        kind = "(" if opening else ")" if closing else word.lower() if word.lower() in KEYWORDS else "word"
        tokens.append((kind, opening or closing or word, start))
        position = found.end()
    index = 0

    def peek() -> str:
        return tokens[index][0] if index < len(tokens) else "end"

    def fail(expected: str) -> SelectionError:
        where = f"at column {tokens[index][2] + 1} ({tokens[index][1]!r})" if index < len(tokens) else "at the end"
        return SelectionError(f"-k {shown(text)}: expected {expected} {where}")

    def or_expr() -> Matcher:
        nonlocal index
        terms = [and_expr()]
        while peek() == "or":
            index += 1
            terms.append(and_expr())
        return terms[0] if len(terms) == 1 else lambda name: any(term(name) for term in terms)

    def and_expr() -> Matcher:
        nonlocal index
        terms = [not_expr()]
        while peek() == "and":
            index += 1
            terms.append(not_expr())
        return terms[0] if len(terms) == 1 else lambda name: all(term(name) for term in terms)

    def not_expr() -> Matcher:
        nonlocal index
        kind = peek()
        if kind == "not":
            index += 1
            inner = not_expr()
            return lambda name: not inner(name)
        if kind == "(":
            index += 1
            inner = or_expr()
            if peek() != ")":
                raise fail("')'")
            index += 1
            return inner
        if kind == "word":
            word = tokens[index][1].lower()
            if not any(word in name.lower() for name in CATALOG):
                raise SelectionError(
                    f"-k {shown(text)}: {word!r} is in no check's name ({', '.join(CATALOG)}){did_you_mean(word, CATALOG)}"
                )
            index += 1
            return lambda name: word in name.lower()
        raise fail("a check name, 'not' or '('")

    matches = or_expr()
    if index < len(tokens):
        raise fail("'and', 'or' or the end")
    return Expression(text, matches)


@dataclass(frozen=True)
class Selection:
    """The command line's choice of checks; empty: every check each scenario lists."""

    only: tuple[str, ...] = ()  # --check, in the order given
    skip: tuple[str, ...] = ()  # --skip-check
    expression: Expression | None = None  # -k

    def __post_init__(self) -> None:
        # Each name once, in the order first given: --check env --check env selects env once.
        object.__setattr__(self, "only", tuple(dict.fromkeys(self.only)))
        object.__setattr__(self, "skip", tuple(dict.fromkeys(self.skip)))

    def __bool__(self) -> bool:
        return bool(self.only or self.skip or self.expression)

    def chooses(self, name: str) -> bool:
        if self.only and name not in self.only:
            return False
        if name in self.skip:
            return False
        return self.expression is None or self.expression.matches(name)

    @property
    def arguments(self) -> tuple[str, ...]:
        """The options that make this selection again (the reproduce command's)."""
        words: list[str] = []
        for name in self.only:
            words += ["--check", name]
        for name in self.skip:
            words += ["--skip-check", name]
        if self.expression is not None:
            words += ["-k", self.expression.text]
        return tuple(words)

    @property
    def said(self) -> str:
        """The selection as the reason of a scenario it leaves no check: 'no check selected (--check env)'."""
        return f"{NO_CHECK_SELECTED} ({' '.join(shown(w) if ' ' in w else w for w in self.arguments)})"


def selection_of(only: Sequence[str] | None, skip: Sequence[str] | None, expression: Expression | None) -> Selection:
    """The Selection of the options as parsed (argparse gives None for an option not given)."""
    return Selection(tuple(only or ()), tuple(skip or ()), expression)


@dataclass(frozen=True)
class Selected:
    """A config after the selection: every scenario with the checks it runs (one left no check keeps its own, to be
    planned and reported, and is named in ``unselected``), and what was kept for a fault, in words. ``matched``: the
    scenarios --filter matched (None: every one)."""

    config: Config
    unselected: frozenset[str]
    kept: tuple[str, ...]
    matched: frozenset[str] | None = None

    @property
    def running(self) -> Config:
        """The config with the scenarios that run: those --filter matched, less those the selection left no check."""
        scenarios = (s for s in self.config.scenarios if self.matched is None or s.name in self.matched)
        return dataclasses.replace(self.config, scenarios=tuple(s for s in scenarios if s.name not in self.unselected))


def select_checks(config: Config, selection: Selection, scenario_names: Sequence[str] | None = None) -> Selected:
    """Each scenario's checks narrowed to the selection. ``scenario_names``: the scenarios that run (after --filter;
    None: all), the ones a --check name must be found among: a --check that no such scenario lists would quietly
    run nothing of what was asked (SelectionError)."""
    matched = None if scenario_names is None else frozenset(scenario_names)
    if not selection:
        return Selected(config, frozenset(), (), matched)
    considered = [s for s in config.scenarios if scenario_names is None or s.name in scenario_names]
    listed = {c.name for s in considered for c in s.checks}
    absent = [name for name in selection.only if name not in listed]
    if absent:
        raise SelectionError(
            f"--check {', '.join(absent)}: no scenario{' selected' if scenario_names is not None else ''} of "
            f"{config.path} lists {'it' if len(absent) == 1 else 'them'}; they list: {', '.join(sorted(listed)) or '(none)'}"
        )
    scenarios: list[Scenario] = []
    unselected: set[str] = set()
    kept: list[str] = []
    for scenario in config.scenarios:
        chosen = {c.name for c in scenario.checks if selection.chooses(c.name)}
        if not chosen:
            unselected.add(scenario.name)
            scenarios.append(scenario)
            continue
        for index, fault in enumerate(scenario.faults):
            trigger = fault.after.check
            if trigger not in chosen:
                chosen.add(trigger)
                kept.append(f"{scenario.name}: kept {trigger}: its faults[{index}] lands after it")
        scenarios.append(dataclasses.replace(scenario, checks=tuple(c for c in scenario.checks if c.name in chosen)))
    return Selected(dataclasses.replace(config, scenarios=tuple(scenarios)), frozenset(unselected), tuple(kept), matched)
