"""distval.config: the GPU keys -- backend nccl and nccl-legacy, device, gpus_per_node -- their defaults,
the rules between them and the layout, and device as a matrix axis.
"""

from __future__ import annotations

import pytest

from distval.config import BACKENDS, MATRIX_AXES, Scenario, parse_config
from tests.config_helpers import FILE, line_of, problems_of, yaml_text


def scenario(*lines: str, top: tuple[str, ...] = (), topology: str = "cross-container") -> str:
    body = "".join(f"    {line}\n" for line in lines)
    return "".join(f"{line}\n" for line in top) + f"scenarios:\n  - topology: {topology}\n{body}    checks: [env]\n"


def devices(text: str) -> list[tuple[str, str, int]]:
    return [(s.name, s.device, s.gpus_per_node) for s in parse_config(text, FILE).scenarios]


def test_backends_and_axes() -> None:
    assert BACKENDS == ("gloo", "nccl", "nccl-legacy", "mpi")
    assert "device" in MATRIX_AXES
    assert "gpus_per_node" not in MATRIX_AXES


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (["world_size: 2"], ("cpu", 0)),
        (["world_size: 2", "backend: mpi"], ("cpu", 0)),
        (["world_size: 2", "backend: nccl"], ("cuda", 1)),
        (["nodes: 2", "nproc_per_node: 4", "backend: nccl"], ("cuda", 4)),
        (["nodes: 2", "nproc_per_node: 2", "backend: nccl-legacy"], ("cuda", 2)),
        (["nodes: 2", "nproc_per_node: 2", "device: cuda"], ("cuda", 1)),
        (["world_size: 2", "backend: mpi", "device: cuda"], ("cuda", 1)),
        (["nodes: 2", "nproc_per_node: 2", "backend: nccl", "gpus_per_node: 8"], ("cuda", 8)),
        (["world_size: 2", "gpus_per_node: 2"], ("cpu", 2)),  # GPUs given, tensors on the CPU: allowed
    ],
)
def test_defaults_follow_the_backend_and_the_layout(lines: list[str], expected: tuple[str, int]) -> None:
    ((_, device, gpus),) = devices(scenario(*lines))
    assert (device, gpus) == expected


def test_in_container_nccl_gets_one_gpu_per_rank() -> None:
    ((_, device, gpus),) = devices(scenario("world_size: 4", "backend: nccl", topology="in-container"))
    assert (device, gpus) == ("cuda", 4)


def test_top_level_defaults() -> None:
    text = yaml_text(
        """
        device: cuda
        gpus_per_node: 2
        scenarios:
          - name: inherits
            topology: cross-container
            world_size: 2
            checks: [env]
          - name: overrides
            topology: cross-container
            world_size: 2
            device: cpu
            gpus_per_node: 0
            checks: [env]
        """
    )
    assert devices(text) == [("inherits", "cuda", 2), ("overrides", "cpu", 0)]


def test_scenario_built_in_code_defaults_to_cpu() -> None:
    s = Scenario("x", "in-container", 2, "gloo", None, 1.0, 1.0, 1.0, "python3", ())
    assert (s.device, s.gpus_per_node) == ("cpu", 0)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("device: gpu", "expected one of cpu, cuda; got 'gpu'"),
        ("device: [cuda]", "expected one of cpu, cuda; got a list"),
        ("gpus_per_node: -1", "expected an integer >= 0; got '-1'"),
        ("gpus_per_node: 1.5", "expected an integer >= 0; got '1.5'"),
        ("backend: nccl2", "expected one of gloo, nccl, nccl-legacy, mpi; got 'nccl2'"),
    ],
)
def test_bad_values(line: str, message: str) -> None:
    text = scenario("world_size: 2", line)
    assert problems_of(text) == [f"{FILE}:{line_of(text, line)}: scenarios[0].{line.split(':')[0]}: {message}"]
    top = scenario("world_size: 2", top=(line,))
    assert problems_of(top) == [f"{FILE}:1: {line.split(':')[0]}: {message}"]


def test_nccl_on_cpu_is_an_error() -> None:
    text = scenario("world_size: 2", "backend: nccl", "device: cpu")
    assert problems_of(text) == [
        f"{FILE}:{line_of(text, 'device: cpu')}: scenarios[0].device: "
        "expected cuda with backend nccl (NCCL runs on CUDA tensors); got 'cpu'"
    ]


def test_nccl_scenario_under_a_top_level_cpu_device() -> None:
    text = scenario("world_size: 2", "backend: nccl-legacy", top=("device: cpu",))
    assert problems_of(text) == [
        f"{FILE}:{line_of(text, '- topology')}: scenarios[0].device: "
        "expected cuda with backend nccl-legacy (NCCL runs on CUDA tensors); got 'cpu' (the top level's)"
    ]


def test_a_top_level_conflict_is_reported_once_at_the_top() -> None:
    text = scenario("world_size: 2", top=("backend: nccl", "device: cpu")) + "  - topology: in-container\n    world_size: 2\n"
    text += "    checks: [env]\n"
    assert problems_of(text) == [
        f"{FILE}:2: device: expected cuda with backend nccl (NCCL runs on CUDA tensors); got 'cpu'",
    ]


def test_two_nccl_ranks_on_one_gpu() -> None:
    text = scenario("nodes: 2", "nproc_per_node: 2", "backend: nccl", "gpus_per_node: 1")
    assert problems_of(text) == [
        f"{FILE}:{line_of(text, 'gpus_per_node')}: scenarios[0].gpus_per_node: expected an integer >= 2: NCCL does not "
        "allow two ranks on one GPU: nproc_per_node 2 needs gpus_per_node >= 2; got 1"
    ]


def test_two_nccl_ranks_on_one_gpu_from_the_top_level() -> None:
    text = scenario("world_size: 3", "backend: nccl", topology="in-container", top=("gpus_per_node: 1",))
    assert problems_of(text) == [
        f"{FILE}:{line_of(text, '- topology')}: scenarios[0].gpus_per_node: expected an integer >= 3: NCCL does not "
        "allow two ranks on one GPU: nproc_per_node 3 needs gpus_per_node >= 3; got 1 (the top level's)"
    ]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("device: cuda", "expected an integer >= 1 with device cuda (the ranks' tensors live on a GPU); got 0"),
        (
            "backend: nccl",
            "expected an integer >= 1: NCCL does not allow two ranks on one GPU: "
            "nproc_per_node 1 needs gpus_per_node >= 1; got 0",
        ),
    ],
)
def test_cuda_without_a_gpu(line: str, expected: str) -> None:
    text = scenario("world_size: 2", line, "gpus_per_node: 0")
    assert problems_of(text) == [f"{FILE}:{line_of(text, 'gpus_per_node')}: scenarios[0].gpus_per_node: {expected}"]


def test_top_level_cuda_without_a_gpu() -> None:
    text = scenario("world_size: 2", top=("device: cuda", "gpus_per_node: 0"))
    assert problems_of(text) == [
        f"{FILE}:2: gpus_per_node: expected an integer >= 1 with device cuda (the ranks' tensors live on a GPU); got 0"
    ]


def test_device_axis() -> None:
    text = yaml_text(
        """
        scenarios:
          - name: d
            topology: cross-container
            nodes: 2
            nproc_per_node: 2
            checks: [env]
            matrix:
              backend: [gloo, nccl, nccl-legacy]
              device: [cpu, cuda]
            exclude:
              - {backend: nccl, device: cpu}
              - {backend: nccl-legacy, device: cpu}
        """
    )
    assert devices(text) == [
        ("d.gloo.cpu", "cpu", 0),
        ("d.gloo.cuda", "cuda", 1),
        ("d.nccl.cuda", "cuda", 2),
        ("d.nccl-legacy.cuda", "cuda", 2),
    ]
    assert [s.axes for s in parse_config(text, FILE).scenarios][0] == (("backend", "gloo"), ("device", "cpu"))


def test_nccl_combination_on_cpu_is_invalid() -> None:
    text = yaml_text(
        """
        scenarios:
          - name: m
            topology: in-container
            world_size: 2
            device: cpu
            checks: [env]
            matrix:
              backend: [gloo, nccl]
        """
    )
    assert problems_of(text) == [
        f"{FILE}:{line_of(text, 'matrix:')}: scenarios[0].matrix: combination m.nccl (backend=nccl) is invalid: "
        "device: expected cuda with backend nccl (NCCL runs on CUDA tensors); got 'cpu'; exclude it or change the axes"
    ]


def test_nccl_layout_axis_needs_more_gpus() -> None:
    text = yaml_text(
        """
        scenarios:
          - name: m
            topology: in-container
            backend: nccl
            gpus_per_node: 2
            checks: [env]
            matrix:
              world_size: [2, 4]
        """
    )
    assert problems_of(text) == [
        f"{FILE}:{line_of(text, 'matrix:')}: scenarios[0].matrix: combination m.w4 (world_size=4) is invalid: "
        "gpus_per_node: expected an integer >= 4: NCCL does not allow two ranks on one GPU: nproc_per_node 4 needs "
        "gpus_per_node >= 4; got 2; exclude it or change the axes"
    ]


def test_gpus_per_node_is_not_an_axis() -> None:
    text = scenario("world_size: 2", "name: m", "matrix: {gpus_per_node: [1, 2]}")
    (problem,) = problems_of(text)
    assert problem.startswith(f"{FILE}:{line_of(text, 'matrix:')}: scenarios[0].matrix.gpus_per_node: unknown key; ")
