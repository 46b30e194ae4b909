"""distval/attestation/policy.py: the policy file, the age of an attestation under an injected clock, and the
verdicts it refuses, failing closed (nothing validated, a required check skipped or missing)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from distval.attestation.policy import (
    DEFAULT_POLICY,
    KEYS,
    BadPolicy,
    Policy,
    age_refusal,
    default_policy,
    parse_policy,
    passed_count,
    verdict_refusal,
)
from distval.attestation.predicate import predicate
from distval.config import load_config
from distval.config.shipped import DEFAULT_CONFIG
from distval.engine_protocol import ImageInfo
from distval.errors import EXIT_BAD_INPUT
from tests.attestation_helpers import IMAGE, MADE, changed, passing_report
from tests.fake_engine import FAKE_IMAGE_ID


def _body(report: dict[str, Any]) -> dict[str, Any]:
    return predicate(report, "r.json", "d" * 64, IMAGE, ImageInfo(FAKE_IMAGE_ID, (), {}), None, MADE)


def test_the_default_policy() -> None:
    assert DEFAULT_POLICY == Policy(max_age_days=7.0, required_checks=(), allow_skipped=None)
    assert verdict_refusal(_body(passing_report()), DEFAULT_POLICY) is None
    assert passed_count(_body(passing_report())) == (9, 10)


def test_a_policy_file_in_yaml_or_json() -> None:
    text = b"max_age_days: 30\nrequired_checks: [ddp, collectives.all_reduce]\nallow_skipped: [cuda_build]\n"
    assert parse_policy(text, "p.yaml") == Policy(30.0, ("ddp", "collectives.all_reduce"), ("cuda_build",))
    assert parse_policy(b'{"max_age_days": 0.5}', "p.json") == Policy(0.5)
    assert parse_policy(b"{}", "p.json") == DEFAULT_POLICY


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            b"",
            f"expected a YAML or JSON mapping of {', '.join(KEYS)}; got NoneType",
        ),
        (b"[1]", "got list"),
        (b"a: 1\nb: [", "it is not YAML (line 2)"),
        (b"\xff", "it is not YAML"),
        (
            b"max_age: 3",
            f"unknown key 'max_age' (expected {', '.join(KEYS)})",
        ),
        (b"max_age_days: 0", "max_age_days: expected a number of days > 0 and <= 3650; got 0"),
        (b"max_age_days: true", "got True"),
        (b"max_age_days: '7'", "got '7'"),
        (b"required_checks: ddp", "required_checks: expected a list of check names; got str"),
        (b"allow_skipped: [1]", "allow_skipped: expected a list of check names"),
    ],
)
def test_a_bad_policy_is_one_line(text: bytes, said: str) -> None:
    with pytest.raises(BadPolicy) as caught:
        parse_policy(text, "p.yaml")
    message = str(caught.value)
    assert message.startswith("p.yaml: ") and said in message and "\n" not in message
    assert caught.value.exit_code == EXIT_BAD_INPUT


def test_an_attestation_older_than_the_policy_allows_has_expired() -> None:
    body = _body(passing_report())
    assert age_refusal(body, DEFAULT_POLICY, MADE + timedelta(days=7)) is None
    expired = age_refusal(body, DEFAULT_POLICY, MADE + timedelta(days=7, seconds=1))
    assert expired == ("not verified: expired: made 2026-12-04T12:00:00Z, 7.0 days ago; the policy accepts at most 7 days")
    assert age_refusal(body, Policy(max_age_days=1), MADE + timedelta(days=2)) is not None
    assert age_refusal(body, Policy(max_age_days=30), MADE + timedelta(days=2)) is None


def test_an_attestation_from_the_future_or_without_a_time_is_refused() -> None:
    body = _body(passing_report())
    assert age_refusal(body, DEFAULT_POLICY, MADE - timedelta(minutes=4)) is None  # clocks a little apart
    assert "in the future" in str(age_refusal(body, DEFAULT_POLICY, MADE - timedelta(hours=1)))
    assert "does not say when" in str(age_refusal({**body, "attested_at": "yesterday"}, DEFAULT_POLICY, MADE))


def _refusal(report: dict[str, Any], policy: Policy = DEFAULT_POLICY) -> str | None:
    return verdict_refusal(_body(report), policy)


def test_a_failed_or_errored_check_is_refused_whatever_the_policy() -> None:
    failed = changed(passing_report(), 1, "ddp", "failed", "rank 1: gradients differ\nsecond line")
    assert (
        _refusal(failed, Policy(allow_skipped=("ddp",)))
        == "refused: cross-container-2ranks: ddp failed: rank 1: gradients differ second line"
    )
    errored = changed(passing_report(), 0, "exit_status", "error", "container x exited with code 1")
    assert _refusal(errored) == "refused: in-container-2ranks: exit_status error: container x exited with code 1"


def test_a_run_that_did_not_exit_0_or_stopped_early_is_refused() -> None:
    report = passing_report()
    report["exit_code"] = 5
    assert _refusal(report) == "refused: the run exited 5 (nothing was validated)"
    report["exit_code"] = None
    assert _refusal(report) == "refused: the run does not say its exit code"
    report["early_error"] = {"kind": "environment", "message": "no Engine"}
    assert _refusal(report) == "refused: the run stopped early (environment): no Engine"


def test_nothing_validated_fails_closed() -> None:
    """A run whose every check skipped (exit_status and process_group validate nothing on their own), or whose
    scenarios ran another image than the one attested, does not verify."""
    report = passing_report()
    for scenario in report["scenarios"]:
        for case in scenario["cases"]:
            if case["name"] != "exit_status":
                case["status"] = "skipped"
    assert _refusal(report) == "refused: nothing was validated: no check passed on the image"
    empty = passing_report()
    empty["scenarios"] = []
    assert _refusal(empty) == "refused: nothing was validated: no check passed on the image"
    unknown = passing_report()
    for scenario in unknown["scenarios"]:
        scenario["image_id"] = None
    assert _refusal(unknown) == "refused: nothing was validated: no check passed on the image"


def test_a_required_check_must_have_passed_on_the_image() -> None:
    policy = Policy(required_checks=("ddp", "cuda_build"))
    assert _refusal(passing_report(), policy) == (
        "refused: cross-container-2ranks: the required check cuda_build was skipped: not supported by this image: no GPU"
    )
    assert _refusal(passing_report(), Policy(required_checks=("ddp", "cuda_build"), allow_skipped=("cuda_build",))) is None
    missing = Policy(required_checks=("store",))
    assert _refusal(passing_report(), missing) == (
        "refused: the required check store did not run on the image (no scenario of the report ran it)"
    )
    skipped_everywhere = changed(changed(passing_report(), 0, "ddp", "skipped"), 1, "ddp", "skipped")
    assert _refusal(skipped_everywhere, Policy(required_checks=("ddp",), allow_skipped=("ddp",))) == (
        "refused: the required check ddp passed in no scenario"
    )


def test_allow_skipped_limits_which_checks_may_skip() -> None:
    assert _refusal(passing_report(), Policy(allow_skipped=())) == (
        "refused: cross-container-2ranks: cuda_build was skipped, which the policy does not allow: not supported by "
        "this image: no GPU"
    )


def test_a_refusal_line_escapes_the_images_text_and_is_capped() -> None:
    report = changed(passing_report(), 0, "ddp", "failed", "\x1b[2Jwiped " + "x" * 500)
    line = str(_refusal(report))
    assert "\x1b" not in line and "\n" not in line and len(line) < 260


def _skipped_on_rank(report: dict[str, Any], scenario: int, check: str, ranks: list[int]) -> dict[str, Any]:
    """``report`` with ``check`` passed in the scenario, but skipped on ``ranks`` (others passed it)."""
    for case in report["scenarios"][scenario]["cases"]:
        if case["name"] == check:
            case["skipped_ranks"] = ranks
    return report


def test_a_required_check_skipped_on_one_rank_is_refused_whatever_allow_skipped_says() -> None:
    report = _skipped_on_rank(passing_report(), 1, "ddp", [1])
    for policy in (Policy(required_checks=("ddp",)), Policy(required_checks=("ddp",), allow_skipped=("ddp",))):
        assert _refusal(report, policy) == "refused: cross-container-2ranks: the required check ddp was skipped on rank(s) 1"


def test_a_required_check_skipped_on_every_rank_says_why_it_was_skipped() -> None:
    # A report may list every rank of a wholly skipped check: the check's own reason says more than the ranks.
    report = _skipped_on_rank(changed(passing_report(), 1, "ddp", "skipped", "no NCCL in this image"), 1, "ddp", [0, 1])
    assert _refusal(report, Policy(required_checks=("ddp",))) == (
        "refused: cross-container-2ranks: the required check ddp was skipped: no NCCL in this image"
    )


def test_allow_skipped_counts_a_check_skipped_on_some_ranks_as_skipped() -> None:
    report = _skipped_on_rank(passing_report(), 0, "ddp", [0])
    refusal = _refusal(report, Policy(allow_skipped=("cuda_build",)))
    assert refusal is not None and refusal.startswith("refused: in-container-2ranks: ddp was skipped, which the policy")
    assert _refusal(report, Policy(allow_skipped=("cuda_build", "ddp"))) is None


def test_required_scenarios_name_the_checks_each_scenario_must_pass() -> None:
    policy = parse_policy(b"required_scenarios:\n  in-container-2ranks: [ddp, collectives]\n", "p.yaml")
    assert policy.required_scenarios == (("in-container-2ranks", ("ddp", "collectives")),)
    assert _refusal(passing_report(), policy) is None
    assert _refusal(passing_report(), Policy(required_scenarios=(("in-container-2ranks", ("store",)),))) == (
        "refused: the required check store did not run on the image (scenario in-container-2ranks never ran it)"
    )
    assert _refusal(passing_report(), Policy(required_scenarios=(("cross-container-2ranks", ("cuda_build",)),))) == (
        "refused: cross-container-2ranks: the required check cuda_build was skipped: not supported by this image: no GPU"
    )
    assert _refusal(passing_report(), Policy(required_scenarios=(("multi-node", ("ddp",)),))) == (
        "refused: the required scenario multi-node did not run on the image"
    )


def test_the_config_can_be_pinned_by_its_hash() -> None:
    pinned = "c" * 64
    policy = parse_policy(f"config_sha256: {pinned}".encode(), "p.yaml")
    assert policy.config_sha256 == pinned
    report = passing_report()
    assert _refusal(report, policy) == (
        f"refused: the run read another config (no config_sha256); the policy pins config_sha256 {pinned}"
    )
    report["config_sha256"] = "d" * 64
    assert "another config (config_sha256 " + "d" * 64 + ")" in str(_refusal(report, policy))
    report["exit_code"] = 1
    assert _refusal(report, Policy(config_sha256="c" * 64)) == "refused: the run exited 1 (a check failed or errored)", (
        "what the run ended with is said before what it read"
    )
    report["exit_code"] = 0
    report["config_sha256"] = pinned
    assert _refusal(report, policy) is None
    with pytest.raises(BadPolicy, match="config_sha256: expected 64 lowercase hex digits"):
        parse_policy(b"config_sha256: abc", "p.yaml")


def test_the_default_policy_requires_what_the_shipped_default_config_validates() -> None:
    """Derived through the loader: every check configs/default.yaml lists, whatever it lists today."""
    config = load_config(DEFAULT_CONFIG)
    listed = {check.name for scenario in config.scenarios for check in scenario.checks}
    assert set(default_policy().required_checks) == listed and listed
    one_check = passing_report()  # env, cuda_build, collectives, ddp: less than the default config
    assert str(_refusal(one_check, default_policy())).startswith("refused: the required check ")
    assert _refusal(passing_report(default_checks=True), default_policy()) is None


def test_policy_bounds_at_their_edges() -> None:
    # The first unknown key in order is named; max_age_days up to ten years, and above 0 only.
    with pytest.raises(BadPolicy, match="unknown key 'a_key'"):
        parse_policy(b"b_key: 1\na_key: 2\n", "p.yaml")
    assert parse_policy(b"max_age_days: 3650", "p.yaml").max_age_days == 3650.0
    for refused in (b"max_age_days: 3650.001", b"max_age_days: -0.5"):
        with pytest.raises(BadPolicy, match="max_age_days: expected a number of days > 0 and <= 3650"):
            parse_policy(refused, "p.yaml")


def test_a_date_up_to_five_minutes_ahead_is_a_clock_apart_and_past_it_the_future() -> None:
    body = _body(passing_report())
    assert age_refusal(body, DEFAULT_POLICY, MADE - timedelta(minutes=5)) is None
    assert "in the future" in str(age_refusal(body, DEFAULT_POLICY, MADE - timedelta(minutes=5, seconds=1)))


def test_a_refusal_shows_the_first_160_characters_of_the_checks_message() -> None:
    report = changed(passing_report(), 1, "ddp", "failed", "x" * 500)
    assert _refusal(report) == (
        f"refused: cross-container-2ranks: ddp failed: {'x' * 160} [... cut: 500 characters in all, the first 160 shown]"
    )


def test_required_scenarios_must_map_names_to_checks() -> None:
    for text in (b"required_scenarios: [a, b]\n", b"required_scenarios:\n  1: [ddp]\n", b"required_scenarios:\n  '': [ddp]\n"):
        with pytest.raises(BadPolicy, match="required_scenarios: expected a mapping of scenario names to lists of check"):
            parse_policy(text, "p.yaml")


def test_an_expired_attestation_says_its_age_in_days() -> None:
    body = _body(passing_report())
    for days, said in ((10.0501, "10.1 days ago"), (10.0499, "10.0 days ago")):
        refusal = age_refusal(body, Policy(max_age_days=1), MADE + timedelta(seconds=86400 * days))
        assert refusal is not None and said in refusal, refusal


def test_a_required_check_skipped_on_many_ranks_names_ten() -> None:
    report = _skipped_on_rank(passing_report(), 1, "ddp", list(range(11)))
    assert _refusal(report, Policy(required_checks=("ddp",))) == (
        "refused: cross-container-2ranks: the required check ddp was skipped on rank(s) 0, 1, 2, 3, 4, 5, 6, 7, 8, 9"
    )


def test_another_config_is_named_by_its_first_80_characters() -> None:
    report = passing_report()
    report["config_sha256"] = "z" * 100
    refusal = _refusal(report, Policy(config_sha256="c" * 64))
    assert f"(config_sha256 {'z' * 80} [... cut: 100 characters in all, the first 80 shown])" in str(refusal)


def test_no_check_counts_as_passed_on_an_image_the_attestation_does_not_name() -> None:
    body = _body(passing_report())
    unnamed = {**body, "image": {}, "scenarios": [{**s, "image_id": None} for s in body["scenarios"]]}
    assert passed_count(unnamed) == (0, 10)
