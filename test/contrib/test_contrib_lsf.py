"""luigi.contrib.lsf end to end: real builds submit real jobs to a stand-in of LSF's bsub/bjobs/bkill.

The stand-in (helpers/lsf_standin.py) follows LSF's command lines and output formats and runs each job as
a local process, so everything but the batch system itself is real: the worker's bsub, the job running
``lsf_runner.py`` with ``/bin/sh`` as LSF does, bjobs polling, bkill.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import lsf_standin
from helpers.lsf_tasks import FailsInTheJob, RunsUntilKilled, WritesInTheWorker, WritesWhereItRan
from helpers.luigid import wait_until
from helpers.outcomes import start_luigi_command

import luigi
from luigi.contrib.lsf import LSFJobTask, TaskNotRebuildableError
from luigi.contrib.lsf_runner import main as runner_main
from luigi.event import Event

FAST = {"poll_time": 0.01}


class StandIn:
    """The stand-in's spool; ``states()`` is what ``bjobs`` says about every job submitted."""

    def __init__(self, spool: Path) -> None:
        self.spool = spool

    def states(self) -> dict[str, str]:
        out = subprocess.run(
            ["bjobs", "-noheader", "-o", "jobid stat"], capture_output=True, text=True
        ).stdout
        return dict(line.split() for line in out.splitlines())

    def submitted(self, job_id: str) -> dict[str, Any]:
        return json.loads((self.spool / job_id / "job.json").read_text())


@pytest.fixture
def lsf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[StandIn]:
    """bsub, bjobs and bkill first on PATH, each a two-line script calling the stand-in."""
    bin_dir, spool = tmp_path / "lsf-bin", tmp_path / "lsf-spool"
    bin_dir.mkdir()
    spool.mkdir()
    for command in lsf_standin.COMMANDS:
        script = bin_dir / command
        standin = shlex.join([sys.executable, lsf_standin.__file__, command])
        script.write_text(f'#!/bin/sh\nexec {standin} "$@"\n')
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("LSF_STANDIN_SPOOL", str(spool))
    yield StandIn(spool)
    assert lsf_standin.stop_leftovers(spool) == [], "a test left LSF jobs running"


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    """The ``shared_tmp_dir``: job directories are made (and removed) here."""
    path = tmp_path / "shared"
    path.mkdir()
    return path


def failures(events: Any) -> Callable[[], list[str]]:
    """Subscribes to task failures; the returned function gives the failures' texts so far."""
    seen, listen = events
    listen(Event.FAILURE)
    return lambda: [str(args[1]) for _, args in seen]


def start_runs_until_killed(output: Path, started: Path, shared: Path) -> subprocess.Popen[str]:
    """``luigi --module helpers.lsf_tasks RunsUntilKilled ...`` as a user types it; a failed task exits 5."""
    return start_luigi_command(
        "helpers.lsf_tasks", "RunsUntilKilled", "--path", str(output), "--started", str(started),
        "--shared-tmp-dir", str(shared), "--poll-time", "0.01", "--retcode-task-failed", "5",
    )  # fmt: skip


def test_work_runs_in_the_lsf_job_and_the_task_completes(lsf: StandIn, shared: Path, tmp_path: Path) -> None:
    task = WritesWhereItRan(path=str(tmp_path / "out.json"), text="hello", shared_tmp_dir=str(shared), **FAST)

    assert luigi.build([task], local_scheduler=True)

    record = json.loads((tmp_path / "out.json").read_text())
    assert record["text"] == "hello"
    assert record["pid"] != os.getpid()  # work() ran in the job's process, not the worker's
    assert record["cwd"] == os.getcwd()  # in the worker's directory, so relative paths agree
    assert lsf.states() == {"101": "DONE"}  # DONE with a warning on stderr is still a success
    assert list(shared.iterdir()) == []  # the job directory is removed


def test_bsub_gets_luigis_flags_and_the_job_writes_its_logs(
    lsf: StandIn, shared: Path, tmp_path: Path
) -> None:
    task = WritesWhereItRan(
        path=str(tmp_path / "out.json"),
        shared_tmp_dir=str(shared),
        queue_flag="short",
        n_cpu_flag=4,
        memory_flag="1024",
        resource_flag="mem=1024",
        runtime_flag=5,
        job_name_flag="nightly",
        extra_bsub_args="-P 'my project'",
        save_job_info=True,
        **FAST,
    )

    assert luigi.build([task], local_scheduler=True)

    options = lsf.submitted("101")["options"]
    assert options == {
        "-q": "short", "-n": "4", "-M": "1024", "-R": "rusage[mem=1024]", "-W": "5", "-J": "nightly",
        "-o": options["-o"], "-e": options["-e"], "-P": "my project",
    }  # fmt: skip
    kept = [path for path in tmp_path.iterdir() if path.name.startswith("WritesWhereItRan")]
    assert len(kept) == 1  # save_job_info moved the job directory next to the output
    assert {path.name for path in kept[0].iterdir()} == {"job.json", "job.out", "job.err", "job.result"}


def test_a_failing_job_fails_the_task_with_the_jobs_error_output(
    lsf: StandIn, shared: Path, tmp_path: Path, events: Any
) -> None:
    seen = failures(events)
    task = FailsInTheJob(path=str(tmp_path / "out"), shared_tmp_dir=str(shared), **FAST)

    assert not luigi.build([task], local_scheduler=True)

    [message] = seen()
    assert "LSF job 101" in message and "exited (EXIT)" in message
    assert "RuntimeError: disk full on node seven" in message
    assert lsf.states() == {"101": "EXIT"}
    assert not (tmp_path / "out").exists()


def test_a_job_killed_with_bkill_fails_the_task(lsf: StandIn, shared: Path, tmp_path: Path) -> None:
    started = tmp_path / "started"
    with start_runs_until_killed(tmp_path / "out", started, shared) as run:
        try:
            wait_until(started.exists, timeout=30, what="the job to start work()")
            assert lsf.states() == {"101": "RUN"}
            assert subprocess.run(["bkill", "101"], capture_output=True, text=True).stdout.strip() == (
                "Job <101> is being terminated"
            )
            output, _ = run.communicate(timeout=30)
        finally:
            run.kill()

    assert run.returncode == 5  # the task failed
    assert "LSF job 101 for RunsUntilKilled" in output and "exited (EXIT)" in output
    assert lsf.states() == {"101": "EXIT"}
    assert not (tmp_path / "out").exists()


def test_a_worker_stopped_while_the_job_runs_kills_the_job(
    lsf: StandIn, shared: Path, tmp_path: Path
) -> None:
    started = tmp_path / "started"
    with start_runs_until_killed(tmp_path / "out", started, shared) as run:
        try:
            wait_until(started.exists, timeout=30, what="the job to start work()")
            run.terminate()
            run.communicate(timeout=30)
        finally:
            run.kill()

    wait_until(lambda: lsf.states() == {"101": "EXIT"}, timeout=10, what="the job to be killed")


def test_a_submission_bsub_refuses_fails_the_task_with_bsubs_words(
    lsf: StandIn, shared: Path, tmp_path: Path, events: Any
) -> None:
    seen = failures(events)
    task = WritesWhereItRan(
        path=str(tmp_path / "out.json"), shared_tmp_dir=str(shared), extra_bsub_args="-Z 1"
    )

    assert not luigi.build([task], local_scheduler=True)

    [message] = seen()
    assert message.startswith("bsub did not submit WritesWhereItRan") and message.endswith(
        "-Z: Illegal option"
    )
    assert lsf.states() == {}
    assert list(shared.iterdir()) == []


def test_local_lsf_job_task_works_without_lsf(lsf: StandIn, tmp_path: Path) -> None:
    assert luigi.build([WritesInTheWorker(path=str(tmp_path / "out"))], local_scheduler=True)

    assert (tmp_path / "out").exists()
    assert lsf.states() == {}


def test_a_brief_bjobs_outage_is_waited_out(lsf: StandIn, shared: Path, tmp_path: Path) -> None:
    (lsf.spool / "down").write_text("3")
    task = WritesWhereItRan(path=str(tmp_path / "out.json"), shared_tmp_dir=str(shared), **FAST)

    assert luigi.build([task], local_scheduler=True)

    assert (lsf.spool / "down").read_text() == "0"  # all three failed bjobs calls happened
    assert lsf.states() == {"101": "DONE"}


def test_a_lasting_bjobs_outage_fails_the_task_and_kills_the_job(
    lsf: StandIn, shared: Path, tmp_path: Path, events: Any
) -> None:
    seen = failures(events)
    (lsf.spool / "down").write_text("1000")
    task = RunsUntilKilled(
        path=str(tmp_path / "out"), started=str(tmp_path / "started"), shared_tmp_dir=str(shared), **FAST
    )

    assert not luigi.build([task], local_scheduler=True)

    [message] = seen()
    assert message.startswith("bjobs failed 5 times in a row for LSF job 101") and "LSF is down" in message
    (lsf.spool / "down").unlink()
    wait_until(lambda: lsf.states() == {"101": "EXIT"}, timeout=10, what="the job to be killed")


def test_no_argument_reaches_a_shell_unquoted(lsf: StandIn, tmp_path: Path) -> None:
    marker = tmp_path / "injected"
    injections = [
        f"'; touch {marker}; echo '",
        f"$(touch {marker})",
        f"`touch {marker}`",
        f'"; touch {marker}; "',
    ]
    shared = tmp_path / f"shared dir $(touch {marker}) ';touch {marker};'"
    shared.mkdir(parents=True)  # the marker's slashes make it a few directories deep
    text = " ".join(injections)
    task = WritesWhereItRan(
        path=str(tmp_path / "out.json"),
        text=text,
        shared_tmp_dir=str(shared),
        job_name_flag=injections[0],
        **FAST,
    )

    assert luigi.build([task], local_scheduler=True)

    assert json.loads((tmp_path / "out.json").read_text())["text"] == text
    assert lsf.submitted("101")["name"] == injections[0]
    assert not marker.exists()


def test_a_task_the_job_cannot_rebuild_fails_before_submitting(
    lsf: StandIn, shared: Path, tmp_path: Path, events: Any
) -> None:
    seen = failures(events)

    class Local(LSFJobTask):
        def output(self) -> luigi.LocalTarget:  # type: ignore[override]
            return luigi.LocalTarget(str(tmp_path / "never"))

    assert not luigi.build([Local(shared_tmp_dir=str(shared), **FAST)], local_scheduler=True)

    [message] = seen()
    assert "\n" not in message
    assert "not reachable by name from its module" in message and "define it at the top level" in message
    assert lsf.states() == {}
    assert list(shared.iterdir()) == []


class ShoutingParameter(luigi.Parameter):
    """Serializes upper-cased: parse(serialize(value)) is not the value."""

    def serialize(self, x: Any) -> str:
        return str(x).upper()


class LossyParameters(LSFJobTask):
    name = ShoutingParameter()


def test_parameters_that_do_not_survive_serialization_are_named(lsf: StandIn, shared: Path) -> None:
    task = LossyParameters(name="quiet", shared_tmp_dir=str(shared))

    with pytest.raises(TaskNotRebuildableError, match=r"parameter\(s\) name do not survive serialization"):
        task.run()
    assert lsf.states() == {}


def test_the_runner_names_a_job_directory_it_cannot_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert runner_main(["lsf_runner.py", str(tmp_path)]) == 1

    error = capsys.readouterr().err
    assert error.startswith("lsf_runner: cannot rebuild the task from") and "job.json" in error
    assert error.count("\n") == 1
