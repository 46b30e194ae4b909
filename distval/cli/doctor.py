"""``distval doctor``: its command line, made from the targets' registry (distval/targets/registry.py): the options
every doctor takes (--image, the --hosts options, --format) and each kind's own; the kind its options choose, whose
doctor yields one line per check, in the order it declares them; and its output (text for people, JSON for tools:
distval/doctor/report.py)."""

from __future__ import annotations

import argparse
import functools
import json
import secrets
import sys
from collections.abc import Callable, Sequence
from typing import Any

from distval.cli import values as cli_values
from distval.cli.target_options import add_option, command_options
from distval.config.shipped import DEFAULT_IMAGE
from distval.doctor.checks import DoctorCheck, exit_code, reference_markdown
from distval.doctor.report import as_data, render_text
from distval.errors import EXIT_BAD_INPUT, EXIT_ENVIRONMENT, EXIT_INTERNAL, EXIT_MEANINGS, EXIT_PASSED, ExitCodes
from distval.targets.kind import DoctorEngine
from distval.targets.registry import chosen_doctor, default_kind, doctor_kinds, doctor_options

# Its help's exit codes (distval/cli/main.py's COMMAND_EXIT_CODES puts them in the epilog).
DOCTOR_EXIT_CODES = ExitCodes(
    (EXIT_PASSED, EXIT_BAD_INPUT, EXIT_ENVIRONMENT, EXIT_INTERNAL),
    {EXIT_PASSED: "every check is ok or warn", EXIT_ENVIRONMENT: f"{EXIT_MEANINGS[EXIT_ENVIRONMENT]}: a check failed"},
)
# The options every doctor takes that a kind's doctor may read or refuse (declared here, not by a kind).
_COMMON = ("image", "hosts", "tls_ca", "tls_cert", "tls_key")


def add_doctor_command(
    commands: Any, connect: DoctorEngine, add_hosts_options: Callable[[argparse.ArgumentParser, bool], None]
) -> None:
    """``connect``: how a kind's doctor reaches an Engine (DOCKER_HOST's, or one of --hosts); distval/cli/main.py gives
    it, so that docker-py is imported only when an Engine is asked."""
    doctor = commands.add_parser(
        "doctor",
        help="check that distval can run here: the Engine, compose, GPUs, disk, the image and its torch",
        description="One line per check: ok, warn (a run goes on with less), fail (a run cannot) or skip (could not "
        "look, and why), with what to do when not ok (docs/doctor.md).",
    )
    doctor.add_argument(
        "--image",
        type=cli_values.image_reference,
        help=f"the image to look for and to import torch in (default {DEFAULT_IMAGE}); never pulled",
    )
    add_hosts_options(doctor, True)
    for option in doctor_options():
        add_option(doctor, option)
    doctor.add_argument("--format", choices=("text", "json"), default="text", help="text for people (default) or JSON")
    doctor.set_defaults(handler=functools.partial(command_doctor, connect=connect))


def command_doctor(args: argparse.Namespace, connect: DoctorEngine) -> int:
    options = command_options(args, doctor_options(), f"doctor-{secrets.token_hex(4)}", _COMMON)
    kind, doctor = chosen_doctor(options)
    lines = list(doctor.lines(options, connect))
    code = exit_code(lines)
    if args.format == "json":
        sys.stdout.write(json.dumps(as_data(kind.name, doctor.image(options), lines, code), indent=2) + "\n")
    else:
        sys.stdout.write(render_text(doctor.heading(options), lines, code))
    return code


def declared_checks() -> list[tuple[str, Sequence[DoctorCheck]]]:
    """Each kind's doctor as docs/doctor.md's table lists it: where its checks run and its checks, the default kind
    first."""
    chosen = sorted(doctor_kinds(), key=lambda pair: pair[0] is not default_kind())
    return [(doctor.runs, doctor.checks) for _kind, doctor in chosen]


def doctor_reference() -> str:
    """The table of docs/doctor.md, from every kind's doctor."""
    return reference_markdown(declared_checks())
