"""The time budget of every file of Docker or host tests, in seconds: what the file may take in a warm CI run
(fixture images built, the host venv and the Slurm bundles cached). One line per file; a new Docker or host test
file adds its line here, with the wall time it measured and the load it measured at
(tests/project/test_budgets.py fails on a file without one, on a line whose file is gone, and on budgets that do
not fit ``CI_DOCKER_WALL_S`` per process).

A file's time is split between CI's two pytest processes (.ci/run): its tests marked ``waits`` run in the waiting
process, the others in the main one. ``BUDGETS_S`` is the file's whole budget; ``WAITING_S`` the part of it that
its ``waits`` tests spend, so the main process's part of a file is the difference. Each process must fit
``CI_DOCKER_WALL_S`` on its own: the two run at once, and CI takes as long as the longer of them.

Where the figures come from: the per-file table that the budget report (tests/budget_report.py) printed in a warm CI
run of 2026-12-06 (Docker images cached, load average 1.7; the whole run 2,465 s, the main process the long pole at
about 37 min beside the waiting process's 17), each process's figure for the file times 1.3, rounded up to the next
10 s (10 s at least). The comment of a line gives that run's figures, main + waiting, in seconds.
"""

from __future__ import annotations

from collections.abc import Mapping

# The limit. .ci/run runs the Docker and host tests as two pytest processes at once (the `waits` tests beside the
# others), and a warm CI run may spend at most CI_DOCKER_WALL_S on them: each process's budgets must fit it
# (tests/project/test_waiting_tests.py is about which test goes where). Two processes that are both busy for the
# whole of that time hold 2 x 25 min of test time, so that is the most all the files' budgets may sum to.
CI_DOCKER_WALL_S = 25 * 60
CI_PYTEST_PROCESSES = 2
CI_LIMIT_S = CI_PYTEST_PROCESSES * CI_DOCKER_WALL_S
MARGIN = 1.3  # the budgets' margin over the measured figures

BUDGETS_S: dict[str, int] = {
    # 87.9: the client against the real registry, the chain (a 2-rank run, the 1.2 GB image pushed, 4 verify
    # containers) and distval's own image built (the session's harness image: tests/conftest.py harness_image)
    "tests/cli/test_attest_registry_docker.py": 120,
    "tests/cli/test_doctor_docker.py": 10,  # 3.7
    # the default config's cross-container-2ranks scenario in pairs: 102.9 + 68.5 in a CI run at load 3-10 (6 runs each,
    # 2026-12-06); the delayed image now also runs the 2 confirmation pairs its regression calls for (10 runs):
    # 253.0 + 70.7 at load 16-26 (2026-12-06), so about 170 + 70 at CI's load
    "tests/comparing/test_reference_delay_docker.py": 320,
    "tests/comparing/test_reference_docker.py": 70,  # 53.0
    "tests/fixtures/test_helper_base_docker.py": 90,  # 64.3 (mmdebstrap of bookworm's python3, push, pull, build)
    "tests/plan/test_gpu_docker.py": 10,  # 2.3 (no GPU: probes and skips)
    "tests/plan/test_plan_engine_docker.py": 90,  # 64.8
    # 558.0 + 24.9: every rendezvous form 421.7 (31 scenarios; about 95 % busy on 2 cores), the same scenarios twice
    # at once 44, ipv6 on 1.13 41 (and on 2.6, which the every-form test runs too: no longer run twice)
    "tests/plan/test_rendezvous_docker.py": 730 + 40,
    "tests/plan/test_restart_docker.py": 140,  # 101.1
    "tests/project/test_ci_examples_docker.py": 1,  # opt-in (DISTVAL_CI_EXAMPLES=1): skipped in CI; about 10 min when run
    "tests/project/test_local_registry_docker.py": 10,  # 0.2
    "tests/project/test_wheel_docker.py": 50,  # 37.3
    "tests/results/test_bandwidth_docker.py": 120,  # 91.5
    "tests/results/test_diagnosis_docker.py": 20 + 150,  # 11.7 + 95.3, and 15 s more of the hung rank's deadline since
    "tests/suite/test_bytecode_docker.py": 20,  # 13.9
    "tests/suite/test_cuda_docker.py": 40,  # 29.1
    "tests/suite/test_ddp_docker.py": 90,  # 62.8
    "tests/suite/test_loaded_docker.py": 80,  # 59.9
    "tests/suite/test_parallelism_docker.py": 90,  # 64.5
    "tests/suite/test_suite_docker.py": 410 + 110,  # 308.5 + 84.5 (the default config on the three good images)
    "tests/suite/test_worlds_docker.py": 80,  # 54.6
    "tests/targets/docker/test_beside_docker.py": 10 + 40,  # 1.9 + 26.5
    "tests/targets/docker/test_cleanup_docker.py": 10,  # 5.8
    # 93.6: the harness image through the socket 73.7, of which its build (now the session's) and the default config's
    # whole check list (now the two checks asserted)
    "tests/targets/docker/test_compose_docker.py": 130,
    "tests/targets/docker/test_docker.py": 50 + 130,  # 35.4 + 62.9, and 30 s more of the hung rank's deadline since
    "tests/targets/docker/test_faults_docker.py": 10 + 730,  # 5.9 + 558.0 (every fault kind: 2.15 281.6, 2.6 276.4)
    "tests/targets/docker/test_reaper_docker.py": 210,  # 160.4, of which 39 the harness image's build (now the session's)
    "tests/targets/engines/test_hosts_docker.py": 110 + 240,  # 83.0 + 178.5
    "tests/targets/kubernetes/test_kube_docker.py": 30,  # 22.0
    "tests/targets/local/test_host_torch.py": 50,  # 35.6 (the venv cached; building it: 155 s, once per machine)
    "tests/targets/local/test_reaper_host.py": 10,  # 2.7
    "tests/targets/slurm/test_slurm_docker.py": 140,  # 106.7
}

# The part of a file's budget that its tests marked `waits` spend, in CI's waiting process (the same run's figures).
WAITING_S: dict[str, int] = {
    # Besides the files of tests that wait on a deadline: whole files that alone kept under 70 % of the 2 cores busy
    # (a CI run of 2026-12-07 with the images built, /proc/stat every 10 s while the main process ran alone: 54-69 %)
    # moved here from the main process, which had run 49 min against this one's 19 (restart, wheel, bandwidth, cuda,
    # ddp, loaded, host torch, Slurm). Their budgets are unchanged.
    "tests/plan/test_rendezvous_docker.py": 40,
    "tests/plan/test_restart_docker.py": 140,
    "tests/project/test_wheel_docker.py": 50,
    "tests/results/test_bandwidth_docker.py": 120,
    "tests/results/test_diagnosis_docker.py": 150,
    "tests/suite/test_cuda_docker.py": 40,
    "tests/suite/test_ddp_docker.py": 90,
    "tests/suite/test_loaded_docker.py": 80,
    "tests/suite/test_suite_docker.py": 110,
    "tests/targets/docker/test_beside_docker.py": 40,
    "tests/targets/docker/test_docker.py": 130,
    "tests/targets/docker/test_faults_docker.py": 730,
    "tests/targets/engines/test_hosts_docker.py": 240,
    "tests/targets/local/test_host_torch.py": 50,
    "tests/targets/slurm/test_slurm_docker.py": 140,
}


def process_budgets(budgets: Mapping[str, int], waiting: Mapping[str, int]) -> tuple[dict[str, int], dict[str, int]]:
    """(the main process's part of each file's budget, the waiting process's part)."""
    return {path: s - waiting.get(path, 0) for path, s in budgets.items()}, dict(waiting)
