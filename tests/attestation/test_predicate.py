"""distval/attestation/predicate.py: what the predicate takes from a JSON report (and what it leaves null because the
report lacks it), and the reports it refuses."""

from __future__ import annotations

import pytest

from distval.attestation.predicate import FINDINGS_KEYS, parse_utc, predicate, utc_text
from distval.comparing.reading import BadReport
from distval.engine_protocol import ImageInfo
from distval.errors import EXIT_BAD_INPUT
from tests.attestation_helpers import IMAGE, MADE, passing_report
from tests.fake_engine import FAKE_IMAGE_ID

INFO = ImageInfo(id=FAKE_IMAGE_ID, tags=(IMAGE,), labels={}, repo_digests=("ghcr.io/org/torch@sha256:" + "2" * 64,))


def _predicate(report: dict[str, object], junit: str | None = "c" * 64) -> dict[str, object]:
    return predicate(report, "report.json", "d" * 64, IMAGE, INFO, junit, MADE)


def test_the_predicate_holds_the_run_the_image_and_every_checks_verdict_and_reason() -> None:
    body = _predicate(passing_report())
    assert body["attested_at"] == "2026-12-04T12:00:00Z"
    assert body["image"] == {"reference": IMAGE, "id": FAKE_IMAGE_ID, "repo_digests": list(INFO.repo_digests)}
    assert body["run"] == {
        "distval_version": "0.1.0",
        "run_id": "abc123",
        "exit_code": 0,
        "early_error": None,
        "config": "configs/default.yaml",
        "config_sha256": None,  # the report does not carry its config's hash
        "started_at": "2026-12-04T11:50:00.125Z",
        "host": "ci-runner-7",
        "engine_version": "27.5.1",
        "sample_image": False,
    }
    assert body["identity"] == {"torch": "2.6.0", "cuda": "12.8", "nccl": "2.26.2", "python": "3.13.5"}
    assert body["report"] == {"sha256": "d" * 64} and body["junit"] == {"sha256": "c" * 64}
    assert body["findings"] == {}
    scenario = body["scenarios"][1]  # type: ignore[index]
    assert scenario["scenario_hash"] == "0123abcd4567" and scenario["scenario_hash_any_image"] == "89ef0123abcd"
    assert scenario["checks"][1] == {
        "name": "cuda_build",
        "status": "skipped",
        "message": "not supported by this image: no GPU",
        "skipped_ranks": [],
    }
    assert scenario["identity"]["nccl"] is None  # its cuda_build skipped: no NCCL read
    assert _predicate(passing_report(), junit=None)["junit"] is None


def test_the_libraries_and_environment_checks_details_are_the_findings_per_scenario() -> None:
    report = passing_report()
    libraries = {
        "mapped_count": 1,
        "owners": {"pip": 1},
        "findings": [],
        "mapped": [{"path": "/x/libnccl.so.2", "soname": "libnccl.so.2", "owner": "pip:nvidia_nccl_cu13"}],
        "packaged_shared_objects": 565,  # not a finding: left out
    }
    environment = {
        "variables": [{"name": "NCCL_ALGO", "value": "Tree", "source": "image", "read_by_image": True}],
        "files": [],
        "findings": [{"kind": "harmful", "name": "NCCL_ALGO", "source": "image", "text": "NCCL_ALGO=Tree ..."}],
        "known_names": 1182,
    }
    report["scenarios"][0]["cases"] += [
        {"name": "libraries", "status": "passed", "message": "", "details": libraries},
        {"name": "environment", "status": "failed", "message": "", "details": environment},
    ]
    assert set(FINDINGS_KEYS) == {"libraries", "environment"}
    findings = _predicate(report)["findings"]
    name = report["scenarios"][0]["name"]
    assert findings["libraries"] == [
        {"scenario": name, "status": "passed", **{k: v for k, v in libraries.items() if k != "packaged_shared_objects"}}
    ]
    assert findings["environment"] == [{"scenario": name, "status": "failed", **environment}]


def test_a_report_of_another_image_is_refused() -> None:
    report = passing_report()
    report["scenarios"][1]["image_id"] = "sha256:" + "e" * 64
    with pytest.raises(BadReport, match="scenario cross-container-2ranks ran example/torch:candidate") as caught:
        _predicate(report)
    assert caught.value.exit_code == EXIT_BAD_INPUT


def test_a_scenario_without_an_image_id_is_kept_but_is_not_the_images() -> None:
    report = passing_report()
    report["scenarios"][0]["image_id"] = None
    body = _predicate(report)
    assert [s["image_id"] for s in body["scenarios"]] == [None, FAKE_IMAGE_ID]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda r: r["scenarios"].append("x"), "a scenario without a name"),
        (lambda r: r["scenarios"][0].pop("cases"), "has no list of cases"),
        (lambda r: r["scenarios"][0]["cases"][0].update(status="great"), "a status not in passed, failed, error, skipped"),
    ],
)
def test_a_report_with_unusable_scenarios_is_bad_input(change: object, said: str) -> None:
    report = passing_report()
    change(report)  # type: ignore[operator]
    with pytest.raises(BadReport, match=said):
        _predicate(report)


def test_times_are_utc_seconds() -> None:
    assert parse_utc(utc_text(MADE)) == MADE
    assert parse_utc("2026-12-04") is None and parse_utc(3) is None
