"""What a command line that cannot build its root task does (LUIGI_COMPAT j.15).

``luigi.run()`` raises Luigi's own exceptions, unwrapped; the ``luigi`` command exits with ``[retcode]
unhandled_exception`` (4), as Luigi does, and prints one line: the one Luigi's traceback ends with (the
exception by its qualified name and its message), without the traceback.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap

import pytest

import luigi
from luigi.parameter import MissingParameterException
from luigi.task_register import TaskClassNotFoundException


class NeedsCount(luigi.Task):
    count = luigi.IntParameter()


class TakesTask(luigi.Task):
    other = luigi.TaskParameter()


def test_luigi_run_raises_missing_parameter_exception_with_luigis_message():
    with pytest.raises(MissingParameterException) as caught:
        luigi.run(["NeedsCount", "--local-scheduler", "--no-lock"])
    assert str(caught.value) == "NeedsCount[args=(), kwargs={}]: requires the 'count' parameter to be set"


def test_luigi_run_raises_task_class_not_found_for_a_bad_task_parameter_value():
    with pytest.raises(TaskClassNotFoundException, match="No task NoSuchTask"):
        luigi.run(["TakesTask", "--other", "NoSuchTask", "--local-scheduler", "--no-lock"])


def test_the_luigi_command_prints_the_exceptions_last_traceback_line_and_exits_4(tmp_path):
    (tmp_path / "errors_pipeline.py").write_text(
        textwrap.dedent(
            """
            import luigi

            class NeedsCount(luigi.Task):
                count = luigi.IntParameter()
            """
        )
    )
    pythonpath = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    (tmp_path / "empty.cfg").write_text("")
    env = {**os.environ, "PYTHONPATH": pythonpath, "LUIGI_CONFIG_PATH": str(tmp_path / "empty.cfg")}
    done = subprocess.run(
        [sys.executable, "-m", "luigi", "--module", "errors_pipeline", "NeedsCount", "--local-scheduler"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert done.returncode == 4
    assert done.stderr.splitlines() == [
        "luigi.parameter.MissingParameterException: NeedsCount[args=(), kwargs={}]: "
        "requires the 'count' parameter to be set"
    ]


def test_an_unknown_flag_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        luigi.run(["NeedsCount", "--count", "1", "--no-such-flag", "--local-scheduler"])
    assert exit_info.value.code == 2
    assert "unrecognized arguments: --no-such-flag" in capsys.readouterr().err


def test_logging_is_left_alone_by_a_raising_luigi_run(caplog):
    with caplog.at_level(logging.DEBUG, logger="luigi-interface"):
        with pytest.raises(MissingParameterException):
            luigi.run(["NeedsCount", "--local-scheduler", "--no-lock"])
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
