"""benchmarks/common.py without Docker: the by-hand launch's arguments, and reading and judging the records."""

from __future__ import annotations

import importlib.util
import json
import os
import re
from types import ModuleType
from typing import Any

import pytest

from distval.cli.values import RUN_ID_PATTERN
from distval.config import load_config
from distval.plan.model import ContainerPlan, ScenarioPlan
from distval.tarball import Directory, File, build_tar
from distval.targets.engines.planning import plan_run
from tests.paths import ROOT


def _load_common() -> ModuleType:
    # The benchmarks import it as ``common`` from their own directory; load it by path under a name that
    # cannot clash with anything else called common.
    spec = importlib.util.spec_from_file_location("bench_common", ROOT / "benchmarks" / "common.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


common = _load_common()


@pytest.fixture(scope="module")
def cross() -> tuple[ScenarioPlan, ContainerPlan]:
    plan = plan_run(load_config(ROOT / "configs" / "default.yaml"), "bench-test")
    sp = next(s for s in plan.scenarios if s.scenario.topology == "cross-container")
    return sp, sp.containers[1]


def results_tar(files: dict[str, list[dict[str, Any]]]) -> bytes:
    entries: list[File | Directory] = [Directory("results")]
    for name, records in files.items():
        entries.append(File(f"results/{name}", "".join(json.dumps(r) + "\n" for r in records).encode()))
    entries.append(File("results/notes.txt", b"not a record file"))
    return build_tar(entries)


def record(rank: int, check: str, status: str = "passed") -> dict[str, Any]:
    return {"rank": rank, "check": check, "case": check, "status": status}


def test_read_records_by_file_in_written_order_ignoring_other_files() -> None:
    tar = results_tar({"rank-1.jsonl": [record(1, "env"), record(1, "all_reduce", "failed")]})
    assert common.read_records(tar) == {"rank-1.jsonl": [record(1, "env"), record(1, "all_reduce", "failed")]}


def test_verify_accepts_passed_and_skipped_for_every_check_of_every_rank(cross: tuple[ScenarioPlan, ContainerPlan]) -> None:
    _, cp = cross
    (rank,) = cp.ranks
    files = {f"rank-{rank}.jsonl": [record(rank, "env"), record(rank, "reconfigure", "skipped")]}
    assert common.verify(cp, files, ["env", "reconfigure"]) == []
    assert common.verify(cp, files, ["env", "reconfigure"], accepted=("passed",)) == [
        f"{cp.name}: rank {rank} check reconfigure: skipped"
    ]


def test_verify_names_a_missing_file_a_missing_check_and_any_bad_part(cross: tuple[ScenarioPlan, ContainerPlan]) -> None:
    _, cp = cross
    (rank,) = cp.ranks
    assert common.verify(cp, {}, ["env"]) == [f"{cp.name}: rank {rank} wrote no rank-{rank}.jsonl"]
    parts = [record(rank, "collectives"), record(rank, "collectives", "failed"), record(rank, "collectives")]
    assert common.verify(cp, {f"rank-{rank}.jsonl": parts}, ["collectives", "store"]) == [
        f"{cp.name}: rank {rank} check collectives: passed, failed, passed",
        f"{cp.name}: rank {rank} check store: no record",
    ]


def test_create_args_is_the_plans_container_with_an_optional_other_command(cross: tuple[ScenarioPlan, ContainerPlan]) -> None:
    sp, cp = cross
    args = common.create_args(sp, cp, "bench-test")
    assert args[:3] == ["create", "--name", cp.name]
    assert ["--hostname", cp.hostname] == args[3:5]
    for key, value in cp.env:
        assert f"{key}={value}" in args
    assert "distval.managed=true" in args and "distval.run=bench-test" in args
    entry = args.index("--entrypoint")
    assert args[entry + 1 :] == [cp.argv[0], sp.image, *cp.argv[1:]]
    floor = common.create_args(sp, cp, "bench-test", ["python3", "/distval/init_only.py"])
    assert floor[:entry] == args[:entry]
    assert floor[entry:] == ["--entrypoint", "python3", sp.image, "/distval/init_only.py"]


def test_resolved_containers_fill_in_subnets_and_refuse_what_is_learned_from_a_running_node(
    cross: tuple[ScenarioPlan, ContainerPlan],
) -> None:
    sp, _ = cross
    containers = common.resolved_containers(sp, {"subnets": "172.30.0.0/16"})
    assert [cp.name for cp in containers] == [cp.name for cp in sp.containers]
    spec = next(f.text for f in containers[0].files if f.path.endswith("spec.json"))
    assert json.loads(spec)["subnets"] == "172.30.0.0/16"
    by_ip = next(
        s for s in plan_run(load_config(ROOT / "configs" / "rendezvous.yaml"), "bench-test").scenarios if s.needs_node0_ip
    )
    with pytest.raises(common.BenchError, match="needs node0_ip"):
        common.resolved_containers(by_ip, {"subnets": ""})


def test_network_and_start_order_are_the_plans(cross: tuple[ScenarioPlan, ContainerPlan]) -> None:
    sp, _ = cross
    args = common.network_create_args(sp.network, "bench-test")
    assert args[:5] == ["network", "create", "--driver", "bridge", "--internal"] and args[-1] == sp.network.name
    # Node 0 last, as distval starts them.
    assert common.start_order(sp) == [cp.name for cp in reversed(sp.containers)]


def test_the_median_interval_is_distribution_free_order_statistics() -> None:
    common = _load_common()
    assert common.median_interval([1.0] * 5) is None  # 2 * (1/2)^5 = 6.25 % > 5 %: no 95 % interval from 5
    # n = 10: P(Binom <= 1) = 1.07 % <= 2.5 %, P(Binom <= 2) = 5.5 % > 2.5 %: k = 2, the 2nd and the 9th.
    values = [0.9, 1.2, 1.0, 1.05, 0.95, 1.01, 0.99, 1.02, 0.98, 1.3]
    assert common.median_interval(values) == (0.95, 1.2)
    assert common.median_interval(list(range(6))) == (0, 5)  # n = 6: only the extremes (2 * 1/64 = 3.1 %)


def test_the_target_verdict_needs_the_whole_interval_on_one_side() -> None:
    common = _load_common()
    assert common.target_verdict((0.98, 1.02), 1.03) == "met"
    assert common.target_verdict((1.04, 1.2), 1.03) == "missed"
    assert common.target_verdict((0.99, 1.05), 1.03).startswith("undecided")
    assert common.target_verdict(None, 1.03).startswith("undecided")


def test_each_benchmark_process_has_run_ids_of_its_own() -> None:
    """Two benchmarks at once never share a run id: each carries its process's pid, and reads back as its owner."""
    mine, other = common.bench_run_id("bs", 12), common.bench_run_id("bs", 12, pid=os.getpid() + 1)
    assert mine != other and mine.startswith("bs-") and mine.endswith("-12")
    assert common.run_owner(mine, ("bs", "bf")) == os.getpid() and common.run_owner(other, ("bs",)) == os.getpid() + 1
    widest = common.bench_run_id("bw", "12c16", pid=4_194_304)  # Linux's largest pid_max
    assert RUN_ID_PATTERN.fullmatch(widest), widest
    with pytest.raises(common.BenchError, match="at most 16"):
        common.bench_run_id("bw", "12345678", pid=4_194_304)  # 17 characters
    for foreign in ("bench-suite-3", "bs-3", "bf-x_y-1", "soak-a1b2c3", "bs--1"):
        assert common.run_owner(foreign, ("bs", "bf")) is None, foreign


def test_a_sweep_of_leftovers_spares_a_live_benchmarks_and_its_own() -> None:
    """Only the runs of a benchmark whose process is gone are swept before a benchmark starts: never a concurrent
    benchmark's (its pid alive), never this process's, never a run id of another form (distval's own, older ones)."""
    live, dead = 4242, 4343
    runs = [
        ("container", "c1", common.bench_run_id("bs", 1, pid=live)),
        ("network", "n1", common.bench_run_id("bf", 1, pid=live)),
        ("container", "c2", common.bench_run_id("bs", 1, pid=dead)),
        ("network", "n2", common.bench_run_id("bf", 2, pid=dead)),
        ("container", "c3", common.bench_run_id("bs", 1)),  # this process's
        ("container", "c4", common.bench_run_id("bd", 1, pid=dead)),  # another benchmark's kind
        ("container", "c5", "bench-suite-1"),
        ("container", "c6", "a1b2c3d4"),
    ]
    swept = common.orphans(runs, ("bs", "bf"), alive=lambda pid: pid == live)
    assert [ident for _, ident, _ in swept] == ["c2", "n2"]
    assert common.owner_alive(os.getpid()) and not common.owner_alive(0)


# Where a benchmark names a run id: an assignment to a run id, a call that takes one, distval's --run-id.
RUN_ID_USE = re.compile(
    r"\w*(run_id|RUN_ID)\w*\s*=\s*.*[\"']|\b(run_once|run_distval|plan_run|sweep|run_by_hand)\(.*[\"']|--run-id\", *f?[\"']"
)


def test_no_benchmark_names_a_run_id_another_benchmark_at_once_would_share() -> None:
    """A literal run id ("bench-suite-{i}") is the same in two benchmarks at once: their containers' names collide, and
    one's sweep removes the other's. Each run id comes from common.bench_run_id, or carries a pid or a random token."""
    fixed = [
        f"{path.name}:{number}: {line.strip()}"
        for path in sorted((ROOT / "benchmarks").glob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if RUN_ID_USE.search(line) and not re.search(r"bench_run_id|pid|token|prefix", line)
    ]
    assert fixed == []
