"""The live progress line: drawn on a terminal while the `luigi` command runs, never elsewhere."""

from __future__ import annotations

import os
import pty
import re
import shutil
import subprocess
import sys
from pathlib import Path

from luigi.task_status import DONE, FAILED, PENDING
from luigi.worker.progress import CLEAR_LINE, Progress, progress_of, render

PIPELINE = """
import os
import luigi

class Leaf(luigi.Task):
    n = luigi.IntParameter()
    root = luigi.Parameter()

    def output(self):
        return luigi.LocalTarget(os.path.join(self.root, f"leaf-{self.n}"))

    def run(self):
        print(f"printed by leaf {self.n}")
        with self.output().open("w") as out:
            out.write("x")

class Fan(luigi.WrapperTask):
    root = luigi.Parameter()

    def requires(self):
        return [Leaf(n, self.root) for n in range(6)]
"""
SUMMARY = "===== Luigi Execution Summary ====="


def test_progress_counts_only_the_tasks_that_had_to_run() -> None:
    done_before, ran, failed, waiting = object(), object(), object(), object()
    history = [
        (done_before, DONE, True),
        (ran, PENDING, True),
        (failed, PENDING, True),
        (waiting, PENDING, True),
        (ran, DONE, None),
        (failed, FAILED, None),
    ]
    assert progress_of(history, running=1, elapsed=2.0) == Progress(3, 1, 1, 1, 2.0)


def test_the_line_says_done_total_running_failed_rate_and_time_left() -> None:
    line = render(Progress(total=40, done=12, failed=1, running=2, elapsed=4.0), width=200)
    assert line == "luigi: 12/40 done, 2 running, 1 failed, 3.0/s, ~9s left"
    assert render(Progress(40, 0, 0, 1, 0.5), width=200) == "luigi: 0/40 done, 1 running"
    assert len(render(Progress(40, 12, 1, 2, 4.0), width=20)) == 19  # never wraps the terminal


def run_luigi(tmp_path: Path, root: str, terminal: bool, progress: bool = True, workers: int = 2) -> str:
    """Run the `luigi` command on the pipeline; its stdout and stderr, on a pty or a pipe."""
    (tmp_path / "progress_pipeline.py").write_text(PIPELINE)
    config = tmp_path / f"luigi-{progress}.cfg"
    config.write_text(f"[core]\nprogress = {str(progress).lower()}\n")
    # The tree under test stays first on the path (a worktree's, not whatever the venv installed).
    pythonpath = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": pythonpath, "LUIGI_CONFIG_PATH": str(config), "TERM": "xterm"}
    command = [sys.executable, "-m", "luigi", "--module", "progress_pipeline", "Fan", "--root", root]
    command += ["--local-scheduler", "--workers", str(workers)]
    if not terminal:
        done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return (done.stdout + done.stderr).decode()
    leader, follower = pty.openpty()
    process = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=follower, stderr=follower)
    os.close(follower)
    output = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the command and its slots closed the terminal
            break
        if not chunk:
            break
        output += chunk
    os.close(leader)
    assert process.wait(timeout=120) == 0
    return output.decode().replace("\r\n", "\n")


def normalised(output: str, root: str) -> str:
    output = output.replace(root, "ROOT")
    return re.sub(r"(pid[ =])\d+|salt=\d+", lambda m: (m.group(1) or "salt=") + "N", output)


def summary_of(output: str) -> str:
    return output[output.index(SUMMARY) :]


def test_on_a_terminal_the_line_is_drawn_in_place_and_cleared_before_an_unchanged_summary(
    tmp_path: Path,
) -> None:
    on_terminal = run_luigi(tmp_path, str(tmp_path / "a"), terminal=True)
    in_a_pipe = run_luigi(tmp_path, str(tmp_path / "b"), terminal=False)
    assert CLEAR_LINE + "luigi: 0/7 done, 1 running" in on_terminal
    assert CLEAR_LINE + "luigi: 7/7 done, 0 running" in on_terminal
    assert not re.search(r"left[^\r]", on_terminal), "a log line was written onto the progress line"
    before, summary = on_terminal.split(SUMMARY, 1)
    assert "luigi: " not in summary and before.rstrip("\n").endswith("INFO: ")
    assert summary_of(on_terminal).replace(str(tmp_path / "a"), "ROOT") == summary_of(in_a_pipe).replace(
        str(tmp_path / "b"), "ROOT"
    )


def test_without_a_terminal_the_output_is_what_it_is_with_progress_off(tmp_path: Path) -> None:
    root = tmp_path / "out"
    default = run_luigi(tmp_path, str(root), terminal=False, workers=1)
    shutil.rmtree(root)  # the same run again, task ids and all
    off = run_luigi(tmp_path, str(root), terminal=False, progress=False, workers=1)
    assert "\x1b[" not in default and "luigi: " not in default
    # Ready tasks of equal priority may run in another order from one run to the next: compare the lines.
    assert sorted(normalised(default, str(root)).splitlines()) == sorted(
        normalised(off, str(root)).splitlines()
    )


def test_progress_false_keeps_a_terminal_free_of_the_line(tmp_path: Path) -> None:
    output = run_luigi(tmp_path, str(tmp_path / "a"), terminal=True, progress=False)
    assert "luigi: " not in output and CLEAR_LINE not in output
    assert SUMMARY in output


def test_what_a_task_prints_clears_the_line_first_and_is_never_glued_to_it(tmp_path: Path) -> None:
    for workers in (1, 2):  # the worker's own process, and task slots forked from it
        output = run_luigi(tmp_path, str(tmp_path / f"w{workers}"), terminal=True, workers=workers)
        printed = [line for line in output.split("\n") if "printed by leaf" in line]
        assert len(printed) == 6, output
        for line in printed:  # what is left on the line before the print's text was cleared first
            assert line.rsplit(CLEAR_LINE, 1)[-1].startswith("printed by leaf"), (workers, repr(line))
