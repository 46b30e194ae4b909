"""README.md is the user documentation: its internal links lead to a heading, and every `distval <command>`
option it shows is one the command line accepts. Pure text and argparse: no Docker, no torch."""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cli import build_parser

README = Path(__file__).resolve().parent.parent / "README.md"

# Flags of other tools that README shows in their own command lines (torchrun, docker, docker-compose,
# kubectl, pip, pytest, the benchmarks). A `--flag` in README that is neither one of these nor an option of
# some distval command is a documented option that does not exist.
OTHER_TOOLS_FLAGS = frozenset(
    {
        # torch.distributed.run (torchrun), both spellings
        "--nnodes",
        "--nproc_per_node",
        "--node_rank",
        "--master_addr",
        "--master_port",
        "--max_restarts",
        "--standalone",
        "--rdzv_backend",
        "--rdzv_endpoint",
        "--rdzv_id",
        "--rdzv_conf",
        "--rdzv-backend",
        "--redirects",
        "--tee",
        # docker, docker-compose
        "--build-arg",
        "--rm",
        "--entrypoint",
        "--privileged",
        "--profile",
        "--abort-on-container-exit",
        "--exit-code-from",
        # kubectl logs
        "--prefix",
        "--tail",
        "--max-log-requests",
        "--timestamps",
        # pip
        "--no-deps",
        "--no-index",
        "--no-compile",
        # mmdebstrap's tar, python -m compileall
        "--clamp-mtime",
        "--invalidation-mode",
        # pytest (tests/conftest.py)
        "--require-docker",
        # benchmarks/*.py
        "--repeat",
        "--config",
    }
)

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_LINK = re.compile(r"\]\(#([^)\s]*)\)")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9_-]*")


def prose_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def code_texts(text: str) -> Iterator[str]:
    """Every fenced block's lines (continuations joined) and every inline code span."""
    fenced = False
    prose: list[str] = []
    block: list[str] = []
    for line in text.splitlines():
        if _FENCE.match(line):
            if fenced:
                yield from "\n".join(block).replace("\\\n", " ").splitlines()
                block = []
            fenced = not fenced
        elif fenced:
            block.append(line)
        else:
            prose.append(line)
    for match in _CODE_SPAN.finditer("\n".join(prose)):
        yield match.group(2).replace("\n", " ")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: the text as shown, lowercased, every character but letters, digits,
    spaces, '-' and '_' dropped, spaces turned into '-'."""
    shown = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link shows its text
    shown = shown.replace("`", "")
    return re.sub(r"[^\w\- ]", "", shown.lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading's anchor; a repeated heading gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _, line in prose_lines(text):
        match = _HEADING.match(line)
        if match is None:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(text: str) -> list[str]:
    """'line N: #anchor' for each internal link whose anchor no heading has."""
    known = anchors(text)
    return [
        f"line {number}: #{target}" for number, line in prose_lines(text) for target in _LINK.findall(line) if target not in known
    ]


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings}


def all_options(parser: argparse.ArgumentParser) -> set[str]:
    """The options of the parser and of every (sub)command under it."""
    found = _options(parser)
    for sub in _subcommands(parser).values():
        found |= all_options(sub)
    return found


def unknown_command_options(text: str, parser: argparse.ArgumentParser) -> list[str]:
    """'distval <command>: --option' for each option a `distval <command> ...` line in README's code gives
    that the (sub)command does not accept."""
    commands = _subcommands(parser)
    pattern = re.compile(rf"(?<![\w./-])distval ({'|'.join(map(re.escape, commands))})(?![\w.:-])(.*)")
    problems = []
    for code in code_texts(text):
        for match in pattern.finditer(code):
            command = match.group(1)
            # The command ends where the shell's would: a comment, a pipe, a list, a redirection.
            rest = re.split(r"\s(?:#|\||;|&&|\|\||>)", match.group(2))[0]
            try:
                tokens = shlex.split(rest)
            except ValueError:  # an unbalanced quote: the command goes on past this code span
                tokens = rest.split()
            sub = commands[command]
            name = command
            while tokens and tokens[0] in _subcommands(sub):  # distval export kubernetes, collect kubernetes
                name = f"{name} {tokens[0]}"
                sub = _subcommands(sub)[tokens.pop(0)]
            accepted = _options(sub)
            for token in tokens:
                option = token.split("=", 1)[0]
                if _FLAG.fullmatch(option) and option not in accepted:
                    problems.append(f"distval {name}: {option}")
    return problems


def unknown_flags(text: str, parser: argparse.ArgumentParser) -> list[str]:
    """Each `--flag` in README's code that no distval command accepts and no other tool's list names."""
    known = all_options(parser) | OTHER_TOOLS_FLAGS
    return sorted({flag for code in code_texts(text) for flag in _FLAG.findall(code) if flag not in known})


def test_every_internal_link_has_its_heading() -> None:
    text = README.read_text(encoding="utf-8")
    assert _LINK.search(text), "README has no internal link: the check below would pass on anything"
    assert broken_links(text) == []


def test_every_distval_command_line_uses_options_its_command_accepts() -> None:
    text = README.read_text(encoding="utf-8")
    parser = build_parser()
    assert "distval run" in text
    assert unknown_command_options(text, parser) == []


def test_every_flag_in_readme_exists_somewhere() -> None:
    assert unknown_flags(README.read_text(encoding="utf-8"), build_parser()) == []


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("## Bandwidth and last-known-good", "bandwidth-and-last-known-good"),
        ("### Nothing left behind, ever", "nothing-left-behind-ever"),
        ("### The `bandwidth` check: **busbw**", "the-bandwidth-check-busbw"),
        ("## Several Docker hosts", "several-docker-hosts"),
        ("## cuda_build (2.15)", "cuda_build-215"),
    ],
)
def test_slug_follows_githubs_rules(heading: str, anchor: str) -> None:
    assert anchors(heading) == {anchor}


def test_a_link_to_a_missing_heading_is_found() -> None:
    text = "# Title\n\n## Host mode\n\nsee [host mode](#host-mode) and [reports](#reports)\n"
    assert broken_links(text) == ["line 5: #reports"]


def test_a_heading_inside_a_code_block_is_no_anchor() -> None:
    text = "```yaml\n# Reports\n```\n\n[r](#reports)\n"
    assert broken_links(text) == ["line 5: #reports"]


def test_repeated_headings_get_numbered_anchors() -> None:
    assert anchors("## Notes\n\n## Notes\n") == {"notes", "notes-1"}


def test_an_option_a_command_lacks_is_found() -> None:
    parser = build_parser()
    text = (
        "Run `distval run configs/default.yaml --no-such-option` or `distval cleanup --filter x`;\n"
        "```\ndistval collect kubernetes logs.txt \\\n    --junit r.xml --layout jobset   # not collect's\n"
        "distval plan x.yaml --format=json | jq .   --not-an-option-of-plan\n```\n"
    )
    assert unknown_command_options(text, parser) == [
        "distval collect kubernetes: --layout",
        "distval run: --no-such-option",
        "distval cleanup: --filter",
    ]


def test_a_flag_no_tool_has_is_found() -> None:
    text = "`--keep-on-failure`, `--nproc_per_node` and `--no-such-flag`\n```\nkubectl logs --prefix\n```\n"
    assert unknown_flags(text, build_parser()) == ["--no-such-flag"]
