"""The time budget of every file of Docker or host tests, in seconds: what the file may take in a warm CI run
(fixture images built, the host venv and the Slurm bundles cached). One line per file; a new Docker or host test
file adds its line here, with the wall time it measured and the load it measured at
(tests/project/test_budgets.py fails on a file without one, on a line whose file is gone, and on a sum over
``CI_LIMIT_S``).

Where the figures come from: the only whole-suite record per run is the warm `.ci/run` of 2026-12-04
(docs/measurements.md#the-tests-and-ci: Docker tests 24.6 min beside the waiting process's 15.2 min, 2,388 s of
test time over the files present then); it was shared out per file by the per-test times recorded for the
slowest tests (CONTRIBUTING.md "Running the tests"; the closing notes of stops 25 to 30: the fault scenarios
195-290 s each, every rendezvous form 308 s, a node Engine stopped mid-run 102 s, across 3/2 Engines 79/76 s,
the Slurm file 213 s, test_plan_engine_docker.py 182 s, test_reaper_docker.py 92 s, a libraries test 11 s). A
line marked ``~`` has no figure of its own recorded: it is its share by test count and kind, to be replaced by
the file's sum in ``pytest --durations=0`` of the next CI run.
"""

from __future__ import annotations

# The limit. .ci/run runs the Docker and host tests as two pytest processes at once (the `waits` tests beside the
# others), and a warm CI run may spend at most CI_DOCKER_WALL_S on them. Two processes that are both busy for the
# whole of that time hold 2 x 25 min of test time, so that is the most the files' budgets may sum to. It is a
# necessary bound, not a sufficient one: it holds only if the two processes are balanced
# (tests/project/test_waiting_tests.py is about which test goes where).
CI_DOCKER_WALL_S = 25 * 60
CI_PYTEST_PROCESSES = 2
CI_LIMIT_S = CI_PYTEST_PROCESSES * CI_DOCKER_WALL_S

BUDGETS_S: dict[str, int] = {
    # the client against the real registry 1.4 s (2 tests); the chain 202 s at load 33 (2026-12-06: a 2-rank run of 2
    # checks on 2.6, the 1.2 GB image pushed in 100 s, 4 verify containers), plus the harness image's build (~)
    "tests/cli/test_attest_registry_docker.py": 330,
    "tests/cli/test_doctor_docker.py": 50,  # ~ 3 tests, each a torch import in the image
    # the default config's cross-container-2ranks scenario, 6 runs per test (--pairs 3): 421 s + 254 s at load 11-20,
    # the delayed image's test alone 169 s at load 5-16 (2026-12-06)
    "tests/comparing/test_reference_delay_docker.py": 450,
    "tests/comparing/test_reference_docker.py": 180,  # ~ 2 tests, each several runs of the default scenario (ABBA pairs)
    # mmdebstrap of bookworm's python3, push, pull, build: 183 s at load 17, 236 s at load 17 (2026-12-06)
    "tests/fixtures/test_helper_base_docker.py": 250,
    "tests/plan/test_gpu_docker.py": 30,  # ~ 4 tests; no GPU here: probes and skips
    "tests/plan/test_plan_engine_docker.py": 190,  # 10 rendezvous forms: 182 s recorded
    "tests/plan/test_rendezvous_docker.py": 330,  # every rendezvous form 308 s (382 s at load 10) + 5 short ones
    "tests/plan/test_restart_docker.py": 130,  # an elastic restart 86 s + 3 ~
    "tests/project/test_ci_examples_docker.py": 1,  # opt-in (DISTVAL_CI_EXAMPLES=1): skipped in CI; about 10 min when run
    "tests/project/test_local_registry_docker.py": 10,  # one push and pull of a one-file image: 1.1 s at load 8
    # python -m build 10 s; then pip download of the dependencies, the adopter fixture pushed to the local registry,
    # pip install in a fresh venv and one check of one scenario from inside a container: 240 s at load 21
    "tests/project/test_wheel_docker.py": 300,
    "tests/results/test_bandwidth_docker.py": 130,  # ~ 6 tests; the baseline one 33 s recorded
    "tests/results/test_diagnosis_docker.py": 180,  # a hung rank's stacks 76 s + 3 ~
    "tests/suite/test_bytecode_docker.py": 40,  # ~ 2 tests
    "tests/suite/test_cuda_docker.py": 100,  # ~ 10 tests, the suite's main driven directly, no launcher
    "tests/suite/test_ddp_docker.py": 250,  # 8 tests: 190 s at load 7 (2026-12-06, beside another pytest process)
    "tests/suite/test_loaded_docker.py": 110,  # 9 tests, 11 s recorded for one
    "tests/suite/test_parallelism_docker.py": 300,  # 6 tests: 223 s at load 7 (2026-12-06), broken images in one topology
    "tests/suite/test_suite_docker.py": 330,  # ~ 3 good images x 2 topologies, 18 broken images (one topology but one), 10 more
    "tests/suite/test_worlds_docker.py": 300,  # ~ 2 images x the default config's 3 scenarios, 5 of its checks
    "tests/targets/docker/test_beside_docker.py": 80,  # ~ 3 tests, one frozen rank's stacks
    "tests/targets/docker/test_cleanup_docker.py": 70,  # with test_kube_docker.py: 185 s recorded for both
    "tests/targets/docker/test_compose_docker.py": 60,  # with test_docker.py: 225 s recorded for both
    "tests/targets/docker/test_docker.py": 160,  # a launcher's wrong world size 44 s, a rank killed at its 60 s deadline
    "tests/targets/docker/test_faults_docker.py": 480,  # fault scenarios: 2.6 195-234 s, 2.15 259-290 s; + 8 s
    "tests/targets/docker/test_reaper_docker.py": 110,  # 92 s recorded for 12 of its 15 tests
    "tests/targets/engines/test_hosts_docker.py": 330,  # a node Engine stopped 102 s, 3 and 2 Engines 79 and 76 s, SIGKILL 64 s
    "tests/targets/kubernetes/test_kube_docker.py": 80,  # with test_cleanup_docker.py: 185 s recorded for both
    "tests/targets/local/test_host_torch.py": 90,  # ~ 2 runs in the cached venv (building it: 155 s, once per machine)
    "tests/targets/local/test_reaper_host.py": 20,  # ~ 1 test
    "tests/targets/slurm/test_slurm_docker.py": 240,  # 8 tests, 213 s recorded with the bundles cached
}
