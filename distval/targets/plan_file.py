"""The plan an export wrote beside what it exported, which collect judges the collected output against.

``distval export kubernetes`` and ``distval export slurm`` write each exported scenario's plan (its Origin: the
scenario with its checks and ranks, the image, the config, the run id) into a plan file beside the manifests or the
batch script, and the file's SHA-256 into those (an annotation of every resource and pod, a comment of the script).
``distval collect`` plans the scenario again from that file only: the pods and job steps run the image under test,
and what they print about what ran is theirs to choose (a log naming another image, another config, one check).

A plan file that is missing, not the one the manifests or the script name (another SHA-256), or not a plan is bad
input (``PlanFileError``, exit 2) in one line.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distval import strict_json
from distval.bounded_read import FileRefused, read_regular_file
from distval.errors import BadInput, one_line
from distval.targets.origin import Origin, origin_data, origin_from_data

PLAN_VERSION = 1
PLAN_KIND = "distval-exported-plan"
# One scenario's plan: its checks' arguments and environment, a few KiB; far below this.
PLAN_MAX_BYTES = 4 * 2**20
# Where the manifests carry the plan file's hash (every resource's and pod's annotations), and how the batch
# script's comment names it.
PLAN_SHA256_KEY = "distval.plan-sha256"
_SHA256 = re.compile(r"[0-9a-f]{64}")
NO_PLAN_FILE = "no plan file (distval export writes it beside what it exports; collect judges the output against it)"
UID_MAX = 2**32 - 2  # (uid_t)-1 is "no user"


class PlanFileError(BadInput):
    """The plan file collect needs is missing, malformed, or not the one the exported job names."""

    kind = "plan"


@dataclass(frozen=True)
class ExportedPlan:
    origin: Origin
    # The user whose job writes the results (Slurm: the job's files are theirs); None where the export did not say.
    job_uid: int | None
    sha256: str  # of the file's bytes
    path: str  # where it was read from (messages)


def plan_text(origin: Origin, job_uid: int | None = None) -> str:
    """The plan file's text: written once by the export, hashed into what it exported."""
    data: dict[str, Any] = {"kind": PLAN_KIND, "version": PLAN_VERSION, "origin": origin_data(origin), "job_uid": job_uid}
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def is_sha256(value: object) -> bool:
    return isinstance(value, str) and _SHA256.fullmatch(value) is not None


def read_plan(path: str | Path, expected_sha256: str | None, named_by: str) -> ExportedPlan:
    """The plan file at ``path`` (a regular file, not followed if a link), whose SHA-256 must be ``expected_sha256``
    (what ``named_by``, the manifest or script, says). PlanFileError otherwise, in one line."""
    try:
        data = read_regular_file(path, PLAN_MAX_BYTES, follow_links=False)
    except FileRefused as exc:
        if exc.missing:
            raise PlanFileError(f"{path}: {NO_PLAN_FILE}") from None
        raise PlanFileError(f"{path}: cannot read the plan file: {exc}") from None
    found = hashlib.sha256(data).hexdigest()
    if expected_sha256 is None:
        raise PlanFileError(f"{named_by} names no plan file SHA-256 ({PLAN_SHA256_KEY}): was it written by distval export?")
    if found != expected_sha256:
        raise PlanFileError(
            f"{path}: the plan file has SHA-256 {found}, and {named_by} names {expected_sha256}: the plan was changed "
            "after the export (export again)"
        )
    try:
        document = strict_json.loads(data)
        if not isinstance(document, dict) or document.get("kind") != PLAN_KIND or document.get("version") != PLAN_VERSION:
            raise ValueError(f"expected a JSON object of kind {PLAN_KIND!r}, version {PLAN_VERSION}")
        uid = document.get("job_uid")
        if uid is not None and (isinstance(uid, bool) or not isinstance(uid, int) or not 0 <= uid <= UID_MAX):
            raise ValueError(f"job_uid: expected a uid from 0 to {UID_MAX} or null")
        origin = origin_from_data(document.get("origin"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise PlanFileError(f"{path}: not a distval plan file: {one_line(str(exc))[:200]}") from None
    return ExportedPlan(origin, uid, found, str(path))
