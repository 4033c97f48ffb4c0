"""A profiler or tracer started after an in-process run works: coverage, cProfile and debuggers in the
users' own test suites call ``sys.settrace``/``sys.setprofile`` after ``luigi.build`` returns."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import os, sys, tempfile
    import luigi

    OUT = tempfile.mkdtemp()

    class Write(luigi.Task):
        def output(self):
            return luigi.LocalTarget(os.path.join(OUT, "out"))

        def run(self):
            with self.output().open("w") as out:
                out.write("x")

    assert luigi.build([Write()], local_scheduler=True)

    def called():
        return 1

    seen = []
    sys.{hook}(lambda frame, event, arg: seen.append(event))
    called()
    sys.{hook}(None)
    print("returned", "call" in seen)
    """
)


@pytest.mark.parametrize("hook", ["settrace", "setprofile"])
def test_a_hook_set_after_an_in_process_run_sees_the_next_call_and_returns(hook, tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(hook=hook)],
        capture_output=True,
        text=True,
        timeout=60,  # the interpreter spun for ever here when a run left its async-exception flag set
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["returned", "True"]
