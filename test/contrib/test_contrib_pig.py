"""luigi.contrib.pig end to end: real builds run a stand-in ``pig`` launcher at ``<[pig] home>/bin/pig``.

The stand-in (`helpers.pig_standin`) records its command line and the files it was handed, and runs a
small subset of Pig Latin over local files, with Pig's return codes and error lines.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil
import pytest
from helpers.luigid import pid_alive, wait_until
from helpers.outcomes import build_failing
from helpers.pig_standin import install_pig, invocations
from helpers.pig_tasks import SimplePigScript, UppercaseWithPig

import luigi
from luigi.contrib.pig import PigJobError, PigJobTask, PigRunContext

TEST_DIR = Path(__file__).resolve().parent.parent

UPPERCASE = """\
-- every name in upper case, keyed as before
people = LOAD '$input' USING PigStorage(',') AS (id:int, name:chararray);
loud = FOREACH people GENERATE id, UPPER(name);
STORE loud INTO '$output';
"""


@pytest.fixture
def pig_home(tmp_path: Path) -> Path:
    """The stand-in installed as ``<home>/bin/pig``, with ``[pig] home`` pointing there."""
    home = tmp_path / "pig-home"
    install_pig(home)
    luigi.configuration.get_config().set("pig", "home", str(home))
    return home


@pytest.fixture
def people(tmp_path: Path) -> Path:
    source = tmp_path / "people.csv"
    source.write_text("1,ada\n2,grace\n")
    return source


def script(tmp_path: Path, text: str) -> str:
    path = tmp_path / "job.pig"
    path.write_text(text)
    return str(path)


def uppercase(tmp_path: Path, source: Path) -> UppercaseWithPig:
    """The UPPERCASE script over ``source``, written to ``<tmp_path>/o``."""
    return UppercaseWithPig(
        script=script(tmp_path, UPPERCASE), source=str(source), destination=str(tmp_path / "o")
    )


def test_a_simple_script_runs_as_home_bin_pig_dash_f_script(pig_home, people, tmp_path):
    text = f"people = LOAD '{people}' USING PigStorage(',') AS (id, name);\n"
    text += f"STORE people INTO '{tmp_path}/out';\n"
    task = SimplePigScript(script=script(tmp_path, text), destination=str(tmp_path / "out"))
    assert luigi.build([task], local_scheduler=True)
    [call] = invocations(pig_home)
    assert call["argv"] == ["-f", task.script]
    assert call["pig_home"] == str(pig_home)
    assert (tmp_path / "out" / "part-m-00000").read_text() == "1\tada\n2\tgrace\n"


def test_parameters_and_properties_reach_pig_in_their_files_after_the_options(pig_home, people, tmp_path):
    task = uppercase(tmp_path, people)
    assert luigi.build([task], local_scheduler=True)
    [call] = invocations(pig_home)
    param_file, property_file = call["argv"][3], call["argv"][5]
    files = ["-param_file", param_file, "-propertyFile", property_file]
    assert call["argv"] == ["-x", "local", *files, "-f", task.script]
    assert call["param_file_text"] == f"input={people}{os.linesep}output={tmp_path / 'o'}{os.linesep}"
    assert call["property_file_text"] == f"pig.additional.jars=/path/to/your/jar{os.linesep}"
    assert call["pig_opts"] == "-Dmapreduce.job.queuename=luigi"  # pig_env_vars() reach Pig's environment
    assert (tmp_path / "o" / "part-m-00000").read_text() == "1\tADA\n2\tGRACE\n"
    assert not os.path.exists(param_file) and not os.path.exists(property_file)  # removed after the run


def test_a_failing_script_fails_the_task_with_pigs_return_code_and_stderr(pig_home, tmp_path):
    missing = tmp_path / "no-such-input.csv"
    error = build_failing(uppercase(tmp_path, missing))
    assert isinstance(error, PigJobError)
    assert error.message == "Pig script failed with return value: 2"
    assert f"ERROR 2118: Input path does not exist: {missing}" in error.err
    assert str(error).startswith("Pig script failed with return value: 2\nSTDERR: ")
    assert not (tmp_path / "o").exists()


def test_a_script_pig_cannot_parse_fails_the_task_naming_the_statement(pig_home, people, tmp_path):
    bad = script(tmp_path, f"people = LOAD '{people}';\nDUMPP people;\n")
    error = build_failing(SimplePigScript(script=bad, destination=str(tmp_path / "o")))
    assert isinstance(error, PigJobError)
    assert "ERROR 1000: Error during parsing. Cannot parse: DUMPP people" in error.err


def test_a_task_without_a_script_or_output_says_what_to_override():
    class Bare(PigJobTask):
        pass

    with pytest.raises(NotImplementedError):
        Bare().pig_script_path()
    with pytest.raises(NotImplementedError):
        Bare().output()


def test_pig_home_defaults_to_usr_share_pig():
    assert PigJobTask().pig_command_path() == "/usr/share/pig/bin/pig"


def test_a_job_error_shows_stdout_and_stderr_in_its_text():
    error = PigJobError("Pig script failed with return value: 6", out="dumped", err="ERROR 1000")
    assert str(error) == "Pig script failed with return value: 6\nSTDOUT: dumped\nSTDERR: ERROR 1000"
    assert (error.out, error.err) == ("dumped", "ERROR 1000")


# -- interrupting a running script -----------------------------------------------------------------


def test_ctrl_c_in_the_run_context_kills_the_client_and_its_hadoop_job(pig_home):
    client = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    try:
        with pytest.raises(KeyboardInterrupt), PigRunContext(str(pig_home / "bin" / "pig")) as context:
            context.proc, context.job_id = client, "job_201501010000_0042"
            raise KeyboardInterrupt
        assert client.wait(timeout=10) == -signal.SIGKILL
    finally:
        client.kill()
        client.wait()
    assert [call["argv"] for call in invocations(pig_home)] == [["-e", "kill job_201501010000_0042"]]


def test_sigterm_to_the_worker_kills_the_running_pig_and_its_job(pig_home, tmp_path):
    running = tmp_path / "still-arriving"
    os.mkfifo(running)  # the stand-in's LOAD blocks on it, as a long job keeps running
    config = tmp_path / "luigi.cfg"
    config.write_text(f"[core]\nno_lock = true\n[pig]\nhome = {pig_home}\n")
    command = [sys.executable, "-m", "luigi", "--module", "helpers.pig_tasks", "UppercaseWithPig"]
    command += ["--script", script(tmp_path, UPPERCASE), "--source", str(running)]
    command += ["--destination", str(tmp_path / "o"), "--local-scheduler"]
    paths = f"{TEST_DIR.parent}{os.pathsep}{TEST_DIR}"
    env = dict(os.environ, PYTHONPATH=paths, LUIGI_CONFIG_PATH=str(config))
    worker = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        log = _read_until(worker.stderr, "HadoopJobId: ")  # the worker has seen the job id
        [call] = invocations(pig_home)
        assert psutil.Process(call["pid"]).ppid() == worker.pid
        worker.send_signal(signal.SIGTERM)
        wait_until(lambda: not pid_alive(call["pid"]), what="the pig client to die")
        log += worker.communicate(timeout=60)[1]
    finally:
        for process in psutil.Process(worker.pid).children(recursive=True) if worker.poll() is None else []:
            process.kill()  # a failed test leaves no pig behind
        if worker.poll() is None:
            worker.kill()
            worker.communicate()
    job_id = f"job_local{call['pid']}_0001"
    assert [c["argv"] for c in invocations(pig_home)][1:] == [["-e", f"kill {job_id}"]]
    assert f"Killing Pig job {job_id}" in log
    assert "1 failed" in log


def _read_until(stream: io.TextIOBase | None, marker: str) -> str:
    """Lines of ``stream`` up to the first containing ``marker`` (the worker's deadline ends it otherwise)."""
    assert stream is not None
    seen = ""
    for line in stream:
        seen += line
        if marker in line:
            return seen
    raise AssertionError(f"{marker!r} never appeared in:\n{seen}")


# -- the seams users' own test suites patch, as Luigi's do --------------------------------------------


class FinishedPig:
    """What a test's fake ``Popen`` returns: a pig that already printed and exits after a few polls."""

    def __init__(self, returncode: int) -> None:
        self.stdout, self.stderr = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        for stream, text in ((self.stdout, b"stdout"), (self.stderr, b"stderr")):
            stream.write(text)
            stream.seek(0)
        self._polls_left, self._code, self.returncode = 3, returncode, None

    def poll(self) -> int | None:
        self._polls_left -= 1
        if self._polls_left <= 0:
            self.returncode = self._code
        return self.returncode

    def wait(self) -> int:
        self.returncode = self._code
        return self._code


def test_pig_starts_through_popen_with_only_the_keywords_a_patched_popen_accepts(monkeypatch, tmp_path):
    commands, files = [], []

    def popen(args, shell=None, stdout=None, stderr=None, env=None, close_fds=True):
        commands.append(args)
        files.extend(Path(arg).read_text() for arg in args if arg.startswith(tempfile.gettempdir()))
        return FinishedPig(returncode=1)

    monkeypatch.setattr("luigi.contrib.pig.subprocess.Popen", popen)
    error = build_failing(
        UppercaseWithPig(script="my_script.pig", source="in", destination=str(tmp_path / "o"))
    )
    assert isinstance(error, PigJobError) and (error.out, error.err) == ("stdout", "stderr")
    [command] = commands
    assert command[:3] == ["/usr/share/pig/bin/pig", "-x", "local"] and command[-2:] == [
        "-f",
        "my_script.pig",
    ]
    assert files == [
        f"input=in{os.linesep}output={tmp_path / 'o'}{os.linesep}",
        f"pig.additional.jars=/path/to/your/jar{os.linesep}",
    ]


def test_a_pig_home_without_pig_fails_the_task_naming_the_setting(tmp_path):
    luigi.configuration.get_config().set("pig", "home", str(tmp_path / "no-pig"))
    error = build_failing(SimplePigScript(script="job.pig", destination=str(tmp_path / "o")))
    assert isinstance(error, PigJobError)
    assert str(error) == (
        f"Pig is not installed at {tmp_path}/no-pig/bin/pig: "
        "set [pig] home to the directory that holds bin/pig"
    )
