"""distval/results/nccl_environment.py on NCCL's own output: a recording of torch 2.15's libnccl (the fixture
distval-fixtures/torch:2.15-pypi, NCCL_DEBUG=INFO NCCL_SOCKET_IFNAME=eth0, ``torch.cuda.nccl.unique_id()`` with no GPU)."""

from __future__ import annotations

from distval.results.nccl_environment import describe, set_by_environment
from tests.paths import ROOT

RECORDED = (ROOT / "tests" / "data" / "nccl" / "set-by-environment.log").read_text()


def test_the_recorded_line_names_the_variable_and_its_value() -> None:
    assert set_by_environment([RECORDED]) == {"NCCL_SOCKET_IFNAME": "eth0"}
    assert describe(set_by_environment([RECORDED])) == "NCCL_SOCKET_IFNAME=eth0"


def test_other_lines_and_launcher_prefixes_are_ignored_and_the_last_value_counts() -> None:
    logs = [
        "[default0]:host:1:1 [0] NCCL INFO NCCL_ALGO set by environment to Ring\nNCCL INFO Bootstrap: Using eth0\n",
        "host:2:2 [1] NCCL INFO NCCL_ALGO set by environment to Tree  \n",
    ]
    assert set_by_environment(logs) == {"NCCL_ALGO": "Tree"}
    assert describe({}) == "none reported"
