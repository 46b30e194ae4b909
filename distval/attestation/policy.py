"""What a verified attestation must say for ``distval verify`` to pass it (docs/attestation.md#the-policy), and
how old it may be. The policy file is a small YAML (or JSON) mapping:

    max_age_days: 7              # the attestation was made at most this many days ago (default 7)
    required_checks: [ddp, collectives.all_reduce]   # each passed on the image, in every scenario that ran it
    allow_skipped: [cuda_build]  # only these checks may be skipped (default: any check not required)
    required_scenarios:          # each of these scenarios ran on the image, and passed each of its checks here
      cross-container-2ranks: [all_reduce, ddp_sync]
    config_sha256: 0123...ef     # the run read exactly this config (the JSON report's config_sha256)

A required check (in required_checks or required_scenarios) passed on every rank: a case with skipped ranks
(skipped_ranks: some ranks skipped it while others passed) does not count as passed for it, whatever
allow_skipped says. A check name no case has names its cases ("collectives": "collectives.all_reduce", ...).

Without a policy file, ``default_policy()``: at most 7 days old, and every check the shipped default config
(configs/default.yaml, read with the config loader) lists is required, so that a run of one check, or of a config
that validates less than the default one, is refused.

Whatever the file says, a verdict fails closed: a check that failed or errored, a run that stopped early or did
not exit 0, or a run in which no check passed on the image is refused.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import yaml

from distval import strict_json
from distval.attestation.predicate import NOT_VALIDATING, parse_utc
from distval.config import load_config
from distval.config.shipped import DEFAULT_CONFIG
from distval.errors import EXIT_MEANINGS, BadInput
from distval.escape import terminal_line
from distval.text_caps import capped

DEFAULT_MAX_AGE_DAYS = 7.0
MAX_AGE_DAYS_LIMIT = 3650
POLICY_MAX_BYTES = 2**20
# A clock that runs a little ahead of the signer's is not a forgery: a time up to this far in the future is taken.
CLOCK_SKEW = timedelta(minutes=5)
KEYS = ("max_age_days", "required_checks", "allow_skipped", "required_scenarios", "config_sha256")
_SHA256 = re.compile(r"[0-9a-f]{64}")
# A check's message in a refusal line, at most this long (the report and the attestation have all of it).
REASON_MAX = 160


class BadPolicy(BadInput):
    kind = "policy"


@dataclass(frozen=True)
class Policy:
    max_age_days: float = DEFAULT_MAX_AGE_DAYS
    required_checks: tuple[str, ...] = ()
    allow_skipped: tuple[str, ...] | None = None  # None: any check that is not required may be skipped
    required_scenarios: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (scenario, its required checks)
    config_sha256: str | None = None  # None: any config


# An empty policy file's policy: only the rules that hold whatever the file says (and the age).
DEFAULT_POLICY = Policy()


@functools.cache
def default_policy() -> Policy:
    """The policy without a policy file: DEFAULT_POLICY, and every check of the shipped default config required
    (derived from configs/default.yaml through the loader: the config may change, the rule follows it)."""
    config = load_config(DEFAULT_CONFIG)
    names = tuple(dict.fromkeys(check.name for scenario in config.scenarios for check in scenario.checks))
    return dataclasses.replace(DEFAULT_POLICY, required_checks=names)


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
    scenarios = data.get("required_scenarios", {})
    if not isinstance(scenarios, dict) or not all(isinstance(name, str) and name for name in scenarios):
        raise BadPolicy(f"{where}: required_scenarios: expected a mapping of scenario names to lists of check names")
    per_scenario = tuple((name, _names(checks, f"required_scenarios.{name}", where)) for name, checks in scenarios.items())
    config = data.get("config_sha256")
    if config is not None and not (isinstance(config, str) and _SHA256.fullmatch(config)):
        raise BadPolicy(f"{where}: config_sha256: expected 64 lowercase hex digits (the JSON report's config_sha256)")
    return Policy(float(age), required, allowed, per_scenario, config)


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


def _of(check: str, cases: list[tuple[str, Mapping[str, Any]]]) -> list[tuple[str, Mapping[str, Any]]]:
    """The cases named ``check``; where none is, its cases ("collectives.all_reduce" of collectives): a config's
    check name (the default policy's) names the cases its check reports."""
    exact = [(scenario, case) for scenario, case in cases if case.get("name") == check]
    return exact or [(scenario, case) for scenario, case in cases if str(case.get("name")).startswith(check + ".")]


def _partly_skipped(case: Mapping[str, Any]) -> bool:
    ranks = case.get("skipped_ranks")
    return isinstance(ranks, list) and bool(ranks)


def _required_refusal(name: str, cases: list[tuple[str, Mapping[str, Any]]], policy: Policy, where: str) -> str | None:
    """Why the required check ``name`` (its ``cases`` on the image) does not pass; None when it does."""
    if not cases:
        return f"refused: the required check {name} did not run on the image ({where} ran it)"
    for scenario, case in cases:
        if case.get("status") == "skipped" and name not in (policy.allow_skipped or ()):
            return f"refused: {scenario}: the required check {name} was skipped: {_reason(case)}"
        if _partly_skipped(case):
            ranks = ", ".join(str(rank) for rank in case["skipped_ranks"][:10])
            return f"refused: {scenario}: the required check {case.get('name')} was skipped on rank(s) {ranks}"
    if not any(case.get("status") == "passed" for _, case in cases):
        return f"refused: the required check {name} passed in no scenario"
    return None


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
    if policy.config_sha256 is not None and run.get("config_sha256") != policy.config_sha256:
        found = run.get("config_sha256")
        said = f"config_sha256 {capped(terminal_line(str(found)), 80)}" if found else "no config_sha256"
        return f"refused: the run read another config ({said}); the policy pins config_sha256 {policy.config_sha256}"
    for name in policy.required_checks:
        problem = _required_refusal(name, _of(name, on_image), policy, "no scenario of the report")
        if problem is not None:
            return problem
    for scenario_name, checks in policy.required_scenarios:
        ran = [s for s, _ in on_image if s == scenario_name]
        if not ran:
            return f"refused: the required scenario {scenario_name} did not run on the image"
        for name in checks:
            cases = _of(name, [(s, c) for s, c in on_image if s == scenario_name])
            problem = _required_refusal(name, cases, policy, f"scenario {scenario_name} never")
            if problem is None and not all(case.get("status") == "passed" for _, case in cases):
                problem = f"refused: {scenario_name}: the required check {name} did not pass there"
            if problem is not None:
                return problem
    if policy.allow_skipped is not None:
        for scenario, case in everywhere:
            skipped = case.get("status") == "skipped" or _partly_skipped(case)
            if skipped and case.get("name") not in policy.allow_skipped:
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
