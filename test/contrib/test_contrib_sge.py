"""luigi.contrib.sge: the qsub/qstat helpers Luigi exposes, and real builds against a real Grid Engine cell.

The cell is Debian's gridengine 8.1.9 on this host, one node, set up by ``scripts/ensure-gridengine.sh``
(``make gridengine``; CI runs it before the suite). Tests needing it skip locally when it is missing and
fail when ``CI`` is set.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers import gridengine
from helpers.luigid import wait_until
from helpers.outcomes import build_failing, start_luigi_command
from helpers.sge_tasks import (
    JOB_OUTPUT,
    FailsInTheJob,
    JobDirectoryNodesCannotSee,
    WritesInTheWorker,
    WritesWhereItRan,
)

import luigi
from luigi.contrib.sge import (
    SGEJobError,
    SGEJobTask,
    TaskNotRebuildableError,
    _build_qsub_command,
    _parse_qstat_state,
    _parse_qsub_job_id,
)
from luigi.contrib.sge_runner import main as runner_main

FAST = {"poll_time": 1}

QSTAT_SAMPLE = """\
job-ID  prior   name       user         state submit/start at     queue              slots ja-task-ID
-----------------------------------------------------------------------------------------------------
      1 0.55500 job1       root         r     07/31/2026 10:00:01 all.q@node1            2
      2 0.55500 job2       root         qw    07/31/2026 10:00:02                        2
      3 0.55500 job3       root         t     07/31/2026 10:00:03 all.q@node1            2
     14 0.55500 job4       root         Eqw   07/31/2026 10:00:04                        2
"""


# The helpers Luigi exposes: no Grid Engine needed.


def test_parse_qstat_state_reads_the_state_column_of_the_jobs_row() -> None:
    assert [_parse_qstat_state(QSTAT_SAMPLE, job) for job in (1, 2, 3, "14")] == ["r", "qw", "t", "Eqw"]


def test_parse_qstat_state_is_u_for_a_job_qstat_does_not_list() -> None:
    assert _parse_qstat_state(QSTAT_SAMPLE, 4) == "u"  # job 4 is not listed; 14 must not match it
    assert _parse_qstat_state("", 1) == "u"


def test_parse_qsub_job_id_reads_qsubs_answer() -> None:
    assert _parse_qsub_job_id('Your job 12345 ("test_job") has been submitted\n') == 12345


def test_parse_qsub_job_id_names_an_answer_it_cannot_read() -> None:
    with pytest.raises(SGEJobError, match="qsub's answer is not 'Your job <id>"):
        _parse_qsub_job_id("Unable to run job: denied")


def test_build_qsub_command_is_luigis_command_line() -> None:
    line = _build_qsub_command("python runner.py /tmp/job /home/me", "MyTask", "/tmp/o", "/tmp/e", "orte", 4)

    assert line == (
        "echo 'python runner.py /tmp/job /home/me' | qsub -o :/tmp/o -e :/tmp/e -V -r y -pe orte 4 -N MyTask"
    )


def test_build_qsub_command_runs_nothing_it_is_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through a real /bin/sh, with a qsub that records what reached it: every word arrives whole."""
    monkeypatch.chdir(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "qsub").write_text('#!/bin/sh\nprintf "%s\\n" "$@" > qsub.args\ncat > qsub.stdin\n')
    (bin_dir / "qsub").chmod(0o755)
    hostile = ["'; touch injected; '", "$(touch injected)", "`touch injected`", '"; touch injected; "']
    cmd, name, out, pe = hostile[0] + " run", hostile[1], f"/tmp/{hostile[2]}", hostile[3]

    line = _build_qsub_command(cmd, name, out, out, pe, 2)
    subprocess.run(
        ["/bin/sh", "-c", line], env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}, check=True
    )

    assert not (tmp_path / "injected").exists()
    arguments = (tmp_path / "qsub.args").read_text().splitlines()
    assert arguments == ["-o", f":{out}", "-e", f":{out}", "-V", "-r", "y", "-pe", pe, "2", "-N", name]
    assert (tmp_path / "qsub.stdin").read_text() == cmd + "\n"


def test_job_name_is_the_family_or_job_name_format_filled_in() -> None:
    assert WritesWhereItRan(path="p").job_name == "WritesWhereItRan"
    named = WritesWhereItRan(path="p", text="x", job_name_format="{task_family}-{text}")
    assert named.job_name == "WritesWhereItRan-x"
    assert WritesWhereItRan(path="p", job_name="mine", job_name_format="{text}").job_name == "mine"


def test_parameters_are_luigis_and_none_changes_the_task_id() -> None:
    task = WritesWhereItRan(path="p")
    assert (task.n_cpu, task.shared_tmp_dir, task.parallel_env, task.poll_time) == (2, "/home", "orte", 5)
    assert (task.run_locally, task.dont_remove_tmp_dir, task.no_tarball) == (False, False, False)
    changed = WritesWhereItRan(path="p", n_cpu=8, parallel_env="smp", poll_time=1, no_tarball=True)
    assert changed.task_id == task.task_id


def test_local_sge_job_task_and_run_locally_work_without_grid_engine(tmp_path: Path) -> None:
    local = WritesInTheWorker(path=str(tmp_path / "local"))
    in_worker = WritesWhereItRan(path=str(tmp_path / "run_locally.json"), run_locally=True)

    assert luigi.build([local, in_worker], local_scheduler=True)

    assert (tmp_path / "local").read_text() == str(os.getpid())
    assert json.loads((tmp_path / "run_locally.json").read_text())["pid"] == os.getpid()


def test_a_task_the_job_cannot_rebuild_fails_before_submitting(tmp_path: Path) -> None:
    class Local(SGEJobTask):  # defined in a function: the job could not import it
        pass

    with pytest.raises(TaskNotRebuildableError, match="not reachable by name from its module"):
        Local(shared_tmp_dir=str(tmp_path)).run()
    assert list(tmp_path.iterdir()) == []  # no job directory, and qsub never ran


def test_the_runner_names_a_job_directory_it_cannot_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert runner_main(["sge_runner.py", str(tmp_path), str(tmp_path), "--no-tarball"]) == 1

    error = capsys.readouterr().err
    assert error.startswith("sge_runner: cannot rebuild the task from") and "job.json" in error
    assert error.count("\n") == 1


def test_the_runner_names_arguments_it_does_not_expect(capsys: pytest.CaptureFixture[str]) -> None:
    assert runner_main(["sge_runner.py", "/no/such/dir"]) == 2
    assert "expected an existing job directory and the project directory" in capsys.readouterr().err


# Real builds against the one-node cell.


@pytest.fixture
def shared(tmp_path: Path) -> Iterator[Path]:
    """The ``shared_tmp_dir`` of a test that submits to the cell; no job of it may outlive the test."""
    gridengine.require_cell()
    path = tmp_path / "shared"
    path.mkdir()
    yield path
    left = gridengine.jobs_writing_under(tmp_path)
    gridengine.delete(left)
    assert left == [], "a test left Grid Engine jobs"


@pytest.mark.slow
def test_work_runs_as_a_grid_engine_job_and_its_output_is_collected(shared: Path, tmp_path: Path) -> None:
    task = WritesWhereItRan(
        path=str(tmp_path / "out.json"),
        text="hello",
        shared_tmp_dir=str(shared),
        dont_remove_tmp_dir=True,
        **FAST,
    )

    assert luigi.build([task], local_scheduler=True)

    record = json.loads((tmp_path / "out.json").read_text())
    assert record["text"] == "hello"
    assert record["pid"] != os.getpid() and record["JOB_ID"] is not None  # work() ran as the job
    assert record["JOB_NAME"] == "WritesWhereItRan" and record["cwd"] == os.getcwd()
    [job_dir] = shared.iterdir()  # kept by dont_remove_tmp_dir: the job's logs are in it
    assert (job_dir / "job.out").read_text() == JOB_OUTPUT + "\n"
    assert (job_dir / "job.err").read_text() == "a warning that is not a failure\n"  # not a failure


@pytest.mark.slow
def test_the_job_directory_is_removed_afterwards_and_no_tarball_is_accepted(
    shared: Path, tmp_path: Path
) -> None:
    task = WritesWhereItRan(
        path=str(tmp_path / "out.json"), shared_tmp_dir=str(shared), no_tarball=True, **FAST
    )

    assert luigi.build([task], local_scheduler=True)

    assert list(shared.iterdir()) == []


@pytest.mark.slow
def test_n_cpu_and_parallel_env_reach_the_job_as_slots_of_that_environment(
    shared: Path, tmp_path: Path
) -> None:
    task = WritesWhereItRan(
        path=str(tmp_path / "out.json"), shared_tmp_dir=str(shared), n_cpu=3, parallel_env="orte", **FAST
    )

    assert luigi.build([task], local_scheduler=True)

    record = json.loads((tmp_path / "out.json").read_text())
    assert (record["NSLOTS"], record["PE"]) == ("3", "orte")


@pytest.mark.slow
def test_a_submission_qsub_refuses_fails_the_task_with_qsubs_words(shared: Path, tmp_path: Path) -> None:
    task = WritesWhereItRan(
        path=str(tmp_path / "out.json"), shared_tmp_dir=str(shared), parallel_env="nosuch"
    )

    message = str(build_failing(task))

    assert message.startswith("qsub did not submit WritesWhereItRan")
    assert 'parallel environment "nosuch" does not exist' in message
    assert list(shared.iterdir()) == []


def test_a_job_name_with_blanks_is_refused_with_the_fix(tmp_path: Path) -> None:
    task = WritesWhereItRan(path=str(tmp_path / "out.json"), shared_tmp_dir=str(tmp_path), job_name="my job")

    assert str(build_failing(task)) == (
        "job_name 'my job' contains whitespace, which Grid Engine refuses: "
        "give job_name (or job_name_format) without spaces"
    )
    assert list(tmp_path.iterdir()) == []  # the job directory is removed and nothing was submitted


@pytest.mark.slow
def test_a_failing_job_fails_the_task_with_the_jobs_error_output(shared: Path, tmp_path: Path) -> None:
    task = FailsInTheJob(path=str(tmp_path / "out"), shared_tmp_dir=str(shared), **FAST)

    message = str(build_failing(task))

    assert message.startswith("Grid Engine job ") and "for FailsInTheJob" in message
    assert "ended without finishing work()" in message
    assert message.rstrip().endswith("RuntimeError: disk full on node seven")
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_job_in_error_state_fails_the_task_with_grid_engines_reason_and_is_deleted(
    shared: Path, tmp_path: Path
) -> None:
    task = JobDirectoryNodesCannotSee(path=str(tmp_path / "out.json"), shared_tmp_dir=str(shared), **FAST)

    message = str(build_failing(task))

    assert message.startswith("Grid Engine job ") and "is in error state 'Eqw'" in message
    assert "(Grid Engine says: " in message and "can't open output file" in message
    assert message.endswith("; deleted it; its stderr is empty")
    assert gridengine.jobs_writing_under(tmp_path) == []  # deleted, not left in the queue


@contextmanager
def job_running_until_killed(tmp_path: Path, shared: Path) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """``luigi --module helpers.sge_tasks RunsUntilKilled ...`` as a user types it (a failed task exits 5),
    with its job running work(); yields the luigi process and the job's id, and kills the process after."""
    started = tmp_path / "started"
    with start_luigi_command(
        "helpers.sge_tasks", "RunsUntilKilled", "--path", str(tmp_path / "out"), "--started", str(started),
        "--shared-tmp-dir", str(shared), "--poll-time", "1", "--retcode-task-failed", "5",
    ) as run:  # fmt: skip
        try:
            wait_until(started.exists, timeout=60, what="the job to start work()")
            [job_id] = gridengine.jobs_writing_under(shared)
            yield run, job_id
        finally:
            run.kill()


@pytest.mark.slow
def test_a_job_deleted_with_qdel_fails_the_task(shared: Path, tmp_path: Path) -> None:
    with job_running_until_killed(tmp_path, shared) as (run, job_id):
        assert gridengine.state(job_id) == "r"
        subprocess.run(["qdel", str(job_id)], check=True, capture_output=True)
        output, _ = run.communicate(timeout=60)

    assert run.returncode == 5  # the task failed
    assert (
        f"Grid Engine job {job_id} for RunsUntilKilled" in output
        and "ended without finishing work()" in output
    )
    assert gridengine.gone(job_id)
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_worker_stopped_while_the_job_runs_deletes_the_job(shared: Path, tmp_path: Path) -> None:
    with job_running_until_killed(tmp_path, shared) as (run, job_id):
        run.terminate()
        run.communicate(timeout=60)

    wait_until(lambda: gridengine.gone(job_id), timeout=30, what="the job to be deleted")


@pytest.mark.slow
def test_no_parameter_job_name_or_path_reaches_a_shell_unquoted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gridengine.require_cell()
    monkeypatch.chdir(tmp_path)  # where an injected relative `touch injected` would land
    marker = tmp_path / "injected"
    injections = [
        "'; touch injected; echo '",
        "$(touch injected)",
        "`touch injected`",
        '"; touch injected; "',
    ]
    shared = tmp_path / "shared dir $(touch injected) ';touch injected;'"
    shared.mkdir()
    text = " ".join(injections)
    job_name = (
        "x;touch${IFS}injected;$(touch${IFS}injected)`touch${IFS}injected`"  # no blanks: qsub refuses them
    )
    task = WritesWhereItRan(
        path=str(tmp_path / "out.json"), text=text, shared_tmp_dir=str(shared), job_name=job_name, **FAST
    )

    try:
        assert luigi.build([task], local_scheduler=True)
    finally:
        left = gridengine.jobs_writing_under(tmp_path)
        gridengine.delete(left)

    record = json.loads((tmp_path / "out.json").read_text())
    assert (record["text"], record["JOB_NAME"]) == (text, job_name)
    assert not marker.exists() and left == []
