"""luigi.contrib.hadoop: Hadoop streaming jobs run for real, through LocalJobRunner and the streaming runner.

The streaming runner's ``hadoop jar`` goes to the stand-in helpers/hadoop_jar_standin.py (reached through
the ``hadoop`` stand-in of helpers/hadoop_cli_standin.py, first on PATH): it runs the shipped
``mrrunner.py`` per input file and per reducer as Hadoop streaming does, over the stand-in's HDFS. The
jobs live in helpers/hadoop_jobs.py, the module the "nodes" import to rebuild them from ``job.json``.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import warnings
import zipfile
from pathlib import Path
from typing import Any

import helpers.hadoop_jobs as hadoop_jobs_module
import pytest
from helpers.hadoop_jobs import (
    CsvInOut,
    FailingMapper,
    Hooks,
    Join,
    JsonRecords,
    RunnerOptions,
    WithSettings,
    WordCount,
)
from helpers.hdfs_cluster import HadoopCli, hadoop_cli  # noqa: F401
from helpers.json_http import JsonHandler, serving
from helpers.outcomes import build_failing
from helpers.scheduler import HeldSchedulerFactory, make_scheduler

import luigi
import luigi.contrib.hadoop as hadoop
from luigi.contrib import mrrunner
from luigi.contrib._job_dir import TaskNotRebuildableError

WORDS = {"a.txt": "a b a\nc a\n", "b.txt": "b b\n"}
EXPECTED_COUNTS = {"a": 3, "b": 3, "c": 1}


@pytest.fixture
def streaming(hadoop_cli: HadoopCli, tmp_path: Path) -> HadoopCli:  # noqa: F811
    """The stand-in ``hadoop``, ``[hadoop] streaming-jar`` pointing at a streaming jar, this Python on the
    nodes, and the words under ``/data`` on HDFS."""
    jar = tmp_path / "hadoop-streaming-3.3.6.jar"
    jar.write_bytes(b"")
    config = luigi.configuration.get_config()
    config.set("hadoop", "streaming_jar", str(jar))
    config.set("hadoop", "python_executable", sys.executable)
    (hadoop_cli.root / "data").mkdir()
    for name, text in WORDS.items():
        (hadoop_cli.root / "data" / name).write_text(text)
    return hadoop_cli


def hdfs(path: str) -> str:
    return f"hdfs://localhost{path}"


def parts(cli: HadoopCli, directory: str) -> list[str]:
    """The lines of every part file of an output directory on the stand-in's HDFS, in part order."""
    files = sorted(cli.local(directory).glob("part-*"))
    return [line for part in files for line in part.read_text().splitlines()]


def run(task: luigi.Task) -> dict[str, Any]:
    """Build ``task`` on a scheduler the test keeps; the scheduler's record of the task."""
    scheduler, _clock = make_scheduler()
    assert luigi.build([task], local_scheduler=True, worker_scheduler_factory=HeldSchedulerFactory(scheduler))
    record: dict[str, Any] = scheduler.task_list("", "")[task.task_id]
    return record


# --- through the streaming runner and the hadoop stand-in ---


@pytest.mark.slow  # a streaming job: Python started per step
def test_word_count_runs_as_a_streaming_job_and_its_output_appears_whole(streaming: HadoopCli):
    task = WordCount(sources=[hdfs("/data/a.txt"), hdfs("/data/b.txt")], destination=hdfs("/out"))
    record = run(task)
    counts = dict(line.split("\t") for line in parts(streaming, "/out"))
    assert {word: int(count) for word, count in counts.items()} == EXPECTED_COUNTS
    assert streaming.listing() == [
        "/data", "/data/a.txt", "/data/b.txt", "/out", "/out/_SUCCESS", "/out/part-00000", "/out/part-00001",
        "/tmp", "/user",
    ]  # fmt: skip
    assert record["tracking_url"] == "http://localhost:8080/"  # the stand-in's "url to track the job" line


@pytest.mark.slow  # a streaming job: Python started per step
def test_the_streaming_command_line_is_hadoops(streaming: HadoopCli):
    run(WordCount(sources=[hdfs("/data/a.txt")], destination=hdfs("/out")))
    [call] = streaming.jar_calls()
    pairs = list(zip(call[2::2], call[3::2], strict=True))
    python = sys.executable
    assert ("-mapper", f"{python} mrrunner.py map") in pairs
    assert ("-combiner", f"{python} mrrunner.py combiner") in pairs
    assert ("-reducer", f"{python} mrrunner.py reduce") in pairs
    assert ("-D", "mapred.reduce.tasks=2") in pairs
    assert ("-D", "stream.jobconf.truncate.limit=20000") in pairs
    shipped = [value for option, value in pairs if option == "-file"]
    assert shipped[0] == mrrunner.__file__
    assert [Path(path).name for path in shipped[1:]] == ["packages.tar", "job.json"]
    assert ("-input", hdfs("/data/a.txt")) in pairs
    assert call[-2] == "-output" and call[-1].startswith(hdfs("/out-temp-"))
    assert not Path(shipped[1]).parent.exists()  # the runner's directory is removed once the job is done


@pytest.mark.slow  # a streaming job: Python started per step
def test_counters_reach_hadoop_and_are_summed_across_steps(
    streaming: HadoopCli, caplog: pytest.LogCaptureFixture
):
    caplog.set_level("INFO", logger="luigi-interface")
    run(WordCount(sources=[hdfs("/data/a.txt"), hdfs("/data/b.txt")], destination=hdfs("/out")))
    logged = [record.getMessage() for record in caplog.records]
    # 3 lines, 7 words: batches of 3 plus the remainder flushed at the end of each mapper
    assert "\tlines" in logged and "\t\tread=3" in logged
    assert "\twords" in logged and "\t\tseen=7" in logged


@pytest.mark.slow  # a streaming job: Python started per step
def test_a_join_of_two_inputs(streaming: HadoopCli):
    (streaming.root / "data" / "users").write_text("user\t1\tada\nuser\t2\tbob\nuser\t3\tcy\n")
    (streaming.root / "data" / "orders").write_text("order\t1\t30\norder\t3\t5\norder\t1\t12\n")
    run(Join(sources=[hdfs("/data/users"), hdfs("/data/orders")], destination=hdfs("/joined")))
    assert sorted(parts(streaming, "/joined")) == ["ada\t42", "cy\t5"]


@pytest.mark.slow  # a streaming job: Python started per step
def test_hooks_run_on_the_nodes_and_jobconfs_reach_them(streaming: HadoopCli):
    run(Hooks(sources=[hdfs("/data/a.txt")], destination=hdfs("/hooks"), marker="seen-on-node"))
    assert parts(streaming, "/hooks") == [
        "line\ta b a,c a",
        "mapped\t2",
        "keys\tline,mapped",
        "jobconf\tseen-on-node",
    ]


@pytest.mark.slow  # a streaming job: Python started per step
def test_a_custom_reader_and_writer_in_a_map_only_job(streaming: HadoopCli):
    (streaming.root / "data" / "people.csv").write_text("ada,1815\nbob,1900\n")
    run(CsvInOut(sources=[hdfs("/data/people.csv")], destination=hdfs("/csv")))
    [call] = streaming.jar_calls()
    assert "-reducer" not in call and "mapred.reduce.tasks=0" in call
    assert parts(streaming, "/csv") == ["ADA=1815", "BOB=1900"]


@pytest.mark.slow  # a streaming job: Python started per step
def test_json_interchange_between_steps(streaming: HadoopCli):
    (streaming.root / "data" / "counts").write_text("x 1\ny 2\nx 3\n")
    run(JsonRecords(sources=[hdfs("/data/counts")], destination=hdfs("/json")))
    assert sorted(parts(streaming, "/json")) == ['["x", "k"]\t{"total": 4}', '["y", "k"]\t{"total": 2}']


@pytest.mark.slow  # a streaming job: Python started per step
def test_a_failing_mapper_fails_the_task_with_the_jobs_output_and_leaves_no_output(streaming: HadoopCli):
    (streaming.root / "data" / "poisoned").write_text("fine words\npoison here\n")
    task = FailingMapper(sources=[hdfs("/data/poisoned")], destination=hdfs("/never"))
    error = build_failing(task)
    assert isinstance(error, hadoop.HadoopJobError)
    assert str(error).startswith("Streaming job failed with exit code 1. ")
    assert "Job not successful!" in str(error.err)  # Hadoop's own failure lines
    assert "ValueError: refusing the record 'poison here'" in str(error.err)  # the step's traceback
    explained = task.on_failure(error)
    assert explained is not None and "refusing the record" in explained and "stderr:" in explained
    assert [path for path in streaming.listing() if "never" in path] == []


@pytest.mark.slow  # a streaming job: Python started per step
def test_a_task_that_cannot_be_rebuilt_on_the_nodes_fails_before_submitting(streaming: HadoopCli):
    class DefinedInAFunction(WordCount):
        pass

    error = build_failing(DefinedInAFunction(sources=[hdfs("/data/a.txt")], destination=hdfs("/out")))
    assert isinstance(error, TaskNotRebuildableError)
    assert "define it at the top level of a module" in str(error)
    assert streaming.jar_calls() == []


@pytest.mark.slow  # a streaming job: Python started per step
def test_hadoop_pool_flag_reaches_the_jobconfs(streaming: HadoopCli):
    with luigi.cmdline_parser.CmdlineParser.global_instance(["WordCount", "--hadoop-pool", "mypool"]):
        task = WordCount(sources=[hdfs("/data/a.txt")], destination=hdfs("/out"))
        assert "mapred.fairscheduler.pool=mypool" in task.jobconfs()
    luigi.configuration.get_config().set("hadoop", "scheduler", "capacity")
    assert "mapred.job.queue.name=q1" in WordCount(sources=[], destination="x", pool="q1").jobconfs()


@pytest.mark.slow  # a streaming job: Python started per step
def test_extra_files_appear_on_the_nodes_where_the_job_asked(streaming: HadoopCli, tmp_path: Path):
    settings = tmp_path / "settings.txt"
    settings.write_text("from-settings\n")
    run(WithSettings(sources=[hdfs("/data/a.txt")], destination=hdfs("/set"), settings=str(settings)))
    [call] = streaming.jar_calls()
    [files] = [value for option, value in zip(call[2::2], call[3::2], strict=True) if option == "-files"]
    assert files.startswith(f"{settings}#conf_settings.txt_")  # linked to conf/settings.txt on the node
    assert parts(streaming, "/set") == ["from-settings\ta b a|c a"]


@pytest.mark.slow  # a streaming job: Python started per step
def test_the_runners_archives_jobconfs_and_streaming_arguments_reach_the_job(
    streaming: HadoopCli, tmp_path: Path
):
    archive = tmp_path / "tools.zip"
    with zipfile.ZipFile(archive, "w") as tools:
        tools.writestr("word.txt", "from-archive\n")
    run(RunnerOptions(sources=[hdfs("/data/b.txt")], destination=hdfs("/opts"), archive=str(archive)))
    [call] = streaming.jar_calls()
    pairs = list(zip(call[2::2], call[3::2], strict=True))
    assert ("-archives", f"{archive}#tools") in pairs and ("-D", "mapred.map.tasks=1") in pairs
    assert ("-cmdenv", "GREETING=hello") in pairs  # "-" added to the job's "cmdenv"
    assert parts(streaming, "/opts") == ["hello\tfrom-archive: b b"]


def build_pex(path: Path) -> Path:
    """A zip application holding Luigi, the test jobs and mrrunner as its entry point: what a pex is."""
    repository = Path(luigi.__file__).parent.parent
    helpers_dir = Path(hadoop_jobs_module.__file__).parent
    with zipfile.ZipFile(path, "w") as pex:
        for tree, base in [(repository / "luigi", repository), (helpers_dir, helpers_dir.parent)]:
            for file in tree.rglob("*.py"):
                pex.write(file, str(file.relative_to(base)))
        pex.writestr("__main__.py", "from luigi.contrib import mrrunner\nmrrunner.main()\n")
    return path


@pytest.mark.slow  # a streaming job: Python started per step
def test_a_package_binary_is_shipped_as_mrrunner_pex_instead_of_the_archive(
    streaming: HadoopCli, tmp_path: Path
):
    pex = build_pex(tmp_path / "job.pex")
    run(RunnerOptions(sources=[hdfs("/data/b.txt")], destination=hdfs("/pex"), binary=str(pex)))
    [call] = streaming.jar_calls()
    pairs = list(zip(call[2::2], call[3::2], strict=True))
    assert ("-mapper", f"{sys.executable} mrrunner.pex map") in pairs
    shipped = [Path(value).name for option, value in pairs if option == "-file"]
    assert shipped == ["mrrunner.pex", "job.json"]
    assert parts(streaming, "/pex") == ["hello\tno archive: b b"]


# --- the node's side: mrrunner ---


def test_mrrunner_rebuilds_the_job_from_job_json_and_runs_a_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    job = WordCount(sources=["in"], destination=str(tmp_path / "out"))
    job.dump(str(tmp_path))
    spec = json.loads((tmp_path / "job.json").read_text())
    assert (spec["module"], spec["family"]) == ("helpers.hadoop_jobs", "WordCount")
    assert not list(tmp_path.glob("*.pickle"))
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    mrrunner.main(["mrrunner.py", "map"], stdin=io.StringIO("x y x\n"), stdout=out)
    assert out.getvalue() == "'x'\t1\n'y'\t1\n'x'\t1\n"
    reduced = io.StringIO()
    mrrunner.main(["mrrunner.py", "reduce"], stdin=io.StringIO("'x'\t1\n'x'\t1\n'y'\t1\n"), stdout=reduced)
    assert reduced.getvalue() == "x\t2\ny\t1\n"


def test_mrrunner_names_an_unknown_step_and_prints_the_exception_as_hex(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    WordCount(sources=["in"], destination="out").dump(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(Exception, match="weird command: shuffle"):
        mrrunner.main(["mrrunner.py", "shuffle"])
    hex_line = [line for line in capsys.readouterr().err.splitlines() if line.startswith("luigi-exc-hex=")]
    assert "weird command: shuffle" in bytes.fromhex(hex_line[0].split("=", 1)[1]).decode()


def test_mrrunner_without_a_job_file_says_where_it_looked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="job.json"):
        mrrunner.Runner()


# --- in the worker: LocalJobRunner ---


def local_inputs(tmp_path: Path) -> list[str]:
    paths = []
    for name, text in WORDS.items():
        (tmp_path / name).write_text(text)
        paths.append(str(tmp_path / name))
    return paths


def test_a_job_with_local_outputs_runs_in_the_worker_with_a_warning(tmp_path: Path):
    task = WordCount(sources=local_inputs(tmp_path), destination=str(tmp_path / "counts.tsv"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert isinstance(task.job_runner(), hadoop.LocalJobRunner)
    assert any("local mode" in str(warning.message) for warning in caught)
    run(task)
    lines = (tmp_path / "counts.tsv").read_text().splitlines()
    assert {word: int(count) for word, count in (line.split("\t") for line in lines)} == EXPECTED_COUNTS


def test_the_local_runner_runs_hooks_reader_writer_and_json_like_the_cluster(tmp_path: Path):
    (tmp_path / "people.csv").write_text("ada,1815\nbob,1900\n")
    run(CsvInOut(sources=[str(tmp_path / "people.csv")], destination=str(tmp_path / "csv")))
    assert (tmp_path / "csv").read_text() == "ADA=1815\nBOB=1900\n"
    (tmp_path / "counts").write_text("x 1\ny 2\nx 3\n")
    run(JsonRecords(sources=[str(tmp_path / "counts")], destination=str(tmp_path / "json")))
    assert (tmp_path / "json").read_text() == '["x", "k"]\t{"total": 4}\n["y", "k"]\t{"total": 2}\n'
    run(Hooks(sources=[str(tmp_path / "people.csv")], destination=str(tmp_path / "hooks")))
    assert (tmp_path / "hooks").read_text().splitlines() == [
        "line\tada,1815,bob,1900", "mapped\t2", "keys\tline,mapped", "jobconf\tnot on a node",
    ]  # fmt: skip


def test_python_interchange_keeps_str_and_bytes_keys_apart():
    class Keys(hadoop.JobTask):
        def mapper(self, line: str):
            yield "test", 1
            yield b"test", 1
            yield "test", 1

        def reducer(self, key: Any, values: Any):
            yield key, sum(values)

    job = Keys()
    job._set_data_interchange()
    mapped, reduced = io.StringIO(), io.StringIO()
    job.run_mapper(io.StringIO("one line\n"), mapped)
    job.run_reducer(hadoop.LocalJobRunner().group(io.StringIO(mapped.getvalue())), reduced)
    assert reduced.getvalue().splitlines() == ["test\t2", "b'test'\t1"]


# --- the package archive and helpers ---


@pytest.fixture
def package_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``archived_pkg`` (a package with a subpackage, a dotfile, a .pyc and an egg-info) and
    ``archived_module``, importable from a fresh directory."""
    root = tmp_path / "src"
    for name in [
        "archived_pkg/__init__.py", "archived_pkg/one.py", "archived_pkg/.hidden", "archived_pkg/one.pyc",
        "archived_pkg/sub/__init__.py", "archived_pkg/sub/two.py", "archived_pkg.egg-info/top_level.txt",
        "archived_module.py",
    ]:  # fmt: skip
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")
    monkeypatch.syspath_prepend(str(root))
    for name in ["archived_pkg", "archived_pkg.sub", "archived_pkg.sub.two", "archived_module"]:
        monkeypatch.delitem(sys.modules, name, raising=False)
    return root


def archived(modules: list[Any], tmp_path: Path) -> list[str]:
    hadoop.create_packages_archive(modules, str(tmp_path / "packages.tar"))
    with tarfile.open(tmp_path / "packages.tar") as tar:
        return sorted(tar.getnames())


def test_the_archive_holds_a_module_a_package_or_a_submodules_package(package_tree: Path, tmp_path: Path):
    import importlib

    module = importlib.import_module("archived_module")
    package = importlib.import_module("archived_pkg")
    submodule = importlib.import_module("archived_pkg.sub.two")
    assert archived([module], tmp_path) == ["archived_module.py"]
    assert archived([package], tmp_path) == [
        "archived_pkg.egg-info/top_level.txt", "archived_pkg/__init__.py", "archived_pkg/one.py",
        "archived_pkg/sub/__init__.py", "archived_pkg/sub/two.py",
    ]  # fmt: skip
    assert archived([submodule], tmp_path) == [
        "archived_pkg/__init__.py",
        "archived_pkg/sub/__init__.py",
        "archived_pkg/sub/two.py",
    ]


def test_the_packages_archive_holds_a_submodules_whole_package(tmp_path: Path):
    import helpers.hadoop_jobs

    archive = tmp_path / "packages.tar"
    hadoop.create_packages_archive([helpers.hadoop_jobs], str(archive))
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert "helpers/hadoop_jobs.py" in names and "helpers/__init__.py" in names
    assert not [name for name in names if name.endswith(".pyc") or "/." in name]


def test_flatten_and_extra_files(tmp_path: Path):
    assert list(hadoop.flatten([1, [2, 3], "ab", b"cd", (4,)])) == [1, 2, 3, "ab", b"cd", 4]
    (tmp_path / "conf" / "sub").mkdir(parents=True)
    (tmp_path / "conf" / "sub" / "x.ini").write_text("")
    (tmp_path / "solo.txt").write_text("")
    found = hadoop.get_extra_files([str(tmp_path / "solo.txt"), (str(tmp_path / "conf"), "etc")])
    assert found == [
        (str(tmp_path / "solo.txt"), "solo.txt"),
        (str(tmp_path / "conf/sub/x.ini"), "etc/sub/x.ini"),
    ]


@pytest.mark.slow  # a streaming job: Python started per step
def test_an_output_that_is_not_on_hdfs_or_s3_is_refused_by_the_streaming_runner(streaming: HadoopCli):
    task = WordCount(sources=[hdfs("/data/a.txt")], destination="relative-local-file")
    runner = hadoop.HadoopJobRunner(streaming_jar="hadoop-streaming.jar")
    with pytest.raises(TypeError, match="output must be an HdfsTarget"):
        runner.run_job(task)


def test_without_a_streaming_jar_the_error_names_the_setting(hadoop_cli: HadoopCli):  # noqa: F811
    with pytest.raises(luigi.parameter.MissingParameterException, match=r"\[hadoop\] streaming-jar"):
        hadoop.DefaultHadoopJobRunner()


SCRIPT = """\
import luigi
from luigi.contrib.hadoop import JobTask
from luigi.contrib.hdfs import HdfsTarget, PlainDir


class Source(luigi.ExternalTask):
    def output(self):
        return HdfsTarget("/data/a.txt")


class ScriptWordCount(JobTask):
    n_reduce_tasks = 1

    def requires(self):
        return Source()

    def output(self):
        return HdfsTarget("/script-out", format=PlainDir)

    def mapper(self, line):
        for word in line.split():
            yield word, 1

    def reducer(self, word, counts):
        yield word, sum(counts)


if __name__ == "__main__":
    luigi.run(["ScriptWordCount", "--local-scheduler"])
"""


@pytest.mark.slow  # a streaming job: Python started per step
def test_a_job_defined_in_the_script_being_run_ships_under_the_scripts_name(
    streaming: HadoopCli, tmp_path: Path
):
    script = tmp_path / "wordcount_script.py"
    script.write_text(SCRIPT)
    config = tmp_path / "luigi.cfg"
    settings = luigi.configuration.get_config()
    config.write_text(
        "[hadoop]\n"
        f"streaming_jar = {settings.get('hadoop', 'streaming_jar')}\n"
        f"python_executable = {sys.executable}\n"
    )
    env = {**os.environ, "LUIGI_CONFIG_PATH": str(config)}
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr
    assert parts(streaming, "/script-out") == ["a\t3", "b\t1", "c\t1"]
    [call] = streaming.jar_calls()
    assert call[call.index("-mapper") + 1].endswith("mrrunner.py map")


# --- following a hadoop command ---


class JobTrackerPages(JsonHandler):
    """A Hadoop 1 JobTracker's failure page linking one failed attempt's log, whose step printed the
    ``luigi-exc-hex=`` line mrrunner writes."""

    def do_GET(self) -> None:  # noqa: N802  (http.server's name)
        if self.path.startswith("/jobfailures.jsp?jobid=job_1&cause=failed"):
            body = '<a href="/tasklog?attemptid=attempt_1_m_0&amp;all=true">All</a>'
        elif self.path == "/tasklog?attemptid=attempt_1_m_0&all=true":
            hex_text = b"ValueError: refusing the record".hex()
            body = f"<pre>stderr logs\nluigi-exc-hex={hex_text}\n</pre>"
        else:
            self.send_error(404)
            return
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_a_failed_job_reports_its_tracking_url_and_the_failed_attempts_logs():
    reported: list[str] = []
    with serving(JobTrackerPages, "jobtracker-pages") as base:
        url = f"{base}/jobdetails.jsp?jobid=job_1"
        failing = f"import sys; print('Tracking URL: {url}', file=sys.stderr); sys.exit(2)"
        with pytest.raises(hadoop.HadoopJobError) as caught:
            hadoop.run_and_track_hadoop_job([sys.executable, "-c", failing], reported.append)
    assert reported == [url]
    assert str(caught.value).startswith("Streaming job failed with exit code 2. Output from tasks below:\n")
    assert "ValueError: refusing the record" in str(caught.value)
    assert caught.value.err == f"Tracking URL: {url}\n"


def test_a_successful_command_returns_its_stdout_and_stderr():
    code = "import sys; print('out'); print('running job: job_7', file=sys.stderr)"
    assert hadoop.run_and_track_hadoop_job([sys.executable, "-c", code]) == ("out\n", "running job: job_7\n")


TRACKER = """\
import logging, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
from luigi.contrib.hadoop import run_and_track_hadoop_job
run_and_track_hadoop_job([sys.executable, "-c", sys.argv[1], sys.argv[2]])
"""

CLIENT = """\
import os, sys, time
open(sys.argv[1], "w").write(str(os.getpid()))
print("INFO mapreduce.Job: Running job: job_1_0007", file=sys.stderr, flush=True)
print("INFO impl.YarnClientImpl: Submitted application application_1_0007", file=sys.stderr, flush=True)
time.sleep(120)
"""


@pytest.mark.timeout(120)
def test_sigterm_while_following_a_job_kills_its_yarn_application(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    calls = tmp_path / "yarn-calls.jsonl"
    yarn = tmp_path / "bin" / "yarn"
    yarn.parent.mkdir()
    record = f"open({str(calls)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')"
    yarn.write_text(f"#!{sys.executable}\nimport json, sys\n{record}\n")
    yarn.chmod(0o755)
    monkeypatch.setenv("PATH", f"{yarn.parent}{os.pathsep}{os.environ['PATH']}")
    client_pid = tmp_path / "client.pid"
    tracker = subprocess.Popen(
        [sys.executable, "-c", TRACKER, CLIENT, str(client_pid)], stderr=subprocess.PIPE, text=True
    )
    try:
        assert tracker.stderr is not None
        for line in tracker.stderr:  # the tracker logs a line once it has noted the ids in it
            if line.startswith("INFO impl.YarnClientImpl: Submitted application"):
                break
        tracker.send_signal(signal.SIGTERM)
        assert tracker.wait(timeout=60) == 128 + signal.SIGTERM
        assert [json.loads(line) for line in calls.read_text().splitlines()] == [
            ["application", "-kill", "application_1_0007"]  # the application wins over the job
        ]
    finally:
        tracker.kill()
        tracker.wait()
        if client_pid.exists():  # the local client is not the tracker's to stop
            os.kill(int(client_pid.read_text()), signal.SIGKILL)
