"""Writing reports safely: a regular file replaced whole, through symbolic links, never leaving a temporary
file behind; a character device (/dev/null) or a FIFO (/dev/stdout under a pipe) written into, never replaced;
and ``distval run`` refuses any other path (a directory, a socket) before anything runs.

A test's device node is its own (a copy of the null device made with mknod in its temporary directory) where
mknod is allowed. The tests of ``--json /dev/null`` write into the system's null device, as a CI script does:
the atomic path refuses every non-regular file as well (defence in depth), so no bug here can replace it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import socket
import stat
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from distval.reports.files import NotARegularFile, UnsafePath, refusal, write_atomically
from distval.reports.json_report import render_json, write_json
from distval.results.outcome import CaseResult
from distval.results.scenario import RunSummary
from tests.fake_engine import FakeEngine
from tests.paths import ROOT
from tests.report_helpers import run, summary

SYSTEM_DEVICES = ("/dev/null", "/dev/zero", "/dev/full")


def listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def special(tmp_path: Path, kind: str) -> Path:
    """A FIFO, a directory, a socket, a character device of the test's own, or a symbolic link to a character device."""
    path = tmp_path / f"report.{kind}"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
        (path / "inside").write_text("keep", encoding="utf-8")
    elif kind == "socket":
        with socket.socket(socket.AF_UNIX) as listening:
            listening.bind(str(path))  # the socket file stays when the socket is closed
    elif kind == "device":
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # the null device's numbers
        except PermissionError:
            path.symlink_to(system_device())
    else:
        path.symlink_to(system_device())
    return path


class FifoReader:
    """A reader of a FIFO, there before the writer comes (the writer opens without waiting and refuses a FIFO that
    no process reads): the read end is opened at once, and a writer end of the test's own keeps the reader from
    seeing the end of the data until ``join`` closes it, whenever the writer under test comes and goes."""

    def __init__(self, path: Path, got: list[bytes]) -> None:
        self.read_end = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        os.set_blocking(self.read_end, True)
        self.held_writer = os.open(path, os.O_WRONLY)
        self.got = got
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        with os.fdopen(self.read_end, "rb") as handle:
            self.got.append(handle.read())

    def join(self, timeout: float) -> None:
        os.close(self.held_writer)
        self.thread.join(timeout)


def read_fifo(path: Path) -> tuple[FifoReader, list[bytes]]:
    """A reader of the FIFO at ``path``, collecting what it reads (once ``join`` is called)."""
    got: list[bytes] = []
    return FifoReader(path, got), got


def system_device() -> str:
    """A character device of the system (whichever is one right now: a careless writer elsewhere may have replaced one)."""
    found = [d for d in SYSTEM_DEVICES if stat.S_ISCHR(os.stat(d).st_mode)]
    assert found, f"none of {SYSTEM_DEVICES} is a character device on this machine"
    return found[0]


def kind_of(path: Path) -> str:
    mode = os.stat(path).st_mode
    if stat.S_ISSOCK(mode):
        return "socket"
    return "fifo" if stat.S_ISFIFO(mode) else "directory" if stat.S_ISDIR(mode) else "chr" if stat.S_ISCHR(mode) else "file"


def refused(path: Path | str, kind: str) -> str:
    return (
        f"{path} is {kind}: a report goes into a regular file, a character device such as /dev/null or a FIFO, "
        "never replaces anything else"
    )


# --- the writer ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "expected"), [("directory", "a directory"), ("socket", "a socket")])
def test_a_target_that_is_neither_a_file_nor_a_stream_is_refused_and_left_alone(tmp_path: Path, kind: str, expected: str) -> None:
    target = special(tmp_path, kind)
    before = (kind_of(target), target.is_symlink(), listing(tmp_path))
    assert refusal(target) == refused(target, expected)
    with pytest.raises(NotARegularFile, match=re.escape(refused(target, expected))):
        write_atomically(target, "report")
    assert (kind_of(target), target.is_symlink(), listing(tmp_path)) == before
    if kind == "directory":
        assert listing(target) == ["inside"]


@pytest.mark.parametrize("kind", ["device", "device-link"])
def test_a_character_device_is_written_into_and_stays_a_device(tmp_path: Path, kind: str) -> None:
    target = special(tmp_path, kind)
    before = (kind_of(target), target.is_symlink(), listing(tmp_path))
    assert refusal(target) is None
    write_atomically(target, "report")
    assert (kind_of(target), target.is_symlink(), listing(tmp_path)) == before  # nothing beside it, nothing renamed


def test_dev_null_takes_a_report_and_stays_the_null_device() -> None:
    assert refusal("/dev/null") is None
    write_atomically("/dev/null", "report")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_fifo_gets_the_whole_report_and_stays_a_fifo(tmp_path: Path) -> None:
    target = special(tmp_path, "fifo")
    assert refusal(target) is None
    reader, got = read_fifo(target)
    text = "x" * 300_000 + " \udc80"  # more than a pipe holds at once; a surrogate as the regular path writes it
    write_atomically(target, text)
    reader.join(10)
    assert got == [text.encode("utf-8", "backslashreplace")]
    assert kind_of(target) == "fifo" and listing(tmp_path) == ["report.fifo"]


def test_a_stream_swapped_for_a_regular_file_is_replaced_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stat says FIFO, the opened file is a regular one (swapped meanwhile): nothing is written through the
    descriptor, and the regular path replaces the file whole."""
    target = tmp_path / "report.json"
    target.write_text("OLD", encoding="utf-8")
    monkeypatch.setattr("distval.reports.files._is_stream", lambda path: True)
    write_atomically(target, "NEW")
    assert target.read_text(encoding="utf-8") == "NEW" and listing(tmp_path) == ["report.json"]


def test_a_symbolic_link_is_written_through_and_stays_a_link(tmp_path: Path) -> None:
    real = tmp_path / "store" / "results.xml"
    real.parent.mkdir()
    real.write_text("OLD", encoding="utf-8")
    link = tmp_path / "results.xml"
    link.symlink_to(real)
    chain = tmp_path / "latest.xml"
    chain.symlink_to(link)
    write_atomically(chain, "NEW")
    assert chain.is_symlink() and link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text(encoding="utf-8") == "NEW"
    assert (listing(tmp_path), listing(real.parent)) == (["latest.xml", "results.xml", "store"], ["results.xml"])


def test_a_dangling_link_gets_its_target_created(tmp_path: Path) -> None:
    link = tmp_path / "report.json"
    link.symlink_to(tmp_path / "out" / "real.json")
    write_atomically(link, "{}")
    assert link.is_symlink() and (tmp_path / "out" / "real.json").read_text(encoding="utf-8") == "{}"


def test_a_loop_of_links_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    assert refusal(tmp_path / "a") == f"{tmp_path / 'a'} is a loop of symbolic links, not a regular file"
    with pytest.raises(NotARegularFile):
        write_atomically(tmp_path / "a", "x")


def _default_mode() -> int:
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


@pytest.mark.parametrize("old_mode", [0o666, 0o600, 0o4777])
def test_a_replaced_file_gives_the_report_none_of_its_permissions(tmp_path: Path, old_mode: int) -> None:
    """The report is distval's own file: a world-writable (or setuid) file it replaces does not make it so."""
    target = tmp_path / "report.md"
    target.write_text("OLD", encoding="utf-8")
    target.chmod(old_mode)
    write_atomically(target, "NEW")
    assert (target.stat().st_mode & 0o7777, target.read_text(encoding="utf-8")) == (_default_mode(), "NEW")


def _fail(*args: Any, **kwargs: Any) -> Any:
    raise OSError(28, "No space left on device")


@pytest.mark.parametrize("step", ["fdopen", "fsync", "replace"])
def test_no_temporary_file_is_left_on_any_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    target = tmp_path / "report.json"
    target.write_text("OLD", encoding="utf-8")
    monkeypatch.setattr(os, step, _fail)
    with pytest.raises(OSError, match="No space left"):
        write_atomically(target, "NEW")
    assert listing(tmp_path) == ["report.json"] and target.read_text(encoding="utf-8") == "OLD"


def test_no_temporary_file_is_left_when_the_target_turns_into_a_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "report.json"
    real_replace: Callable[..., None] = os.replace

    def race(source: str, destination: str, **kwargs: Any) -> None:
        target.mkdir()  # made a directory between the check and the rename
        real_replace(source, destination, **kwargs)

    monkeypatch.setattr(os, "replace", race)
    with pytest.raises(IsADirectoryError):
        write_atomically(target, "NEW")
    assert listing(tmp_path) == ["report.json"] and target.is_dir()


def test_lone_surrogates_from_rank_output_are_written_as_escapes(tmp_path: Path) -> None:
    base = summary()
    scenario = base.scenarios[0]
    odd = CaseResult("env", "failed", "bad byte \udc80 from a rank", 0.5)
    report = RunSummary(base.run_id, (type(scenario)(scenario.plan, (odd,), scenario.properties, "log \udcff", 1.0),))
    write_json(report, tmp_path / "r.json")
    written = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert written["scenarios"][0]["cases"][0]["message"] == "bad byte \udc80 from a rank"


# --- distval run ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "kind", "expected"),
    [
        ("--markdown", "socket", "a socket"),
        ("--json", "directory", "a directory"),
        ("--junit", "socket", "a socket"),
    ],
)
def test_run_refuses_a_report_path_that_is_neither_a_file_nor_a_stream_before_anything_runs(
    fake_docker: Path,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    option: str,
    kind: str,
    expected: str,
) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    target = special(reports, kind)
    before = listing(reports)
    # run() passes --junit r.xml and --json r.json; the option under test comes later and wins.
    code = run(fake_docker, tmp_path, "--quiet", "--markdown", str(tmp_path / "r.md"), option, str(target))
    assert code == 2
    assert FakeEngine.instances == []  # refused before the Engine was asked anything
    (line,) = capsys.readouterr().err.splitlines()
    assert line == f"distval: {option} {refused(target, expected)}"
    assert listing(reports) == before and kind_of(target) == kind
    written = {"--junit": tmp_path / "r.xml", "--json": tmp_path / "r.json", "--markdown": tmp_path / "r.md"}
    del written[option]
    for path in written.values():  # the other reports still say why the run stopped
        assert f"is {expected}: a report goes into" in path.read_text(encoding="utf-8")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []


@pytest.mark.parametrize("option", ["--junit", "--json", "--markdown"])
def test_run_accepts_dev_null_for_a_report(
    fake_docker: Path,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    option: str,
) -> None:
    """A CI script that throws a report away: the run runs (the checks' exit code, not 2) and /dev/null stays."""
    others = {"--junit": "--json", "--json": "--markdown", "--markdown": "--junit"}
    code = run(fake_docker, tmp_path, "--quiet", others[option], str(tmp_path / "other"), option, "/dev/null")
    assert code == 1, capsys.readouterr().err  # the checks' exit code: across fails
    assert "/dev/null" not in capsys.readouterr().err
    assert FakeEngine.instances != [] and stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.parametrize("option", ["--junit", "--json", "--markdown"])
def test_run_writes_a_report_into_a_fifo(fake_docker: Path, tmp_path: Path, option: str) -> None:  # noqa: F811
    fifo = special(tmp_path, "fifo")
    reader, got = read_fifo(fifo)
    code = run(fake_docker, tmp_path, "--quiet", option, str(fifo))
    reader.join(10)
    assert code == 1 and len(got) == 1
    text = got[0].decode()
    if option == "--junit":
        assert ET.fromstring(text).tag == "testsuites"
    elif option == "--json":
        assert json.loads(text)["exit_code"] == 1
    else:
        assert "exit code 1" in text
    assert kind_of(fifo) == "fifo"


def test_run_writes_the_json_report_to_dev_stdout_through_a_pipe(tmp_path: Path) -> None:
    """``--json /dev/stdout | jq``: /dev/stdout is /proc/self/fd/1, a link to "pipe:[N]", which no path names.
    Without an Engine the run stops early (exit 3), and the report says so on stdout, before the summary."""
    environment = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock", "DOCKER_CONFIG": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "distval", "run", str(ROOT / "configs" / "default.yaml"), "-q", "--json", "/dev/stdout"],
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
    )
    assert done.returncode == 3, done.stderr
    report, _ = json.JSONDecoder().raw_decode(done.stdout)
    assert report["exit_code"] == 3 and "cannot reach the Docker Engine" in json.dumps(report)


def test_run_writes_junit_through_a_symbolic_link(fake_docker: Path, tmp_path: Path) -> None:  # noqa: F811
    real = tmp_path / "archive" / "build-7.xml"
    real.parent.mkdir()
    link = tmp_path / "latest.xml"
    link.symlink_to(real)
    assert run(fake_docker, tmp_path, "--quiet", "--junit", str(link)) == 1  # the checks' exit code: across fails
    assert link.is_symlink()
    assert ET.parse(real).getroot().tag == "testsuites"


def _not_json(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")


@pytest.mark.parametrize("duration", [float("nan"), float("inf"), -1.0, 1.797693134862316e305])
def test_a_clock_gone_wrong_still_gives_valid_json(duration: float) -> None:
    base = summary()
    scenario = base.scenarios[0]
    odd = tuple(dataclasses.replace(c, duration_s=duration) for c in scenario.cases)
    report = RunSummary(base.run_id, (dataclasses.replace(scenario, cases=odd, duration_s=duration),))
    data = json.loads(render_json(report), parse_constant=_not_json)
    (written,) = data["scenarios"]
    assert {written["duration_s"], *(c["duration_s"] for c in written["cases"])} == {0.0}


# -- symbolic links another user owns (fs.protected_symlinks' rule); the tests run as root ----------------
OTHER_UID = 4242  # no one's: a user other than the caller (root) and the directory's owner


def sticky_directory(tmp_path: Path, owner: int = 0) -> Path:
    shared = tmp_path / "tmp"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # like /tmp: sticky and world-writable
    os.chown(shared, owner, owner)
    return shared


def link_of(owner: int, link: Path, target: Path) -> Path:
    link.symlink_to(target)
    os.chown(link, owner, owner, follow_symlinks=False)
    return link


@pytest.fixture(autouse=False)
def as_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: the links are given to another user with chown")


@pytest.mark.usefixtures("as_root")
def test_another_users_link_in_a_sticky_directory_is_refused_and_nothing_is_created(tmp_path: Path) -> None:
    shared = sticky_directory(tmp_path)
    victim = tmp_path / "etc" / "cron.d" / "job"
    link = link_of(OTHER_UID, shared / "junit.xml", victim)
    reason = refusal(link)
    assert reason is not None and "another user's link" in reason and f"uid {OTHER_UID}" in reason
    with pytest.raises(UnsafePath):
        write_atomically(link, "<x/>")
    assert not (tmp_path / "etc").exists()  # not even the parent directories
    existing = tmp_path / "passwd"
    existing.write_text("root", encoding="utf-8")
    other = link_of(OTHER_UID, shared / "report.json", existing)
    with pytest.raises(UnsafePath):
        write_atomically(other, "{}")
    assert existing.read_text(encoding="utf-8") == "root"


@pytest.mark.usefixtures("as_root")
def test_a_link_to_a_directory_in_a_sticky_directory_is_refused_too(tmp_path: Path) -> None:
    shared = sticky_directory(tmp_path)
    (tmp_path / "etc").mkdir()
    link_of(OTHER_UID, shared / "out", tmp_path / "etc")
    with pytest.raises(UnsafePath):
        write_atomically(shared / "out" / "report.md", "x")
    assert listing(tmp_path / "etc") == []


@pytest.mark.usefixtures("as_root")
def test_links_the_rule_allows_are_followed(tmp_path: Path) -> None:
    shared = sticky_directory(tmp_path, owner=OTHER_UID)
    mine = link_of(0, shared / "mine.xml", tmp_path / "a" / "mine.xml")  # the caller's own link
    owners = link_of(OTHER_UID, shared / "owners.xml", tmp_path / "owners.xml")  # the directory owner's link
    write_atomically(mine, "1")
    write_atomically(owners, "2")
    assert (tmp_path / "a" / "mine.xml").read_text(encoding="utf-8") == "1"
    assert (tmp_path / "owners.xml").read_text(encoding="utf-8") == "2"
    assert mine.is_symlink() and owners.is_symlink()


@pytest.mark.usefixtures("as_root")
def test_no_directory_is_created_through_another_users_link(tmp_path: Path) -> None:
    private = tmp_path / "reports"
    private.mkdir()  # not sticky: the rule above does not apply, but the link is still someone else's
    link = link_of(OTHER_UID, private / "out", tmp_path / "elsewhere" / "deep")
    with pytest.raises(UnsafePath, match="creates no directory"):
        write_atomically(link / "report.json", "{}")
    assert not (tmp_path / "elsewhere").exists()
    (tmp_path / "elsewhere" / "deep").mkdir(parents=True)  # an existing directory is written into
    write_atomically(link / "report.json", "{}")
    assert (tmp_path / "elsewhere" / "deep" / "report.json").read_text(encoding="utf-8") == "{}"


def test_the_temporary_file_is_never_opened_through_a_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """O_EXCL | O_NOFOLLOW: a link planted at the temporary name is not followed (the name is taken instead)."""
    monkeypatch.setattr("distval.reports.files.secrets.token_hex", lambda _: "feed")
    planted = tmp_path / "victim"
    (tmp_path / ".report.json.feed.tmp").symlink_to(planted)
    with pytest.raises(FileExistsError):
        write_atomically(tmp_path / "report.json", "{}")
    assert not planted.exists()


@pytest.mark.usefixtures("as_root")
def test_run_refuses_another_users_link_before_anything_runs(fake_docker: Path, tmp_path: Path) -> None:  # noqa: F811
    shared = sticky_directory(tmp_path)
    link = link_of(OTHER_UID, shared / "junit.xml", tmp_path / "made" / "junit.xml")
    code = run(fake_docker, tmp_path, "--quiet", "--junit", str(link))
    assert code == 2 and FakeEngine.instances == []
    assert not (tmp_path / "made").exists()


@pytest.mark.usefixtures("as_root")
def test_another_users_file_planted_in_a_sticky_directory_is_replaced_by_roots_own(tmp_path: Path) -> None:
    """Another user's report.json of mode 0666 in /tmp: root's report replaces it with a file root owns, of
    distval's mode, which that user can no longer edit (flip a status) before attest signs it."""
    shared = sticky_directory(tmp_path)
    planted = shared / "report.json"
    planted.write_text("{}", encoding="utf-8")
    os.chown(planted, 65534, 65534)
    planted.chmod(0o666)
    write_atomically(planted, '{"exit_code": 0}')
    status = planted.stat()
    assert (status.st_uid, status.st_gid, status.st_mode & 0o7777) == (0, os.getegid(), _default_mode())
    assert not status.st_mode & stat.S_IWOTH and planted.read_text(encoding="utf-8") == '{"exit_code": 0}'


def test_a_fifo_no_process_reads_is_refused_at_once(tmp_path: Path) -> None:
    """Opened without waiting: the writer never hangs on a pipe nobody reads; one line names the path."""
    fifo = special(tmp_path, "fifo")
    with pytest.raises(NotARegularFile, match=f"{re.escape(str(fifo))} is a named pipe \\(FIFO\\) that no process reads"):
        write_atomically(fifo, "{}")
    assert kind_of(fifo) == "fifo" and listing(tmp_path) == ["report.fifo"]


@pytest.mark.usefixtures("as_root")
def test_another_users_fifo_in_a_sticky_directory_is_refused_even_with_a_reader(tmp_path: Path) -> None:
    shared = sticky_directory(tmp_path)
    fifo = shared / "junit.xml"
    os.mkfifo(fifo)
    os.chown(fifo, OTHER_UID, OTHER_UID)
    reason = refusal(fifo)
    assert reason is not None and f"uid {OTHER_UID}" in reason and "another user's FIFO" in reason
    reader, got = read_fifo(fifo)
    with pytest.raises(UnsafePath, match="another user's FIFO"):
        write_atomically(fifo, "<x/>")
    reader.join(10)
    assert got == [b""]


@pytest.mark.usefixtures("as_root")
def test_run_refuses_another_users_fifo_before_anything_runs(fake_docker: Path, tmp_path: Path) -> None:  # noqa: F811
    shared = sticky_directory(tmp_path)
    fifo = shared / "report.json"
    os.mkfifo(fifo)
    os.chown(fifo, OTHER_UID, OTHER_UID)
    code = run(fake_docker, tmp_path, "--quiet", "--json", str(fifo))
    assert code == 2 and FakeEngine.instances == []


@pytest.mark.usefixtures("as_root")
def test_run_refuses_a_symbolic_link_another_user_planted_at_the_report_path(fake_docker: Path, tmp_path: Path) -> None:  # noqa: F811
    shared = sticky_directory(tmp_path)
    victim = tmp_path / "victim.json"
    victim.write_text("keep", encoding="utf-8")
    link_of(65534, shared / "report.json", victim)
    code = run(fake_docker, tmp_path, "--quiet", "--json", str(shared / "report.json"))
    assert code == 2 and victim.read_text(encoding="utf-8") == "keep"
