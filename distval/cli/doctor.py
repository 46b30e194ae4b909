"""``distval doctor``: its command line, the Engines it looks at, and its output (text for people, JSON for tools),
one line per check of distval/doctor/checks.py, in the order they are declared there."""

from __future__ import annotations

import argparse
import functools
import json
import os
import secrets
import sys
from collections.abc import Callable, Sequence
from typing import Any

from distval.cli import values as cli_values
from distval.config.engine_hosts import HostSpec, host_specs, tls_files
from distval.config.shipped import DEFAULT_IMAGE
from distval.doctor.checks import DEFAULT_SOCKET, STATUSES, Doctor, EngineSlot, Line, exit_code, run_checks
from distval.engine_protocol import EngineAPI
from distval.errors import (
    EXIT_BAD_INPUT,
    EXIT_ENVIRONMENT,
    EXIT_INTERNAL,
    EXIT_MEANINGS,
    EXIT_PASSED,
    BadInput,
    EngineError,
    ExitCodes,
)
from distval.escape import terminal_line

# How the doctor reaches an Engine: the one of DOCKER_HOST (None) or one of --hosts; distval/cli/main.py gives it,
# so that docker-py is imported only when an Engine is asked.
Connect = Callable[[str, HostSpec | None], EngineAPI]
# Its help's exit codes (distval/cli/main.py's COMMAND_EXIT_CODES puts them in the epilog).
DOCTOR_EXIT_CODES = ExitCodes(
    (EXIT_PASSED, EXIT_BAD_INPUT, EXIT_ENVIRONMENT, EXIT_INTERNAL),
    {EXIT_PASSED: "every check is ok or warn", EXIT_ENVIRONMENT: f"{EXIT_MEANINGS[EXIT_ENVIRONMENT]}: a check failed"},
)


def add_doctor_command(
    commands: Any, connect: Connect, add_hosts_options: Callable[[argparse.ArgumentParser, bool], None]
) -> None:
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
    doctor.add_argument(
        "--local", action="store_true", help="check running without Docker instead: the local Python and its torch"
    )
    doctor.add_argument("--python", metavar="PATH", help="with --local: the Python to check (default: python3 on PATH)")
    doctor.add_argument("--format", choices=("text", "json"), default="text", help="text for people (default) or JSON")
    doctor.set_defaults(handler=functools.partial(command_doctor, connect=connect))


def _slots(args: argparse.Namespace, run_id: str, connect: Connect) -> list[EngineSlot]:
    """The Engines to look at: DOCKER_HOST's, or each of --hosts; one that does not answer keeps its error."""
    specs: Sequence[HostSpec | None] = [None]
    if args.hosts:
        specs = host_specs(args.hosts, tls_files(args.tls_ca, args.tls_cert, args.tls_key))
    slots = []
    for index, spec in enumerate(specs):
        where = spec.url if spec is not None else os.environ.get("DOCKER_HOST") or DEFAULT_SOCKET
        label = f"host {index} ({where})" if spec is not None else ""
        try:
            slots.append(EngineSlot(where, label, connect(run_id, spec)))
        except EngineError as exc:
            slots.append(EngineSlot(where, label, None, exc))
    return slots


def command_doctor(args: argparse.Namespace, connect: Connect) -> int:
    if args.local and (args.image or args.hosts):
        raise BadInput("doctor --local checks the local Python: --image and --hosts go without --local")
    if args.python and not args.local:
        raise BadInput("doctor --python goes with --local (in an image, the python is the scenarios' python3)")
    run_id = f"doctor-{secrets.token_hex(4)}"
    image = args.image or DEFAULT_IMAGE
    if args.local:
        doctor = Doctor("local", image, run_id, python=args.python)
    else:
        doctor = Doctor("docker", image, run_id, slots=_slots(args, run_id, connect))
    lines = run_checks(doctor)
    code = exit_code(lines)
    if args.format == "json":
        sys.stdout.write(json.dumps(as_data(doctor, lines, code), indent=2) + "\n")
    else:
        sys.stdout.write(render_text(doctor, lines, code))
    return code


def render_text(doctor: Doctor, lines: Sequence[Line], code: int) -> str:
    what = "without Docker (--local)" if doctor.mode == "local" else f"in containers, image {doctor.image}"
    out = [f"distval doctor: can distval run here, {what}?"]
    width = max((len(line.check) for line in lines), default=0)
    for line in lines:
        finding = line.finding
        # Each part escaped on its own (terminal_line folds runs of spaces, the columns' padding among them).
        engine = f"[{terminal_line(line.engine)}] " if line.engine else ""
        todo = f" -> {terminal_line(finding.todo)}" if finding.todo else ""
        out.append(f"{finding.status:<4}  {line.check:<{width}}  {engine}{terminal_line(finding.found)}{todo}")
    counts = ", ".join(f"{sum(1 for line in lines if line.finding.status == s)} {s}" for s in STATUSES)
    verdict = "a check failed" if code else "nothing stops a run"
    out.append(f"{counts}: {verdict} (exit {code})")
    return "\n".join(out) + "\n"


def as_data(doctor: Doctor, lines: Sequence[Line], code: int) -> dict[str, Any]:
    return {
        "mode": doctor.mode,
        "image": doctor.image if doctor.mode == "docker" else None,
        "checks": [
            {
                "check": line.check,
                "engine": line.engine or None,
                "status": line.finding.status,
                "found": terminal_line(line.finding.found),
                "todo": terminal_line(line.finding.todo) or None,
            }
            for line in lines
        ],
        "exit_code": code,
    }
