"""A distval JSON report -> the predicate of the attestation (docs/attestation.md#the-predicate): what ran, on
which image, Engine and host, every check's verdict and reason, the torch/CUDA/NCCL identity, the digests of the
report and the JUnit file. Only what the report holds: a field it lacks is null, never guessed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from distval import __version__
from distval.comparing.reading import BadReport
from distval.engine_protocol import ImageInfo

# The checks whose details are the findings of the attestation (distval_suite/libraries.py, environment.py): what the
# ranks mapped and who owns it, the variables the image bakes in, and what was wrong with either; per scenario that
# ran them, with the check's status.
FINDINGS_DETAILS = {
    "libraries": ("mapped_count", "owners", "findings", "mapped"),
    "environment": ("variables", "files", "findings", "known_names"),
}
FINDINGS_KEYS = tuple(FINDINGS_DETAILS)
# Testcases that validate nothing on their own (docs/reports.md#verdicts): they are listed, but a pass of theirs
# is not "a check passed".
NOT_VALIDATING = frozenset({"exit_status", "process_group"})
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
STATUSES = ("passed", "failed", "error", "skipped")


def utc_text(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime(TIME_FORMAT)


def parse_utc(text: object) -> datetime | None:
    """A time as predicate writes it (2026-12-04T13:00:00Z); None when it is not one."""
    if not isinstance(text, str):
        return None
    try:
        return datetime.strptime(text, TIME_FORMAT).replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def _text(value: object) -> str | None:
    """A report's string where it is known ("unknown" and "" are not)."""
    return value if isinstance(value, str) and value not in ("", "unknown") else None


def _problem(where: str, what: str) -> BadReport:
    return BadReport(f"{where} is not a usable distval JSON report: {what}")


def _case(case: object, where: str, scenario: str) -> dict[str, Any]:
    if not isinstance(case, dict) or not isinstance(case.get("name"), str) or case.get("status") not in STATUSES:
        raise _problem(where, f"scenario {scenario}: a case without a name or with a status not in {', '.join(STATUSES)}")
    skipped = case.get("skipped_ranks")
    return {
        "name": case["name"],
        "status": case["status"],
        "message": str(case.get("message") or ""),
        "skipped_ranks": [rank for rank in skipped if isinstance(rank, int)] if isinstance(skipped, list) else [],
    }


def _nccl(cases: Sequence[object]) -> str | None:
    """The NCCL the image loads, as its cuda_build check read it (torch.cuda.nccl.version()); None without one."""
    for case in cases:
        if isinstance(case, dict) and case.get("name") == "cuda_build" and isinstance(case.get("details"), dict):
            return _text(case["details"].get("nccl_runtime"))
    return None


def _findings(scenarios: Sequence[object]) -> dict[str, list[dict[str, Any]]]:
    """Per finding check, one entry per scenario that ran it: its status and the details its ranks recorded."""
    found: dict[str, list[dict[str, Any]]] = {}
    for scenario in scenarios:
        if not isinstance(scenario, dict) or not isinstance(scenario.get("cases"), list):
            continue
        for case in scenario["cases"]:
            if not isinstance(case, dict) or case.get("name") not in FINDINGS_DETAILS:
                continue
            found_details = case.get("details")
            details: dict[str, Any] = found_details if isinstance(found_details, dict) else {}
            entry: dict[str, Any] = {"scenario": scenario.get("name"), "status": case.get("status")}
            entry.update({key: details.get(key) for key in FINDINGS_DETAILS[str(case["name"])]})
            found.setdefault(str(case["name"]), []).append(entry)
    return found


def _scenario(scenario: object, where: str) -> dict[str, Any]:
    if not isinstance(scenario, dict) or not isinstance(scenario.get("name"), str):
        raise _problem(where, "a scenario without a name")
    name = scenario["name"]
    cases = scenario.get("cases")
    if not isinstance(cases, list):
        raise _problem(where, f"scenario {name} has no list of cases")
    found = scenario.get("properties")
    properties: dict[str, Any] = found if isinstance(found, dict) else {}
    return {
        "name": name,
        "image": _text(scenario.get("image")),
        "image_id": _text(scenario.get("image_id")),
        "status": str(scenario.get("status")),
        "started_at": _text(scenario.get("started_at")),
        "scenario_hash": _text(properties.get("scenario_hash")),
        "scenario_hash_any_image": _text(properties.get("scenario_hash_any_image")),
        "identity": {
            "torch": _text(properties.get("torch_version")),
            "cuda": _text(properties.get("cuda_version")),  # "none": a CPU build
            "nccl": _nccl(cases),
            "python": _text(properties.get("python_version")),
        },
        "checks": [_case(case, where, name) for case in cases],
    }


def report_image_id(report: Mapping[str, Any], where: str) -> str:
    """The one image id the report's scenarios ran (sha256:<hex>): what an attestation in the registry must find
    there. BadReport when the report names none, or several."""
    found = {
        s.get("image_id")
        for s in report.get("scenarios", [])
        if isinstance(s, dict) and isinstance(s.get("image_id"), str) and s["image_id"].startswith("sha256:")
    }
    if len(found) != 1:
        said = "no image id" if not found else f"{len(found)} image ids"
        raise _problem(where, f"its scenarios name {said}; an attestation is of the one image the report validated")
    return str(found.pop())


def predicate(
    report: Mapping[str, Any],
    where: str,
    report_sha256: str,
    reference: str,
    image: ImageInfo,
    junit_sha256: str | None,
    now: datetime,
    published: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The predicate for the report read from the file ``where`` (sha256 ``report_sha256``) on ``image``, the
    Engine's answer for ``reference`` (or, for an image attested in its registry, the report's image id and
    ``published``: its manifest there, published.py). A report of another image (a scenario whose image id differs) is BadReport:
    an attestation is of one image."""
    scenarios = [_scenario(s, where) for s in report.get("scenarios", [])]
    for scenario in scenarios:
        if scenario["image_id"] is not None and scenario["image_id"] != image.id:
            raise BadReport(
                f"{where}: scenario {scenario['name']} ran {scenario['image']} ({scenario['image_id']}), not {reference} "
                f"({image.id}): an attestation is of the image the report validated"
            )
    ran = [s for s in scenarios if s["image_id"] == image.id]
    identity = next((s["identity"] for s in ran if s["identity"]["torch"] is not None), None)
    starts = sorted(s["started_at"] for s in scenarios if s["started_at"] is not None)
    early = report.get("early_error")
    exit_code = report.get("exit_code")
    return {
        "attested_at": utc_text(now),
        "attested_by": {"distval_version": __version__},
        "image": {"reference": reference, "id": image.id, "repo_digests": list(image.repo_digests)},
        "published": dict(published) if published is not None else None,
        "run": {
            "distval_version": _text(report.get("distval_version")),
            "run_id": _text(report.get("run_id")),
            "exit_code": exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None,
            "early_error": early if isinstance(early, dict) else None,
            "config": _text(report.get("config")),
            # The report names its config file, but not its contents' hash: null until it carries one.
            "config_sha256": _text(report.get("config_sha256")),
            "started_at": starts[0] if starts else None,
            "host": _text(report.get("host")),
            "engine_version": _text(report.get("engine_version")),
            "sample_image": report.get("sample_image") is True,
        },
        "identity": identity or {"torch": None, "cuda": None, "nccl": None, "python": None},
        "scenarios": scenarios,
        "findings": _findings(report.get("scenarios", [])),
        "report": {"sha256": report_sha256},
        "junit": {"sha256": junit_sha256} if junit_sha256 is not None else None,
    }
