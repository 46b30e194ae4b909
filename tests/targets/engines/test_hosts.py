"""Several Docker hosts without Docker: --hosts and the hosts key (bad input is one line), placement, the plan
across hosts (every step names its host, host networking, the probed placeholders), the per-host facts, image
transfer and its refusal of a mismatch, and host-named errors. The real Engines: tests/targets/engines/test_hosts_docker.py."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from distval.cli.plan_render import plan_as_data, render_plan
from distval.config import load_config, parse_config
from distval.config.engine_hosts import host_specs, parse_hosts, tls_files
from distval.config.engine_urls import url_problem
from distval.engine_protocol import ContainerState, ImageInfo
from distval.errors import BadInput, EngineError, ImageMissing
from distval.plan.identity import scenario_hash
from distval.plan.model import CreateContainer, ProbeHost, StartContainer
from distval.plan.placeholders import facts_on_host, host_fact, resolve
from distval.run.steps import WAIT_SLICE_S
from distval.targets.base import plan_on, refuse_what_it_lacks
from distval.targets.docker.runtime import HOST_WATCH_S
from distval.targets.engines.hosts import placement, run_hosts
from distval.targets.engines.plan import rendezvous_target
from distval.targets.engines.planning import plan_run
from distval.targets.engines.target import EnginesTarget
from distval.targets.engines.transfer import ImageMismatch, same_image
from tests.config_helpers import FILE, line_of, problems_of, yaml_text
from tests.fake_clock import FakeClock
from tests.fake_engine import FakeEngine

A, B, C = "tcp://10.0.0.1:2375", "https://10.0.0.2:2376", "ssh://ci@node3"
CROSS = """
version: 1
scenarios:
  - name: cross
    topology: cross-container
    world_size: 3
    checks: [env, all_reduce]
  - name: inside
    topology: in-container
    world_size: 2
    checks: [env]
"""


@pytest.mark.parametrize(
    "url",
    [
        "unix:///var/run/docker.sock",
        "tcp://10.0.0.1:2375",
        "tcp://node-1.example:2375",
        "https://[fd00::1]:2376",
        "ssh://ci@node3",
        "ssh://ci@node3:2222",
    ],
)
def test_engine_urls_docker_py_takes_are_accepted(url: str) -> None:
    assert url_problem(url) is None
    assert parse_hosts(url) == (url,)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10.0.0.1:2375", "(no scheme)"),
        ("http://10.0.0.1:2375", "(scheme 'http')"),
        ("tcp://10.0.0.1", "with a port"),
        ("tcp://10.0.0.1:99999", "Port out of range"),
        ("unix://relative.sock", "expected unix:///ABSOLUTE/PATH"),
        ("tcp://10.0.0.1:2375/path", "a path, query or fragment"),
        ("ssh://ci:secret@node3", "without a password"),
        ("tcp://bad_host!:2375", "neither a host name nor an IP address"),
        (f"{A},,{B}", "no empty entry"),
        (f"{A},{A}", "listed twice"),
        ("", "no empty entry"),
    ],
)
def test_bad_hosts_are_one_line_naming_what_was_expected_and_seen(text: str, expected: str) -> None:
    with pytest.raises(BadInput) as caught:
        parse_hosts(text)
    message = str(caught.value)
    assert message.startswith("--hosts: ") and "\n" not in message
    assert expected in message


def test_the_command_line_refuses_bad_hosts_with_exit_2_and_one_line(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(yaml_text(CROSS))
    done = subprocess.run(
        [sys.executable, "-m", "distval", "plan", str(config), "--hosts", "tcp://10.0.0.1"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "expected tcp://HOST:PORT with a port" in done.stderr, done.stderr


def test_nodes_go_on_hosts_in_order_or_as_placed() -> None:
    assert placement(3, 2) == (0, 1, 0)
    assert placement(2, 3) == (0, 1)
    assert placement(3, 2, (1, 1, 0)) == (1, 1, 0)
    with pytest.raises(BadInput, match=r"one host index per node \(3\); got 2"):
        placement(3, 2, (0, 1))
    with pytest.raises(BadInput, match=r"expected host indexes 0..1 .*; got 2"):
        placement(2, 2, (0, 2))


def test_https_hosts_need_tls_files_and_get_them(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"https://10.0.0.2:2376 is TLS .*--tls-ca"):
        host_specs([A, B], None)
    for name in ("ca.pem", "cert.pem", "key.pem"):
        (tmp_path / name).write_text("x")
    files = tls_files(None, None, None, {"DOCKER_CERT_PATH": str(tmp_path)})
    assert files is not None and files.ca == str(tmp_path / "ca.pem")
    plain, secure = host_specs([A, B], files)
    assert plain.tls is None and secure.tls == files
    with pytest.raises(BadInput, match="go together"):
        tls_files(str(tmp_path / "ca.pem"), None, None, {})
    with pytest.raises(BadInput, match=r"expected a readable file at .*missing.pem"):
        tls_files(str(tmp_path / "missing.pem"), str(tmp_path / "cert.pem"), str(tmp_path / "key.pem"), {})


def test_the_hosts_key_is_read_once_and_bad_entries_name_file_line_and_key_path() -> None:
    config = parse_config(yaml_text(f"version: 1\nhosts: [{A}, {B}]\n" + CROSS.split("version: 1\n", 1)[1]), FILE)
    assert all(s.hosts == (A, B) for s in config.scenarios)
    text = yaml_text(
        """
        version: 1
        scenarios:
          - topology: cross-container
            world_size: 2
            hosts: [tcp://10.0.0.1:2375, tcp://10.0.0.1]   # bad
            checks: [env]
        """
    )
    (problem,) = problems_of(text)
    assert problem.startswith(f"{FILE}:{line_of(text, '# bad')}: scenarios[0].hosts[1]: expected tcp://HOST:PORT with a port")
    (problem,) = problems_of(text.replace("hosts: [tcp://10.0.0.1:2375, tcp://10.0.0.1]", "hosts: tcp://10.0.0.1:2375"))
    assert "scenarios[0].hosts: expected a list of 1..64 Docker Engine URLs; got 'tcp://10.0.0.1:2375'" in problem
    (problem,) = problems_of(text.replace("hosts: [tcp://10.0.0.1:2375, tcp://10.0.0.1]", "advertise_addr: node0"))
    assert "scenarios[0].advertise_addr: expected an IP address (as a string); got 'node0'" in problem


def test_the_plan_across_hosts_names_each_steps_host_and_uses_host_networking() -> None:
    config = parse_config(yaml_text(CROSS), FILE)
    plan = plan_run(config, "r1", hosts=(A, B))
    cross, inside = plan.scenarios
    assert cross.networks == () and [c.host for c in cross.containers] == [A, B, A]
    assert [(type(s).__name__, s.host) for s in cross.steps] == [
        ("ProbeHost", A),
        ("ProbeHost", B),
        *[("CreateContainer", h) for h in (A, B, A)],
        *[("StartContainer", h) for h in (A, B, A)],
    ]
    first, second = (s for s in cross.steps if isinstance(s, ProbeHost))
    assert first.first and not second.first
    for container in cross.containers:
        kwargs = container.create_kwargs()
        assert kwargs["network_mode"] == "host" and "hostname" not in kwargs and "network" not in kwargs
        assert ("GLOO_SOCKET_IFNAME", "{socket_ifname}") in container.env
        assert "--master_addr={node0_ip}" in container.argv and "--master_port={master_port}" in container.argv
    # host 0's probe looks toward host 0's own address; the others toward the rendezvous point once known.
    assert cross.probes[0].argv[-2:] == ("10.0.0.1", "2") and cross.probes[1].argv[-2:] == ("{node0_ip}", "0")
    # An in-container scenario runs on host 0 as on one Engine, on its own network there.
    assert inside.networks and {s.host for s in inside.steps} == {A}
    text = render_plan(plan)
    assert f"  host 0: {A} (nodes 0, 2)\n  host 1: {B} (node 1)\n" in text
    assert f"4. create container distval-r1-cross-n1 (node 1, ranks 1)  [on host 1: {B}]" in text
    assert "placeholder {socket_ifname}: the interface holding the route" in text
    data = plan_as_data(plan)["scenarios"][0]
    assert data["hosts"] == [A, B] and [c["host"] for c in data["containers"]] == [A, B, A]
    json.dumps(data)


def test_without_hosts_the_plan_is_unchanged() -> None:
    plan = plan_run(parse_config(yaml_text(CROSS), FILE), "r1")
    assert all(s.host == "" for sp in plan.scenarios for s in sp.steps)
    assert all(sp.hosts == () and sp.probes == () for sp in plan.scenarios)
    assert "[on host" not in render_plan(plan) and "hosts" not in plan_as_data(plan)["scenarios"][0]


def test_per_host_facts_resolve_to_each_hosts_own_interface() -> None:
    plan = plan_run(parse_config(yaml_text(CROSS), FILE), "r1", hosts=(A, B)).scenarios[0]
    facts = {
        "node0_ip": "10.0.0.1",
        "node0_host": "10.0.0.1",
        "master_port": "40001",
        "c10d_port": "40002",
        host_fact("socket_ifname", A): "eth0",
        host_fact("socket_ifname", B): "ens5",
    }
    for container, ifname in zip(plan.containers, ("eth0", "ens5", "eth0"), strict=True):
        resolved = resolve(container, facts_on_host(facts, container.host))
        assert dict(resolved.env)["GLOO_SOCKET_IFNAME"] == ifname == dict(resolved.env)["NCCL_SOCKET_IFNAME"]
        assert "--master_addr=10.0.0.1" in resolved.argv and "--master_port=40001" in resolved.argv


def test_the_rendezvous_point_is_advertised_or_host_0s_url_address_or_the_route_to_the_next_host() -> None:
    assert rendezvous_target((A, B), "192.0.2.7") == "192.0.2.7"
    assert rendezvous_target((A, B), None) == "10.0.0.1"
    assert rendezvous_target(("unix:///var/run/docker.sock", C), None) == "node3"
    assert rendezvous_target(("unix:///var/run/docker.sock",), None) == "127.0.0.1"


def test_the_run_uses_hosts_override_else_every_scenarios_hosts_in_order() -> None:
    assert run_hosts([(A, B), (B, C)], ()) == (A, B, C)
    assert run_hosts([(A, B)], (C,)) == (C,)
    assert run_hosts([(), ()], ()) == ()


class FakeHost:
    """An Engine as transfer.py sees it: images by reference, save/load of bytes."""

    def __init__(self, where: str, images: dict[str, ImageInfo], fail_load: bool = False) -> None:
        self.where, self.images, self.fail_load = where, dict(images), fail_load
        self.loaded: list[int] = []
        self.pulled: list[str] = []

    def image(self, reference: str) -> ImageInfo | None:
        return self.images.get(reference)

    def save_image(self, reference: str) -> Iterator[bytes]:
        yield from (b"x" * 1000, reference.encode())

    def load_image(self, chunks: Iterable[bytes]) -> list[str]:
        data = b"".join(chunks)
        self.loaded.append(len(data))
        if self.fail_load:
            return []
        reference = data[1000:].decode()
        self.images[reference] = ImageInfo("sha256:good", (reference,), {})
        return [reference]

    def pull_digest(self, reference: str) -> None:
        self.pulled.append(reference)
        self.images["img:1"] = ImageInfo("sha256:good", ("img:1",), {})


GOOD = ImageInfo("sha256:good", ("img:1",), {}, ("reg/img@sha256:" + "a" * 64,))


def test_transfer_copies_the_image_where_it_is_missing_or_different_and_says_how_much() -> None:
    hosts = [
        FakeHost("h0", {"img:1": GOOD}),
        FakeHost("h1", {}),
        FakeHost("h2", {"img:1": ImageInfo("sha256:old", (), {})}),
        FakeHost("h3", {"img:1": GOOD}),
    ]
    lines: list[str] = []
    moved = same_image(hosts, "img:1", "transfer", lines.append)
    assert [(m.host, m.how, m.bytes) for m in moved] == [(1, "transfer", 1005), (2, "transfer", 1005), (3, "present", 0)]
    assert hosts[1].loaded == [1005] and hosts[3].loaded == []
    assert any("copying it from host 0 to host 1 (h1)" in line for line in lines)


def test_pull_goes_by_the_digest_host_0_has() -> None:
    hosts = [FakeHost("h0", {"img:1": GOOD}), FakeHost("h1", {})]
    assert [m.how for m in same_image(hosts, "img:1", "pull", lambda line: None)] == ["pull"]
    assert hosts[1].pulled == [GOOD.repo_digests[0]]


def test_a_mismatch_after_loading_refuses_the_run_naming_both_ids() -> None:
    hosts = [FakeHost("h0", {"img:1": GOOD}), FakeHost("h1", {"img:1": ImageInfo("sha256:old", (), {})}, fail_load=True)]
    with pytest.raises(ImageMismatch) as caught:
        same_image(hosts, "img:1", "transfer", lambda line: None)
    assert str(caught.value) == (
        "image img:1 differs between hosts: expected sha256:good (host 0, h0) on every host; host 1 (h1) has sha256:old"
    )


def test_an_image_missing_on_host_0_is_said_so() -> None:
    with pytest.raises(ImageMissing, match=r"image img:1 is not on host 0 \(h0\)"):
        same_image([FakeHost("h0", {}), FakeHost("h1", {})], "img:1", "transfer", lambda line: None)


def test_host_engine_errors_name_the_host() -> None:
    from distval.targets.engines.runtime import HostEngine

    class Unreachable:
        where, run_id = "tcp://10.0.0.9:2375", "r"

        def state(self, container: object) -> None:
            raise EngineError("inspect n1: Connection refused")

    engine = HostEngine(2, Unreachable())  # type: ignore[arg-type]
    with pytest.raises(EngineError, match=r"^host 2 \(tcp://10.0.0.9:2375\): inspect n1: Connection refused$"):
        engine.state(object())


def test_steps_without_hosts_keep_their_old_fields() -> None:
    assert CreateContainer("c") == CreateContainer("c", host="") and StartContainer("c").host == ""


def test_the_host_probe_finds_the_route_its_interface_and_free_ports(capsys: pytest.CaptureFixture[str]) -> None:
    from distval_suite import host_probe

    assert host_probe.source_address("127.0.0.1") == "127.0.0.1"
    assert host_probe.interface_of("10.1.2.3", {"lo": "127.0.0.1", "eth7": "10.1.2.3"}) == "eth7"
    assert host_probe.interface_of("10.9.9.9", {"lo": "127.0.0.1"}) == ""
    ports = host_probe.free_ports(3)
    assert len(set(ports)) == 3 and all(1024 <= p <= 65535 for p in ports)
    assert host_probe.main(["127.0.0.1", "2"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["address"] == "127.0.0.1" and found["interface"] == "lo" and len(found["ports"]) == 2


def test_an_image_no_host_has_comes_from_the_origin_given_and_is_checked_against_it() -> None:
    local = FakeHost("local", {"img:1": GOOD})
    hosts = [FakeHost("h0", {}), FakeHost("h1", {"img:1": GOOD})]
    lines: list[str] = []
    moved = same_image(hosts, "img:1", "transfer", lines.append, origin=local)
    assert [(m.host, m.how) for m in moved] == [(0, "transfer"), (1, "present")]
    assert any("copying it from the local Engine to host 0 (h0)" in line for line in lines)
    moved = same_image([FakeHost("h0", {}), hosts[1]], "img:1", "transfer", lines.append, origin=hosts[1])
    assert [(m.host, m.how) for m in moved] == [(0, "transfer")]
    assert any("copying it from host 1 to host 0" in line for line in lines)


class ProbedEngine(FakeEngine):
    """A fake host whose probe answers, and which can become unreachable once its node has started."""

    def __init__(self, name: str, interface: str, unreachable_after_start: bool = False) -> None:
        super().__init__("r1")
        self.where = f"tcp://{name}:2375"
        self.name, self.interface, self.unreachable_after_start, self.started = name, interface, unreachable_after_start, False

    def start(self, container: Any) -> None:
        super().start(container)
        self.started = self.started or not str(container).endswith(tuple(f"probe{i}" for i in range(9)))

    def state(self, container: Any) -> ContainerState:
        if self.unreachable_after_start and self.started:
            raise EngineError(f"inspect {container}: Connection refused")
        return super().state(container)

    def logs(self, container: Any) -> tuple[str, str]:
        if "probe" in str(container):
            return json.dumps({"address": "10.0.0.1", "interface": self.interface, "ports": [40001, 40002]}) + "\n", ""
        return "out", "err"


def test_the_runtime_runs_each_step_on_its_host_and_an_unreachable_one_is_that_hosts_error() -> None:
    from distval.run.events import NoEvents
    from distval.targets.engines.runtime import HostEngine, run_across_hosts

    plan = plan_run(parse_config(yaml_text(CROSS), FILE), "r1", hosts=(A, B)).scenarios[0]
    first, second = ProbedEngine("a", "eth0"), ProbedEngine("b", "ens5", unreachable_after_start=True)
    hosts = {A: HostEngine(0, first), B: HostEngine(1, second)}  # type: ignore[arg-type]
    outcome = run_across_hosts(FakeEngine("unused"), plan, NoEvents(), hosts=hosts)
    assert outcome.setup_error == "host 1 (tcp://b:2375): inspect distval-r1-cross-n1: Connection refused"
    # Node 0 and node 2 on host 0, node 1 on host 1; both hosts probed, both cleaned.
    assert first.calls.count("create_container") == 3 and second.calls.count("create_container") == 2
    assert first.calls[-1] == "remove_labelled" and second.calls[-1] == "remove_labelled"


class RunningEngine(ProbedEngine):
    """A fake host whose nodes run until killed: the wait on them only ever times out, taking its timeout on
    ``clock`` (shared by the hosts of a scenario)."""

    clock = FakeClock()

    def state(self, container: Any) -> ContainerState:
        if self.unreachable_after_start and self.started:
            raise EngineError(f"inspect {container}: Connection refused")
        if "probe" in str(container):
            return super().state(container)
        return ContainerState("running", None, False)

    def wait_stopped(self, container: Any, timeout_s: float) -> bool:
        if "probe" in str(container):
            return True
        self.clock.advance(timeout_s)
        return False


def test_an_engine_that_stops_answering_while_another_hosts_node_is_waited_on_is_its_error_before_the_deadline() -> None:
    """The wait blocks on node 0 (host 0), which runs on: host 1, gone, is its error within HOST_WATCH_S, not at
    the scenario's deadline (240 s). On a fake clock that the waits move (tests/fake_clock.py)."""
    from distval.run.events import NoEvents
    from distval.targets.engines.runtime import HostEngine, run_across_hosts

    plan = plan_run(parse_config(yaml_text(CROSS), FILE), "r1", hosts=(A, B)).scenarios[0]
    first, second = RunningEngine("a", "eth0"), RunningEngine("b", "ens5", unreachable_after_start=True)
    first.clock = second.clock = clock = FakeClock()
    hosts = {A: HostEngine(0, first), B: HostEngine(1, second)}  # type: ignore[arg-type]
    started = clock()
    outcome = run_across_hosts(FakeEngine("unused"), plan, NoEvents(), hosts=hosts, clock=clock)
    assert outcome.setup_error == "host 1 (tcp://b:2375): inspect distval-r1-cross-n1: Connection refused"
    assert HOST_WATCH_S <= clock() - started <= HOST_WATCH_S + WAIT_SLICE_S, "seen at the deadline, not when the host went"
    assert first.calls[-1] == "remove_labelled" and second.calls[-1] == "remove_labelled"


def test_hosts_and_host_mode_are_refused_together_in_one_line(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(yaml_text(CROSS))
    done = subprocess.run(
        [sys.executable, "-m", "distval", "run", str(config), "--local", "--hosts", A, "--quiet"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "distval: --hosts names Docker Engines, --local runs local processes without Docker: give one, not both" in done.stderr


def test_cleanup_with_hosts_cleans_each_engine(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import distval.cli.main
    from distval.config.engine_hosts import HostSpec

    seen: list[str] = []

    class Engine:
        def __init__(self, run_id: str, host: HostSpec) -> None:
            self.where = host.url
            seen.append(host.url)

        def list_managed(self, labels: list[str] | None = None) -> list[object]:
            return []

    monkeypatch.setattr(distval.cli.main, "Engine", Engine, raising=False)
    other = "tcp://10.0.0.3:2375"
    assert distval.cli.main.main(["cleanup", "--hosts", f"{A},{other}"]) == 0
    assert seen == [A, other]
    out = capsys.readouterr().out
    assert f"on {A}:\n" in out and f"on {other}:\n" in out and out.count("removed 0 container(s)") == 2


def test_placement_puts_nodes_where_the_scenario_says_and_a_wrong_one_is_one_line(tmp_path: Path) -> None:
    placed = CROSS.replace("    world_size: 3\n", "    world_size: 3\n    placement: [1, 1, 0]\n", 1)
    plan = plan_run(parse_config(yaml_text(placed), FILE), "r1", hosts=(A, B)).scenarios[0]
    assert [c.host for c in plan.containers] == [B, B, A]
    assert [p.host for p in plan.probes] == [B, A]  # node 0's host is probed first: it is the rendezvous point
    config = tmp_path / "c.yaml"
    config.write_text(yaml_text(placed))
    done = subprocess.run(
        [sys.executable, "-m", "distval", "plan", str(config), "--hosts", A], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2
    assert done.stderr == "distval: scenario cross: placement: expected host indexes 0..0 (one per --hosts entry); got 1\n"
    (problem,) = problems_of(yaml_text(placed.replace("[1, 1, 0]", "[1, true, 0]")))
    assert "scenarios[0].placement[1]: expected a host index 0..63; got 'true'" in problem


def _plan_command(tmp_path: Path, text: str, *options: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "c.yaml"
    config.write_text(yaml_text(text))
    return subprocess.run(
        [sys.executable, "-m", "distval", "plan", str(config), *options], capture_output=True, text=True, check=False
    )


def test_a_scenario_with_faults_is_refused_across_hosts_never_run_without_them(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "distval", "plan", "configs/faults.yaml", "--hosts", f"{A},tcp://10.0.0.3:2375"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        "distval: scenarios kill-2x1, kill-rank-2x1, kill-3x1, kill-store-2x1, kill-store-3x1 and 8 more ask for "
        "injected faults (faults:); the engines target cannot give it: the fault runner injects faults on one Engine "
        "only; run it without --hosts\n"
    )
    faulty = load_config("configs/faults.yaml")
    # One host named with --hosts is still the engines target: refused from its declaration, before anything runs.
    across = EnginesTarget((A,), (A,), None, None, "transfer", print)
    with pytest.raises(BadInput, match="^scenarios kill-2x1, .* ask for injected faults .*the engines target cannot"):
        refuse_what_it_lacks(across, plan_on(across, faulty, "r1"))
    assert all(sp.faults is not None for sp in plan_run(faulty, "r1").scenarios)  # one Engine: kept


def test_an_in_container_scenario_with_its_own_hosts_key_plans_on_host_0() -> None:
    inside = f"version: 1\nhosts: [{A}, {B}]\n" + CROSS.split("version: 1\n", 1)[1]
    plan = plan_run(parse_config(yaml_text(inside), FILE), "r1").scenarios[1]  # was a RecursionError
    assert plan.hosts == (A, B) and {s.host for s in plan.steps} == {A} and plan.networks


def test_a_hosts_key_in_the_file_needs_the_command_lines_consent(tmp_path: Path) -> None:
    text = f"version: 1\nhosts: [{A}, tcp://10.0.0.3:2375]\n" + CROSS.split("version: 1\n", 1)[1]
    done = _plan_command(tmp_path, text)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "scenario cross: hosts: places the ranks on 2 Engine(s)" in done.stderr
    assert "pass --hosts-from-config to allow it (or give the Engines with --hosts)" in done.stderr
    allowed = _plan_command(tmp_path, text, "--hosts-from-config")
    assert allowed.returncode == 0 and f"host 0: {A} (nodes 0, 2)" in allowed.stdout
    assert _plan_command(tmp_path, text, "--hosts", A).returncode == 0  # --hosts replaces the file's hosts
    assert _plan_command(tmp_path, CROSS).returncode == 0  # no hosts key: nothing to allow
    config = tmp_path / "hosts.yaml"
    config.write_text(yaml_text(text))
    run = subprocess.run(
        [sys.executable, "-m", "distval", "run", str(config), "--quiet"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 2 and "pass --hosts-from-config to allow it" in run.stderr


def test_the_plan_shows_the_image_transfer_its_destinations_and_host_networking() -> None:
    plan = plan_run(parse_config(yaml_text(CROSS), FILE), "r1", hosts=(A, B))
    text = render_plan(plan)
    image = plan.scenarios[0].image
    assert f"  image transfer: {image} to {A}, {B} (docker save | docker load" in text
    assert "  host networking: 5 container(s) (network_mode host" in text and "distval-r1-cross-probe1" in text
    data = plan_as_data(plan)["scenarios"][0]
    assert data["image_transfer"]["destinations"] == [A, B] and data["image_transfer"]["image"] == image
    assert len(data["host_network"]["containers"]) == 5
    inside = plan_as_data(plan)["scenarios"][1]
    assert inside["image_transfer"]["destinations"] == [A, B] and inside["host_network"]["containers"] == []
    alone = plan_run(parse_config(yaml_text(CROSS), FILE), "r1")
    assert "image transfer" not in render_plan(alone) and "image_transfer" not in plan_as_data(alone)["scenarios"][0]


def test_the_scenario_hash_covers_the_hosts_and_not_the_run_id() -> None:
    config = parse_config(yaml_text(CROSS), FILE)
    one, across, again, elsewhere = (
        plan_run(config, "r1").scenarios[0],
        plan_run(config, "r1", hosts=(A, B)).scenarios[0],
        plan_run(config, "r2", hosts=(A, B)).scenarios[0],
        plan_run(config, "r1", hosts=(B, A)).scenarios[0],
    )
    for any_image in (False, True):
        assert scenario_hash(across, any_image) != scenario_hash(one, any_image)
        assert scenario_hash(across, any_image) == scenario_hash(again, any_image)
        assert scenario_hash(across, any_image) != scenario_hash(elsewhere, any_image)
    assert scenario_hash(plan_run(config, "r1").scenarios[0]) == scenario_hash(plan_run(config, "zz-9").scenarios[0])
    # The plan given is hashed, not the scenario planned again: a changed container is a changed hash.
    first = dataclasses.replace(one.containers[0], argv=(*one.containers[0].argv, "--extra"))
    changed = dataclasses.replace(one, containers=(first, *one.containers[1:]))
    assert scenario_hash(changed) != scenario_hash(one)
