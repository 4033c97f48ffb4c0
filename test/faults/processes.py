"""The real processes of a fault run: a ``luigid`` that can be killed and restarted on its port and state
(two on one PostgreSQL state, active and standby, when ``state_url`` is given), and the ``luigi`` worker
processes a supervisor keeps alive until the pipeline is done.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from helpers.luigid import LUIGID, HttpProbe, free_port, luigid_env, wait_until

from faults.pipeline import MODULE

DISCONNECT_DELAY = 3.0
SHUTDOWN_GRACE = 2.0
START_TIMEOUT = 30.0

LUIGID_CONFIG = f"""
[scheduler]
worker_disconnect_delay = {DISCONNECT_DELAY}
retry_delay = 1
"""

# rpc_retry_wait below the disconnect delay: a worker riding out a luigid restart is back before luigid,
# counting from its restart, takes it for dead and hands its tasks to others
WORKER_CONFIG = f"""
[core]
rpc_retry_wait = 1

[worker]
keep_alive = true
ping_interval = 0.5
wait_interval = 0.2
wait_jitter = 0.3
shutdown_grace = {SHUTDOWN_GRACE}
scheduler_unreachable_timeout = 300
"""


@dataclass
class Luigid:
    """A ``luigid`` on a fixed port and state path (or ``state_url``), started again after each kill."""

    workdir: Path
    state_dir: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    state_url: str | None = None  # a PostgreSQL state shared with other luigids (one active, standbys)
    name: str = "luigid"  # of its log files: <name>-<start>.log

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def answers_as(self) -> str | None:
        """``active`` or ``standby`` by how it answers an API call now (None: it does not answer)."""
        try:
            reply = HttpProbe(port=self.port).call("is_paused")
        except OSError:
            return None
        if reply.status == 200:
            return "active"
        return "standby" if reply.status == 503 and reply.json().get("standby") else None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self, wait: bool = True) -> None:
        """Start it (again) and, with ``wait``, wait until ``HEAD /`` answers."""
        self.starts += 1
        log = (self.workdir / f"{self.name}-{self.starts}.log").open("wb")
        state = self.state_dir / f"{self.name}-state.db"
        argv = [str(LUIGID), "--port", str(self.port), "--state-path", str(state)]
        config = LUIGID_CONFIG
        if self.state_url is not None:
            config += f"state_url = {self.state_url.replace('%', '%%')}\n"
        env = luigid_env(self.workdir, config)
        self.process = subprocess.Popen(argv, cwd=self.workdir, env=env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        if not wait:
            return
        probe = HttpProbe(port=self.port)
        wait_until(
            lambda: self.process.poll() is not None or probe.health(), START_TIMEOUT, "luigid to answer"
        )
        if self.process.poll() is not None:
            raise AssertionError(f"luigid exited with {self.process.returncode}: see {log.name}")

    def kill(self) -> None:
        """``kill -9`` and reap it."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(START_TIMEOUT)

    def rss(self) -> int:
        """Its resident memory in bytes."""
        return int(psutil.Process(self.pid).memory_info().rss)

    def stop(self) -> None:
        """SIGTERM and wait (SIGKILL past the deadline)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(START_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(START_TIMEOUT)


@dataclass
class WorkerSeat:
    """The place of one worker process: restarted by the supervisor whenever its process is gone."""

    index: int
    url: str
    workdir: Path
    slots: int = 2
    process: subprocess.Popen[bytes] | None = None
    pids: list[int] = field(default_factory=list)
    stopped: bool = False

    def start(self) -> None:
        config = self.workdir / f"worker-{self.index}.cfg"
        config.write_text(textwrap.dedent(WORKER_CONFIG))
        env = {k: v for k, v in os.environ.items() if not k.startswith("LUIGI_")}
        env["LUIGI_CONFIG_PATH"] = str(config)
        env["PYTHONPATH"] = os.pathsep.join([str(self.workdir), env.get("PYTHONPATH", "")])
        argv = [sys.executable, "-m", "luigi", "--module", MODULE, "All", "--workers", str(self.slots)]
        argv += ["--scheduler-url", self.url, "--no-lock"]
        with (self.workdir / f"worker-{self.index}.log").open("ab") as log:
            self.process = subprocess.Popen(argv, cwd=self.workdir, env=env, stdout=log, stderr=log)
        self.pids.append(self.process.pid)

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, signum: int) -> None:
        assert self.process is not None
        self.process.send_signal(signum)

    def children(self) -> list[int]:
        """The pids of its slot processes."""
        try:
            return [child.pid for child in psutil.Process(self.pid).children()]
        except psutil.NoSuchProcess:
            return []

    def end(self) -> None:
        """At the end of a run: continue it if stopped, then SIGTERM, then SIGKILL past the deadline."""
        if not self.running():
            return
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(START_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(START_TIMEOUT)
