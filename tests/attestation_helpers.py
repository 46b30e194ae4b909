"""What the attestation tests share (tests/attestation/, tests/cli/test_attest.py): a JSON report of a run that
passed on the fake Engine's image, built as distval/reports/json_report.py lays one out, a key pair, a clock."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec

from distval.attestation import keys
from distval.attestation.policy import default_policy
from tests.fake_engine import FAKE_IMAGE_ID

IMAGE = "example/torch:candidate"
# When the tests' attestations are made; verify's clock is set from it.
MADE = datetime(2026, 12, 4, 12, 0, 0, tzinfo=timezone.utc)


def _case(name: str, status: str = "passed", message: str = "ok", details: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "status": status,
        "message": message,
        "duration_s": 0.5,
        "output": f"rank 0: {status}: {message}",
        "skipped_ranks": [],
        "details": details or {},
    }


def _scenario(name: str, cases: list[dict[str, Any]], image_id: str | None = FAKE_IMAGE_ID) -> dict[str, Any]:
    return {
        "name": name,
        "suite_name": f"[{IMAGE}] {name} (in-container, 2 ranks)",
        "topology": "in-container",
        "world_size": 2,
        "backend": "gloo",
        "image": IMAGE,
        "image_id": image_id,
        "status": "passed",
        "duration_s": 4.25,
        "started_at": "2026-12-04T11:50:00.125Z",
        "properties": {
            "image": IMAGE,
            "image_id": image_id or "unknown",
            "torch_version": "2.6.0",
            "python_version": "3.13.5",
            "cuda_version": "12.8",
            "scenario_hash": "0123abcd4567",
            "scenario_hash_any_image": "89ef0123abcd",
        },
        "reproduce": None,
        "cases": cases,
        "bandwidth": [],
        "diagnosis": {},
        "logs": "",
    }


def _default_checks(present: list[str]) -> list[dict[str, Any]]:
    """A passed case of each check of the shipped default config that ``present`` lacks (the default policy
    requires them all; derived, as the policy derives them)."""
    names = default_policy().required_checks
    return [_case(name) for name in names if not any(p == name or p.startswith(name + ".") for p in present)]


def passing_report(default_checks: bool = False) -> dict[str, Any]:
    """A run of two scenarios on the fake Engine's image: every check passed but cuda_build's skip in one.
    ``default_checks``: the first also ran the default config's other checks (what the default policy requires)."""
    return {
        "schema_version": 1,
        "run_id": "abc123",
        "distval_version": "0.1.0",
        "exit_code": 0,
        "early_error": None,
        "engine_version": "27.5.1",
        "host": "ci-runner-7",
        "config": "configs/default.yaml",
        "sample_image": False,
        "scenarios": [
            _scenario(
                "in-container-2ranks",
                [
                    _case("env", message="torch 2.6.0, Python 3.13.5"),
                    _case("cuda_build", details={"nccl_runtime": "2.26.2"}),
                    _case("collectives.all_reduce"),
                    _case("ddp"),
                    _case("exit_status"),
                    *(_default_checks(["env", "cuda_build", "collectives.all_reduce", "ddp"]) if default_checks else []),
                ],
            ),
            _scenario(
                "cross-container-2ranks",
                [
                    _case("env"),
                    _case("cuda_build", "skipped", "not supported by this image: no GPU"),
                    _case("collectives.all_reduce"),
                    _case("ddp"),
                    _case("exit_status"),
                ],
            ),
        ],
        "bandwidth_topologies": [],
    }


def changed(report: dict[str, Any], scenario: int, check: str, status: str, message: str = "") -> dict[str, Any]:
    """A copy of ``report`` where one scenario's check has another status (and message)."""
    result = copy.deepcopy(report)
    for case in result["scenarios"][scenario]["cases"]:
        if case["name"] == check:
            case["status"], case["message"] = status, message or case["message"]
    return result


def write_json(path: Path, data: object) -> str:
    path.write_text(json.dumps(data, indent=2))
    return str(path)


def key_pair() -> tuple[ec.EllipticCurvePrivateKey, ec.EllipticCurvePublicKey]:
    private = ec.generate_private_key(ec.SECP256R1())
    return private, private.public_key()


def write_key_pair(directory: Path, name: str = "cosign") -> tuple[str, str]:
    """(private key path, public key path): a new pair in ``directory``, the private key not encrypted."""
    private_pem, public_pem = keys.generate_key_pair(None)
    (directory / f"{name}.key").write_text(private_pem)
    (directory / f"{name}.pub").write_text(public_pem)
    return str(directory / f"{name}.key"), str(directory / f"{name}.pub")


def passed_of(report: dict[str, Any]) -> str:
    """verify's "N of M check results passed" for ``report``, all on the fake Engine's image."""
    cases = [case for scenario in report["scenarios"] for case in scenario["cases"]]
    return f"{sum(1 for case in cases if case['status'] == 'passed')} of {len(cases)} check results passed"
