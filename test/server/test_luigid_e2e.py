"""End to end through a real ``luigid`` subprocess: several ``luigi`` worker processes, crashes and restarts.

Each test starts ``luigid`` on a free port with its own state file, runs ``luigi --scheduler-url`` worker
subprocesses on a small pipeline written into ``tmp_path``, and checks from the log the tasks append to
(``task_id pid`` lines, written with O_APPEND) that every task ran exactly once, or failed and was rerun.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.luigid import (
    LUIGID,
    HttpProbe,
    LuigidProcess,
    luigid_env,
    pid_alive,
    running_luigid,
    wait_until,
)

from luigi.rpc import RemoteScheduler
from luigi.task import task_id_str

LUIGI = Path(sys.executable).parent / "luigi"
RUN_TIMEOUT = 40.0
BLOCKER = task_id_str("Blocker", {})  # seconds any single worker subprocess may take before the test fails

PIPELINE = '''
import os
import time

import luigi

ROOT = os.environ["E2E_DIR"]


def log_run(task_id):
    fd = os.open(os.path.join(ROOT, "runs.log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{task_id} {os.getpid()}\\n".encode())
    finally:
        os.close(fd)


class Logged(luigi.Task):
    """Logs its run, does its ``work``, then writes "done" to its output."""

    def run(self):
        log_run(self.task_id)
        self.work()
        with self.output().open("w") as out:
            out.write("done")

    def work(self):
        pass


class Step(Logged):
    i = luigi.IntParameter()
    pause = luigi.FloatParameter(default=0.05, significant=False)

    def output(self):
        return luigi.LocalTarget(os.path.join(ROOT, "out", f"step-{self.i}"))

    def work(self):
        time.sleep(self.pause)  # a little work, so that the two workers overlap


class All(luigi.WrapperTask):
    n = luigi.IntParameter()
    pause = luigi.FloatParameter(default=0.05)

    def requires(self):
        return [Step(i=i, pause=self.pause) for i in range(self.n)]


class Link(Logged):
    """Link i needs link i - 1: a chain, whose next link a worker is granted ahead of the running one."""

    i = luigi.IntParameter()

    def requires(self):
        return [Link(i=self.i - 1)] if self.i else []

    def output(self):
        return luigi.LocalTarget(os.path.join(ROOT, "out", f"link-{self.i}"))


class Cell(Logged):
    """Cell (layer, k) needs cells k and k + 1 of the layer before: a lattice 10 cells wide."""

    layer = luigi.IntParameter()
    k = luigi.IntParameter()

    def requires(self):
        if not self.layer:
            return []
        return [Cell(layer=self.layer - 1, k=k % 10) for k in (self.k, self.k + 1)]

    def output(self):
        return luigi.LocalTarget(os.path.join(ROOT, "out", f"cell-{self.layer}-{self.k}"))


class Grid(luigi.WrapperTask):
    n = luigi.IntParameter()

    def requires(self):
        return [Cell(layer=self.n // 10 - 1, k=k) for k in range(10)]


class Blocker(luigi.Task):
    """Writes its pid to blocker.pid, then waits for the file ``release`` before finishing."""

    def output(self):
        return luigi.LocalTarget(os.path.join(ROOT, "out", "blocker"))

    def run(self):
        log_run(self.task_id)
        with open(os.path.join(ROOT, f"blocker.pid.{os.getpid()}"), "w") as out:
            out.write(str(os.getpid()))
        deadline = time.monotonic() + 60
        while not os.path.exists(os.path.join(ROOT, "release")):
            if time.monotonic() > deadline:
                raise RuntimeError("nobody released the blocker")
            time.sleep(0.02)
        with self.output().open("w") as out:
            out.write("done")
'''

WORKER_CONFIG = """
[core]
rpc_retry_attempts = 2
rpc_retry_wait = 1
[worker]
ping_interval = 0.2
wait_interval = 0.1
wait_jitter = 0.1
send_failure_email = false
"""


@dataclass
class Setup:
    """The pipeline module, the worker config and where the tasks write."""

    root: Path
    env: dict[str, str]

    def runs(self) -> Counter[str]:
        """How many times each task id was started (a line per run in runs.log)."""
        log = self.root / "runs.log"
        lines = log.read_text().splitlines() if log.exists() else []
        return Counter(line.rsplit(" ", 1)[0] for line in lines)

    def blocker_pids(self) -> list[int]:
        return [int(p.read_text() or 0) for p in self.root.glob("blocker.pid.*") if p.read_text()]

    def worker(self, url: str, *task_args: str, workers: int = 1) -> subprocess.Popen:
        """A ``luigi`` worker subprocess in its own session (so that it can be killed with its children)."""
        argv = [str(LUIGI), "--module", "e2e_pipeline", *task_args, "--scheduler-url", url, "--no-lock"]
        argv += ["--workers", str(workers)]
        log = open(self.root / f"worker-{len(list(self.root.glob('worker-*.log')))}.log", "wb")  # noqa: SIM115
        with log:
            return subprocess.Popen(
                argv,
                cwd=self.root,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def worker_logs(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.root.glob("worker-*.log")))


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    root = tmp_path / "e2e"
    (root / "out").mkdir(parents=True)
    (root / "e2e_pipeline.py").write_text(PIPELINE)
    config = root / "worker.cfg"
    config.write_text(textwrap.dedent(WORKER_CONFIG))
    env = {k: v for k, v in os.environ.items() if k not in ("LUIGI_CONFIG_PARSER", "LUIGI_AUTH_TOKEN")}
    env.update(E2E_DIR=str(root), PYTHONPATH=f"{root}{os.pathsep}{env.get('PYTHONPATH', '')}")
    env["LUIGI_CONFIG_PATH"] = str(config)
    started = Setup(root, env)
    yield started


def finish(setup: Setup, process: subprocess.Popen, timeout: float = RUN_TIMEOUT) -> int:
    """The worker's exit code; it is killed, and the test fails with its output, once ``timeout`` seconds
    pass with no task started by any worker (stuck). A pipeline of thousands of tasks on a loaded machine
    may take longer than ``timeout`` in all while never stopping."""
    started = sum(setup.runs().values())
    while True:
        try:
            return process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            started, before = sum(setup.runs().values()), started
            if started > before:
                continue
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise AssertionError(f"worker started no task for {timeout}s:\n{setup.worker_logs()}") from None


def task_status(url: str, task_id: str) -> str | None:
    """The task's status in luigid (None when it does not know the task)."""
    client = RemoteScheduler(url, retry_attempts=1, batch_size=1)
    try:
        for status in ("PENDING", "RUNNING", "DONE", "FAILED", "DISABLED"):
            if task_id in client.task_list(status=status):
                return status
        return None
    finally:
        client.close()


def pipeline(shape: str, n: int, pause: str) -> tuple[list[str], str]:
    """The worker's task arguments and the root task's id: ``wide`` is All over n Steps of ``pause``
    seconds, ``chain`` is n Links, ``lattice`` n Cells in layers of 10."""
    if shape == "chain":
        return ["Link", "--i", str(n - 1)], task_id_str("Link", {"i": str(n - 1)})
    if shape == "lattice":
        return ["Grid", "--n", str(n)], task_id_str("Grid", {"n": str(n)})
    return ["All", "--n", str(n), "--pause", pause], task_id_str("All", {"n": str(n), "pause": pause})


def restart_on_same_port(old: LuigidProcess, config: str) -> LuigidProcess:
    """Start luigid again on ``old``'s port and state file, and wait until it answers."""
    log_path = old.workdir / "luigid-restarted.log"
    argv = [str(LUIGID), "--port", str(old.port), "--state-path", str(old.state_path)]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            argv, cwd=old.workdir, env=luigid_env(old.workdir, config), stdout=log, stderr=subprocess.STDOUT
        )
    restarted = LuigidProcess(process, old.workdir, log_path, old.state_path, old.port, None)
    wait_until(
        lambda: process.poll() is not None or HttpProbe(port=old.port).health() is not None,
        what="the restarted luigid to answer",
    )
    assert process.poll() is None, f"luigid did not restart:\n{restarted.logs()}"
    return restarted


@pytest.mark.slow
@pytest.mark.parametrize(
    ("shape", "n", "pause"),
    [("wide", 30, "0.05"), ("wide", 400, "0.0"), ("chain", 300, "0.0"), ("lattice", 3000, "0.0")],
    ids=["overlapping-tasks", "short-tasks-asked-ahead", "chain-granted-ahead", "lattice-granted-ahead"],
)
def test_two_worker_processes_share_a_pipeline_and_run_every_task_exactly_once(
    tmp_path, setup, shape, n, pause
):
    task_args, _ = pipeline(shape, n, pause)
    task_args.append("--worker-keep-alive")  # neither leaves while the other runs what it could take
    with running_luigid(tmp_path) as luigid:
        first = setup.worker(luigid.url, *task_args)
        second = setup.worker(luigid.url, *task_args)
        assert finish(setup, first) == 0, setup.worker_logs()
        assert finish(setup, second) == 0, setup.worker_logs()
    runs = setup.runs()
    assert len(runs) == n
    assert set(runs.values()) == {1}, runs
    outputs = list((setup.root / "out").iterdir())
    assert len(outputs) == n and all(path.read_text() == "done" for path in outputs)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("shape", "n", "pause", "killed_after"),
    [("wide", 40, "0.1", 5), ("wide", 3000, "0.0", 300), ("chain", 2000, "0.0", 200)],
    ids=["slow-tasks", "short-tasks-asked-ahead", "chain-granted-ahead"],
)
def test_a_killed_luigid_restarted_on_its_state_file_loses_and_repeats_no_task(
    tmp_path, setup, shape, n, pause, killed_after
):
    task_args, root_id = pipeline(shape, n, pause)
    with running_luigid(tmp_path) as luigid:
        worker = setup.worker(luigid.url, *task_args)
        wait_until(
            lambda: sum(setup.runs().values()) >= killed_after, timeout=RUN_TIMEOUT, what="tasks to run"
        )
        luigid.stop(signal.SIGKILL)
        wait_until(
            lambda: "Scheduler unreachable" in setup.worker_logs(),
            timeout=RUN_TIMEOUT,
            what="the worker to find luigid gone",
        )
        restarted = restart_on_same_port(luigid, "")
        try:
            assert finish(setup, worker) == 0, setup.worker_logs()
            assert task_status(restarted.url, root_id) == "DONE"
        finally:
            restarted.stop()
    runs = setup.runs()
    assert len(runs) == n
    assert set(runs.values()) == {1}, runs
    assert "Scheduler reachable again" in setup.worker_logs()


SCHEDULER_CONFIG = """
[scheduler]
retry_delay = 1
worker_disconnect_delay = 2
prune_interval = 0.2
"""


@pytest.mark.slow
def test_a_task_whose_process_is_killed_fails_and_another_worker_reruns_it(tmp_path, setup):
    with running_luigid(tmp_path, config=SCHEDULER_CONFIG) as luigid:
        first = setup.worker(luigid.url, "Blocker", workers=2)  # two slots: the task runs in a child
        (task_pid,) = wait_until(setup.blocker_pids, timeout=RUN_TIMEOUT, what="the blocker to start")
        assert task_pid != first.pid
        os.kill(task_pid, signal.SIGKILL)
        finish(setup, first)  # Luigi's default retcodes: a failed task still exits 0
        assert task_status(luigid.url, BLOCKER) == "FAILED"
        (setup.root / "release").touch()
        second = setup.worker(luigid.url, "Blocker")
        assert finish(setup, second) == 0, setup.worker_logs()
        assert task_status(luigid.url, BLOCKER) == "DONE"
    assert setup.runs() == Counter({BLOCKER: 2})
    assert (setup.root / "out" / "blocker").read_text() == "done"


@pytest.mark.slow
def test_a_killed_worker_loses_its_running_task_which_another_worker_reruns(tmp_path, setup):
    with running_luigid(tmp_path, config=SCHEDULER_CONFIG) as luigid:
        first = setup.worker(luigid.url, "Blocker")
        (task_pid,) = wait_until(setup.blocker_pids, timeout=RUN_TIMEOUT, what="the blocker to start")
        assert task_pid == first.pid  # one slot and no timeout: the task runs in the worker itself
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=RUN_TIMEOUT)
        assert not pid_alive(task_pid)
        wait_until(
            lambda: task_status(luigid.url, BLOCKER) == "FAILED",
            timeout=RUN_TIMEOUT,
            what="luigid to fail the task of the dead worker",
        )
        (setup.root / "release").touch()
        second = setup.worker(luigid.url, "Blocker")
        assert finish(setup, second) == 0, setup.worker_logs()
    assert setup.runs() == Counter({BLOCKER: 2})
