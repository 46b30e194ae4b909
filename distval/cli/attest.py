"""``distval attest`` and ``distval verify`` (docs/attestation.md): the command lines, the files they read and
write, the Engine they ask for the image's digests. What is signed and checked is distval/attestation/."""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import secrets
import sys
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any

from distval.attestation import dsse, keys
from distval.attestation.policy import (
    POLICY_MAX_BYTES,
    BadPolicy,
    Policy,
    age_refusal,
    default_policy,
    parse_policy,
    passed_count,
    verdict_refusal,
)
from distval.attestation.predicate import parse_utc, predicate, report_image_id
from distval.attestation.published import PublishedImage, manifest_to_verify, platform_image, store, stored_layers
from distval.attestation.statement import Statement, image_id_subjects, parse_statement, statement_bytes, subject_mismatch
from distval.bounded_read import FileRefused, read_regular_file
from distval.cli import values as cli_values
from distval.comparing.reading import parse_report, read_report_bytes
from distval.engine_protocol import EngineAPI, ImageInfo
from distval.errors import (
    EXIT_BAD_INPUT,
    EXIT_CHECKS_FAILED,
    EXIT_ENVIRONMENT,
    EXIT_INTERNAL,
    EXIT_MEANINGS,
    EXIT_NOT_VERIFIED,
    EXIT_PASSED,
    BadInput,
    ExitCodes,
    ImageMissing,
    NotVerified,
)
from distval.escape import terminal_line
from distval.registry.client import ManifestUnknown, RegistryAPI
from distval.registry.reference import Reference, parse_reference
from distval.reports.files import NotARegularFile, UnsafePath, create_new, write_atomically

# How attest and verify reach the Engine that holds the image (distval/cli/main.py gives its own, the tests a fake).
EngineFor = Callable[[str], EngineAPI]
# How they reach a registry's HTTP API, by host[:port] (main.py gives distval.registry.client.Registry).
RegistryFor = Callable[[str], RegistryAPI]
# The JUnit file is hashed, never parsed: at most as large as a report.
JUNIT_MAX_BYTES = 256 * 2**20

ATTEST_EXIT_CODES = ExitCodes(
    (EXIT_PASSED, EXIT_BAD_INPUT, EXIT_ENVIRONMENT, EXIT_INTERNAL),
    {EXIT_PASSED: "success: the attestation (or the key pair) was written"},
)
VERIFY_EXIT_CODES = ExitCodes(
    (EXIT_PASSED, EXIT_CHECKS_FAILED, EXIT_BAD_INPUT, EXIT_ENVIRONMENT, EXIT_INTERNAL, EXIT_NOT_VERIFIED),
    {
        EXIT_PASSED: "verified: signed with the key, of this image (its platform's manifest), recent enough, and its "
        "verdict passes the policy",
        EXIT_CHECKS_FAILED: "refused: the attestation is genuine, but its verdict does not pass the policy (a check "
        "failed, errored or was skipped where required, or nothing passed)",
        EXIT_NOT_VERIFIED: f"{EXIT_MEANINGS[EXIT_NOT_VERIFIED]}: unsigned, another key, another image's digest, expired, "
        "a multi-platform index or another platform's manifest, no attestation stored in the registry, or not distval's "
        "statement",
    },
)


def now() -> datetime:
    """The clock of attest and verify (a test sets its own)."""
    return datetime.now(timezone.utc)


def add_attest_commands(commands: Any, engine_for: EngineFor, registry_for: RegistryFor) -> None:
    attest = commands.add_parser(
        "attest",
        help="sign a JSON report's verdict on an image as an in-toto attestation (DSSE), for distval verify or cosign",
        description="Write an in-toto Statement v1 in a DSSE envelope, signed with an ECDSA P-256 key: its subject is the "
        "image's manifest in its registry, the exact platform's (with --registry or --push), or else the image id the "
        "Engine reports; its predicate every check's verdict and reason, the torch/CUDA/NCCL identity, the report's and "
        "JUnit file's digests, the Engine and host (docs/attestation.md). "
        f"An encrypted private key's passphrase comes from ${keys.PASSPHRASE_ENV}.",
    )
    attest.add_argument("report", nargs="?", type=cli_values.file_path("a distval JSON report"), help="the run's JSON report")
    attest.add_argument(
        "--image",
        type=cli_values.image_reference,
        help="the image the report validated: as the Engine names it, or with --registry/--push as pushed "
        "(REGISTRY/REPO:TAG or REGISTRY/REPO@sha256:...)",
    )
    attest.add_argument(
        "--key",
        required=True,
        metavar="KEY",
        type=cli_values.file_path("the private key"),
        help="the private key (PKCS#8 PEM, ECDSA P-256); with --generate-key, where to write a new one",
    )
    attest.add_argument(
        "-o", "--output", metavar="FILE", type=cli_values.file_path("the attestation file"), help="write the envelope here"
    )
    attest.add_argument(
        "--junit",
        metavar="PATH",
        type=cli_values.file_path("the run's JUnit XML file"),
        help="the run's JUnit file, whose digest the predicate carries",
    )
    attest.add_argument(
        "--registry",
        action="store_true",
        help="the image as published: its subject is the manifest of --image in its registry (asked over HTTP, no "
        "Engine) whose configuration is the report's image, that platform's manifest where --image is a "
        "multi-platform index",
    )
    attest.add_argument(
        "--push",
        action="store_true",
        help="--registry, and store the attestation beside the image in the registry as cosign does (tag sha256-<digest>.att)",
    )
    attest.add_argument(
        "--generate-key",
        action="store_true",
        help=f"write a new key pair instead: KEY (mode 0600; encrypted when ${keys.PASSPHRASE_ENV} is set) and its public "
        "key beside it (KEY's name with .pub for .key); existing files are never overwritten",
    )
    attest.set_defaults(handler=functools.partial(command_attest, engine_for=engine_for, registry_for=registry_for))

    verify = commands.add_parser(
        "verify",
        help="verify an attestation of distval attest: signature, the image's digest, its age and a policy",
        description="Check that a signature of the envelope holds under the public key, that one of its subjects is the "
        "image's digest (with --registry: its manifest in the registry; given as IMAGE@sha256:...: that digest, "
        "without an Engine; else the image id the Engine reports), that it is recent enough and that its verdict "
        "passes the policy (default: nothing failed, every check of the shipped default config passed, at most 7 "
        "days old; docs/attestation.md#the-policy). One line says why not.",
    )
    verify.add_argument(
        "attestation",
        nargs="?",
        type=cli_values.file_path("an attestation (DSSE envelope)"),
        help="the file distval attest wrote (with --registry it may be left out: the attestations stored beside the "
        "image are read)",
    )
    verify.add_argument("--image", required=True, type=cli_values.image_reference, help="the image to verify it for")
    verify.add_argument(
        "--registry",
        action="store_true",
        help="ask --image's registry (over HTTP, no Engine) for the image's manifest digest and, without a file, for the "
        "attestations stored beside it",
    )
    verify.add_argument(
        "--key",
        required=True,
        metavar="PUB",
        type=cli_values.file_path("the public key"),
        help="the public key (PEM, as cosign.pub)",
    )
    verify.add_argument(
        "--policy",
        metavar="POLICY",
        type=cli_values.file_path("a policy file"),
        help="a YAML or JSON policy (default: see above)",
    )
    verify.add_argument(
        "--report",
        metavar="REPORT",
        type=cli_values.file_path("a distval JSON report"),
        help="also check that this JSON report is the one attested (its sha256 is the predicate's): a report handed on "
        "with the attestation cannot be changed unseen",
    )
    verify.set_defaults(handler=functools.partial(command_verify, engine_for=engine_for, registry_for=registry_for))


def _read(path: str, limit: int, what: str) -> bytes:
    try:
        return read_regular_file(path, limit)
    except FileRefused as exc:
        raise BadInput(f"cannot read {what} {path}: {exc}") from None


def _image(engine_for: EngineFor, reference: str) -> ImageInfo:
    info = engine_for(f"attest-{secrets.token_hex(4)}").image(reference)
    if info is None:
        raise ImageMissing(f"image {reference} is not in the Engine (never pulled: pull or build it first)")
    return info


def _write(path: str, text: str, what: str, new_mode: int = 0o666) -> None:
    try:
        write_atomically(path, text, new_mode)
    except (NotARegularFile, UnsafePath) as exc:
        raise BadInput(f"cannot write {what} {path}: {exc}") from None
    except OSError as exc:
        raise BadInput(f"cannot write {what} {path}: {exc.strerror or exc}") from None


def _create(path: str, text: str, what: str, mode: int) -> None:
    try:
        create_new(path, text, mode)
    except FileExistsError:
        raise BadInput(
            f"attest --generate-key: {path} appeared while the key pair was made; a key is never overwritten "
            "(check who put it there, remove it, or name another)"
        ) from None
    except UnsafePath as exc:
        raise BadInput(f"cannot write {what} {path}: {exc}") from None
    except OSError as exc:
        raise BadInput(f"cannot write {what} {path}: {exc.strerror or exc}") from None


def public_key_path(private: str) -> str:
    """Where --generate-key writes the public key: KEY with .pub for .key (cosign.key -> cosign.pub), else KEY.pub."""
    return private.removesuffix(".key") + ".pub"


def _passphrase() -> bytes | None:
    value = os.environ.get(keys.PASSPHRASE_ENV)
    return value.encode("utf-8") if value else None


def generate_key(path: str) -> int:
    public = public_key_path(path)
    for target in (path, public):
        if os.path.lexists(target):
            raise BadInput(f"attest --generate-key: {target} exists; a key is never overwritten (remove it, or name another)")
    private_pem, public_pem = keys.generate_key_pair(_passphrase())
    # Each file is made whole under a private temporary name and linked to its name, which fails when anything is
    # there: a file (or a link) another user put at either name after the check above is never written over, nor
    # taken for the key pair's public key; the private key made a moment before is then removed again.
    _create(path, private_pem, "the private key", 0o600)
    try:
        _create(public, public_pem, "the public key", 0o644)
    except BadInput:
        os.unlink(path)
        raise
    encrypted = f"encrypted with ${keys.PASSPHRASE_ENV}" if _passphrase() else f"not encrypted (${keys.PASSPHRASE_ENV} unset)"
    print(f"wrote {path} (private, {encrypted}) and {public} (public: give it to distval verify --key or cosign)")
    return EXIT_PASSED


def _published(registry_for: RegistryFor, reference: Reference, image_id: str) -> PublishedImage:
    try:
        return platform_image(registry_for(reference.api_host), reference, image_id)
    except ManifestUnknown:
        raise ImageMissing(
            f"the registry {reference.registry} has no {reference.name}:{reference.manifest_reference} (push it first)"
        ) from None


def command_attest(args: argparse.Namespace, engine_for: EngineFor, registry_for: RegistryFor) -> int:
    if args.generate_key:
        if args.report or args.image or args.output or args.junit or args.registry or args.push:
            raise BadInput("attest --generate-key writes a key pair only: give it --key alone")
        return generate_key(args.key)
    missing = [what for what, given in (("REPORT", args.report), ("--image", args.image)) if not given]
    if not (args.output or args.push):
        missing.append("-o/--output (or --push)")
    if missing:
        raise BadInput(f"attest needs {', '.join(missing)}: distval attest REPORT.json --image IMAGE --key KEY -o FILE")
    key = keys.private_key_from_pem(_read(args.key, keys.KEY_MAX_BYTES, "the private key"), args.key, _passphrase())
    raw = read_report_bytes(args.report)
    report = parse_report(raw, args.report)
    junit = hashlib.sha256(_read(args.junit, JUNIT_MAX_BYTES, "the JUnit file")).hexdigest() if args.junit else None
    published: PublishedImage | None = None
    if args.registry or args.push:
        reference = parse_reference(args.image)
        image_id = report_image_id(report, args.report)
        published = _published(registry_for, reference, image_id)
        info = ImageInfo(image_id, (), {}, (reference.with_digest(published.manifest.digest),))
        subjects = published.subjects()
        fields = {
            "repository": reference.name,
            "manifest_digest": published.manifest.digest,
            "media_type": published.manifest.media_type,
            "platform": published.platform,
            "index_digest": published.index_digest,
        }
        body = predicate(report, args.report, hashlib.sha256(raw).hexdigest(), args.image, info, junit, now(), fields)
        described = published.described()
    else:
        info = _image(engine_for, args.image)
        subjects = image_id_subjects(args.image, info)
        if not subjects:
            raise BadInput(f"the Engine names {args.image} {info.id!r}, which is no sha256 digest: nothing to attest")
        body = predicate(report, args.report, hashlib.sha256(raw).hexdigest(), args.image, info, junit, now())
        described = f"{args.image} ({info.id[:19]})"
    envelope = dsse.envelope_json(dsse.signed(dsse.PAYLOAD_TYPE, statement_bytes(subjects, body), key))
    if args.output:
        _write(args.output, envelope, "the attestation")
    passed, total = passed_count(body)
    code = body["run"]["exit_code"]
    where = [args.output] if args.output else []
    if args.push and published is not None:
        tag = store(registry_for(published.reference.api_host), published.reference, published.manifest.digest, envelope.encode())
        where.append(f"{published.reference.name}:{tag}")
    print(f"wrote {' and '.join(where)}: {described}, {passed} of {total} check results passed; run exit code {code}")
    return EXIT_PASSED


def _policy(path: str | None) -> Policy:
    if path is None:
        return default_policy()
    try:
        return parse_policy(read_regular_file(path, POLICY_MAX_BYTES), path)
    except FileRefused as exc:
        raise BadPolicy(f"cannot read the policy {path}: {exc}") from None


def _report_sha256(path: str) -> str:
    """The digest of the JSON report at ``path`` (read as one: anything else is bad input)."""
    raw = read_report_bytes(path)
    parse_report(raw, path)
    return hashlib.sha256(raw).hexdigest()


def report_mismatch(predicate: Mapping[str, Any], path: str | None, sha256: str | None) -> str | None:
    """Why the report at ``path`` (its digest ``sha256``) is not the attested one; None when it is, or not given."""
    if path is None:
        return None
    attested = predicate.get("report")
    if isinstance(attested, dict) and attested.get("sha256") == sha256:
        return None
    return f"not verified: {path} is not the report attested (its sha256 differs: changed since, or another run's)"


def _genuine(raw: bytes, where: str, public: Any, key_path: str, digest: str, described: str) -> Statement:
    """The statement of the envelope ``raw`` when a signature of it holds under the key and one of its subjects is
    ``digest``; NotVerified with the first reason otherwise (BadEnvelope when it is no envelope)."""
    envelope = dsse.parse_envelope(raw, where)
    if envelope.payload_type != dsse.PAYLOAD_TYPE:
        raise NotVerified(f"not verified: the envelope's payloadType is {envelope.payload_type!r}, not {dsse.PAYLOAD_TYPE}")
    statement = parse_statement(dsse.verify_payload(envelope, public, key_path))
    refusal = subject_mismatch(statement, digest, described)
    if refusal is not None:
        raise NotVerified(refusal)
    return statement


def _stored_statement(
    api: RegistryAPI, reference: Reference, public: Any, key_path: str, digest: str, described: str
) -> Statement:
    """The newest genuine statement among the attestations stored beside the manifest ``digest`` (by attested_at:
    the latest evidence decides, an older pass does not outvote a newer failure); NotVerified when none is."""
    layers = stored_layers(api, reference, digest)
    if not layers:
        raise NotVerified(f"not verified: no attestation is stored in the registry for {described}")
    found: list[Statement] = []
    refusal: NotVerified | None = None
    for layer in layers:
        if layer.size > dsse.ENVELOPE_MAX_BYTES:
            continue
        raw = api.blob(reference.repository, layer.digest, dsse.ENVELOPE_MAX_BYTES)
        try:
            found.append(_genuine(raw, f"{reference.name}@{layer.digest}", public, key_path, digest, described))
        except (NotVerified, BadInput) as exc:
            refusal = exc if isinstance(exc, NotVerified) else NotVerified(f"not verified: {exc}")
    if not found:
        assert refusal is not None
        raise NotVerified(f"{refusal} (each of the {len(layers)} attestation(s) stored for it)")
    # On a tie (two made within a second), the one stored later: never the older verdict by accident.
    newest = max(range(len(found)), key=lambda i: (str(parse_utc(found[i].predicate.get("attested_at")) or ""), i))
    return found[newest]


def command_verify(args: argparse.Namespace, engine_for: EngineFor, registry_for: RegistryFor) -> int:
    # Every input is read before anything is judged: a bad file is exit code 2 whatever the attestation says.
    policy = _policy(args.policy)
    public = keys.public_key_from_pem(_read(args.key, keys.KEY_MAX_BYTES, "the public key"), args.key)
    report = _report_sha256(args.report) if args.report else None
    raw = _read(args.attestation, dsse.ENVELOPE_MAX_BYTES, "the attestation") if args.attestation else None
    if raw is not None:
        dsse.parse_envelope(raw, args.attestation)
    elif not args.registry:
        raise BadInput("verify needs the attestation file, or --registry to read the attestations stored beside the image")
    reference = parse_reference(args.image)
    if args.registry:
        api = registry_for(reference.api_host)
        try:
            digest = manifest_to_verify(api, reference).digest
        except ManifestUnknown:
            raise ImageMissing(f"the registry {reference.registry} has no {args.image}") from None
        described = reference.with_digest(digest)
        if raw is None:
            statement = _stored_statement(api, reference, public, args.key, digest, described)
        else:
            statement = _genuine(raw, args.attestation, public, args.key, digest, described)
    elif reference.digest is not None:
        # The digest given is the image: no Engine, no registry.
        digest, described = reference.digest, args.image
        assert raw is not None
        statement = _genuine(raw, args.attestation, public, args.key, digest, described)
    else:
        info = _image(engine_for, args.image)
        digest, described = info.id, f"{args.image} ({info.id[:19]})"
        assert raw is not None
        statement = _genuine(raw, args.attestation, public, args.key, digest, described)
    for refusal in (
        report_mismatch(statement.predicate, args.report, report),
        age_refusal(statement.predicate, policy, now()),
    ):
        if refusal is not None:
            raise NotVerified(refusal)
    refusal = verdict_refusal(statement.predicate, policy)
    if refusal is not None:
        print(f"distval: {terminal_line(refusal)}", file=sys.stderr)
        return EXIT_CHECKS_FAILED
    passed, total = passed_count(statement.predicate)
    made = terminal_line(str(statement.predicate.get("attested_at")))
    shown = described if args.registry or reference.digest else f"{args.image} ({digest[:19]})"
    print(f"verified: {shown}: {passed} of {total} check results passed; attested {made}")
    return EXIT_PASSED
