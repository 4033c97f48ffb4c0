"""Several hosts, proven: ``luigid`` on one network namespace, a ``luigi`` worker on each of two others.

The three hosts (``sched``, ``alpha`` and ``beta``, see ``helpers.netns``) share a private bridge and, like
machines with a shared file system, ``tmp_path``. Each task of the pipeline appends ``<task id> <pid>
<host name>`` to ``started.log`` when it starts and to ``finished.log`` once its output is written, so the
test can tell which host ran what, and how often. Each test makes its own network and ``luigid``:

- both hosts share a run of 200 tasks, each task run once;
- every process of ``beta`` is killed mid-run: ``alpha`` reruns beta's running tasks once the scheduler
  has given up on beta (``worker_disconnect_delay``) and their ``retry_delay`` has passed;
- beta's cable is pulled for longer than ``worker_disconnect_delay`` and plugged back in: the scheduler
  fails beta's running tasks meanwhile, but ``retry_delay`` is longer than the cut, so nobody reruns them
  before beta, back on the network, reports them done. Every task runs once.

The scheduler settings are those a user with such a cluster would choose, shortened: a task of a host
that went silent is failed after ``worker_disconnect_delay`` (here 3 s) and retried after ``retry_delay``
(here 15 s, longer than any cut the cluster should ride out without a duplicate run).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
from helpers.luigid import LUIGID, wait_until
from helpers.netns import Host, PrivateNetwork, listens_on, private_network, require_private_networks

from luigi.task import task_id_str

LUIGI = Path(sys.executable).parent / "luigi"
PORT = 8082  # the namespace is ours alone: luigid's default port cannot be taken there
DISCONNECT_DELAY = 3.0
RETRY_DELAY = 15.0
RUN_TIMEOUT = 45.0  # seconds any one run of the pipeline may take before the test fails

PIPELINE = '''
import os
import socket
import time

import luigi

ROOT = os.environ["MULTIHOST_DIR"]


def note(run, log, task_id):
    """Append "<task id> <pid> <host name>" to the run's log (one write, O_APPEND: never interleaved)."""
    fd = os.open(os.path.join(ROOT, f"run-{run}", log), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{task_id} {os.getpid()} {socket.gethostname()}\\n".encode())
    finally:
        os.close(fd)


class Step(luigi.Task):
    """Works 20-200 ms (by its number), then writes its output."""

    run_number = luigi.IntParameter()
    i = luigi.IntParameter()

    def output(self):
        return luigi.LocalTarget(os.path.join(ROOT, f"run-{self.run_number}", "out", f"step-{self.i}"))

    def run(self):
        note(self.run_number, "started.log", self.task_id)
        time.sleep((20 + self.i * 73 % 181) / 1000)
        with self.output().open("w") as out:
            out.write(socket.gethostname())
        note(self.run_number, "finished.log", self.task_id)


class Pipeline(luigi.WrapperTask):
    run_number = luigi.IntParameter()
    n = luigi.IntParameter()

    def requires(self):
        return [Step(run_number=self.run_number, i=i) for i in range(self.n)]
'''

SCHEDULER_CONFIG = f"""
[scheduler]
auth_token = {{token}}
worker_disconnect_delay = {DISCONNECT_DELAY}
retry_delay = {RETRY_DELAY}
prune_interval = 0.2
"""

# The worker rides out an unreachable scheduler with its own backoff (scheduler_unreachable_timeout);
# a short socket timeout makes a request lost in a cut fail fast rather than hang for 10 s.
WORKER_CONFIG = """
[core]
rpc_connect_timeout = 2
rpc_retry_attempts = 2
rpc_retry_wait = 0.5
[scheduler]
auth_token = {token}
[worker]
keep_alive = true
ping_interval = 0.5
wait_interval = 0.1
wait_jitter = 0.1
send_failure_email = false
"""


@dataclass(frozen=True)
class Start:
    """One line of a run's log: a task started (or finished) in process ``pid`` on host ``host``."""

    task_id: str
    pid: int
    host: str


@dataclass
class Cluster:
    """The private network, the luigid on ``sched`` and the workers started on the other hosts."""

    network: PrivateNetwork
    root: Path
    env: dict[str, str]
    luigid: subprocess.Popen
    workers: list[subprocess.Popen] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://{self.network['sched'].address}:{PORT}/"

    def start_worker(self, host: Host, run: int, n: int) -> subprocess.Popen:
        """``luigi --module multihost_pipeline Pipeline ...`` on ``host``, two task slots, its own lock."""
        (self.root / f"run-{run}" / "out").mkdir(parents=True, exist_ok=True)
        argv = [str(LUIGI), "--module", "multihost_pipeline", "Pipeline", "--run-number", str(run)]
        argv += ["--n", str(n), "--scheduler-url", self.url, "--workers", "2"]
        argv += ["--lock-pid-dir", str(self.root / host.name / "lock")]
        with open(self.root / f"worker-{host.name}-run-{run}.log", "wb") as log:
            worker = subprocess.Popen(
                host.command(argv), cwd=self.root, env=self.env, stdout=log, stderr=subprocess.STDOUT
            )
        self.workers.append(worker)
        return worker

    def log(self, run: int, name: str) -> list[Start]:
        """The lines of ``started.log`` or ``finished.log`` of ``run``."""
        path = self.root / f"run-{run}" / name
        lines = path.read_text().splitlines() if path.exists() else []
        return [Start(task_id, int(pid), host) for task_id, pid, host in (line.split() for line in lines)]

    def in_flight(self, run: int, host: Host) -> set[str]:
        """Tasks of ``run`` that started on ``host`` and have not finished."""
        finished = {line.task_id for line in self.log(run, "finished.log")}
        started = {line.task_id for line in self.log(run, "started.log") if line.host == host.name}
        return started - finished

    def finish(self, worker: subprocess.Popen, timeout: float = RUN_TIMEOUT) -> int:
        """The worker's exit status; past ``timeout`` the test fails with every log."""
        try:
            return worker.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"a worker ran past {timeout}s:\n{self.logs()}") from None

    def logs(self) -> str:
        paths = [self.root / "luigid.log", *sorted(self.root.glob("worker-*.log"))]
        return "\n".join(f"== {p.name}\n{p.read_text(errors='replace')}" for p in paths if p.exists())

    def scheduler_status(self, task_id: str) -> str | None:
        """The status luigid gives ``task_id``, asked from ``alpha`` (None when luigid does not know it)."""
        ask = textwrap.dedent(f"""
            from luigi.rpc import RemoteScheduler
            client = RemoteScheduler({self.url!r}, retry_attempts=1, batch_size=1)
            found = [s for s in ("PENDING", "RUNNING", "DONE", "FAILED", "DISABLED")
                     if {task_id!r} in client.task_list(status=s)]
            print(found[0] if found else "")
        """)
        command = self.network["alpha"].command([sys.executable, "-c", ask])
        done = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=RUN_TIMEOUT)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip() or None


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    require_private_networks()
    token = secrets.token_urlsafe(16)
    (tmp_path / "multihost_pipeline.py").write_text(PIPELINE)
    (tmp_path / "luigid.cfg").write_text(SCHEDULER_CONFIG.format(token=token))
    (tmp_path / "worker.cfg").write_text(WORKER_CONFIG.format(token=token))
    env = {k: v for k, v in os.environ.items() if k not in ("LUIGI_CONFIG_PARSER", "LUIGI_AUTH_TOKEN")}
    env.update(MULTIHOST_DIR=str(tmp_path), PYTHONPATH=f"{tmp_path}{os.pathsep}{env.get('PYTHONPATH', '')}")
    with private_network(["sched", "alpha", "beta"]) as network:
        sched = network["sched"]
        argv = [str(LUIGID), "--address", sched.address, "--port", str(PORT)]
        argv += ["--state-path", str(tmp_path / "luigid-state.db")]
        with open(tmp_path / "luigid.log", "wb") as log:
            luigid = subprocess.Popen(
                sched.command(argv),
                cwd=tmp_path,
                env={**env, "LUIGI_CONFIG_PATH": str(tmp_path / "luigid.cfg")},
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        env["LUIGI_CONFIG_PATH"] = str(tmp_path / "worker.cfg")
        started = Cluster(network, tmp_path, env, luigid)
        try:
            wait_until(
                lambda: luigid.poll() is not None or listens_on(luigid.pid, sched.address, PORT),
                what="luigid to listen on its namespace address",
            )
            assert luigid.poll() is None, started.logs()
            yield started
        finally:
            for process in [*started.workers, luigid]:
                if process.poll() is None:
                    process.kill()
                process.wait(timeout=RUN_TIMEOUT)


def stop_when_running_tasks(cluster: Cluster, run: int, host: Host, after: int = 10) -> set[str]:
    """Stop (SIGSTOP) every process of ``host`` at a moment when it runs tasks of ``run``, once it has
    finished ``after`` of them; returns the tasks it runs.

    Frozen, the host can neither finish a task nor start one, so what the logs say it runs is exact.
    """

    def mid_run() -> bool:
        finished = [line for line in cluster.log(run, "finished.log") if line.host == host.name]
        return len(finished) >= after and bool(cluster.in_flight(run, host))

    def stopped_while_running() -> set[str]:
        wait_until(mid_run, timeout=RUN_TIMEOUT, what=f"{host.name} to be running tasks mid-run")
        stop_every_process(host)
        running = cluster.in_flight(run, host)
        if not running:  # it finished them between the two looks: let it go on and look again
            host.signal_all(signal.SIGCONT)
        return running

    return wait_until(stopped_while_running, timeout=RUN_TIMEOUT, what=f"{host.name} caught running")


def stop_every_process(host: Host) -> None:
    """SIGSTOP every process of ``host`` (those it forks meanwhile too), and wait until all are stopped."""
    stopped: set[int] = set()
    while new := set(host.pids()) - stopped:
        for pid in new:
            with contextlib.suppress(ProcessLookupError):  # it exited meanwhile
                os.kill(pid, signal.SIGSTOP)
        stopped |= new
        wait_until(lambda: all(is_stopped(pid) for pid in new), what=f"{host.name} to stop")


def is_stopped(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() in (psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


def step_ids(run: int, n: int) -> set[str]:
    return {task_id_str("Step", {"run_number": str(run), "i": str(i)}) for i in range(n)}


def assert_ran_once_each(cluster: Cluster, run: int, n: int) -> Counter[str]:
    """Every step of ``run`` started once, finished once and has its output; the count of steps per host."""
    once_each = Counter(dict.fromkeys(step_ids(run, n), 1))
    assert Counter(line.task_id for line in cluster.log(run, "started.log")) == once_each
    finished = cluster.log(run, "finished.log")
    assert Counter(line.task_id for line in finished) == once_each
    assert len(list((cluster.root / f"run-{run}" / "out").iterdir())) == n
    return Counter(line.host for line in finished)


def finished_on(cluster: Cluster, run: int, host: Host) -> set[str]:
    return {line.task_id for line in cluster.log(run, "finished.log") if line.host == host.name}


def failed_by_luigid(cluster: Cluster, task_id: str) -> bool:
    """Whether luigid's log says it failed ``task_id`` because its worker went silent."""
    log = (cluster.root / "luigid.log").read_text()
    return f"{task_id!r} is marked as running by disconnected worker" in log


def assert_pipeline_done(cluster: Cluster, run: int, n: int) -> None:
    root_id = task_id_str("Pipeline", {"run_number": str(run), "n": str(n)})
    assert cluster.scheduler_status(root_id) == "DONE", cluster.logs()


@pytest.mark.slow
def test_workers_on_two_hosts_share_a_pipeline_and_run_each_task_once(cluster):
    alpha, beta = cluster.network["alpha"], cluster.network["beta"]
    workers = [cluster.start_worker(alpha, run=1, n=200), cluster.start_worker(beta, run=1, n=200)]
    assert [cluster.finish(worker) for worker in workers] == [0, 0], cluster.logs()
    per_host = assert_ran_once_each(cluster, run=1, n=200)
    assert per_host["alpha"] >= 40 and per_host["beta"] >= 40, per_host
    assert_pipeline_done(cluster, run=1, n=200)


@pytest.mark.slow
def test_the_tasks_a_dead_host_was_running_are_rerun_on_the_other_and_nothing_else(cluster):
    alpha, beta = cluster.network["alpha"], cluster.network["beta"]
    survivor = cluster.start_worker(alpha, run=1, n=100)
    cluster.start_worker(beta, run=1, n=100)
    killed_tasks = stop_when_running_tasks(cluster, 1, beta)
    beta.kill_all()
    assert cluster.finish(survivor) == 0, cluster.logs()
    assert {line.task_id for line in cluster.log(1, "finished.log")} == step_ids(1, 100)
    assert len(list((cluster.root / "run-1" / "out").iterdir())) == 100
    started = cluster.log(1, "started.log")
    rerun = {task_id for task_id, count in Counter(line.task_id for line in started).items() if count > 1}
    started_on_beta = {line.task_id for line in started if line.host == "beta"}
    # Rerun: the tasks beta was running, and perhaps some it finished but had not reported yet.
    assert killed_tasks <= rerun <= started_on_beta, (killed_tasks, rerun)
    for task_id in rerun:
        assert [line.host for line in started if line.task_id == task_id] == ["beta", "alpha"]
    assert not killed_tasks & finished_on(cluster, 1, beta)
    assert rerun <= finished_on(cluster, 1, alpha)
    assert all(failed_by_luigid(cluster, task_id) for task_id in rerun)
    assert_pipeline_done(cluster, run=1, n=100)


@pytest.mark.slow
def test_a_host_cut_off_for_longer_than_the_disconnect_delay_loses_and_repeats_no_task(cluster):
    """Beta's cable stays out until luigid has failed beta's running tasks and alpha has finished 30 more
    (at least 1.6 s of their sleeps): with a retry_delay shorter than that, alpha would rerun them."""
    alpha, beta = cluster.network["alpha"], cluster.network["beta"]
    first = cluster.start_worker(alpha, run=1, n=150)
    cut_off = cluster.start_worker(beta, run=1, n=150)
    cut_tasks = stop_when_running_tasks(cluster, 1, beta)
    cluster.network.cut(beta)
    beta.signal_all(signal.SIGCONT)
    wait_until(
        lambda: all(failed_by_luigid(cluster, task_id) for task_id in cut_tasks),
        timeout=DISCONNECT_DELAY + 10,
        what="luigid to fail the tasks of the silent host",
    )
    done_by_alpha = finished_on(cluster, 1, alpha)
    wait_until(
        lambda: (
            len(finished_on(cluster, 1, alpha)) >= len(done_by_alpha) + 30
            or finished_on(cluster, 1, alpha) | cut_tasks >= step_ids(1, 150)
        ),
        timeout=RUN_TIMEOUT,
        what="alpha to go on working while beta is cut off",
    )
    # Beta's ordinary attempts (two, each up to its 2 s socket timeout) may outlast the wait above; the
    # cable stays out until beta has given them up and rides the outage out, the case this test is about.
    beta_log = cluster.root / "worker-beta-run-1.log"
    wait_until(
        lambda: "Scheduler unreachable" in beta_log.read_text(),
        timeout=RUN_TIMEOUT,
        what="beta to ride out the outage",
    )
    cluster.network.restore(beta)
    assert cluster.finish(first) == 0, cluster.logs()
    assert cluster.finish(cut_off) == 0, cluster.logs()  # back on the network, it reported and left
    assert_ran_once_each(cluster, run=1, n=150)
    assert cut_tasks <= finished_on(cluster, 1, beta)
    assert "Scheduler reachable again" in beta_log.read_text()
    assert_pipeline_done(cluster, run=1, n=150)
