"""distval.config: layouts (nodes x nproc_per_node), rendezvous forms, network and container options, and
scenario matrices -- expansion, names, excludes and invalid combinations.

Like tests/config/test_config.py: every problem is ONE line ``FILE:LINE: KEY.PATH: ...`` and all are reported.
"""

from __future__ import annotations

import dataclasses

import pytest

from distval.config import MATRIX_AXES, NAME_MAX, RESERVED_ENV, Scenario, parse_config
from distval.errors import ConfigError
from tests.config_helpers import FILE, line_of, problems_of, yaml_text


def scenarios_of(text: str) -> list[Scenario]:
    return list(parse_config(text, FILE).scenarios)


def one(text: str) -> Scenario:
    (scenario,) = scenarios_of(text)
    return scenario


def entry(topology: str, *lines: str, top: tuple[str, ...] = ()) -> str:
    """A file with one scenario of ``topology`` and the given extra lines (each one key), checks last."""
    body = "".join(f"    {line}\n" for line in lines)
    return "".join(f"{line}\n" for line in top) + f"scenarios:\n  - topology: {topology}\n{body}    checks: [env]\n"


def layout(s: Scenario) -> tuple[int, int, int]:
    return (s.nodes, s.nproc_per_node, s.world_size)


# --- the Scenario dataclass -----------------------------------------------------------------------


def test_scenario_fields_and_defaults() -> None:
    names = [f.name for f in dataclasses.fields(Scenario)]
    # The original fields first, in their order: code that builds a Scenario positionally keeps working.
    assert names[:10] == [
        "name",
        "topology",
        "world_size",
        "backend",
        "image",
        "timeout_s",
        "collective_timeout_s",
        "check_timeout_s",
        "python",
        "checks",
    ]
    s = one(entry("cross-container", "world_size: 2"))
    assert (s.rendezvous, s.master_addr, s.egress, s.extra_networks, s.ipv6) == ("static", "name", False, 0, False)
    assert (s.cpus, s.memory, s.shm_size, s.env, s.user, s.working_dir) == (None, None, None, (), None, None)
    assert (s.expanded_from, s.axes) == (None, ())
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.nodes = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    ("topology", "world_size", "expected"),
    [("in-container", 4, (1, 4, 4)), ("cross-container", 3, (3, 1, 3))],
)
def test_scenario_built_in_code_derives_its_layout(topology: str, world_size: int, expected: tuple[int, int, int]) -> None:
    s = Scenario("x", topology, world_size, "gloo", None, 1.0, 1.0, 1.0, "python3", ())
    assert layout(s) == expected
    assert layout(dataclasses.replace(s, world_size=world_size * 2, nodes=0, nproc_per_node=0))[2] == world_size * 2


def test_scenario_built_in_code_with_a_partial_layout() -> None:
    s = Scenario("x", "cross-container", 8, "gloo", None, 1.0, 1.0, 1.0, "python3", (), nproc_per_node=2)
    assert layout(s) == (4, 2, 8)
    s = Scenario("x", "cross-container", 8, "gloo", None, 1.0, 1.0, 1.0, "python3", (), nodes=2)
    assert layout(s) == (2, 4, 8)


def test_scenario_built_in_code_must_be_consistent() -> None:
    with pytest.raises(ValueError, match="world_size 3 is not nodes x nproc_per_node = 2 x 2"):
        Scenario("x", "cross-container", 3, "gloo", None, 1.0, 1.0, 1.0, "python3", (), nodes=2, nproc_per_node=2)


# --- layout: nodes x nproc_per_node ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("topology", "lines", "expected"),
    [
        # The issue's topologies: 1xN in one container; 2x1, 3x1, 4x1, 8x1; 2x2 and 4x2.
        ("in-container", ["world_size: 4"], (1, 4, 4)),
        ("in-container", ["nproc_per_node: 3"], (1, 3, 3)),
        ("in-container", ["nodes: 1", "nproc_per_node: 2"], (1, 2, 2)),
        ("in-container", ["nodes: 1", "world_size: 5"], (1, 5, 5)),
        ("in-container", ["world_size: 2", "nproc_per_node: 2"], (1, 2, 2)),
        ("cross-container", ["world_size: 2"], (2, 1, 2)),
        ("cross-container", ["world_size: 3"], (3, 1, 3)),
        ("cross-container", ["nodes: 4"], (4, 1, 4)),
        ("cross-container", ["nodes: 8", "nproc_per_node: 1"], (8, 1, 8)),
        ("cross-container", ["nodes: 2", "nproc_per_node: 2"], (2, 2, 4)),
        ("cross-container", ["nodes: 4", "nproc_per_node: 2", "world_size: 8"], (4, 2, 8)),
        ("cross-container", ["world_size: 8", "nproc_per_node: 2"], (4, 2, 8)),
        ("cross-container", ["world_size: 1"], (1, 1, 1)),
    ],
)
def test_layout_is_derived(topology: str, lines: list[str], expected: tuple[int, int, int]) -> None:
    s = one(entry(topology, *lines))
    assert layout(s) == expected
    assert s.world_size == s.nodes * s.nproc_per_node


@pytest.mark.parametrize(
    ("topology", "lines", "marker", "key", "message"),
    [
        (
            "cross-container",
            ["nodes: 2", "nproc_per_node: 2", "world_size: 3"],
            "world_size: 3",
            "world_size",
            "expected world_size = nodes x nproc_per_node = 4; got 3",
        ),
        (
            "cross-container",
            ["nodes: 3", "world_size: 2"],
            "world_size: 2",
            "world_size",
            "expected world_size = nodes x nproc_per_node = 3; got 2",
        ),
        (
            "cross-container",
            ["world_size: 6", "nproc_per_node: 4"],
            "world_size: 6",
            "world_size",
            "expected world_size = nodes x nproc_per_node, a multiple of nproc_per_node = 4; got 6",
        ),
        (
            "cross-container",
            ["nproc_per_node: 2"],
            "nproc_per_node: 2",
            "nproc_per_node",
            "expected nodes or world_size with it (cross-container: one container per node)",
        ),
        (
            "in-container",
            ["world_size: 3", "nproc_per_node: 4"],
            "world_size: 3",
            "world_size",
            "expected world_size = nodes x nproc_per_node = 4; got 3",
        ),
        (
            "in-container",
            ["nodes: 2", "world_size: 2"],
            "nodes: 2",
            "nodes",
            "expected 1 for in-container (one container; cross-container runs one per node); got 2",
        ),
        (
            "in-container",
            ["nodes: 1"],
            "nodes: 1",
            "nodes",
            "expected world_size or nproc_per_node with it (in-container: the processes in its one container)",
        ),
    ],
)
def test_inconsistent_layout(topology: str, lines: list[str], marker: str, key: str, message: str) -> None:
    text = entry(topology, *lines)
    assert problems_of(text) == [f"{FILE}:{line_of(text, marker)}: scenarios[0].{key}: {message}"]


def test_no_layout_at_all_keeps_the_required_key_problem() -> None:
    text = "scenarios:\n  - topology: cross-container\n    checks: [env]\n"
    assert problems_of(text) == [f"{FILE}:2: scenarios[0].world_size: required key is missing"]


@pytest.mark.parametrize("key", ["nodes", "nproc_per_node"])
@pytest.mark.parametrize(
    ("value", "got"), [("0", "'0'"), ("-1", "'-1'"), ("two", "'two'"), ("true", "'true'"), ("[2]", "a list")]
)
def test_layout_values_must_be_positive_integers(key: str, value: str, got: str) -> None:
    text = entry("cross-container", f"{key}: {value}")
    assert problems_of(text) == [f"{FILE}:3: scenarios[0].{key}: expected an integer >= 1; got {got}"]


def test_default_name_uses_the_product() -> None:
    assert one(entry("cross-container", "nodes: 2", "nproc_per_node: 2")).name == "cross-container-4ranks"


# --- rendezvous and master_addr -------------------------------------------------------------------


@pytest.mark.parametrize("form", ["static", "c10d", "env", "tcp"])
def test_every_rendezvous_form_across_containers(form: str) -> None:
    s = one(entry("cross-container", "world_size: 3", f"rendezvous: {form}"))
    assert (s.rendezvous, layout(s)) == (form, (3, 1, 3))


def test_c10d_and_static_allow_several_processes_per_node() -> None:
    for form in ("static", "c10d"):
        assert layout(one(entry("cross-container", "nodes: 4", "nproc_per_node: 2", f"rendezvous: {form}"))) == (4, 2, 8)


@pytest.mark.parametrize("form", ["env", "tcp"])
def test_env_and_tcp_need_one_process_per_container(form: str) -> None:
    text = entry("cross-container", "nodes: 2", "nproc_per_node: 2", f"rendezvous: {form}")
    assert problems_of(text) == [
        f"{FILE}:{line_of(text, 'rendezvous:')}: scenarios[0].rendezvous: expected static or c10d with nproc_per_node = 2 "
        f"(env and tcp run one process per container, no launcher); got {form!r}"
    ]


def test_env_from_the_defaults_with_several_processes_is_reported_at_nproc_per_node() -> None:
    text = entry("cross-container", "nodes: 2", "nproc_per_node: 2", top=("rendezvous: env",))
    assert problems_of(text) == [
        f"{FILE}:{line_of(text, 'nproc_per_node')}: scenarios[0].nproc_per_node: expected 1 with rendezvous env "
        "(one process per container, no launcher); got 2"
    ]


def test_in_container_is_static() -> None:
    s = one(entry("in-container", "world_size: 2", "rendezvous: static", "master_addr: name"))
    assert (s.rendezvous, s.master_addr) == ("static", "name")


@pytest.mark.parametrize("form", ["c10d", "env", "tcp"])
def test_in_container_rejects_other_rendezvous_forms(form: str) -> None:
    text = entry("in-container", "world_size: 2", f"rendezvous: {form}")
    assert problems_of(text) == [
        f"{FILE}:4: scenarios[0].rendezvous: expected static for in-container (it runs the launcher with --standalone); "
        f"got {form!r}"
    ]


def test_in_container_rejects_master_addr_ip() -> None:
    text = entry("in-container", "world_size: 2", "master_addr: ip")
    assert problems_of(text) == [
        f"{FILE}:4: scenarios[0].master_addr: expected name for in-container (no other node addresses node 0); got 'ip'"
    ]


@pytest.mark.parametrize("value", ["name", "ip"])
def test_master_addr_across_containers(value: str) -> None:
    assert one(entry("cross-container", "world_size: 2", f"master_addr: {value}")).master_addr == value


@pytest.mark.parametrize(
    ("line", "key", "message"),
    [
        ("rendezvous: etcd", "rendezvous", "expected one of static, c10d, env, tcp; got 'etcd'"),
        ("rendezvous: C10D", "rendezvous", "expected one of static, c10d, env, tcp; got 'C10D'"),
        ("rendezvous: [c10d]", "rendezvous", "expected one of static, c10d, env, tcp; got a list"),
        ("master_addr: dns", "master_addr", "expected one of name, ip; got 'dns'"),
        ("master_addr:", "master_addr", "expected one of name, ip; got nothing"),
    ],
)
def test_bad_rendezvous_or_master_addr(line: str, key: str, message: str) -> None:
    text = entry("cross-container", "world_size: 2", line)
    assert problems_of(text) == [f"{FILE}:4: scenarios[0].{key}: {message}"]
    # The same parser at the top level.
    assert problems_of(entry("cross-container", "world_size: 2", top=(line,))) == [f"{FILE}:1: {key}: {message}"]


def test_rendezvous_and_master_addr_defaults_apply_across_containers_only() -> None:
    text = yaml_text(
        """
        rendezvous: c10d
        master_addr: ip
        scenarios:
          - {name: inside, topology: in-container, world_size: 2, checks: [env]}
          - {name: across, topology: cross-container, world_size: 2, checks: [env]}
          - {name: own, topology: cross-container, world_size: 2, rendezvous: tcp, master_addr: name, checks: [env]}
        """
    )
    inside, across, own = scenarios_of(text)
    assert (inside.rendezvous, inside.master_addr) == ("static", "name")
    assert (across.rendezvous, across.master_addr) == ("c10d", "ip")
    assert (own.rendezvous, own.master_addr) == ("tcp", "name")


# --- network and container options ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "field", "value"),
    [
        ("egress: true", "egress", True),
        ("egress: false", "egress", False),
        ("ipv6: true", "ipv6", True),
        ("extra_networks: 0", "extra_networks", 0),
        ("extra_networks: 2", "extra_networks", 2),
        ("cpus: 2", "cpus", 2.0),
        ("cpus: 0.5", "cpus", 0.5),
        ("memory: 512m", "memory", "512m"),
        ("memory: 2G", "memory", "2g"),
        ("memory: 1073741824", "memory", "1073741824"),
        ("memory: 100k", "memory", "100k"),
        ("memory: 4096b", "memory", "4096b"),
        ("shm_size: 64m", "shm_size", "64m"),
        ("shm_size: '1g'", "shm_size", "1g"),
        ("user: nobody", "user", "nobody"),
        ("user: '1000:1000'", "user", "1000:1000"),
        ("user: 1000:1000", "user", "1000:1000"),
        # YAML 1.1 reads these as sexagesimal integers (0 and 60050): the text as written is kept.
        ("user: 0:0", "user", "0:0"),
        ("user: 1000:50", "user", "1000:50"),
        ("user: 1000", "user", "1000"),
        ("user: app-user.x:staff", "user", "app-user.x:staff"),
        ("working_dir: /work", "working_dir", "/work"),
        ("working_dir: /", "working_dir", "/"),
        ("working_dir: '/a b/c'", "working_dir", "/a b/c"),
    ],
)
def test_option_is_accepted(line: str, field: str, value: object) -> None:
    s = one(entry("cross-container", "world_size: 2", line))
    assert getattr(s, field) == value
    assert type(getattr(s, field)) is type(value)


@pytest.mark.parametrize(
    ("line", "key", "message"),
    [
        ("egress: maybe", "egress", "expected true or false; got 'maybe'"),
        ("egress: 1", "egress", "expected true or false; got '1'"),
        ("ipv6: 'true'", "ipv6", "expected true or false; got 'true'"),
        ("ipv6:", "ipv6", "expected true or false; got nothing"),
        ("extra_networks: -1", "extra_networks", "expected an integer >= 0; got '-1'"),
        ("extra_networks: 1.5", "extra_networks", "expected an integer >= 0; got '1.5'"),
        ("extra_networks: true", "extra_networks", "expected an integer >= 0; got 'true'"),
        ("cpus: 0", "cpus", "expected a number of CPUs > 0; got '0'"),
        ("cpus: -1", "cpus", "expected a number of CPUs > 0; got '-1'"),
        ("cpus: .inf", "cpus", "expected a number of CPUs > 0; got '.inf'"),
        ("cpus: true", "cpus", "expected a number of CPUs > 0; got 'true'"),
        ("cpus: two", "cpus", "expected a number of CPUs > 0; got 'two'"),
        ("cpus: '2'", "cpus", "expected a number of CPUs > 0; got '2'"),
    ],
)
def test_option_is_rejected(line: str, key: str, message: str) -> None:
    text = entry("cross-container", "world_size: 2", line)
    assert problems_of(text) == [f"{FILE}:4: scenarios[0].{key}: {message}"]


SIZE_EXPECTED = "expected a Docker size > 0 like 512m or 2g (digits, then b, k, m or g)"


@pytest.mark.parametrize("key", ["memory", "shm_size"])
@pytest.mark.parametrize(
    ("value", "got"),
    [
        ("512x", "'512x'"),
        ("1.5g", "'1.5g'"),
        ("10mb", "'10mb'"),
        ("m", "'m'"),
        ("0", "'0'"),
        ("0m", "'0m'"),
        ("-1", "'-1'"),
        ("'2 g'", "'2 g'"),
        ('"512m\\n"', "'512m\\n'"),
        ("''", "nothing"),
        ("", "nothing"),
        ("[1g]", "a list"),
        ("true", "'true'"),
    ],
)
def test_sizes_are_rejected(key: str, value: str, got: str) -> None:
    text = entry("cross-container", "world_size: 2", f"{key}: {value}")
    assert problems_of(text) == [f"{FILE}:4: scenarios[0].{key}: {SIZE_EXPECTED}; got {got}"]


@pytest.mark.parametrize(
    ("value", "got"),
    [
        ("'a b'", "'a b'"),
        ("':x'", "':x'"),
        ("'x:'", "'x:'"),
        ("''", "nothing"),
        ("", "nothing"),
        ("[1]", "a list"),
        ("'a:b:c'", "'a:b:c'"),
    ],
)
def test_user_is_rejected(value: str, got: str) -> None:
    text = entry("cross-container", "world_size: 2", f"user: {value}")
    assert problems_of(text) == [f"{FILE}:4: scenarios[0].user: expected a user: name, uid, name:group or uid:gid; got {got}"]


@pytest.mark.parametrize(
    ("value", "got"),
    [("work", "'work'"), ("./work", "'./work'"), ("''", "nothing"), ("", "nothing"), ("[/w]", "a list"), ("1", "'1'")],
)
def test_working_dir_must_be_absolute(value: str, got: str) -> None:
    text = entry("cross-container", "world_size: 2", f"working_dir: {value}")
    assert problems_of(text) == [
        f"{FILE}:4: scenarios[0].working_dir: expected an absolute path in the container (starting with '/'); got {got}"
    ]


def test_env_values_are_strings_as_written_sorted_by_name() -> None:
    text = yaml_text(
        """
        scenarios:
          - topology: cross-container
            world_size: 2
            env:
              ZED: last
              OMP_NUM_THREADS: 4
              VERSION: 1.10
              FLAG: yes
              PADDED: 007
              EMPTY: ''
              _UNDER: x
              lower_ok: "a b"
            checks: [env]
        """
    )
    s = one(text)
    assert s.env == (
        ("EMPTY", ""),
        ("FLAG", "yes"),
        ("OMP_NUM_THREADS", "4"),
        ("PADDED", "007"),
        ("VERSION", "1.10"),
        ("ZED", "last"),
        ("_UNDER", "x"),
        ("lower_ok", "a b"),
    )
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in s.env)


def test_env_problems_name_each_key() -> None:
    text = yaml_text(
        """
        scenarios:
          - topology: cross-container
            world_size: 2
            env:
              GOOD: 1
              1BAD: x
              BAD-DASH: x
              RANK: 3
              DISTVAL_RUN_ID: x
              LIST: [1]
              NULL_VALUE:
              TILDE: ~
              GOOD: 2
            checks: [env]
        """
    )
    name_expected = "expected an environment variable name (letters, digits and '_', not starting with a digit)"
    value_expected = "expected a value: a string, a number or true/false ('' for an empty one)"
    reserved = f"expected a variable the harness does not set ({', '.join(RESERVED_ENV)} and DISTVAL_* are its own)"
    assert problems_of(text) == [
        f"{FILE}:{line_of(text, '1BAD')}: scenarios[0].env.1BAD: {name_expected}; got '1BAD'",
        f"{FILE}:{line_of(text, 'BAD-DASH')}: scenarios[0].env.BAD-DASH: {name_expected}; got 'BAD-DASH'",
        f"{FILE}:{line_of(text, 'RANK')}: scenarios[0].env.RANK: {reserved}; got 'RANK'",
        f"{FILE}:{line_of(text, 'DISTVAL_RUN_ID')}: scenarios[0].env.DISTVAL_RUN_ID: {reserved}; got 'DISTVAL_RUN_ID'",
        f"{FILE}:{line_of(text, 'LIST')}: scenarios[0].env.LIST: {value_expected}; got a list",
        f"{FILE}:{line_of(text, 'NULL_VALUE')}: scenarios[0].env.NULL_VALUE: {value_expected}; got nothing",
        f"{FILE}:{line_of(text, 'TILDE')}: scenarios[0].env.TILDE: {value_expected}; got '~'",
        f"{FILE}:{line_of(text, 'GOOD: 2')}: scenarios[0].env.GOOD: duplicate key",
    ]


@pytest.mark.parametrize(("value", "got"), [("[A=1]", "a list"), ("A=1", "'A=1'"), ("", "nothing")])
def test_env_must_be_a_mapping(value: str, got: str) -> None:
    text = entry("cross-container", "world_size: 2", f"env: {value}")
    assert problems_of(text) == [
        f"{FILE}:4: scenarios[0].env: expected a mapping of environment variable names to values; got {got}"
    ]


def test_empty_env_is_accepted() -> None:
    assert one(entry("cross-container", "world_size: 2", "env: {}")).env == ()


def test_options_are_inherited_from_the_top_level_and_overridden() -> None:
    text = yaml_text(
        """
        egress: true
        ipv6: true
        cpus: 1.5
        memory: 1g
        shm_size: 256m
        user: '1000:1000'
        working_dir: /work
        env: {A: top, B: top}
        scenarios:
          - name: inherits
            topology: cross-container
            world_size: 2
            checks: [env]
          - name: overrides
            topology: in-container
            world_size: 2
            egress: false
            ipv6: false
            cpus: 4
            memory: 2g
            shm_size: 1g
            user: nobody
            working_dir: /tmp
            extra_networks: 1
            env: {B: own, C: own}
            checks: [env]
        """
    )
    inherits, overrides = scenarios_of(text)
    assert (inherits.egress, inherits.ipv6, inherits.cpus, inherits.memory, inherits.shm_size) == (True, True, 1.5, "1g", "256m")
    assert (inherits.user, inherits.working_dir, inherits.env, inherits.extra_networks) == (
        "1000:1000",
        "/work",
        (("A", "top"), ("B", "top")),
        0,
    )
    assert (overrides.egress, overrides.ipv6, overrides.cpus, overrides.memory, overrides.shm_size) == (
        False,
        False,
        4.0,
        "2g",
        "1g",
    )
    assert (overrides.user, overrides.working_dir, overrides.extra_networks) == ("nobody", "/tmp", 1)
    # Merged: the scenario's keys override the defaults' keys, the others are kept.
    assert overrides.env == (("A", "top"), ("B", "own"), ("C", "own"))


@pytest.mark.parametrize(
    ("line", "key", "message"),
    [
        ("egress: 2", "egress", "expected true or false; got '2'"),
        ("ipv6: no6", "ipv6", "expected true or false; got 'no6'"),
        ("cpus: 0", "cpus", "expected a number of CPUs > 0; got '0'"),
        ("memory: lots", "memory", f"{SIZE_EXPECTED}; got 'lots'"),
        ("shm_size: 1.5g", "shm_size", f"{SIZE_EXPECTED}; got '1.5g'"),
        ("user: 'a b'", "user", "expected a user: name, uid, name:group or uid:gid; got 'a b'"),
        ("working_dir: w", "working_dir", "expected an absolute path in the container (starting with '/'); got 'w'"),
        ("env: [A]", "env", "expected a mapping of environment variable names to values; got a list"),
    ],
)
def test_top_level_option_is_rejected(line: str, key: str, message: str) -> None:
    text = entry("cross-container", "world_size: 2", top=("version: 1", line))
    assert problems_of(text) == [f"{FILE}:2: {key}: {message}"]


@pytest.mark.parametrize("key", ["extra_networks", "nodes", "nproc_per_node", "world_size", "topology", "matrix", "exclude"])
def test_scenario_only_keys_are_unknown_at_the_top_level(key: str) -> None:
    text = entry("cross-container", "world_size: 2", top=(f"{key}: 1",))
    (problem,) = problems_of(text)
    assert problem.startswith(f"{FILE}:1: {key}: unknown key; expected one of version, backend, ")


# --- the matrix: expansion ------------------------------------------------------------------------

RDZV = yaml_text(
    """
    scenarios:
      - name: rdzv
        topology: cross-container
        checks: [env, all_reduce]
        timeout_s: 99
        matrix:
          rendezvous: [static, c10d]
          nodes: [2, 4]
          nproc_per_node: [1, 2]
    """
)


def test_expansion_order_and_names() -> None:
    scenarios = scenarios_of(RDZV)
    assert [s.name for s in scenarios] == [
        "rdzv.static.n2.p1",
        "rdzv.static.n2.p2",
        "rdzv.static.n4.p1",
        "rdzv.static.n4.p2",
        "rdzv.c10d.n2.p1",
        "rdzv.c10d.n2.p2",
        "rdzv.c10d.n4.p1",
        "rdzv.c10d.n4.p2",
    ]
    assert [(s.rendezvous, *layout(s)) for s in scenarios][-1] == ("c10d", 4, 2, 8)
    for s in scenarios:
        # The entry's other keys, on every expanded scenario.
        assert (s.topology, s.timeout_s, [c.name for c in s.checks]) == ("cross-container", 99.0, ["env", "all_reduce"])
        assert s.expanded_from == "rdzv"
        assert [axis for axis, _ in s.axes] == ["rendezvous", "nodes", "nproc_per_node"]
    assert scenarios[5].axes == (("rendezvous", "c10d"), ("nodes", "2"), ("nproc_per_node", "2"))


def test_example_name_from_the_issue() -> None:
    text = RDZV.replace("    topology: cross-container\n", "")
    text = text.replace("    matrix:\n", "    matrix:\n      topology: [cross-container]\n")
    assert "rdzv.cross.c10d.n4.p2" in [s.name for s in scenarios_of(text)]


def test_axes_and_values_keep_the_written_order() -> None:
    text = yaml_text(
        """
        scenarios:
          - name: m
            checks: [env]
            matrix:
              world_size: [4, 2]
              backend: [nccl, gloo]
              topology: [cross-container, in-container]
        """
    )
    assert [s.name for s in scenarios_of(text)] == [
        "m.w4.nccl.cross",
        "m.w4.nccl.in",
        "m.w4.gloo.cross",
        "m.w4.gloo.in",
        "m.w2.nccl.cross",
        "m.w2.nccl.in",
        "m.w2.gloo.cross",
        "m.w2.gloo.in",
    ]


@pytest.mark.parametrize(
    ("image", "short"),
    [
        ("pytorch/pytorch:2.6.0-cuda12.4-cudnn9-runtime", "pytorch-2.6.0-cuda12.4-cudnn9-runtime"),
        ("registry.example:5000/team/torch:2.6", "torch-2.6"),
        ("torch:2.6", "torch-2.6"),
        ("local/torch", "torch"),
        ("torch@sha256:" + "ab" * 16, "torch-sha256-" + "ab" * 16),
        ("distval-fixtures/torch:2.6-debian", "torch-2.6-debian"),
    ],
)
def test_image_values_are_named_by_their_last_part(image: str, short: str) -> None:
    text = entry("in-container", "name: img", "world_size: 2", f"matrix: {{image: ['{image}']}}")
    s = one(text)
    assert (s.name, s.image, s.axes) == (f"img.{short}", image, (("image", image),))


def test_every_axis_is_accepted_and_rendered() -> None:
    text = yaml_text(
        """
        scenarios:
          - name: all
            checks: [env]
            matrix:
              image: [a/torch:1]
              topology: [cross-container]
              rendezvous: [tcp]
              master_addr: [ip]
              backend: [gloo]
              device: [cpu]
              world_size: [2]
              nodes: [2]
              nproc_per_node: [1]
        """
    )
    s = one(text)
    assert s.name == "all.torch-1.cross.tcp.ip.gloo.cpu.w2.n2.p1"
    assert [axis for axis, _ in s.axes] == list(MATRIX_AXES)
    assert (s.image, s.rendezvous, s.master_addr, s.backend, *layout(s)) == ("a/torch:1", "tcp", "ip", "gloo", 2, 1, 2)


def test_matrix_scenarios_inherit_the_top_level_defaults() -> None:
    text = "backend: nccl\nmemory: 1g\nenv: {A: '1'}\n" + RDZV.replace("timeout_s: 99\n", "timeout_s: 99\n    env: {B: '2'}\n")
    for s in scenarios_of(text):
        assert (s.backend, s.memory, s.env) == ("nccl", "1g", (("A", "1"), ("B", "2")))


def test_matrix_and_plain_scenarios_keep_the_file_order() -> None:
    text = yaml_text(
        """
        scenarios:
          - {name: first, topology: in-container, world_size: 2, checks: [env]}
          - name: mid
            topology: cross-container
            world_size: 2
            checks: [env]
            matrix: {backend: [gloo, mpi]}
          - {name: last, topology: in-container, world_size: 2, checks: [env]}
        """
    )
    scenarios = scenarios_of(text)
    assert [(s.name, s.expanded_from) for s in scenarios] == [
        ("first", None),
        ("mid.gloo", "mid"),
        ("mid.mpi", "mid"),
        ("last", None),
    ]


# --- the matrix: exclude --------------------------------------------------------------------------


def test_exclude_removes_matching_combinations_only() -> None:
    text = RDZV + "    exclude:\n      - {rendezvous: c10d, nproc_per_node: 1}\n      - {nodes: 4, rendezvous: static}\n"
    assert [s.name for s in scenarios_of(text)] == [
        "rdzv.static.n2.p1",
        "rdzv.static.n2.p2",
        "rdzv.c10d.n2.p2",
        "rdzv.c10d.n4.p2",
    ]


def test_exclude_of_every_combination_is_a_problem() -> None:
    text = RDZV + "    exclude:\n      - {rendezvous: static}\n      - {rendezvous: c10d}\n"
    assert problems_of(text) == [
        f"{FILE}:{line_of(text, 'exclude:')}: scenarios[0].exclude: expected at least one combination left; "
        "the exclude entries remove all 8"
    ]


def test_exclude_key_must_be_an_axis_of_this_matrix() -> None:
    text = RDZV + "    exclude:\n      - {backend: gloo}\n      - {rendezvous: c10d, colour: red}\n"
    axes = "expected one of rendezvous, nodes, nproc_per_node"
    assert problems_of(text) == [
        f"{FILE}:{line_of(text, 'backend: gloo')}: scenarios[0].exclude[0].backend: unknown key; {axes}",
        f"{FILE}:{line_of(text, 'colour')}: scenarios[0].exclude[1].colour: unknown key; {axes}",
    ]


def test_exclude_value_must_be_one_of_the_axis_values() -> None:
    text = RDZV + "    exclude:\n      - rendezvous: env\n        nodes: 3\n      - {nproc_per_node: two}\n"
    assert problems_of(text) == [
        f"{FILE}:{line_of(text, 'rendezvous: env')}: scenarios[0].exclude[0].rendezvous: "
        "expected one of the matrix's rendezvous values (static, c10d); got 'env'",
        f"{FILE}:{line_of(text, 'nodes: 3')}: scenarios[0].exclude[0].nodes: "
        "expected one of the matrix's nodes values (2, 4); got '3'",
        f"{FILE}:{line_of(text, 'two')}: scenarios[0].exclude[1].nproc_per_node: expected an integer >= 1; got 'two'",
    ]


@pytest.mark.parametrize(
    ("value", "key_path", "message"),
    [
        ("[]", "exclude", "expected a non-empty list of mappings of matrix axes to values; got a list"),
        ("{nodes: 2}", "exclude", "expected a non-empty list of mappings of matrix axes to values; got a mapping"),
        ("", "exclude", "expected a non-empty list of mappings of matrix axes to values; got nothing"),
        ("[{}]", "exclude[0]", "expected at least one matrix axis; got an empty mapping (it would exclude everything)"),
        ("[nodes]", "exclude[0]", "expected a mapping with keys rendezvous, nodes, nproc_per_node; got 'nodes'"),
    ],
)
def test_exclude_shape(value: str, key_path: str, message: str) -> None:
    text = RDZV + f"    exclude: {value}\n"
    assert problems_of(text) == [f"{FILE}:{line_of(text, 'exclude:')}: scenarios[0].{key_path}: {message}"]


def test_exclude_without_matrix() -> None:
    text = entry("cross-container", "world_size: 2", "exclude: [{nodes: 2}]")
    assert problems_of(text) == [f"{FILE}:4: scenarios[0].exclude: expected exclude only with a matrix (it removes combinations)"]


# --- the matrix: invalid combinations -------------------------------------------------------------

TOPO_RDZV = yaml_text(
    """
    scenarios:
      - name: t
        world_size: 2
        checks: [env]
        matrix:
          topology: [in-container, cross-container]
          rendezvous: [static, c10d, env]
    """
)


def test_invalid_combination_is_a_problem_naming_it() -> None:
    problems = problems_of(TOPO_RDZV)
    line = line_of(TOPO_RDZV, "matrix:")
    standalone = "expected static for in-container (it runs the launcher with --standalone)"
    assert problems == [
        f"{FILE}:{line}: scenarios[0].matrix: combination t.in.c10d (topology=in-container, rendezvous=c10d) is invalid: "
        f"rendezvous: {standalone}; got 'c10d'; exclude it or change the axes",
        f"{FILE}:{line}: scenarios[0].matrix: combination t.in.env (topology=in-container, rendezvous=env) is invalid: "
        f"rendezvous: {standalone}; got 'env'; exclude it or change the axes",
    ]


def test_excluded_invalid_combinations_are_not_problems() -> None:
    text = (
        TOPO_RDZV
        + "    exclude:\n      - {topology: in-container, rendezvous: c10d}\n      - {topology: in-container, rendezvous: env}\n"
    )
    assert [(s.name, s.rendezvous) for s in scenarios_of(text)] == [
        ("t.in.static", "static"),
        ("t.cross.static", "static"),
        ("t.cross.c10d", "c10d"),
        ("t.cross.env", "env"),
    ]


def test_world_size_and_nodes_axes_must_agree_unless_excluded() -> None:
    text = yaml_text(
        """
        scenarios:
          - name: ws
            topology: cross-container
            nproc_per_node: 2
            checks: [env]
            matrix:
              world_size: [4, 8]
              nodes: [2, 4]
        """
    )
    line = line_of(text, "matrix:")
    assert problems_of(text) == [
        f"{FILE}:{line}: scenarios[0].matrix: combination ws.w4.n4 (world_size=4, nodes=4) is invalid: "
        "world_size: expected world_size = nodes x nproc_per_node = 8; got 4; exclude it or change the axes",
        f"{FILE}:{line}: scenarios[0].matrix: combination ws.w8.n2 (world_size=8, nodes=2) is invalid: "
        "world_size: expected world_size = nodes x nproc_per_node = 4; got 8; exclude it or change the axes",
    ]
    fixed = text + "    exclude:\n      - {world_size: 4, nodes: 4}\n      - {world_size: 8, nodes: 2}\n"
    assert [(s.name, *layout(s)) for s in scenarios_of(fixed)] == [("ws.w4.n2", 2, 2, 4), ("ws.w8.n4", 4, 2, 8)]


def test_combination_with_several_reasons_is_one_problem() -> None:
    text = yaml_text(
        """
        scenarios:
          - name: c
            checks: [env]
            nodes: 2
            world_size: 2
            matrix:
              topology: [in-container]
              rendezvous: [c10d]
        """
    )
    (problem,) = problems_of(text)
    assert problem.startswith(f"{FILE}:{line_of(text, 'matrix:')}: scenarios[0].matrix: combination c.in.c10d ")
    assert "nodes: expected 1 for in-container" in problem
    assert "rendezvous: expected static for in-container" in problem


def test_problem_of_fixed_keys_is_reported_once_where_the_key_is() -> None:
    text = yaml_text(
        """
        scenarios:
          - name: fixed
            topology: cross-container
            nodes: 2
            nproc_per_node: 2
            world_size: 3
            checks: [env]
            matrix:
              backend: [gloo, nccl, mpi]
        """
    )
    assert problems_of(text) == [
        f"{FILE}:{line_of(text, 'world_size: 3')}: scenarios[0].world_size: "
        "expected world_size = nodes x nproc_per_node = 4; got 3"
    ]


def test_env_rendezvous_with_a_nproc_axis() -> None:
    text = yaml_text(
        """
        scenarios:
          - name: e
            topology: cross-container
            nodes: 2
            rendezvous: env
            checks: [env]
            matrix:
              nproc_per_node: [1, 2]
        """
    )
    (problem,) = problems_of(text)
    assert problem == (
        f"{FILE}:{line_of(text, 'matrix:')}: scenarios[0].matrix: combination e.p2 (nproc_per_node=2) is invalid: "
        "rendezvous: expected static or c10d with nproc_per_node = 2 (env and tcp run one process per container, no launcher); "
        "got 'env'; exclude it or change the axes"
    )


# --- the matrix: bad axes -------------------------------------------------------------------------


def test_unknown_axis() -> None:
    text = RDZV.replace("nodes: [2, 4]", "checks: [env]")
    assert problems_of(text) == [
        f"{FILE}:{line_of(text, 'checks: [env]')}: scenarios[0].matrix.checks: "
        f"unknown key; expected one of {', '.join(MATRIX_AXES)}"
    ]


def test_bad_axis_value_has_the_item_key_path() -> None:
    text = yaml_text(
        """
        scenarios:
          - name: r
            topology: cross-container
            world_size: 2
            checks: [env]
            matrix:
              rendezvous:
                - static
                - c10d
                - etcd
              nodes: [2, 0]
        """
    )
    assert problems_of(text) == [
        f"{FILE}:{line_of(text, 'etcd')}: scenarios[0].matrix.rendezvous[2]: expected one of static, c10d, env, tcp; got 'etcd'",
        f"{FILE}:{line_of(text, 'nodes: [2, 0]')}: scenarios[0].matrix.nodes[1]: expected an integer >= 1; got '0'",
    ]


@pytest.mark.parametrize(
    ("value", "got"), [("[]", "got a list"), ("c10d", "got 'c10d'"), ("", "got nothing"), ("{a: 1}", "got a mapping")]
)
def test_axis_must_be_a_non_empty_list(value: str, got: str) -> None:
    text = RDZV.replace("rendezvous: [static, c10d]", f"rendezvous: {value}")
    assert problems_of(text) == [
        f"{FILE}:{line_of(text, 'rendezvous:')}: scenarios[0].matrix.rendezvous: "
        f"expected a non-empty list of rendezvous values; {got}"
    ]


def test_axis_value_listed_twice() -> None:
    text = RDZV.replace("nodes: [2, 4]", "nodes: [2, 4, 2]")
    assert problems_of(text) == [
        f"{FILE}:{line_of(text, 'nodes: [2, 4, 2]')}: scenarios[0].matrix.nodes[2]: expected each value once; 2 is also nodes[0]"
    ]


def test_image_values_with_the_same_short_name() -> None:
    text = RDZV.replace("nodes: [2, 4]", "nodes: [2, 4]\n      image: [a/torch:2.6, b/torch:2.6]")
    assert problems_of(text) == [
        f"{FILE}:{line_of(text, 'image:')}: scenarios[0].matrix.image[1]: expected values with distinct short names; "
        "'b/torch:2.6' and image[0] are both 'torch-2.6' in scenario names"
    ]


@pytest.mark.parametrize(("value", "got"), [("", "got nothing"), ("[a]", "got a list"), ("{}", "got an empty mapping")])
def test_matrix_must_be_a_non_empty_mapping(value: str, got: str) -> None:
    text = entry("cross-container", "name: m", "world_size: 2", f"matrix: {value}")
    (problem,) = problems_of(text)
    assert problem.startswith(f"{FILE}:{line_of(text, 'matrix:')}: scenarios[0].matrix: expected a mapping ")
    assert problem.endswith(got)


def test_matrix_needs_a_name() -> None:
    text = RDZV.replace("  - name: rdzv\n    topology", "  - topology")
    assert problems_of(text) == [
        f"{FILE}:2: scenarios[0].name: required key is missing (a matrix's scenarios are named <name>.<value>...)"
    ]


def test_key_and_axis_at_once() -> None:
    text = RDZV.replace("timeout_s: 99", "rendezvous: c10d")
    assert problems_of(text) == [
        f"{FILE}:{line_of(text, 'rendezvous: c10d')}: scenarios[0].rendezvous: "
        "expected either a key or a matrix axis; rendezvous is also matrix.rendezvous"
    ]


def test_axes_provide_required_keys() -> None:
    text = "scenarios:\n  - name: m\n    checks: [env]\n    matrix: {topology: [cross-container], nodes: [2]}\n"
    assert [s.name for s in scenarios_of(text)] == ["m.cross.n2"]
    missing = "scenarios:\n  - name: m\n    checks: [env]\n    matrix: {backend: [gloo]}\n"
    assert problems_of(missing) == [
        f"{FILE}:2: scenarios[0].topology: required key is missing",
        f"{FILE}:2: scenarios[0].world_size: required key is missing",
    ]


def test_expanded_names_longer_than_the_limit() -> None:
    name = "m" * (NAME_MAX - 4)
    text = f"scenarios:\n  - name: {name}\n    world_size: 2\n    checks: [env]\n"
    text += "    matrix: {topology: [in-container, cross-container]}\n"
    # "<name>.in" fits; "<name>.cross" does not. Reported once, at the entry's name.
    assert len(f"{name}.in") <= NAME_MAX < len(f"{name}.cross") == NAME_MAX + 2
    assert problems_of(text) == [
        f"{FILE}:2: scenarios[0].name: expected expanded names of at most {NAME_MAX} characters; "
        f"got '{name}.cross' ({NAME_MAX + 2})"
    ]


# --- names unique across the file -----------------------------------------------------------------


def test_expanded_names_must_be_unique_across_entries() -> None:
    text = yaml_text(
        """
        scenarios:
          - name: a
            topology: cross-container
            checks: [env]
            matrix: {world_size: [2, 3]}
          - name: a.w3
            topology: in-container
            world_size: 2
            checks: [env]
        """
    )
    assert problems_of(text) == [
        f"{FILE}:{line_of(text, 'name: a.w3')}: scenarios[1].name: expected a unique scenario name; 'a.w3' is also scenarios[0]"
    ]


def test_two_matrices_with_colliding_names() -> None:
    text = yaml_text(
        """
        scenarios:
          - name: x
            topology: cross-container
            checks: [env]
            matrix: {world_size: [2, 3]}
          - name: x
            topology: cross-container
            checks: [all_reduce]
            matrix: {world_size: [3, 4]}
        """
    )
    line = line_of(text, "checks: [all_reduce]") - 2
    assert problems_of(text) == [
        f"{FILE}:{line}: scenarios[1].name: expected a unique scenario name; 'x' is also scenarios[0]",
        f"{FILE}:{line}: scenarios[1].name: expected a unique scenario name; 'x.w3' is also scenarios[0]",
    ]


def test_matrix_name_and_plain_scenario_name_share_a_namespace() -> None:
    text = yaml_text(
        """
        scenarios:
          - {name: grp, topology: in-container, world_size: 2, checks: [env]}
          - name: grp
            topology: cross-container
            checks: [env]
            matrix: {world_size: [2]}
        """
    )
    assert problems_of(text) == [
        f"{FILE}:{line_of(text, '- name: grp')}: scenarios[1].name: expected a unique scenario name; 'grp' is also scenarios[0]"
    ]


def test_distinct_matrices_are_fine() -> None:
    text = RDZV + "  - name: other\n    topology: in-container\n    checks: [env]\n    matrix: {world_size: [2, 4]}\n"
    names = [s.name for s in scenarios_of(text)]
    assert names[-2:] == ["other.w2", "other.w4"]
    assert len(names) == len(set(names)) == 10


# --- every problem collected, in file order -------------------------------------------------------


def test_all_problems_are_collected_in_file_order() -> None:
    text = yaml_text(
        """
        scenarios:
          - name: m
            topology: cross-container
            cpus: 0
            checks: [env]
            matrix:
              nodes: [2, x]
              colour: [red]
            exclude:
              - {nodes: 3}
          - topology: in-container
            world_size: 2
            rendezvous: c10d
            checks: [env]
        memory: lots
        """
    )
    problems = problems_of(text)
    assert [p.split(": ")[1] for p in problems] == [
        "scenarios[0].cpus",
        "scenarios[0].matrix.nodes[1]",
        "scenarios[0].matrix.colour",
        "scenarios[0].exclude[0].nodes",
        "scenarios[1].rendezvous",
        "memory",
    ]
    lines = [int(p.split(":")[1]) for p in problems]
    assert lines == sorted(lines)


def test_config_error_is_raised_once_with_every_problem() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(TOPO_RDZV + entry("cross-container", "world_size: 2", "user: ''").split("scenarios:\n", 1)[1], FILE)
    assert len(caught.value.problems) == 3
