"""``distval history REPORT.json... --html DIR`` (the page of several runs) and ``distval run --html FILE``'s option
(the same page for one run): distval/comparing/history.py reads, distval/comparing/html.py renders."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from distval.cli import values as cli_values
from distval.comparing import charts
from distval.comparing.history import read_history
from distval.comparing.html import HISTORY_PAGE, write_history_html
from distval.errors import EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_PASSED, BadInput, ExitCodes

HISTORY_EXIT_CODES = ExitCodes(
    (EXIT_PASSED, EXIT_BAD_INPUT, EXIT_INTERNAL),
    {
        EXIT_PASSED: "the page was written (whatever the runs' verdicts: distval compare gates on a regression)",
        EXIT_BAD_INPUT: "bad input (a file that is not a distval JSON report, a number out of range, no vl-convert-python)",
    },
)


def html_refusal() -> str | None:
    """Why no HTML page can be written (the optional renderer is missing), for ``distval run --html``; None: it can."""
    return None if charts.available() else "needs vl-convert-python to render its charts offline: pip install 'distval[html]'"


def add_html_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--html",
        metavar="PATH",
        type=cli_values.file_path("the HTML page"),
        help="write a self-contained HTML page here: the run's checks and its figures as charts, no JavaScript, "
        "nothing fetched (needs the html extra; docs/reports.md)",
    )


def command_history(args: argparse.Namespace) -> int:
    try:
        charts.require()
        history = read_history(args.reports)
        page = write_history_html(history, args.html)
    except BadInput as exc:
        print(f"distval: {exc}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:
        print(f"distval: cannot write the HTML page into {args.html}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    regressions = len(history.check_regressions) + len(history.figure_regressions)
    print(f"{page}: {len(history.runs)} run(s), {len(history.trends)} scenario(s), {regressions} regression(s)")
    return EXIT_PASSED


def add_history_command(commands: Any) -> None:
    history = commands.add_parser(
        "history",
        help="render JSON reports of several runs as one static HTML page: runs x checks, trend charts, regressions",
        description="Render the JSON reports of several runs (nightly runs of one config, an image's tags) as one "
        "self-contained HTML page: a matrix of runs x checks, each scenario's time to verdict, busbw and efficiency "
        "run by run, and every regression marked with the run that introduced it. The page has no JavaScript and "
        "fetches nothing: it opens from a CI artifact on the file system.",
    )
    history.add_argument("reports", nargs="+", metavar="REPORT.json", help="JSON reports of distval run, in any order")
    history.add_argument(
        "--html",
        required=True,
        metavar="DIR",
        type=cli_values.file_path("the directory of the page"),
        help=f"write the page as DIR/{HISTORY_PAGE} (DIR made if missing); links to each run's JUnit and Markdown "
        "files beside its JSON report are relative to it",
    )
    history.set_defaults(handler=command_history)
