"""distval.targets.kubernetes.collect: pod logs -> the verdicts of a Docker run, on logs recorded from real runs.

tests/data/kube/<image>/ holds, per exported scenario of configs/default.yaml, each pod's log, what the
Docker path read from the same containers (``<job>.outcome.json``: exit codes and result files), the plan file
(``<job>.plan.json``) and the manifests' metadata with its SHA-256 (``<job>.yaml``; these two were made from the
origin the pods' first lines carried when they were recorded, before the export wrote plan files). They were
recorded by running the exported pods in the Engine (tests/kube_pods.py):

    python -m tests.kube_pods distval-fixtures/torch:2.6-debian tests/data/kube/torch-2.6
    python -m tests.kube_pods distval-fixtures/broken:ddp-no-broadcast-rank1 \
        tests/data/kube/ddp-no-broadcast-rank1 cross-container-2ranks

The broken image's pods were killed at the scenario's 240 s deadline after writing their last record (load
average 30 on 2 cores): the Docker path's exit_status is an error there, which collect from files cannot
see (it skips exit_status), so exit_status is left out of the comparison. tests/targets/kubernetes/test_kube_docker.py records
afresh and compares live.
"""

from __future__ import annotations

import dataclasses
import hashlib
import http.server
import io
import json
import os
import re
import sys
import threading
import time
import tracemalloc
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import distval.cli.main
import distval.targets.kubernetes.collect
from distval.bounded_read import CONTAINER_LOG_MAX_BYTES
from distval.errors import EnvironmentUnusable
from distval.results.outcome import ERROR, EXIT_STATUS_CASE, FAILED, PASSED, SKIPPED, ContainerOutcome, ScenarioOutcome
from distval.results.scenario import RunSummary, ScenarioResult, summarize_scenario
from distval.targets.kubernetes.collect import (
    LOG_LINES_MAX,
    CollectError,
    KubernetesPods,
    PodLog,
    read_api,
    read_files,
    read_log,
    read_plans,
    summarize_sources,
)
from distval.targets.plan_file import NO_PLAN_FILE, PLAN_SHA256_KEY, ExportedPlan, PlanFileError
from distval_suite.records import STDOUT_MARKER, STDOUT_PIECE_CHARS, RecordWriter
from tests.docker_helpers import cases, outcome, validate
from tests.paths import DATA

KUBE_DATA = DATA / "kube"
GOOD = KUBE_DATA / "torch-2.6"
BROKEN = KUBE_DATA / "ddp-no-broadcast-rank1"
CROSS = "dv-kube-rec-cross-container-2ranks"
# What the export puts in a spec's stdout_records (the cross-container scenario's, as the recorded logs hold it).
ORIGIN = json.loads((GOOD / f"{CROSS}-0.log").read_text().splitlines()[0].split(" ", 5)[5])["start"]["origin"]


def logs(directory: Path, job: str | None = None) -> list[Path]:
    return sorted(p for p in directory.glob("*.log") if job is None or p.name.startswith(f"{job}-"))


def docker_results(directory: Path) -> dict[str, ScenarioResult]:
    """What ``distval run`` made of the same containers: their result files through summarize_scenario."""
    results = {}
    for path in sorted(directory.glob("*.outcome.json")):
        job = path.name.removesuffix(".outcome.json")
        plan = collect(logs(directory, job)).scenarios[0].plan
        containers = tuple(
            ContainerOutcome(
                name=c["name"],
                node_rank=c["node_rank"],
                ranks=tuple(c["ranks"]),
                exit_code=c["exit_code"],
                killed_at_deadline=c["killed_at_deadline"],
                stdout="",
                stderr="",
                result_files={k: v.encode() for k, v in c["result_files"].items()},
            )
            for c in json.loads(path.read_text())["containers"]
        )
        results[plan.scenario.name] = summarize_scenario(ScenarioOutcome(plan, None, 0.0, containers))
    return results


def verdicts(result: ScenarioResult) -> list[tuple[str, str, str]]:
    return [(c.name, c.status, c.message) for c in result.cases if c.name != EXIT_STATUS_CASE]


def plans_of(paths: list[Path] | list[str]) -> list[ExportedPlan]:
    """The recorded plans of the jobs the logs are named after (all of their directory's for a file named after none):
    a test that passes one job's logs judges that job."""
    directory = BROKEN if any(str(p).startswith(str(BROKEN)) for p in paths) else GOOD
    plans = read_plans(directory)
    named = [p for p in plans if any(Path(path).name.startswith(f"{p.origin.job}-") for path in paths)]
    return named or plans


def collect(paths: list[Path] | list[str], **kwargs: Any) -> RunSummary:
    return summarize_sources(read_files(map(str, paths)), plans_of(paths), **kwargs)


def plan_of(directory: Path, job: str = CROSS) -> ExportedPlan:
    (found,) = [p for p in read_plans(directory) if p.origin.job == job]
    return found


def by_name(summary: RunSummary) -> dict[str, ScenarioResult]:
    return {s.plan.scenario.name: s for s in summary.scenarios}


def case(result: ScenarioResult, name: str) -> tuple[str, str]:
    found = next(c for c in result.cases if c.name == name)
    return found.status, found.message


@pytest.mark.parametrize("directory", (GOOD, BROKEN), ids=lambda p: p.name)
def test_recorded_pod_logs_give_the_verdicts_of_the_docker_path(directory: Path) -> None:
    """Every testcase, status and message from the logs equals what the result files gave; the plan (and so
    the scenario hash) is the Docker run's."""
    docker = docker_results(directory)
    collected = by_name(collect(logs(directory)))
    assert set(collected) == set(docker) and docker
    for name, result in collected.items():
        assert verdicts(result) == verdicts(docker[name])
        assert dict(result.properties)["scenario_hash"] == dict(docker[name].properties)["scenario_hash"]
        assert dict(result.properties)["torch_version"] == "2.6.0+debian"
        assert case(result, EXIT_STATUS_CASE)[0] == SKIPPED
        assert "not checked: a pod's exit code is not in its log" in case(result, EXIT_STATUS_CASE)[1]


def test_a_collected_scenario_starts_when_its_first_rank_did(tmp_path: Path) -> None:
    """No target saw the pods start: the earliest rank process's start, as its records say, dates the scenario,
    so that the history orders collected runs by time whatever order they are given in. (The recorded logs predate
    the records' started_at: rank 1's records get one here.)"""
    assert collect(logs(GOOD, CROSS)).scenarios[0].started_at is None  # nothing says when: none is made up
    paths = _edited(tmp_path, lambda text: text.replace('"status": "passed"', '"started_at": 1765000000.25, "status": "passed"'))
    assert collect(paths).scenarios[0].started_at == 1765000000.25


def test_the_good_image_passes_and_the_broken_one_fails_on_rank_1() -> None:
    good = collect(logs(GOOD))
    assert good.exit_code == 0 and {s.status for s in good.scenarios} == {PASSED}
    assert len(good.scenarios) == 2
    broken = collect(logs(BROKEN))
    assert broken.exit_code == 1
    status, message = case(broken.scenarios[0], "ddp_sync")
    assert status == FAILED and "rank(s) [1] differ from rank 0" in message
    assert [c.name for c in broken.scenarios[0].cases if c.status not in (PASSED, SKIPPED)] == ["ddp_sync"]


def _prefixed(path: Path, prefix: bool, timestamps: bool) -> str:
    pod = path.name.removesuffix(".log")
    lines = []
    for number, line in enumerate(path.read_text().splitlines()):
        stamp = f"2026-12-01T18:{number // 60 % 60:02d}:{number % 60:02d}.{number:09d}Z " if timestamps else ""
        lines.append((f"[pod/{pod}-x7k2q/suite] " if prefix else "") + stamp + line)
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("prefix", "timestamps"), ((True, False), (False, True), (True, True)))
def test_kubectl_prefix_and_timestamps(tmp_path: Path, prefix: bool, timestamps: bool) -> None:
    """kubectl logs --prefix and/or --timestamps, one file per pod or (with --prefix) all pods in one file."""
    expected = {n: verdicts(r) for n, r in by_name(collect(logs(GOOD))).items()}
    separate = []
    for path in logs(GOOD):
        target = tmp_path / path.name
        target.write_text(_prefixed(path, prefix, timestamps))
        separate.append(target)
    assert {n: verdicts(r) for n, r in by_name(collect(separate)).items()} == expected
    if prefix:
        one = tmp_path / "all.log"
        one.write_text("".join(_prefixed(p, prefix, timestamps) for p in logs(GOOD)))
        collected = by_name(collect([one]))
        assert {n: verdicts(r) for n, r in collected.items()} == expected
        # The pods are named as --prefix names them.
        assert f"===== {CROSS}-1-x7k2q (node 1, ranks 1) stdout =====" in collected["cross-container-2ranks"].logs


def test_one_job_concatenated_without_prefix(tmp_path: Path) -> None:
    """Records carry their rank and each rank's first line its node: one job's pods need no prefix."""
    one = tmp_path / "cross.log"
    one.write_text("".join(p.read_text() for p in logs(GOOD, CROSS)))
    result = collect([one]).scenarios[0]
    assert verdicts(result) == verdicts(by_name(collect(logs(GOOD)))["cross-container-2ranks"])


def test_several_jobs_in_one_file_without_prefix_is_an_error(tmp_path: Path) -> None:
    """Two jobs' ranks share numbers: without --prefix their records collide, and that is an error, never a pass."""
    one = tmp_path / "all.log"
    one.write_text("".join(p.read_text() for p in logs(GOOD)))
    summary = collect([one])
    assert summary.exit_code == 1
    status, message = case(summary.scenarios[0], "results")
    assert status == ERROR
    assert re.match(
        r"^.*all\.log:\d+: rank 0's record 0 part 1 differs from the one at line 1 \(two pods' logs in one file", message
    )


def _truncated(tmp_path: Path, after_case: str) -> Path:
    """Node 1's log cut just after rank 1's record of ``after_case``, as a killed pod or a lost log tail leaves it."""
    source = GOOD / f"{CROSS}-1.log"
    kept = []
    for line in source.read_text().splitlines():
        kept.append(line)
        if line.startswith(STDOUT_MARKER) and f'"case": "{after_case}"' in line:
            break
    target = tmp_path / source.name
    target.write_text("\n".join(kept) + "\n")
    return target


def test_a_truncated_log_is_an_error_naming_the_rank_never_a_pass(tmp_path: Path) -> None:
    cut = _truncated(tmp_path, "ddp_sync")
    summary = collect([GOOD / f"{CROSS}-0.log", cut])
    result = summary.scenarios[0]
    assert summary.exit_code == 1 and result.status == ERROR
    for name in ("ddp_sampler", "store", "timeout", "reconfigure"):
        status, message = case(result, name)
        assert status == ERROR, name
        assert message.startswith(
            f"no result from rank(s) 1: the log of {CROSS} node 1 ({cut}) ends before rank(s) 1 reported every check"
        )
    assert case(result, "all_reduce")[0] == PASSED  # reported by both ranks before the cut
    status, message = case(result, EXIT_STATUS_CASE)
    assert status == ERROR and message.startswith("expected every pod's log to hold its ranks' records; the log of")


def test_a_missing_pod_log_is_an_error_naming_the_rank(tmp_path: Path) -> None:
    result = collect([GOOD / f"{CROSS}-0.log"]).scenarios[0]
    assert result.status == ERROR
    status, message = case(result, "all_reduce")
    assert status == ERROR
    assert message == "no result from rank(s) 1: no log of node 1's pod was given (expected rank(s) 1)"
    # Rank 1 reported nothing: no testcase passed, not even env.
    assert {c.status for c in result.cases} == {ERROR}


def _edited(tmp_path: Path, edit: Any) -> list[Path]:
    paths = []
    for path in logs(GOOD, CROSS):
        target = tmp_path / path.name
        text = path.read_text()
        target.write_text(edit(text) if path.name.endswith("-1.log") else text)
        paths.append(target)
    return paths


def _line_of(path: Path, needle: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), start=1) if needle in line)


def test_a_garbled_record_line_is_an_error_with_file_and_line(tmp_path: Path) -> None:
    paths = _edited(tmp_path, lambda text: re.sub(r"(@distval-record v1) r=1 (n=4 )", r"\1 r=one \2", text))
    line = _line_of(paths[1], "r=one")
    result = collect(paths).scenarios[0]
    status, message = case(result, "results")
    assert status == ERROR
    assert message == (
        f"{paths[1]}:{line}: garbled record line: expected '@distval-record v1 r=<rank> n=<number> p=<part>/<parts> "
        f"<JSON piece>'; got {paths[1].read_text().splitlines()[line - 1][:120]!r}"
        f"; {paths[1]}: rank 1's record(s) 4 are missing between the ones present"
    )
    lost = json.loads(paths[1].read_text().splitlines()[line - 1].split(" ", 5)[5])["case"]
    assert case(result, lost)[0] == ERROR
    assert result.status == ERROR and collect(paths).exit_code == 1


def test_a_corrupt_record_is_an_error(tmp_path: Path) -> None:
    paths = _edited(tmp_path, lambda text: text.replace('"status": "passed"', '"status": "passed', 1))
    message = case(collect(paths).scenarios[0], "results")[1]
    assert re.search(r"-1\.log:\d+: rank 1's record \d+ is not a distval record \(", message), message


def test_a_record_missing_a_part_is_an_error(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = _records_of(tmp_path, capfd, monkeypatch, details={"traceback": "x" * (2 * STDOUT_PIECE_CHARS)})
    lines = text.splitlines()
    assert [line.split(" ")[4] for line in lines if " n=1 " in line] == ["p=1/3", "p=2/3", "p=3/3"]
    broken = "\n".join(line for line in lines if " n=1 p=2/3 " not in line)
    (source,) = read_log("pod.log", broken)
    assert source.garbled == [f"pod.log:{2}: rank 3's record 1 lacks part(s) 2 of 3"]


def _records_of(
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    details: dict[str, Any],
    local_rank: str = "0",
) -> str:
    monkeypatch.setenv("LOCAL_RANK", local_rank)
    monkeypatch.setenv("DISTVAL_NODE_RANK", "1")
    capfd.readouterr()
    writer = RecordWriter(str(tmp_path / "results"), 3, ORIGIN)
    writer.write("env", "env", "passed", "fine", 0.5, details)
    return capfd.readouterr().out


def test_suite_records_on_stdout_round_trip(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record longer than one pipe write is cut into pieces of at most PIPE_BUF bytes (atomic on a pipe, so
    ranks sharing torchrun's stdout never interleave inside one) and read back whole; the file is unchanged."""
    big = {"traceback": "é" + "y" * (3 * STDOUT_PIECE_CHARS)}
    text = _records_of(tmp_path, capfd, monkeypatch, big)
    record_lines = [line for line in text.splitlines() if line.startswith(STDOUT_MARKER)]
    assert all(len(line.encode()) + 1 <= 4096 for line in record_lines)
    assert len(record_lines) == 1 + 4
    (source,) = read_log("pod.log", text)
    assert source.garbled == []
    # What collect keeps of a start line: its rank, its node and the job it names (the plan comes from the plan file).
    assert source.starts == [{"rank": 3, "node_rank": 1}] and source.jobs == [CROSS]
    ((serial, record),) = source.records[3]
    on_disk = json.loads((tmp_path / "results" / "rank-3.jsonl").read_text())
    assert serial == 1 and record == on_disk and record["details"] == big
    assert "distval: rank 3 env passed fine" in text
    # A node's other ranks say where they started, without the origin.
    other = _records_of(tmp_path, capfd, monkeypatch, {}, local_rank="1")
    assert read_log("pod.log", other)[0].jobs == []


def test_records_stay_off_stdout_without_the_spec_option(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    writer = RecordWriter(str(tmp_path), 0)
    writer.write("env", "env", "passed", "fine", 0.5)
    assert STDOUT_MARKER not in capfd.readouterr().out


def test_logs_without_records_are_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = tmp_path / "nginx.log"
    plain.write_text("GET / 200\n")
    assert distval.cli.main.main(["collect", "kubernetes", "--plan", str(GOOD), str(plain)]) == 2
    err = capsys.readouterr().err
    assert err == "distval: no distval record in the logs given (was the job exported by distval export kubernetes?)\n"
    assert distval.cli.main.main(["collect", "kubernetes", "--plan", str(GOOD), str(tmp_path / "absent.log")]) == 2
    err = capsys.readouterr().err
    assert err == f"distval: cannot read the log {tmp_path / 'absent.log'}: No such file or directory\n"
    assert distval.cli.main.main(["collect", "kubernetes"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_records_without_any_origin_are_refused(tmp_path: Path) -> None:
    headless = tmp_path / "x.log"
    headless.write_text("\n".join(line for line in (GOOD / f"{CROSS}-1.log").read_text().splitlines() if " n=0 " not in line))
    with pytest.raises(CollectError, match=r"x\.log: distval records, but no line naming their job .*hold 2 jobs$"):
        collect([headless])


def test_collect_command_writes_the_reports_of_a_docker_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junit, report, markdown = tmp_path / "r.xml", tmp_path / "r.json", tmp_path / "r.md"
    argv = [
        "collect",
        "kubernetes",
        *map(str, logs(BROKEN)),
        "--plan",
        str(BROKEN),
        "--junit",
        str(junit),
        "--json",
        str(report),
        "--markdown",
        str(markdown),
        "--suite-prefix",
        "k8s-nightly",
    ]
    assert distval.cli.main.main(argv) == 1
    root = validate(junit)
    # --suite-prefix names the testsuites and classnames, as in distval run (docs/reports.md).
    (written,) = root.iter("testsuite")
    assert written.get("name") == "[k8s-nightly] cross-container-2ranks (cross-container, 2x1, 2 ranks, static)"
    assert {c.get("classname") for c in written.iter("testcase")} == {"distval.k8s-nightly.cross-container-2ranks"}
    assert root.get("time") == written.get("time")  # no scenario start in pod logs: the suites' sum
    found = cases(root)
    suite = "cross-container-2ranks (cross-container, 2x1, 2 ranks, static)"
    assert outcome(found[(suite, "ddp_sync")])[0] == "failure"
    assert outcome(found[(suite, "all_reduce")]) == ("passed", "")
    assert outcome(found[(suite, "exit_status")])[0] == "skipped"
    assert '"kube-rec"' in report.read_text()
    assert markdown.read_text().startswith(
        "## ❌ distval: failed\n\n24 of 29 check results passed in 1 scenario(s); exit code 1."
    )
    assert "distval run kube-rec: " in capsys.readouterr().out


def test_fail_on_skip_fails_the_unchecked_exit_status() -> None:
    result = collect(logs(GOOD, CROSS), fail_on_skip=True).scenarios[0]
    status, message = case(result, EXIT_STATUS_CASE)
    assert status == FAILED and message.startswith("expected no skip (--fail-on-skip); skipped: not checked")


class FakePods:
    """The PodSource protocol over recorded logs: what KubernetesPods reads from a cluster."""

    def __init__(
        self, exit_codes: dict[int, int | None], failure: str | None = None, reason: str = "Completed", empty: int | None = None
    ) -> None:
        self.exit_codes, self.failure, self.reason, self.empty = exit_codes, failure, reason, empty
        self.plan_sha256: str | None = plan_of(GOOD).sha256

    def pod_logs(self, namespace: str, job: str) -> list[PodLog]:
        assert (namespace, job) == ("ml", CROSS)
        return [
            PodLog(
                f"{CROSS}-{index}-abcde",
                index,
                "" if index == self.empty else (GOOD / f"{CROSS}-{index}.log").read_text(),
                code,
                self.reason,
                "docker-pullable://x@sha256:1",
                self.plan_sha256,
            )
            for index, code in self.exit_codes.items()
        ]

    def job_failure(self, namespace: str, job: str) -> str | None:
        return self.failure


def read_api_of(pods: FakePods, namespace: str, job: str) -> tuple[list[Any], str | None]:
    assert job == CROSS
    return read_api(pods, namespace, plan_of(GOOD))


def summarize_api(sources: list[Any], **kwargs: Any) -> RunSummary:
    return summarize_sources(sources, [plan_of(GOOD)], from_api=True, **kwargs)


def test_through_the_api_the_exit_codes_are_checked() -> None:
    sources, failure = read_api_of(FakePods({0: 0, 1: 0}), "ml", CROSS)
    result = summarize_api(sources, job_failure=failure).scenarios[0]
    assert result.status == PASSED
    assert case(result, EXIT_STATUS_CASE) == (PASSED, "2 pod(s) exited 0 within the 240 s deadline")
    assert dict(result.properties)["image_id"] == "docker-pullable://x@sha256:1"
    sources, failure = read_api_of(FakePods({0: 0, 1: 137}, reason="OOMKilled"), "ml", CROSS)
    result = summarize_api(sources, job_failure=failure).scenarios[0]
    status, message = case(result, EXIT_STATUS_CASE)
    assert status == ERROR and f"pod {CROSS}-1-abcde exited with code 137 (OOMKilled)" in message


def test_through_the_api_a_pod_gone_at_the_deadline_names_the_job_failure() -> None:
    failure = f"Job {CROSS} failed: DeadlineExceeded: Job was active longer than specified deadline"
    sources, found = read_api_of(FakePods({0: 0}, failure=failure), "ml", CROSS)
    result = summarize_api(sources, job_failure=found).scenarios[0]
    status, message = case(result, "all_reduce")
    assert status == ERROR
    assert message == f"no result from rank(s) 1: no log of node 1's pod was given (expected rank(s) 1); {failure}"
    # Pod 0 ended with 0 before the deadline: only the missing pod is blamed.
    status, message = case(result, EXIT_STATUS_CASE)
    assert status == ERROR and f"{CROSS}-0-abcde" not in message and "no log of node 1's pod was given" in message


def test_through_the_api_a_pod_with_an_empty_log_is_named() -> None:
    """A pod that never ran the suite (its image could not be pulled): its ranks are errors naming the pod."""
    sources, failure = read_api_of(FakePods({0: 0, 1: None}, empty=1), "ml", CROSS)
    result = summarize_api(sources, job_failure=failure).scenarios[0]
    status, message = case(result, "all_reduce")
    assert status == ERROR
    assert message.startswith(f"no result from rank(s) 1: the log of {CROSS}-1-abcde (pod {CROSS}-1-abcde) ends before rank(s) 1")
    assert message.endswith("its last line: (empty)")
    assert case(result, EXIT_STATUS_CASE)[0] == ERROR


def test_no_pods_through_the_api_is_one_line() -> None:
    with pytest.raises(CollectError, match=f"^no pod with label distval.job={CROSS} in namespace ml$"):
        read_api_of(FakePods({}), "ml", CROSS)


def test_without_the_kubernetes_client_collect_says_so_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "kubernetes", None)  # import kubernetes -> ImportError
    assert distval.cli.main.main(["collect", "kubernetes", "--plan", str(GOOD), "--job", CROSS]) == EnvironmentUnusable.exit_code
    assert capsys.readouterr().err == (
        "distval: reading pod logs through the API needs the kubernetes Python client (pip install kubernetes); "
        "or pass the logs as files (kubectl logs ... > FILE)\n"
    )


def test_files_and_job_together_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert distval.cli.main.main(["collect", "kubernetes", "x.log", "--job", "j"]) == 2
    assert capsys.readouterr().err == "distval: collect kubernetes: expected log files or --job (with --namespace), not both\n"


def test_recorded_data_is_what_the_docstring_says() -> None:
    assert {p.name for p in logs(GOOD)} == {f"{CROSS}-0.log", f"{CROSS}-1.log", "dv-kube-rec-in-container-2ranks-0.log"}
    assert os.path.getsize(GOOD / f"{CROSS}-1.log") > 1000
    assert io.StringIO((BROKEN / f"{CROSS}-1.log").read_text()).readline().startswith(STDOUT_MARKER)


# -- the real kubernetes client against a stub API server ------------------------------------------------
class _StubApi(http.server.BaseHTTPRequestHandler):
    """The three API calls KubernetesPods makes, answered from the recorded logs: pods of the job (node 1's
    terminated with 137, OOMKilled), each pod's log, and the Job's Failed condition."""

    pods = {0: 0, 1: 137}
    log_limits: list[str] = []  # the limitBytes each log request carried
    index_text: str | None = None  # the completion index annotation, when not the pod's index

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        if url.path == "/api/v1/namespaces/ml/pods":
            assert query["labelSelector"] == [f"distval.job={CROSS}"]
            items = [
                {
                    "metadata": {
                        "name": f"{CROSS}-{i}-abcde",
                        "annotations": {
                            "batch.kubernetes.io/job-completion-index": self.index_text or str(i),
                            PLAN_SHA256_KEY: plan_of(GOOD).sha256,
                        },
                    },
                    "status": {
                        "containerStatuses": [
                            {
                                "name": "suite",
                                "image": "x",
                                "imageID": "docker-pullable://x@sha256:2",
                                "ready": False,
                                "restartCount": 0,
                                "state": {"terminated": {"exitCode": code, "reason": "OOMKilled" if code else "Completed"}},
                            }
                        ]
                    },
                }
                for i, code in self.pods.items()
            ]
            self._send("application/json", json.dumps({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items}))
        elif url.path.startswith("/api/v1/namespaces/ml/pods/") and url.path.endswith("/log"):
            assert query["container"] == ["suite"]
            index = int(url.path.split("/")[-2].removeprefix(f"{CROSS}-").split("-")[0])
            text = (GOOD / f"{CROSS}-{index}.log").read_text()
            self.log_limits.extend(query.get("limitBytes", ["none"]))
            limit = int(query.get("limitBytes", [len(text.encode())])[0])
            self._send("text/plain", text.encode()[:limit].decode("utf-8", "replace"))  # as the API cuts it
        elif url.path == "/apis/batch/v1/namespaces/ml/jobs":
            condition = {
                "type": "Failed",
                "status": "True",
                "reason": "BackoffLimitExceeded",
                "message": "Job has reached the specified backoff limit",
            }
            job = {"metadata": {"name": CROSS}, "spec": {"template": {}}, "status": {"conditions": [condition]}}
            self._send(
                "application/json", json.dumps({"apiVersion": "batch/v1", "kind": "JobList", "metadata": {}, "items": [job]})
            )
        else:
            self.send_error(404)

    def _send(self, kind: str, body: str) -> None:
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def stub_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    pytest.importorskip("kubernetes", reason="the kubernetes Python client is not installed (pip install kubernetes)")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _StubApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "stub", "cluster": {"server": f"http://127.0.0.1:{server.server_address[1]}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "stub", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    yield kubeconfig
    server.shutdown()


def test_the_kubernetes_client_reads_pods_logs_and_the_job(stub_cluster: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """KubernetesPods through the real client: the exit codes, reasons and image ids of the pods, their logs and
    the Job's failure reach the verdict."""
    assert (
        distval.cli.main.main(
            [
                "collect",
                "kubernetes",
                "--plan",
                str(GOOD),
                "--namespace",
                "ml",
                "--job",
                CROSS,
                "--json",
                str(stub_cluster.parent / "r.json"),
            ]
        )
        == 1
    )
    assert "distval run kube-rec: " in capsys.readouterr().out
    result = json.loads((stub_cluster.parent / "r.json").read_text())
    text = json.dumps(result)
    assert f"pod {CROSS}-1-abcde exited with code 137 (OOMKilled)" in text
    assert "docker-pullable://x@sha256:2" in text
    sources, failure = read_api(KubernetesPods(), "ml", plan_of(GOOD))
    assert failure == f"Job {CROSS} failed: BackoffLimitExceeded: Job has reached the specified backoff limit"
    assert sorted(s.node_rank for s in sources if s.node_rank is not None) == [0, 1]


def test_without_a_kubeconfig_collect_says_so_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("kubernetes", reason="the kubernetes Python client is not installed (pip install kubernetes)")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.setenv("HOME", str(tmp_path))
    assert distval.cli.main.main(["collect", "kubernetes", "--plan", str(GOOD), "--job", CROSS]) == EnvironmentUnusable.exit_code
    err = capsys.readouterr().err
    assert err.startswith("distval: no usable kubeconfig ($KUBECONFIG or ~/.kube/config): ") and err.count("\n") == 1


def test_records_behind_a_launcher_prefix_are_read(tmp_path: Path) -> None:
    """torchrun with --tee or a log line prefix template writes "[rank0]:" or "[default0]:" before each line."""
    paths = []
    for index, path in enumerate(logs(GOOD, CROSS)):
        target = tmp_path / path.name
        target.write_text("".join(f"[default{index}]:{line}\n" for line in path.read_text().splitlines()))
        paths.append(target)
    assert verdicts(collect(paths).scenarios[0]) == verdicts(by_name(collect(logs(GOOD)))["cross-container-2ranks"])


# --- bounds on what a log line can make distval allocate (issue 19) -------------------------------------


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        (f"{STDOUT_MARKER} v1 r=0 n=1 p=1/99999999999 {{}}", "garbled record line"),
        (f"{STDOUT_MARKER} v1 r=0 n=1 p=1/999999999 {{}}", "claims 999999999 parts; expected at most 4096"),
        (f"{STDOUT_MARKER} v1 r=0 n=1 p=1/{'9' * 5000} {{}}", "garbled record line"),
        (f"{STDOUT_MARKER} v1 r={'9' * 5000} n=1 p=1/1 {{}}", "garbled record line"),
    ],
    ids=["46-byte-line", "parts-past-the-bound", "5000-digit-parts", "5000-digit-rank"],
)
def test_a_record_line_cannot_make_distval_allocate_by_its_numbers(line: str, fragment: str) -> None:
    """Was: the 46-byte line p=1/99999999999 listed every absent part (memory exhausted); 5000 digits: ValueError."""
    # CPU time of this process, here and below: the bound is on the work done, which other processes' load does not
    # change (wall-clock bounds failed at a load of 30; a quick test must not depend on the machine's load).
    started = time.process_time()
    (source,) = read_log("pod.log", line)
    assert time.process_time() - started < 1
    assert len(source.garbled) == 1 and fragment in source.garbled[0], source.garbled


def test_a_record_numbered_a_billion_does_not_list_the_numbers_before_it() -> None:
    """Was: the missing serials were found as set(range(max + 1)) - present: 10**9 numbers for n=999999999."""
    record = json.dumps({"rank": 0, "check": "env", "status": "passed"})
    started = time.process_time()
    (source,) = read_log("pod.log", f"{STDOUT_MARKER} v1 r=0 n=999999999 p=1/1 {record}")
    assert time.process_time() - started < 1
    assert source.garbled == ["pod.log: rank 0's record(s) 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 are missing between the ones present"]


def test_through_the_api_a_log_is_read_to_its_bound_and_no_further(stub_cluster: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Was: the whole log asked for, of any size (the image's output). Now limit_bytes, and past it an error."""
    monkeypatch.setattr(_StubApi, "log_limits", [])
    monkeypatch.setattr(distval.targets.kubernetes.collect, "LOG_MAX_BYTES", 1000)
    with pytest.raises(CollectError) as caught:
        read_api(KubernetesPods(), "ml", plan_of(GOOD))
    assert str(caught.value) == f"the log of pod {CROSS}-0-abcde is larger than 1000 bytes; expected less"
    assert _StubApi.log_limits == ["1001"]


def test_through_the_api_a_completion_index_of_5000_digits_is_unknown(
    stub_cluster: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: int() of the annotation, a ValueError past 4300 digits (an internal error)."""
    monkeypatch.setattr(_StubApi, "index_text", "9" * 5000)
    sources, _ = read_api(KubernetesPods(), "ml", plan_of(GOOD))
    assert {s.node_rank for s in sources} == {None}


# --- what ran is the exported plan's, never the logs' (issue 34, finding 3) ------------------------------------------


def _forged_logs(tmp_path: Path, origin: dict[str, Any], checks: tuple[str, ...] | None = ("env",)) -> list[Path]:
    """The cross-container job's pod logs as an image that writes its own origin would leave them: each node's start
    line naming ``origin`` (another image, another config, fewer checks), and only the records of ``checks``."""
    paths = []
    for path in logs(GOOD, CROSS):
        kept = []
        for line in path.read_text().splitlines():
            if not line.startswith(STDOUT_MARKER):
                kept.append(line)
                continue
            head, piece = line.rsplit(" ", 1)[0].split(" ", 4)[:4], line.split(" ", 5)[5]
            record = json.loads(piece)
            if "start" in record:
                if "origin" in record["start"]:
                    record["start"]["origin"] = origin
            elif checks is not None and record["check"] not in checks:
                continue
            kept.append(" ".join(head) + " p=1/1 " + json.dumps(record))
        target = tmp_path / path.name
        target.write_text("\n".join(kept) + "\n")
        paths.append(target)
    return paths


def _only_env(origin: dict[str, Any], image: str = "evil.example/anything:latest") -> dict[str, Any]:
    forged: dict[str, Any] = json.loads(json.dumps(origin))
    forged["scenario"]["checks"] = [c for c in forged["scenario"]["checks"] if c["name"] == "env"]
    forged["image"], forged["config_path"] = image, "configs/env-only.yaml"
    return forged


def test_a_log_naming_its_own_image_config_and_one_check_is_judged_against_the_exported_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: the scenario came from the pod log, so a log with only an env check, naming an image and a config of its
    choosing, exited 0 (the real config had every check). Now every check of the plan file is judged."""
    plan = plan_of(GOOD)
    assert len(plan.origin.scenario.checks) > 5
    paths = _forged_logs(tmp_path, _only_env(ORIGIN))
    report = tmp_path / "r.json"
    argv = ["collect", "kubernetes", "--plan", plan.path, *map(str, paths), "--json", str(report)]
    assert distval.cli.main.main(argv) == 1
    capsys.readouterr()
    (scenario,) = json.loads(report.read_text())["scenarios"]
    assert scenario["image"] == plan.origin.image == "distval-fixtures/torch:2.6-debian"
    assert "evil.example" not in report.read_text() and "env-only" not in report.read_text()
    statuses = {c["name"]: c["status"] for c in scenario["cases"]}
    assert statuses["env"] == PASSED
    for check in plan.origin.scenario.checks:
        if check.name != "env":
            assert statuses[check.name] == ERROR, (check.name, statuses)


def test_a_log_naming_a_world_of_its_own_costs_nothing(tmp_path: Path) -> None:
    """Was: a 1.4 KB log whose origin planned a huge world cost 101 s, 1.5 GB and a 230 MB report. The origin a log
    names is not planned: the collect costs what the plan file's scenario does."""
    forged = _only_env(ORIGIN)
    forged["scenario"]["nodes"] = 1024
    forged["scenario"]["checks"] = [{"name": "env", "args": {}, "required": False}] * 1000
    paths = _forged_logs(tmp_path, forged, checks=None)
    started = time.process_time()
    summary = collect(paths)
    assert time.process_time() - started < 5
    (result,) = summary.scenarios
    assert result.plan.scenario.world_size == 2 and result.plan.image == plan_of(GOOD).origin.image
    assert verdicts(result) == verdicts(by_name(collect(logs(GOOD)))["cross-container-2ranks"])


def test_a_log_naming_a_job_no_plan_file_holds_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    forged = _only_env(ORIGIN)
    forged["job"] = "dv-elsewhere-env-only"
    paths = _forged_logs(tmp_path, forged)
    assert distval.cli.main.main(["collect", "kubernetes", "--plan", plan_of(GOOD).path, *map(str, paths)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "its ranks name job 'dv-elsewhere-env-only', which no plan file given holds" in err


def test_every_scenario_of_the_plan_files_is_judged_even_without_logs(tmp_path: Path) -> None:
    """The export's directory: a job whose logs were not given is an error of its ranks, never left out of the run."""
    summary = summarize_sources(read_files(map(str, logs(GOOD, CROSS))), read_plans(GOOD))
    results = by_name(summary)
    assert set(results) == {"cross-container-2ranks", "in-container-2ranks"} and summary.exit_code == 1
    assert results["cross-container-2ranks"].status == PASSED
    status, message = case(results["in-container-2ranks"], "env")
    assert status == ERROR and "no log of node 0's pod was given" in message


def _plan_copy(tmp_path: Path, edit: Any = None, manifests: Any = None) -> Path:
    """GOOD's cross-container plan file and manifests in ``tmp_path``, the plan edited by ``edit``."""
    source = Path(plan_of(GOOD).path)
    tmp_path.mkdir(exist_ok=True)
    plan = tmp_path / source.name
    plan.write_text(edit(source.read_text()) if edit else source.read_text())
    text = source.with_name(f"{CROSS}.yaml").read_text()
    (tmp_path / f"{CROSS}.yaml").write_text(manifests(text) if manifests else text)
    return plan


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("missing", r"no plan file \(distval export writes it beside what it exports"),
        ("changed", r"the plan file has SHA-256 [0-9a-f]{64}, and .*\.yaml names [0-9a-f]{64}: the plan was changed"),
        ("malformed", r"not a distval plan file: "),
        ("no-hash", r"\.yaml names no plan file SHA-256 \(distval.plan-sha256\)"),
        ("no-manifests", r"cannot read the manifests the plan file goes with: No such file"),
        ("empty-directory", r"no plan file \(\*\.plan\.json\) in it"),
        ("fifo", r"cannot read the plan file: expected a regular file; got a FIFO"),
        ("link", r"cannot read the plan file: expected a regular file; got a symbolic link"),
    ],
)
def test_a_plan_file_missing_changed_or_malformed_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, expected: str
) -> None:
    plans = tmp_path / "plans"
    plans.mkdir()
    if kind == "changed":  # one check fewer: what a hand (or a script) dropping a failing check does
        plan = _plan_copy(plans, lambda text: text.replace('"name": "store"', '"name": "env"', 1))
    elif kind == "malformed":
        plan = _plan_copy(plans, lambda text: text[:-20])
        manifests = plans / f"{CROSS}.yaml"
        manifests.write_text(re.sub(r"[0-9a-f]{64}", hashlib.sha256(plan.read_bytes()).hexdigest(), manifests.read_text()))
    elif kind == "no-hash":
        plan = _plan_copy(plans, manifests=lambda text: re.sub(r".*distval.plan-sha256.*\n", "", text))
    else:
        plan = _plan_copy(plans)
    if kind == "missing":
        plan.unlink()
    elif kind == "no-manifests":
        (plans / f"{CROSS}.yaml").unlink()
    elif kind == "empty-directory":
        plan.unlink()
        plan = plans
    elif kind == "fifo":
        plan.unlink()
        os.mkfifo(plan)
    elif kind == "link":
        target = tmp_path / "elsewhere.json"
        plan.rename(target)
        plan.symlink_to(target)
    started = time.monotonic()
    assert distval.cli.main.main(["collect", "kubernetes", "--plan", str(plan), *map(str, logs(GOOD, CROSS))]) == 2
    assert time.monotonic() - started < 30  # a FIFO is refused, never waited on
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(expected, err), err


def test_the_default_plan_is_the_exports_default_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert distval.cli.main.main(["collect", "kubernetes", *map(str, logs(GOOD, CROSS))]) == 2
    assert capsys.readouterr().err == f"distval: distval-kubernetes: {NO_PLAN_FILE}\n"
    _plan_copy(tmp_path / "distval-kubernetes")
    assert distval.cli.main.main(["collect", "kubernetes", *map(str, logs(GOOD, CROSS))]) == 0


def test_through_the_api_a_pod_of_another_plan_is_refused() -> None:
    pods = FakePods({0: 0, 1: 0})
    pods.plan_sha256 = "0" * 64
    with pytest.raises(PlanFileError, match=f"^pod {CROSS}-0-abcde: its distval.plan-sha256 annotation is 0{{64}}, and "):
        read_api_of(pods, "ml", CROSS)
    pods.plan_sha256 = None
    with pytest.raises(PlanFileError, match="annotation is missing"):
        read_api_of(pods, "ml", CROSS)


def test_through_the_api_a_log_naming_another_job_is_an_error_of_its_results() -> None:
    """The API says which job a pod is of: the job its log names is the image's word, and a different one an error."""

    class Renamed(FakePods):
        def pod_logs(self, namespace: str, job: str) -> list[PodLog]:
            return [
                dataclasses.replace(p, log=p.log.replace(f'"job": "{CROSS}"', '"job": "dv-other"'))
                for p in super().pod_logs(namespace, job)
            ]

    sources, failure = read_api_of(Renamed({0: 0, 1: 0}), "ml", CROSS)
    result = summarize_api(sources, job_failure=failure).scenarios[0]
    status, message = case(result, "results")
    assert status == ERROR and "its ranks name job 'dv-other'; the pod is of" in message


@pytest.mark.parametrize("shape", ["short-lines", "records", "one-long-line"])
def test_a_log_bomb_is_bounded_in_time_and_memory(shape: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every line a pod wrote is its rank output, bounded as a container's: at most LOG_LINES_MAX lines are read, the
    last CONTAINER_LOG_MAX_BYTES characters of its text kept. Was: every line of a log of up to 256 MiB read and kept
    (a list of them first). CPU time of this process and the memory Python allocated: the bounds are on the work.
    The records' shape runs at a tenth of the bound (200,000 records cost 3 s here on a quiet machine, 5x that under
    tracemalloc): what it shows is that the records stop at the bound, and what they cost up to it."""
    bound = LOG_LINES_MAX if shape != "records" else LOG_LINES_MAX // 10
    monkeypatch.setattr(distval.targets.kubernetes.collect, "LOG_LINES_MAX", bound)
    lines = bound + 50_000
    if shape == "short-lines":
        text = "x\n" * lines
    elif shape == "records":
        record = json.dumps({"rank": 0, "check": "env", "case": "env", "status": "passed"})
        text = "".join(f"{STDOUT_MARKER} v1 r=0 n={n} p=1/1 {record}\n" for n in range(1, lines))
    else:
        text = "y" * (3 * CONTAINER_LOG_MAX_BYTES)
    tracemalloc.start()
    started = time.process_time()
    try:
        (source,) = read_log("bomb.log", text)
        elapsed = time.process_time() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert elapsed < 60  # measured 7 s (short lines) under tracemalloc at a load of 21
    assert peak < 200 * 2**20, peak  # the text's end and a tenth of the records: measured 40-90 MB
    assert source.text_chars <= CONTAINER_LOG_MAX_BYTES + 1
    if shape != "one-long-line":
        assert source.garbled[-1] == f"bomb.log: more than {bound} lines; the rest was not read"
        assert sum(len(r) for r in source.records.values()) <= bound
    else:
        assert source.output.startswith(f"[... cut: {2 * CONTAINER_LOG_MAX_BYTES} characters before these]")
