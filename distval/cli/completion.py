"""``distval completion {bash,zsh,fish}``: a shell completion script generated from the argparse parser itself,
so that a new command, option or choice completes without editing any script.

The parser is read once into ``Command`` rows (``commands_of``): each command's visible subcommands, options
(with their choices, or whether they take a file or a directory) and what its positional arguments take.
Hidden commands and options (no help line: ``distval nodes``, ``--host``) are not completed. A value is a
path when the option's type says so (cli_values.FilePath, report_file) or its metavar does (PATH, DIR, a file
name such as OLD.json); DIR completes directories.

Each shell gets the same rows in its own form: bash a ``complete -F`` function, zsh a ``compdef`` function,
fish ``complete`` lines. The words are distval's own option names, command names and choices: plain words,
quoted all the same.
"""

from __future__ import annotations

import argparse
import functools
import re
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from distval.cli import values as cli_values

SHELLS = ("bash", "zsh", "fish")
FUNCTION = "_distval"
# Metavars that name a file or a directory (the options whose type does not say so already).
_FILE_METAVARS = ("PATH", "LOG")
_DIR_METAVARS = ("DIR",)

# What an option's value (or a positional argument) completes to.
FILE, DIRECTORY, WORD, FREE = "file", "directory", "word", "free"


@dataclass(frozen=True)
class Option:
    flags: tuple[str, ...]  # "-j", "--jobs"
    value: str | None  # None: a flag; else FILE, DIRECTORY, WORD (one of choices) or FREE
    choices: tuple[str, ...]
    help: str


@dataclass(frozen=True)
class Command:
    path: tuple[str, ...]  # () for distval itself, ("export", "kubernetes")
    help: str
    subcommands: tuple[str, ...]  # the visible ones
    options: tuple[Option, ...]
    positional: str | None  # what its positional arguments complete to (FILE, WORD, ...); None: none
    positional_choices: tuple[str, ...]

    @property
    def key(self) -> str:
        return " ".join(self.path)


def _value_kind(action: argparse.Action) -> str:
    if action.choices:
        return WORD
    metavar = action.metavar if isinstance(action.metavar, str) else ""
    if metavar in _DIR_METAVARS:
        return DIRECTORY
    if isinstance(action.type, cli_values.FilePath) or action.type is cli_values.report_file:
        return FILE
    if metavar in _FILE_METAVARS or re.fullmatch(r"[A-Z]+\.[a-z]+", metavar):  # OLD.json: a file name
        return FILE
    return FREE


def _visible(action: argparse.Action) -> bool:
    return action.help != argparse.SUPPRESS


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:  # type: ignore[type-arg]
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def commands_of(parser: argparse.ArgumentParser, path: tuple[str, ...] = (), help_text: str = "") -> list[Command]:
    """``parser`` and every visible command below it, depth first."""
    sub = _subparsers(parser)
    visible = cli_values.visible_commands(sub) if sub is not None else []
    helps = {choice.dest: choice.help or "" for choice in sub._choices_actions} if sub is not None else {}
    options = tuple(
        Option(
            tuple(action.option_strings),
            None if action.nargs == 0 else _value_kind(action),
            tuple(str(c) for c in action.choices or ()),
            " ".join((action.help or "").split()),
        )
        for action in parser._actions
        if action.option_strings and _visible(action)
    )
    positionals = [a for a in parser._actions if not a.option_strings and a is not sub and _visible(a)]
    kinds = [_value_kind(a) for a in positionals]
    positional = WORD if WORD in kinds else FILE if FILE in kinds else (kinds[0] if kinds else None)
    choices = tuple(str(c) for a in positionals for c in a.choices or ())
    found = [Command(path, help_text, tuple(visible), options, positional, choices)]
    if sub is not None:
        for name in visible:
            found += commands_of(sub.choices[name], (*path, name), helps[name])
    return found


def render_completion(parser: argparse.ArgumentParser, shell: str) -> str:
    commands = commands_of(parser)
    prog = parser.prog
    if shell == "bash":
        return _bash(prog, commands)
    if shell == "zsh":
        return _zsh(prog, commands)
    return _fish(prog, commands)


def _words(words: tuple[str, ...] | list[str]) -> str:
    return shlex.quote(" ".join(words))


def _valued(command: Command) -> list[str]:
    return [flag for option in command.options if option.value is not None for flag in option.flags]


def _walk_cases(commands: list[Command], indent: str) -> list[str]:
    """The case arms (bash and zsh alike) that follow the command words: "$at/$word" -> the command now, and the
    options that take a value (their value is skipped, not read as a command)."""
    lines = []
    for command in commands:
        for name in command.subcommands:
            lines.append(f"{indent}{shlex.quote(command.key + '/' + name)}) at={shlex.quote(' '.join((*command.path, name)))} ;;")
        valued = _valued(command)
        if valued:
            arms = "|".join(shlex.quote(f"{command.key}/{flag}") for flag in valued)
            lines.append(f"{indent}{arms}) skip=1 ;;")
    return lines


def _value_and_table_arms(
    commands: list[Command], actions: dict[str, str], choice_action: Callable[[tuple[str, ...]], str]
) -> tuple[list[str], list[str]]:
    """The case arms (bash and zsh alike; ``actions`` in the shell's words per kind of value, ``choice_action`` for
    an option's choices) that complete an option's value, and those that set each command's options, subcommands
    and positional argument."""
    values, tables = [], []
    for command in commands:
        for option in command.options:
            if option.value is None:
                continue
            arms = "|".join(shlex.quote(f"{command.key}/{flag}") for flag in option.flags)
            action = choice_action(option.choices) if option.value == WORD else actions[option.value]
            values.append(f"        {arms}) {action}; return ;;")
        flags = [flag for option in command.options for flag in option.flags]
        tables.append(
            f"        {shlex.quote(command.key)}) opts={_words(flags)}; subs={_words(command.subcommands)}; "
            f"positional={shlex.quote(command.positional or '')}; choices={_words(command.positional_choices)} ;;"
        )
    return values, tables


def _bash(prog: str, commands: list[Command]) -> str:
    values, tables = _value_and_table_arms(
        commands,
        {
            FILE: 'compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur"))',
            DIRECTORY: 'compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- "$cur"))',
            FREE: "COMPREPLY=()",
        },
        lambda choices: f'COMPREPLY=($(compgen -W {_words(choices)} -- "$cur"))',
    )
    walk = "\n".join(_walk_cases(commands, "            "))
    return f"""# bash completion for {prog}, generated from its parser: {prog} completion bash
# Load it with: source <({prog} completion bash)   (or save it as ~/.local/share/bash-completion/completions/{prog})
{FUNCTION}() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="" at="" skip=0 i word opts subs positional choices
    (( COMP_CWORD > 0 )) && prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    for (( i = 1; i < COMP_CWORD; i++ )); do
        word="${{COMP_WORDS[i]}}"
        if (( skip )); then skip=0; continue; fi
        case "$at/$word" in
{walk}
        esac
    done
    if (( skip )); then
        case "$at/$prev" in
{chr(10).join(values)}
        esac
    fi
    case "$at" in
{chr(10).join(tables)}
    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    elif [[ -n "$subs" ]]; then
        COMPREPLY=($(compgen -W "$subs" -- "$cur"))
    elif [[ "$positional" == word ]]; then
        COMPREPLY=($(compgen -W "$choices" -- "$cur"))
    elif [[ "$positional" == file ]]; then
        compopt -o filenames 2>/dev/null
        COMPREPLY=($(compgen -f -- "$cur"))
    else
        COMPREPLY=()
    fi
}}
complete -F {FUNCTION} {prog}
"""


def _zsh(prog: str, commands: list[Command]) -> str:
    values, tables = _value_and_table_arms(
        commands,
        {FILE: "_files", DIRECTORY: "_files -/", FREE: "_message value"},
        lambda choices: "compadd -- " + " ".join(shlex.quote(choice) for choice in choices),
    )
    walk = "\n".join(_walk_cases(commands, "            "))
    return f"""#compdef {prog}
# zsh completion for {prog}, generated from its parser: {prog} completion zsh
# Load it with: source <({prog} completion zsh)   (or save it as _{prog} in a directory of $fpath)
{FUNCTION}() {{
    local cur="${{words[CURRENT]}}" prev="${{words[CURRENT-1]}}" at="" skip=0 i word opts subs positional choices
    for (( i = 2; i < CURRENT; i++ )); do
        word="${{words[i]}}"
        if (( skip )); then skip=0; continue; fi
        case "$at/$word" in
{walk}
        esac
    done
    if (( skip )); then
        case "$at/$prev" in
{chr(10).join(values)}
        esac
    fi
    case "$at" in
{chr(10).join(tables)}
    esac
    if [[ "$cur" == -* ]]; then
        compadd -- ${{(z)opts}}
    elif [[ -n "$subs" ]]; then
        compadd -- ${{(z)subs}}
    elif [[ "$positional" == word ]]; then
        compadd -- ${{(z)choices}}
    elif [[ "$positional" == file ]]; then
        _files
    fi
}}
if [[ "$funcstack[1]" == _{prog} ]]; then {FUNCTION} "$@"; else compdef {FUNCTION} {prog}; fi
"""


def _fish_text(text: str) -> str:
    """A single-quoted fish string (fish's single quotes know only \\\\ and \\' as escapes)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _first_sentence(text: str, limit: int = 80) -> str:
    text = text.split("; ")[0].split(" (")[0]
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _fish_condition(path: tuple[str, ...], children: tuple[str, ...]) -> str:
    """fish: the command line has ``path``'s words (and, to offer them, none of ``children``)."""
    if not path:
        return "__fish_use_subcommand"
    seen = "; and ".join(f"__fish_seen_subcommand_from {word}" for word in path)
    return seen + (f"; and not __fish_seen_subcommand_from {' '.join(children)}" if children else "")


def _fish(prog: str, commands: list[Command]) -> str:
    lines = [
        f"# fish completion for {prog}, generated from its parser: {prog} completion fish",
        f"# Load it with: {prog} completion fish | source   (or save it as ~/.config/fish/completions/{prog}.fish)",
        f"complete -c {prog} -f",
    ]
    by_key = {command.key: command for command in commands}
    for command in commands:
        offer = _fish_text(_fish_condition(command.path, command.subcommands))
        for name in command.subcommands:
            about = by_key[" ".join((*command.path, name))].help
            lines.append(f"complete -c {prog} -n {offer} -a {name} -d {_fish_text(_first_sentence(about))}")
        where = _fish_text(_fish_condition(command.path, ()))
        for option in command.options:
            parts = [f"complete -c {prog} -n {where}"]
            for flag in option.flags:
                parts.append(f"-l {flag[2:]}" if flag.startswith("--") else f"-s {flag[1:]}")
            if option.value == WORD:
                parts.append(f"-x -a {_fish_text(' '.join(option.choices))}")
            elif option.value == FILE:
                parts.append("-r -F")
            elif option.value == DIRECTORY:
                parts.append("-x -a '(__fish_complete_directories)'")
            elif option.value == FREE:
                parts.append("-x")
            if option.help:
                parts.append(f"-d {_fish_text(_first_sentence(option.help))}")
            lines.append(" ".join(parts))
        if command.path and not command.subcommands:
            if command.positional == WORD:
                lines.append(f"complete -c {prog} -n {where} -a {_fish_text(' '.join(command.positional_choices))}")
            elif command.positional == FILE:
                lines.append(f"complete -c {prog} -n {where} -F")
    return "\n".join(lines) + "\n"


def command_completion(args: argparse.Namespace, build_parser: Callable[[], argparse.ArgumentParser]) -> int:
    sys.stdout.write(render_completion(build_parser(), args.shell))
    return 0


def add_completion_command(commands: Any, build_parser: Callable[[], argparse.ArgumentParser]) -> None:
    """``build_parser``: the whole command line's parser, which the script is generated from."""
    completion = commands.add_parser(
        "completion",
        help="print a shell completion script (bash, zsh or fish), generated from this command line's own parser",
        description="Print a completion script for the shell: bash (source <(distval completion bash)), zsh "
        "(source <(distval completion zsh), after compinit) or fish (distval completion fish | source).",
    )
    completion.add_argument("shell", choices=SHELLS)
    completion.set_defaults(handler=functools.partial(command_completion, build_parser=build_parser))
