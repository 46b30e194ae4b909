"""The reaper (distval/targets/docker/reaper.py, distval/targets/docker/reaper_daemon.py) against the real Engine.
Marked ``docker``.

``distval run`` runs as a subprocess that the tests kill with SIGKILL or SIGINT, or let end; every run has
a run id of its own, and each test removes what is left of its runs by that id at its end.
"""

from __future__ import annotations

import hmac
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import distval.targets.docker.reaper
from distval.cli.main import main
from distval.images import REAPER_IMAGE
from distval.plan.specs import ContainerPlan, NetworkPlan
from distval.tarball import File, build_tar
from distval.targets.docker.engine import Engine
from distval.targets.docker.reaper import GRACE_S, REAPER_PORT, addresses, daemon_command, engine_socket_path
from tests.docker_helpers import leftovers
from tests.paths import ROOT

pytestmark = pytest.mark.docker
IMAGE = "distval-fixtures/torch:2.6-debian"
# From SIGKILL to nothing of the run in the Engine: the code's part is the reaper's grace period (GRACE_S, 2 s), the
# rest the Engine's forced removal of each container and the network. Measured 2026-12-06 on 2 cores: 3.3 s at load
# 9-14, 3.7-3.9 s at 23-25 (earlier: 5.0 s at 20, 7.0 s at 36); the wait ends as soon as nothing is left, so 30 s
# costs nothing when the reaper works and still fails one that never removes.
REAP_BOUND_S = 30.0
STARTUP_S = 420.0

CONFIG = """\
version: 1
timeout_s: 400
scenarios:
  - name: good
    topology: cross-container
    world_size: 2
    checks: [env]
"""
FAILING = """\
  - name: bad
    topology: cross-container
    world_size: 2
    checks: [{name: identity, args: {torch: '>=99'}}]
"""


@pytest.fixture
def run_id(docker_client: Any, fixture_image: Callable[[str], str]) -> Iterator[str]:
    fixture_image(IMAGE)
    fixture_image(REAPER_IMAGE)
    value = "tr" + secrets.token_hex(4)
    yield value
    Engine(value).remove_labelled()


def config(tmp_path: Path, failing: bool = False) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG + (FAILING if failing else ""), encoding="utf-8")
    return path


def distval_run(path: Path, run_id: str, *extra: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "distval", "run", str(path), "--image", IMAGE, "--run-id", run_id, *extra]
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_line(process: subprocess.Popen[str], *needles: str) -> list[str]:
    """stderr lines up to the first point where each of ``needles`` was in a line, in any order (the reaper
    says it holds the run from its own thread, while the first scenario is set up)."""
    assert process.stderr is not None
    seen: list[str] = []
    missing = set(needles)
    until = time.monotonic() + STARTUP_S
    while time.monotonic() < until:
        line = process.stderr.readline()
        if not line:
            break
        seen.append(line.rstrip("\n"))
        missing -= {needle for needle in missing if needle in line}
        if not missing:
            return seen
    process.kill()
    raise AssertionError(f"expected stderr lines with {sorted(missing)!r} within {STARTUP_S:g} s; saw:\n" + "\n".join(seen))


def wait_until_gone(client: Any, run_id: str, bound_s: float) -> tuple[float, list[str]]:
    """(seconds until the Engine held nothing of the run, or the bound; what it held last)."""
    started = time.monotonic()
    while True:
        left = leftovers(client, run_id)
        elapsed = time.monotonic() - started
        if not left or elapsed > bound_s:
            return elapsed, left
        time.sleep(0.2)


def test_sigkill_of_distval_mid_run_leaves_nothing_within_the_bound(run_id: str, docker_client: Any, tmp_path: Path) -> None:
    process = distval_run(config(tmp_path), run_id)
    wait_for_line(process, "started 2 container(s)", f"reaper distval-{run_id}-reaper holds run {run_id}")
    held = sorted(leftovers(docker_client, run_id))
    assert held == sorted(
        [f"distval-{run_id}-good", f"distval-{run_id}-good-n0", f"distval-{run_id}-good-n1", f"distval-{run_id}-reaper"]
    ), held
    process.kill()
    process.wait()
    elapsed, left = wait_until_gone(docker_client, run_id, REAP_BOUND_S)
    print(f"SIGKILL to nothing left: {elapsed:.1f} s (load {os.getloadavg()[0]:.1f})")
    assert left == [], f"expected nothing of run {run_id} {REAP_BOUND_S:g} s after SIGKILL; the Engine still holds {left}"


def test_a_local_engines_reaper_shares_distvals_network_and_still_reaps_after_sigkill(
    run_id: str, docker_client: Any, tmp_path: Path
) -> None:
    """distval on the Engine's host: its reaper runs in the host's network, at a loopback port, with nothing
    published (no network of its own to set up and tear down: about 0.2 s of every run, issue 13)."""
    interface = Engine(run_id).bridge_interface()
    names = [name for _, name in socket.if_nameindex()]
    if interface not in names or distval.targets.docker.reaper.own_container() is not None:
        pytest.skip(f"the Engine's bridge {interface} is not an interface here ({names}): the reaper gets a network of its own")
    process = distval_run(config(tmp_path), run_id)
    lines = wait_for_line(process, "started 2 container(s)", f"reaper distval-{run_id}-reaper holds run {run_id} (at 127.0.0.1:")
    attrs = docker_client.api.inspect_container(f"distval-{run_id}-reaper")
    assert attrs["HostConfig"]["NetworkMode"] == "host", attrs["HostConfig"]
    assert not attrs["HostConfig"].get("PortBindings"), attrs["HostConfig"]
    assert not [line for line in lines if "no reaper" in line], lines
    process.kill()
    process.wait()
    elapsed, left = wait_until_gone(docker_client, run_id, REAP_BOUND_S)
    assert left == [], f"expected nothing of run {run_id} {REAP_BOUND_S:g} s after SIGKILL; the Engine still holds {left}"


@pytest.mark.parametrize("ending", ["pass", "fail", "ctrl-c"])
def test_normal_endings_leave_no_reaper(run_id: str, docker_client: Any, tmp_path: Path, ending: str) -> None:
    process = distval_run(config(tmp_path, failing=ending == "fail"), run_id)
    started = ["started 2 container(s)"] if ending == "ctrl-c" else []
    lines = wait_for_line(process, f"reaper distval-{run_id}-reaper holds run {run_id}", *started)
    if ending == "ctrl-c":
        process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=STARTUP_S)
    expected_code = {"pass": 0, "fail": 1, "ctrl-c": 130}[ending]
    assert process.returncode == expected_code, "\n".join(lines) + err + out
    assert leftovers(docker_client, run_id) == [], "distval exited and left these behind"
    assert "no reaper" not in err


def test_keep_on_failure_keeps_the_failed_scenario_and_prints_working_commands(
    run_id: str, docker_client: Any, tmp_path: Path
) -> None:
    process = distval_run(config(tmp_path, failing=True), run_id, "--keep-on-failure")
    out, err = process.communicate(timeout=STARTUP_S * 2)
    assert process.returncode == 1, err + out
    kept = [f"distval-{run_id}-bad", f"distval-{run_id}-bad-n0", f"distval-{run_id}-bad-n1"]
    assert sorted(leftovers(docker_client, run_id)) == kept, err
    # The reaper was told the run ended normally: it is gone, and what was kept is still there after its grace.
    time.sleep(GRACE_S + 3)
    assert sorted(leftovers(docker_client, run_id)) == kept, "the reaper removed what --keep-on-failure kept"
    lines = [line.removeprefix("distval: ").strip() for line in err.splitlines()]
    assert "kept 2 container(s) and 1 network(s) of 1 failed scenario(s) (--keep-on-failure): bad" in lines, err
    for name in kept[1:]:
        logs_command = f"docker logs {name}"
        assert logs_command in lines, err
        logs = subprocess.run(logs_command.split(), capture_output=True, text=True, timeout=60)
        assert logs.returncode == 0 and "torch" in logs.stdout + logs.stderr, logs
        (shell_command,) = [line for line in lines if line.startswith(f"docker commit {name} ")]
        # As printed, but without a terminal (-i instead of -it): the shell sees the failed run's results.
        shell = subprocess.run(
            shell_command.replace(" -it ", " -i "),
            shell=True,
            input="ls /distval/results\n",
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert shell.returncode == 0, shell
        assert "rank-" in shell.stdout, shell
        assert docker_client.api.images(name=f"distval-kept:{name}") == [], "the shell command left its image behind"
    assert f"remove them: distval cleanup --run-id {run_id}" in lines, err
    assert main(["cleanup", "--run-id", run_id]) == 0
    assert leftovers(docker_client, run_id) == []


def test_a_reaper_that_cannot_start_is_one_line_and_the_run_goes_on(
    run_id: str, docker_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # An entrypoint that is not in the reaper's image: the reaper's container cannot start.
    monkeypatch.setattr(distval.targets.docker.reaper, "daemon_command", lambda: ["/no/such/python3", "-c", "pass"])
    assert main(["run", str(config(tmp_path)), "--image", IMAGE, "--run-id", run_id, "--quiet"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"distval: no reaper for run {run_id} (start the reaper distval-{run_id}-reaper: "), err
    assert "/no/such/python3" in err[0], err
    assert err[0].endswith(f"): if distval is killed, `distval cleanup --run-id {run_id}` removes its containers and networks"), (
        err
    )
    assert leftovers(docker_client, run_id) == []


# -- the reaper on its own ------------------------------------------------------------------------------
KEY = b"right-key-of-32-bytes-----------"


def start_reaper(run_id: str, key: bytes, first_s: float = 60.0) -> list[tuple[str, int]]:
    environment = {
        "DISTVAL_REAPER_RUN": run_id,
        "DISTVAL_REAPER_KEY": key.hex(),
        "DISTVAL_REAPER_GRACE_S": str(GRACE_S),
        "DISTVAL_REAPER_FIRST_S": str(first_s),
    }
    _, port, own = Engine(run_id).start_reaper(
        REAPER_IMAGE, daemon_command(), f"distval-{run_id}-reaper", environment, engine_socket_path(), REAPER_PORT, "127.0.0.1"
    )
    return addresses(port, own)


def proof(key: bytes, nonce: bytes, run_id: str, what: bytes = b"") -> str:
    return hmac.new(key, nonce + run_id.encode() + what, "sha256").hexdigest()


def hello(where: list[tuple[str, int]], line: Callable[[bytes], bytes]) -> tuple[socket.socket, str, bytes]:
    """Read the reaper's challenge, send ``line(nonce)`` (retrying while it starts); (the connection, its
    answer, the nonce)."""
    until = time.monotonic() + 30
    while True:
        for address in where:
            try:
                sock = socket.create_connection(address, timeout=2)
                reader = sock.makefile("rb")
                challenge = reader.readline().split()
                if len(challenge) != 2 or challenge[0] != b"CHALLENGE":
                    sock.close()
                    continue
                sock.sendall(line(challenge[1]) + b"\n")
                answer = reader.readline().decode("ascii", "replace").strip()
            except OSError:
                continue
            if answer:
                return sock, answer, challenge[1]
            sock.close()
        assert time.monotonic() < until, f"no answer from the reaper at {where}"
        time.sleep(0.2)


def right(run_id: str) -> Callable[[bytes], bytes]:
    return lambda nonce: f"HELLO {run_id} {proof(KEY, nonce, run_id)}".encode()


def sleeper(run_id: str, image: str) -> None:
    engine = Engine(run_id)
    network = NetworkPlan(f"distval-{run_id}", True, ())
    engine.create_network(network)
    container = engine.create_container(
        ContainerPlan(f"distval-{run_id}-sleep", "sleep", 0, (0,), ("sleep", "300"), (), (), "/", image, (network.name,))
    )
    engine.start(container)


def test_the_reaper_refuses_a_wrong_proof_or_run_and_exits_when_disarmed(run_id: str, docker_client: Any) -> None:
    where = start_reaper(run_id, KEY)
    wrong: list[Callable[[bytes], bytes]] = [
        lambda nonce: f"HELLO {run_id} {proof(b'wrong', nonce, run_id)}".encode(),
        lambda nonce: f"HELLO other{run_id} {proof(KEY, nonce, 'other' + run_id)}".encode(),
        lambda nonce: f"HELLO {run_id} {proof(KEY, b'0' * 64, run_id)}".encode(),  # another connection's proof
        lambda nonce: b"HELLO",
        lambda nonce: b"HELLO \xff x",  # crashed the reaper before (a str with non-ASCII in compare_digest)
        lambda nonce: b"GET / HTTP/1.0",
    ]
    for line in wrong:
        sock, answer, _ = hello(where, line)
        sock.close()
        assert answer == "DENIED wrong run id or proof", (line(b"nonce"), answer)
    sock, answer, nonce = hello(where, right(run_id))
    assert answer == "OK"
    sock.sendall(b"DISARM\n")  # without this connection's proof: ignored
    sock.sendall(b"PING\n")
    reader = sock.makefile()
    assert reader.readline().strip() == "PONG"
    sock.sendall(f"DISARM {proof(KEY, nonce, run_id, b'DISARM')}\n".encode())
    assert reader.readline().strip() == "BYE"
    sock.close()
    elapsed, left = wait_until_gone(docker_client, run_id, 20)
    assert left == [], f"expected the disarmed reaper to exit and be removed; the Engine still holds {left}"


def test_the_reaper_removes_its_run_only_when_its_connection_drops(
    run_id: str, docker_client: Any, fixture_image: Callable[[str], str]
) -> None:
    other = "tr" + secrets.token_hex(4)
    try:
        base = fixture_image(distval.images.recipes.HARNESS_BASE)
        sleeper(run_id, base)
        sleeper(other, base)
        where = start_reaper(run_id, KEY)
        sock, answer, _ = hello(where, right(run_id))
        assert answer == "OK"
        time.sleep(GRACE_S + 2)  # held: nothing is removed
        assert sorted(leftovers(docker_client, run_id)) == [
            f"distval-{run_id}",
            f"distval-{run_id}-reaper",
            f"distval-{run_id}-sleep",
        ]
        sock.close()
        elapsed, left = wait_until_gone(docker_client, run_id, REAP_BOUND_S)
        assert left == [], f"expected nothing of run {run_id} once its connection dropped; the Engine still holds {left}"
        assert elapsed >= GRACE_S - 0.5, f"the reaper removed the run {elapsed:.1f} s after the drop, within its grace"
        assert sorted(leftovers(docker_client, other)) == [f"distval-{other}", f"distval-{other}-sleep"]
    finally:
        Engine(other).remove_labelled()


def test_a_reaper_nobody_connects_to_reaps_after_its_first_connection_window(
    run_id: str, docker_client: Any, fixture_image: Callable[[str], str]
) -> None:
    sleeper(run_id, fixture_image(distval.images.recipes.HARNESS_BASE))
    start_reaper(run_id, KEY, first_s=3)
    elapsed, left = wait_until_gone(docker_client, run_id, REAP_BOUND_S)
    assert left == [], f"expected the reaper to reap run {run_id} when distval never connected; the Engine holds {left}"


@pytest.mark.parametrize("network", ["bridge", "own"], ids=["docker-run", "compose-like-network"])
def test_in_the_harness_image_the_reaper_holds_the_run_and_reaps_it_after_sigkill(
    run_id: str, docker_client: Any, harness_image: str, network: str
) -> None:
    harness_run = Engine(run_id + "-harness")  # the harness container and its network: not the run's own id
    if network == "own":  # like docker-compose's project network: the default bridge is out of reach from it
        network = f"distval-{run_id}-harness"
        harness_run.create_network(NetworkPlan(network, False, ()))
    container = docker_client.containers.create(
        harness_image,
        command=["run", "configs/default.yaml", "--filter", "cross-container-2ranks", "--image", IMAGE, "--run-id", run_id],
        volumes={"/var/run/docker.sock": {"bind": "/var/run/docker.sock", "mode": "rw"}},
        labels={"distval.managed": "true", "distval.run": run_id + "-harness"},
        network=network,
    )
    try:
        container.start()
        until = time.monotonic() + STARTUP_S
        while f"distval-{run_id}-cross-container-2ranks-n0" not in leftovers(docker_client, run_id):
            assert time.monotonic() < until, container.logs().decode()[-3000:]
            time.sleep(0.5)
        reaper = docker_client.api.inspect_container(f"distval-{run_id}-reaper")
        # distval in a container: the Engine host's loopback is not its own, so it reaches the reaper at the
        # reaper's address on distval's network (the default bridge, or the one the reaper joined). The
        # connection is made in the reaper's thread while the scenario is set up: wait for its line.
        address = reaper["NetworkSettings"]["Networks"][network]["IPAddress"]
        held = f"reaper distval-{run_id}-reaper holds run {run_id} (at {address}:{REAPER_PORT})"
        while held not in (logs := container.logs().decode()):
            assert time.monotonic() < until, logs[-3000:]
            time.sleep(0.2)
        container.kill()  # SIGKILL to distval, PID 1 of the harness container
        elapsed, left = wait_until_gone(docker_client, run_id, REAP_BOUND_S)
        print(f"harness image on {network}: SIGKILL to nothing left: {elapsed:.1f} s (load {os.getloadavg()[0]:.1f})")
        assert left == [], f"expected nothing of run {run_id} {REAP_BOUND_S:g} s after SIGKILL; the Engine holds {left}"
    finally:
        container.remove(force=True)
        harness_run.remove_labelled()


# -- a hostile image under test never runs as the reaper (issue 19) ----------------------------------------
# What a hostile image plants: code that, run with the Engine's socket, creates a network named after the
# run (not labelled with it, so no cleanup of the run removes the evidence), then carries on as if nothing
# happened (the ranks, without the socket, run normally).
PAYLOAD = """\
import json, os, socket, sys
def _pwn(how):
    try:
        run = os.environ.get("DISTVAL_REAPER_RUN") or os.environ.get("PWN_RUN") or "none"
        body = json.dumps({"Name": "pwned-" + how + "-" + run, "Labels": {"distval-test.pwned": run}}).encode()
        s = socket.socket(socket.AF_UNIX)
        s.connect("/var/run/docker.sock")
        s.sendall(b"POST /networks/create HTTP/1.0\\r\\nContent-Type: application/json\\r\\nContent-Length: "
                  + str(len(body)).encode() + b"\\r\\n\\r\\n" + body)
        s.recv(4096)
        s.close()
    except OSError:
        pass
"""
# hmac.py on the image's PYTHONPATH: `python -S` still honours PYTHONPATH, and the reaper imports hmac.
PLANTED_HMAC = (
    PAYLOAD
    + """\
_pwn("hmac")
sys.path = [p for p in sys.path if p != os.path.dirname(os.path.abspath(__file__))]
del sys.modules["hmac"]
import hmac as _real
sys.modules["hmac"] = _real
globals().update({k: v for k, v in vars(_real).items() if not k.startswith("__")})
"""
)
# python3 itself a script: whatever runs `python3` in the image runs this first.
PLANTED_PYTHON = """\
#!/bin/sh
/usr/bin/python3.13 -S -c 'exec(open("/opt/evil/payload.py").read()); _pwn("python3")' 2>/dev/null
exec /usr/bin/python3.13 "$@"
"""
HOSTILE_DOCKERFILE = f"""\
FROM {IMAGE}
COPY payload.py hmac.py python3 /opt/evil/
RUN chmod 0755 /opt/evil/python3 && rm /usr/bin/python3 && cp /opt/evil/python3 /usr/bin/python3
ENV PYTHONPATH=/opt/evil
# Containers inherit their image's labels: these would exempt the ranks from the reaper and from cleanup, and
# tie them to another scenario, unless distval gives each of its labels a value itself.
LABEL distval.role=reaper distval.scenario=another distval.node=7
"""


@pytest.fixture(scope="module")
def hostile_image(docker_client: Any, fixture_image: Callable[[str], str]) -> Iterator[str]:
    fixture_image(IMAGE)
    tag = "distval-test/hostile-reaper:" + secrets.token_hex(3)
    context = build_tar(
        [
            File("Dockerfile", HOSTILE_DOCKERFILE.encode()),
            File("payload.py", PAYLOAD.encode()),
            File("hmac.py", PLANTED_HMAC.encode()),
            File("python3", PLANTED_PYTHON.encode()),
        ]
    )
    Engine("tests-hostile-image").build(context, tag, {}, print)
    yield tag
    docker_client.images.remove(tag, force=True)


def pwned(client: Any, marker: str) -> list[str]:
    return [str(n["Name"]) for n in client.api.networks(filters={"label": [f"distval-test.pwned={marker}"]})]


def remove_pwned(client: Any, marker: str) -> None:
    for name in pwned(client, marker):
        client.api.remove_network(name)


def test_the_hostile_images_planted_code_is_armed(docker_client: Any, hostile_image: str) -> None:
    """The reproducer works: the image's python3 and its hmac.py, run with the Engine's socket (as the reaper
    ran before issue 19), reach the Engine. So the test below, where nothing is reached, means something."""
    marker = "armed" + secrets.token_hex(3)
    try:
        docker_client.containers.run(
            hostile_image,
            ["python3", "-S", "-c", "import hmac; assert hmac.compare_digest(b'a', b'a')"],
            environment={"PWN_RUN": marker},
            volumes={"/var/run/docker.sock": {"bind": "/var/run/docker.sock", "mode": "rw"}},
            user="0:0",
            remove=True,
        )
        assert sorted(pwned(docker_client, marker)) == [f"pwned-hmac-{marker}", f"pwned-python3-{marker}"]
    finally:
        remove_pwned(docker_client, marker)


def test_a_hostile_image_under_test_never_runs_as_the_reaper(
    run_id: str, docker_client: Any, tmp_path: Path, hostile_image: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run of the hostile image: its ranks run its python3 and hmac.py (without the socket: harmless), the
    reaper holds the run from distval's own image, and nothing planted ever reached the Engine."""
    seen: list[str] = []
    original = Engine.start_reaper

    def recording(self: Engine, image: str, entrypoint: list[str], *rest: Any, **kwargs: Any) -> Any:
        seen.append(image)
        return original(self, image, entrypoint, *rest, **kwargs)

    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(Engine, "start_reaper", recording)
            code = main(["run", str(config(tmp_path)), "--image", hostile_image, "--run-id", run_id, "--quiet"])
        err = capsys.readouterr().err
        assert code == 0, err[-3000:]
        assert "no reaper" not in err, err
        assert seen == [REAPER_IMAGE], seen
        assert pwned(docker_client, run_id) == [], "the image under test reached the Engine's socket"
        assert leftovers(docker_client, run_id) == []
    finally:
        remove_pwned(docker_client, run_id)


def test_a_hostile_images_labels_do_not_exempt_its_ranks_from_the_reaper(
    run_id: str, docker_client: Any, tmp_path: Path, hostile_image: str
) -> None:
    """The image says `LABEL distval.role=reaper`: its rank containers still carry distval's own values, and a
    SIGKILLed distval's reaper removes them."""
    process = distval_run(config(tmp_path), run_id, "--image", hostile_image)
    wait_for_line(process, "started 2 container(s)", f"reaper distval-{run_id}-reaper holds run {run_id}")
    rank = docker_client.containers.get(f"distval-{run_id}-good-n1")
    assert rank.labels["distval.role"] == "" and rank.labels["distval.scenario"] == "good", rank.labels
    process.kill()
    process.wait()
    elapsed, left = wait_until_gone(docker_client, run_id, REAP_BOUND_S)
    assert left == [], f"expected nothing of run {run_id} {REAP_BOUND_S:g} s after SIGKILL; the Engine still holds {left}"
