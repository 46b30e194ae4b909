"""README.md, docs/*.md and CONTRIBUTING.md are the documentation: their links lead to a file and a heading
that exist, every `distval <command>` option they show is one the command line accepts, and README's exit-code
table is the one distval/errors.py declares. Pure text and argparse: no Docker, no torch."""

from __future__ import annotations

import argparse
import re
import shlex
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from distval import errors
from distval.cli.main import build_parser
from tests.paths import ROOT

README = ROOT / "README.md"
# Every page of the documentation: the front door, the topic pages and the developers' page.
DOC_FILES = [README, ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
DOC_IDS = [str(path.relative_to(ROOT)) for path in DOC_FILES]

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
        # cosign (docs/attestation.md)
        "--type",
        "--attestation",
        "--insecure-ignore-tlog",
        # sbatch, srun, pyxis, apptainer, runc (docs/slurm.md)
        "--nodes",
        "--ntasks",
        "--ntasks-per-node",
        "--time",
        "--gpus-per-node",
        "--cpus-per-task",
        "--mem",
        "--relative",
        "--export",
        "--container",
        "--container-image",
        "--container-mounts",
        "--container-workdir",
        "--no-container-mount-home",
        "--bind",
        "--cleanenv",
        "--containall",
        "--env",
        "--nv",
        "--pwd",
        "--root",
        # benchmarks/*.py
        "--repeat",
        "--config",
        "--reports",
        "--timeline-only",
        "--images",
        # benchmarks/bench_reference_rates.py
        "--append",
        "--busy-cpus",
        "--disjoint",
        "--docs",
        "--judge-pairs",
        "--max-minutes",
        "--no-baseline",
        "--no-same",
        "--slow",
    }
)

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_LINK = re.compile(r"\]\(#([^)\s]*)\)")
# A link to another file, with or without a heading: [text](docs/x.md#y), [text](../README.md), [text](scale.md).
_FILE_LINK = re.compile(r"\]\(([^)\s#]+)(?:#([^)\s]*))?\)")
_EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # https:, mailto:
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


def broken_file_links(text: str, where: Path) -> list[str]:
    """'line N: target' for each link to another file (relative to ``where``, the linking file's folder) that
    leads to no file, or to a Markdown file without the heading it names."""
    problems = []
    for number, line in prose_lines(text):
        for target, anchor in _FILE_LINK.findall(line):
            if _EXTERNAL.match(target):
                continue
            path = where / target
            shown = f"{target}#{anchor}" if anchor else target
            if not path.exists():
                problems.append(f"line {number}: {shown} (no such file)")
            elif anchor and (path.suffix != ".md" or anchor not in anchors(path.read_text(encoding="utf-8"))):
                problems.append(f"line {number}: {shown} (no such heading)")
    return problems


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


def test_the_documentation_has_links_of_both_kinds() -> None:
    """Without links the checks below would pass on anything."""
    texts = [path.read_text(encoding="utf-8") for path in DOC_FILES]
    assert any(_LINK.search(text) for text in texts), "no link to a heading of the same page"
    assert any("docs/" in target for target, _ in _FILE_LINK.findall(README.read_text(encoding="utf-8")))
    assert any(target.startswith("../") for text in texts for target, _ in _FILE_LINK.findall(text))


def test_readme_links_every_docs_page() -> None:
    linked = {target for target, _ in _FILE_LINK.findall(README.read_text(encoding="utf-8"))}
    pages = {str(path.relative_to(ROOT)) for path in DOC_FILES if path != README}
    assert pages - linked == set()


@pytest.mark.parametrize("path", DOC_FILES, ids=DOC_IDS)
def test_every_internal_link_has_its_heading(path: Path) -> None:
    assert broken_links(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("path", DOC_FILES, ids=DOC_IDS)
def test_every_link_to_another_file_leads_to_it_and_its_heading(path: Path) -> None:
    assert broken_file_links(path.read_text(encoding="utf-8"), path.parent) == []


@pytest.mark.parametrize("path", DOC_FILES, ids=DOC_IDS)
def test_every_distval_command_line_uses_options_its_command_accepts(path: Path) -> None:
    assert unknown_command_options(path.read_text(encoding="utf-8"), build_parser()) == []


def test_readme_shows_distval_run() -> None:
    assert "distval run" in README.read_text(encoding="utf-8")


@pytest.mark.parametrize("path", DOC_FILES, ids=DOC_IDS)
def test_every_flag_in_the_documentation_exists_somewhere(path: Path) -> None:
    assert unknown_flags(path.read_text(encoding="utf-8"), build_parser()) == []


def exit_code_table(text: str) -> dict[str, str]:
    """README's "Exit codes" table: code (as written, e.g. '128+N') -> meaning."""
    section = ("\n" + text).split("\n## Exit codes\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|") for line in section.splitlines() if line.startswith("| ") and not line.startswith("| code ")]
    return {cells[1].strip(): cells[2].strip() for cells in rows}


def test_readme_exit_codes_are_the_declared_ones() -> None:
    """Each code distval/errors.py declares (EXIT_*) is a row of README's table starting with its meaning, and
    the table has no other row. Interrupted is 128+N, the declared EXIT_INTERRUPTED being Ctrl-C's."""
    declared = {value for name, value in vars(errors).items() if name.startswith("EXIT_") and isinstance(value, int)}
    assert set(errors.EXIT_MEANINGS) == declared
    assert errors.EXIT_INTERRUPTED == 128 + signal.SIGINT
    written = {
        "128+N" if code == errors.EXIT_INTERRUPTED else str(code): meaning for code, meaning in errors.EXIT_MEANINGS.items()
    }
    # The README's short table, and docs/reports.md's with every case that leads to each code.
    for page in (README, ROOT / "docs" / "reports.md"):
        table = exit_code_table(page.read_text(encoding="utf-8"))
        assert set(table) == set(written), page
        for code, meaning in written.items():
            assert table[code].startswith(meaning), f"exit code {code}: {page.name} says {table[code][:80]!r}"


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


def test_a_link_to_a_missing_file_or_heading_of_another_file_is_found(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "faults.md").write_text("# Faults\n\n## Expectations\n")
    text = (
        "[a](docs/faults.md#faults) [b](docs/faults.md#expectations) [c](docs/faults.md#kinds)\n"
        "[d](docs/nothing.md) [e](https://example.com/x.md#y) [f](#local)\n"
    )
    assert broken_file_links(text, tmp_path) == [
        "line 1: docs/faults.md#kinds (no such heading)",
        "line 2: docs/nothing.md (no such file)",
    ]
    up = "[up](../README.md#exit-codes)\n"
    assert broken_file_links(up, tmp_path / "docs") == ["line 1: ../README.md#exit-codes (no such file)"]


def test_an_exit_code_table_is_read_row_by_row() -> None:
    text = "## Exit codes\n\n| code | meaning |\n|---|---|\n| 0 | passed |\n| 128+N | interrupted |\n\n## Next\n| 9 | no |\n"
    assert exit_code_table(text) == {"0": "passed", "128+N": "interrupted"}


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


def test_the_readme_is_a_front_door() -> None:
    """At most ~250 lines, and a newcomer reaches how to read a result and the exit codes on the first screen
    (install and run come first, nothing longer in between)."""
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: references belong in docs/"
    headings = {line: number for number, line in enumerate(lines, 1) if line.startswith("## ")}
    assert headings["## How to read the result"] <= 40
    assert headings["## Exit codes"] <= 70
    table_end = next(n for n in range(headings["## Exit codes"] + 3, len(lines)) if not lines[n].startswith("|"))
    assert table_end <= 80, "the exit-code table must fit the first screens"
