"""What a verified attestation must say for ``distval verify`` to pass it (docs/attestation.md#the-policy), and
how old it may be. The policy file is a small YAML (or JSON) mapping:

    max_age_days: 7              # the attestation was made at most this many days ago (default 7)
    required_checks: [ddp, collectives.all_reduce]   # each passed on the image, in every scenario that ran it
    allow_skipped: [cuda_build]  # only these checks may be skipped (default: any check not required)

Whatever the file says, a verdict fails closed: a check that failed or errored, a run that stopped early or did
not exit 0, or a run in which no check passed on the image is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import yaml

from distval import strict_json
from distval.attestation.predicate import NOT_VALIDATING, parse_utc
from distval.errors import EXIT_MEANINGS, BadInput
from distval.escape import terminal_line
from distval.text_caps import capped

DEFAULT_MAX_AGE_DAYS = 7.0
MAX_AGE_DAYS_LIMIT = 3650
POLICY_MAX_BYTES = 2**20
# A clock that runs a little ahead of the signer's is not a forgery: a time up to this far in the future is taken.
CLOCK_SKEW = timedelta(minutes=5)
KEYS = ("max_age_days", "required_checks", "allow_skipped")
# A check's message in a refusal line, at most this long (the report and the attestation have all of it).
REASON_MAX = 160


class BadPolicy(BadInput):
    kind = "policy"


@dataclass(frozen=True)
class Policy:
    max_age_days: float = DEFAULT_MAX_AGE_DAYS
    required_checks: tuple[str, ...] = ()
    allow_skipped: tuple[str, ...] | None = None  # None: any check that is not required may be skipped


DEFAULT_POLICY = Policy()


def _names(value: object, key: str, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise BadPolicy(f"{where}: {key}: expected a list of check names; got {type(value).__name__}")
    return tuple(value)


def parse_policy(raw: bytes, where: str) -> Policy:
    """The policy in the file ``where``; BadPolicy (exit code 2, one line) when it is not one."""
    try:
        data = strict_json.yaml_safe_load(raw.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError, RecursionError) as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1})" if mark is not None else ""
        twice = getattr(exc, "problem", None)
        if isinstance(twice, str) and "appears twice" in twice:
            raise BadPolicy(f"{where}{at}: {twice}: a policy says each thing once") from None
        raise BadPolicy(f"{where}: expected a YAML or JSON mapping of {', '.join(KEYS)}; it is not YAML{at}") from None
    if not isinstance(data, dict):
        raise BadPolicy(f"{where}: expected a YAML or JSON mapping of {', '.join(KEYS)}; got {type(data).__name__}")
    unknown = sorted(str(key) for key in data if key not in KEYS)
    if unknown:
        raise BadPolicy(f"{where}: unknown key {unknown[0]!r} (expected {', '.join(KEYS)})")
    age = data.get("max_age_days", DEFAULT_MAX_AGE_DAYS)
    if isinstance(age, bool) or not isinstance(age, int | float) or not 0 < age <= MAX_AGE_DAYS_LIMIT:
        raise BadPolicy(f"{where}: max_age_days: expected a number of days > 0 and <= {MAX_AGE_DAYS_LIMIT}; got {age!r}")
    required = _names(data["required_checks"], "required_checks", where) if "required_checks" in data else ()
    allowed = _names(data["allow_skipped"], "allow_skipped", where) if "allow_skipped" in data else None
    return Policy(float(age), required, allowed)


def age_refusal(predicate: Mapping[str, Any], policy: Policy, now: datetime) -> str | None:
    """Why the attestation is too old (or dated in the future) for the policy; None when it is not."""
    made = parse_utc(predicate.get("attested_at"))
    if made is None:
        return "not verified: the attestation does not say when it was made (attested_at)"
    if made - now > CLOCK_SKEW:
        return f"not verified: the attestation is dated {predicate['attested_at']}, in the future"
    age = now - made
    if age > timedelta(days=policy.max_age_days):
        return (
            f"not verified: expired: made {predicate['attested_at']}, {age.total_seconds() / 86400:.1f} days ago; the "
            f"policy accepts at most {policy.max_age_days:g} days"
        )
    return None


def _reason(case: Mapping[str, Any]) -> str:
    return capped(terminal_line(str(case.get("message") or "")).strip(), REASON_MAX) or "no reason given"


def _mapping(value: object) -> Mapping[str, Any]:
    """A signed predicate's object (the signer's data: read defensively), or an empty one."""
    return value if isinstance(value, dict) else {}


def _image_id(predicate: Mapping[str, Any]) -> object:
    return _mapping(predicate.get("image")).get("id")


def _cases(scenarios: Sequence[Mapping[str, Any]]) -> list[tuple[str, Mapping[str, Any]]]:
    return [(str(s.get("name")), c) for s in scenarios for c in s.get("checks") or () if isinstance(c, dict)]


def verdict_refusal(predicate: Mapping[str, Any], policy: Policy) -> str | None:
    """Why the attested run does not pass the policy (the first reason, one line); None when it passes."""
    scenarios = [s for s in predicate.get("scenarios") or () if isinstance(s, dict)]
    image_id = _image_id(predicate)
    everywhere = _cases(scenarios)
    on_image = _cases([s for s in scenarios if image_id is not None and s.get("image_id") == image_id])
    for scenario, case in everywhere:
        if case.get("status") in ("failed", "error"):
            return f"refused: {scenario}: {case.get('name')} {case.get('status')}: {_reason(case)}"
    run = _mapping(predicate.get("run"))
    early = run.get("early_error")
    if early:
        return f"refused: the run stopped early ({_mapping(early).get('kind')}): {_reason(_mapping(early))}"
    code = run.get("exit_code")
    if code != 0:
        meaning = EXIT_MEANINGS.get(code, "") if isinstance(code, int) else ""
        said = f"exited {code}" + (f" ({meaning})" if meaning else "") if code is not None else "does not say its exit code"
        return f"refused: the run {said}"
    for name in policy.required_checks:
        cases = [(scenario, case) for scenario, case in on_image if case.get("name") == name]
        if not cases:
            return f"refused: the required check {name} did not run on the image (no scenario of the report ran it)"
        for scenario, case in cases:
            if case.get("status") == "skipped" and name not in (policy.allow_skipped or ()):
                return f"refused: {scenario}: the required check {name} was skipped: {_reason(case)}"
        if not any(case.get("status") == "passed" for _, case in cases):
            return f"refused: the required check {name} passed in no scenario"
    if policy.allow_skipped is not None:
        for scenario, case in everywhere:
            if case.get("status") == "skipped" and case.get("name") not in policy.allow_skipped:
                return f"refused: {scenario}: {case.get('name')} was skipped, which the policy does not allow: {_reason(case)}"
    if not any(case.get("status") == "passed" and case.get("name") not in NOT_VALIDATING for _, case in on_image):
        return "refused: nothing was validated: no check passed on the image"
    return None


def passed_count(predicate: Mapping[str, Any]) -> tuple[int, int]:
    """(checks passed on the image, checks in all), for verify's line."""
    image_id = _image_id(predicate)
    scenarios = [s for s in predicate.get("scenarios") or () if isinstance(s, dict)]
    on_image = _cases([s for s in scenarios if image_id is not None and s.get("image_id") == image_id])
    return sum(1 for _, c in on_image if c.get("status") == "passed"), len(_cases(scenarios))
