"""The ``luigid`` command (LUIGI_COMPAT e.2): a real server process, in the foreground and as a daemon."""

from __future__ import annotations

import gc
import os
import signal
import subprocess

import pytest
from helpers.luigid import (
    LUIGID,
    HttpProbe,
    free_port,
    listening_addresses,
    luigid_env,
    pid_alive,
    running_luigid,
    wait_until,
)

import luigi.server
from luigi import cmdline, configuration
from luigi.setup_logging import DaemonLogging

pytestmark = pytest.mark.slow


def test_luigid_serves_on_loopback_by_default_and_stops_cleanly_on_sigterm(tmp_path):
    with running_luigid(tmp_path) as luigid:
        probe = luigid.probe()
        assert probe.health() == 204
        assert probe.call("add_task", {"worker": "w", "task_id": "Hello()"}).json() == {"response": None}
        assert list(probe.call("task_list", verb="GET").json()["response"]) == ["Hello()"]
        assert listening_addresses(luigid.pid, luigid.port) == ["127.0.0.1"]
        assert luigid.stop(signal.SIGTERM) == 0
    logs = luigid.logs()
    assert (
        f"luigid listening on 127.0.0.1:{luigid.port}; "
        f"visualiser at http://127.0.0.1:{luigid.port}/static/visualiser/index.html"
    ) in logs
    assert "received SIGTERM: shutting down" in logs
    assert "Traceback" not in logs


def test_luigid_stops_cleanly_on_sigint(tmp_path):
    with running_luigid(tmp_path) as luigid:
        assert luigid.stop(signal.SIGINT) == 0
    assert "received SIGINT: shutting down" in luigid.logs()
    assert "Traceback" not in luigid.logs()


def test_luigid_keeps_its_state_across_a_restart(tmp_path):
    with running_luigid(tmp_path) as luigid:
        luigid.probe().call("add_task", {"worker": "w", "task_id": "Kept()", "family": "Kept"})
        assert luigid.stop() == 0
    with running_luigid(tmp_path) as again:
        tasks = again.probe().call("task_list", verb="GET").json()["response"]
    assert list(tasks) == ["Kept()"]


def test_luigid_on_a_unix_socket(tmp_path):
    path = str(tmp_path / "luigid.sock")
    with running_luigid(tmp_path, unix_socket=path) as luigid:
        probe = luigid.probe()
        assert probe.health() == 204
        assert probe.call("ping", {"worker": "w"}).json() == {"response": {"rpc_messages": []}}
        assert luigid.stop() == 0
    assert f"luigid listening on unix socket {path}" in luigid.logs()
    assert not os.path.exists(path)


def test_luigid_with_a_token_from_the_environment_requires_it(tmp_path):
    with running_luigid(tmp_path, env={"LUIGI_AUTH_TOKEN": "tok"}) as luigid:
        assert luigid.probe().health() == 204
        assert luigid.probe().call("ping", {"worker": "w"}).status == 401
        assert luigid.probe(token="tok").call("ping", {"worker": "w"}).status == 200


def test_luigid_on_a_busy_port_exits_with_one_clear_line(tmp_path):
    with running_luigid(tmp_path) as first:
        done = subprocess.run(
            [str(LUIGID), "--port", str(first.port), "--state-path", str(tmp_path / "other")],
            capture_output=True,
            text=True,
            env=luigid_env(tmp_path),
            timeout=60,
        )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"luigid: cannot listen on 127.0.0.1:{first.port}: ")
    assert "Address already in use" in last
    assert "Traceback" not in done.stderr


def test_luigid_refuses_a_bad_port_number(tmp_path):
    done = subprocess.run([str(LUIGID), "--port", "99999"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "argument --port: 99999 is not a port number (expected 0 to 65535)" in done.stderr


def test_luigid_with_an_unusable_state_path_says_where_and_what_to_change(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    done = subprocess.run(
        [str(LUIGID), "--port", str(free_port()), "--state-path", str(blocker / "state.pickle")],
        capture_output=True,
        text=True,
        env=luigid_env(tmp_path),
        timeout=60,
    )
    assert done.returncode == 1
    assert "--state-path" in done.stderr.strip().splitlines()[-1]
    assert "Traceback" not in done.stderr


# -- in the background -------------------------------------------------------------------------------------


def start_background(tmp_path, pidfile, logdir, port: int) -> subprocess.CompletedProcess:
    argv = [
        str(LUIGID),
        "--background",
        "--pidfile",
        str(pidfile),
        "--logdir",
        str(logdir),
        "--port",
        str(port),
        "--state-path",
        str(tmp_path / "state.pickle"),
    ]
    return subprocess.run(
        argv, capture_output=True, text=True, env=luigid_env(tmp_path), cwd=tmp_path, timeout=60
    )


def test_background_luigid_writes_its_pidfile_refuses_a_second_start_and_stops_on_sigterm(tmp_path):
    pidfile, logdir, port = tmp_path / "luigid.pid", tmp_path / "logs", free_port()
    first = start_background(tmp_path, pidfile, logdir, port)
    assert first.returncode == 0, first.stderr
    pid = wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), what="the pidfile")
    pid = int(pid)
    try:
        probe = HttpProbe(port=port)
        wait_until(lambda: probe.health() == 204, what="the daemon to answer HEAD /")
        assert pid_alive(pid) and pid != os.getpid()

        second = start_background(tmp_path, pidfile, logdir, free_port())
        assert second.returncode == 1
        assert f"luigid: luigid is already running (pid {pid}, pidfile {pidfile})" in second.stderr
        assert pidfile.read_text() == f"{pid}\n"

        os.kill(pid, signal.SIGTERM)
        wait_until(lambda: not pid_alive(pid), what="the daemon to exit")
    finally:
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
    assert not pidfile.exists()
    log = (logdir / "luigi-server.log").read_text()
    assert f"luigid listening on 127.0.0.1:{port}" in log
    assert "received SIGTERM: shutting down" in log
    assert sorted(p.suffix for p in logdir.glob("luigi-server-*")) == [".err", ".out"]


# -- the luigid() function ---------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _collector_thresholds_restored():
    """``luigid()`` sets this process's garbage collector thresholds: the tests after these keep theirs."""
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


@pytest.fixture
def recorded_run(monkeypatch):
    """``luigi.server.run`` replaced by a recorder (as tests patch it), logging set-up skipped."""
    calls: list[dict] = []
    monkeypatch.setattr(luigi.server, "run", lambda **kwargs: calls.append(kwargs))
    monkeypatch.setattr(DaemonLogging, "setup", classmethod(lambda cls, opts=None: False))
    return calls


def test_luigid_defaults_to_port_8082_on_loopback(recorded_run):
    cmdline.luigid([])
    assert recorded_run == [{"api_port": 8082, "address": "127.0.0.1", "unix_socket": None}]


def test_luigid_collects_young_garbage_less_often_than_python_does(recorded_run):
    gc.set_threshold(700, 10, 10)  # Python's default
    cmdline.luigid([])
    assert gc.get_threshold() == cmdline.LUIGID_GC_THRESHOLDS
    assert cmdline.LUIGID_GC_THRESHOLDS[0] > 700


def test_luigid_passes_address_port_and_socket_and_sets_the_state_path(recorded_run, tmp_path):
    state = str(tmp_path / "state.pickle")
    cmdline.luigid(
        ["--address", "0.0.0.0", "--port", "9000", "--unix-socket", "/tmp/s", "--state-path", state]
    )
    assert recorded_run == [{"api_port": 9000, "address": "0.0.0.0", "unix_socket": "/tmp/s"}]
    assert configuration.get_config().get("scheduler", "state_path") == state


def test_luigid_in_the_foreground_holds_a_pidfile_while_running(monkeypatch, tmp_path):
    pidfile = tmp_path / "luigid.pid"
    seen: list[str] = []
    monkeypatch.setattr(luigi.server, "run", lambda **kwargs: seen.append(pidfile.read_text()))
    monkeypatch.setattr(DaemonLogging, "setup", classmethod(lambda cls, opts=None: False))
    cmdline.luigid(["--pidfile", str(pidfile)])
    assert seen == [f"{os.getpid()}\n"]
    assert not pidfile.exists()


def test_luigid_creates_its_log_directory(recorded_run, tmp_path):
    logdir = tmp_path / "new" / "logs"
    cmdline.luigid(["--logdir", str(logdir)])
    assert logdir.is_dir()


def test_luigid_says_why_it_cannot_start_in_one_line(recorded_run, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(SystemExit) as exit_info:
        cmdline.luigid(["--logdir", str(blocker / "logs")])
    assert exit_info.value.code == 1
    assert capsys.readouterr().err.startswith(f"luigid: Cannot create log directory {blocker / 'logs'}")
    assert recorded_run == []
