"""``distval fixtures build|list``: distval's own images (the sample image, the broken ones its tests use, the
reaper), built here from their recipes (no registry needed)."""

from __future__ import annotations

import argparse
import functools
import os
import secrets
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from distval.cli import values as cli_values
from distval.cli.output import print_json, stamped_progress
from distval.errors import BadInput, DistvalError
from distval.image_names import BROKEN_PREFIX
from distval.images import FIXTURES, build_fixtures, recipe_hash
from distval.images.helper_base import HELPER_BASE_FLAG, HELPER_BASE_HELP, base_problem
from distval.images.helper_base import choose as choose_helpers

if TYPE_CHECKING:
    from distval.targets.kind import Engine


def command_fixtures(args: argparse.Namespace, engine_for: Callable[[str], Engine]) -> int:
    if args.action == "list":
        shown_tags = [tag for tag in FIXTURES if args.all or not tag.startswith(BROKEN_PREFIX)]
        hidden = len(FIXTURES) - len(shown_tags)
        if args.format == "json":
            print_json(fixtures_as_data(shown_tags, hidden))
            return 0
        for tag in shown_tags:
            print(f"{tag}  recipe {recipe_hash(tag)}  {FIXTURES[tag].description}")
        if hidden:
            print(f"(and {hidden} {BROKEN_PREFIX}* images for distval's own tests: distval fixtures list --all)")
        return 0
    if args.format != "text":
        raise BadInput("fixtures build: --format is fixtures list's (build says its progress on stderr)")
    progress = stamped_progress(False)
    try:
        engine = engine_for(secrets.token_hex(4))
        tags = args.tags or list(FIXTURES)
        build_fixtures(engine, tags, progress, force=args.force, helpers=choose_helpers(args.helper_base, os.environ))
    except DistvalError as exc:
        print(f"distval: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


def fixtures_as_data(tags: list[str], hidden: int) -> dict[str, Any]:
    """``distval fixtures list --format json``: each fixture's tag, recipe hash (the label a built image carries),
    description and whether it is one of the broken images made for distval's own tests; ``hidden``: those
    left out (without --all)."""
    return {
        "fixtures": [
            {
                "tag": tag,
                "recipe": recipe_hash(tag),
                "description": FIXTURES[tag].description,
                "broken": tag.startswith(BROKEN_PREFIX),
            }
            for tag in tags
        ],
        "hidden": hidden,
    }


def add_fixtures_command(commands: Any, engine_for: Callable[[str], Engine]) -> None:
    fixtures = commands.add_parser("fixtures", help="build or list the fixture images (no registry needed)")
    fixtures.add_argument("action", choices=("build", "list"))
    fixtures.add_argument("tags", nargs="*", help="fixtures to build (default: all)")
    fixtures.add_argument("--force", action="store_true", help="rebuild even when up to date")
    fixtures.add_argument("--all", action="store_true", help="list: also the broken:* images, made for distval's own tests")
    fixtures.add_argument(HELPER_BASE_FLAG, type=cli_values.CheckedText(base_problem), metavar="IMAGE", help=HELPER_BASE_HELP)
    fixtures.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="list: text for people (default), or one JSON object (each fixture's tag, recipe hash, description)",
    )
    fixtures.set_defaults(handler=functools.partial(command_fixtures, engine_for=engine_for))
