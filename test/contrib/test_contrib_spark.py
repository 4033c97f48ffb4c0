"""luigi.contrib.spark against a real Spark: ``local[2]`` and a standalone master with one worker.

Every Spark run starts JVMs, so the group is slow; the clusters are session fixtures
(helpers/spark_cluster.py).
The task classes live at module level because the Spark driver unpickles them by importing this module.
"""

from __future__ import annotations

import json
import logging
import operator
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from helpers.luigid import free_port

import luigi
from luigi.contrib.spark import PySparkTask, SparkJobError, SparkSubmitTask
from luigi.event import Event
from luigi.interface import _WorkerSchedulerFactory
from luigi.scheduler import Scheduler
from luigi.task_status import DONE, FAILED

if TYPE_CHECKING:
    from helpers.spark_cluster import SparkSetup

pytest_plugins = ["helpers.spark_cluster"]  # its session fixtures spark_local and spark_standalone

SECRET = "s3cr3t-token-8e1f0c"
SPARK_TIMEOUT = 300  # JVM start-up on a loaded 2-core machine


class KeepingFactory(_WorkerSchedulerFactory):
    """The usual local scheduler, kept so a test can read what the worker reported to it."""

    scheduler: Scheduler

    def create_local_scheduler(self) -> Scheduler:
        self.scheduler = super().create_local_scheduler()
        return self.scheduler


def build(task: luigi.Task) -> tuple[Any, dict[str, Any], Scheduler]:
    """Run ``task`` with a local scheduler: (the detailed result, the scheduler's record of it, scheduler)."""
    factory = KeepingFactory()
    result = luigi.build(
        [task], local_scheduler=True, worker_scheduler_factory=factory, detailed_summary=True
    )
    return result, factory.scheduler.task_list("", "")[task.task_id], factory.scheduler


def error_of(scheduler: Scheduler, task: luigi.Task) -> str:
    return str(json.loads(scheduler.fetch_error(task.task_id)["error"]))


def leftover_run_directories(directory: Path) -> list[str]:
    return [path.name for path in directory.iterdir() if path.name.startswith("luigi-spark-")]


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The tasks' own temp files (run directories) go here, so a test can see that none is left."""
    run_dirs = tmp_path / "runs"
    run_dirs.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(run_dirs))
    return run_dirs


# -- tasks the Spark driver runs ---------------------------------------------------------------------


class WordCount(PySparkTask):
    """Counts the words of a text file: the executors write the counts, the driver then publishes them."""

    source = luigi.Parameter()
    destination = luigi.Parameter()

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(self.destination)

    def main(self, sc: Any, *args: Any) -> None:
        counts = sc.textFile(self.source).flatMap(str.split).map(lambda word: (word, 1))
        lines = counts.reduceByKey(operator.add).map(lambda pair: f"{pair[0]}\t{pair[1]}")
        staging = f"{self.destination}.staging"
        lines.saveAsTextFile(staging)
        os.rename(staging, self.destination)  # the output appears whole, or not at all


class SessionWordCount(WordCount):
    """The same count, given a SparkSession (a SparkContext has no ``sparkContext``)."""

    def main(self, spark: Any, *args: Any) -> None:
        super().main(spark.sparkContext, *args)


class BrokenWordCount(WordCount):
    """Fails on the driver before writing anything."""

    def main(self, sc: Any, *args: Any) -> None:
        raise ValueError(f"no words to count in {self.source}")


class AppReport(SparkSubmitTask):
    """Runs a PySpark script file with spark-submit; the script reports what it was given."""

    app_path = luigi.Parameter()
    destination = luigi.Parameter()
    name = "luigi-app-report"

    @property
    def app(self) -> str:  # type: ignore[override]
        return str(self.app_path)

    def app_options(self) -> list[str]:
        return [self.destination, "alpha", "beta"]

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(self.destination)


REPORTING_APP = """
import json, os, sys
from pyspark import SparkContext

sc = SparkContext()
conf = sc.getConf()
destination, *rest = sys.argv[1:]
report = {
    "args": rest,
    "name": conf.get("spark.app.name"),
    "colour": conf.get("spark.luigi.colour"),
    "token": conf.get("spark.luigi.api.token"),
    "total": sc.parallelize(range(10), 2).sum(),
}
with open(destination + ".partial", "w") as handle:
    json.dump(report, handle)
os.rename(destination + ".partial", destination)
sc.stop()
"""


def write_words(path: Path) -> Path:
    path.write_text("to be or not to be\nthat is the question\nto be\n")
    return path


def counts_in(directory: Path) -> dict[str, int]:
    lines = [line for part in sorted(directory.glob("part-*")) for line in part.read_text().splitlines()]
    return {word: int(count) for word, count in (line.split("\t") for line in lines)}


EXPECTED_COUNTS = {"to": 3, "be": 3, "or": 1, "not": 1, "that": 1, "is": 1, "the": 1, "question": 1}


# -- local[2] ------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(SPARK_TIMEOUT)
def test_a_pyspark_task_counts_words_and_reports_the_spark_ui_as_its_tracking_url(
    spark_local: SparkSetup, tmp_path: Path, private_tmp: Path
) -> None:
    ui_port = free_port()
    spark_local.configure(conf=f"spark.ui.port={ui_port}")
    task = WordCount(source=str(write_words(tmp_path / "words.txt")), destination=str(tmp_path / "counts"))
    result, record, _ = build(task)
    assert result.status == luigi.LuigiStatusCode.SUCCESS, result.summary_text
    assert record["status"] == DONE
    assert counts_in(tmp_path / "counts") == EXPECTED_COUNTS
    assert record["tracking_url"] == f"http://127.0.0.1:{ui_port}"
    assert leftover_run_directories(private_tmp) == []  # the pickle and its directory are gone


@pytest.mark.slow
@pytest.mark.timeout(SPARK_TIMEOUT)
def test_an_exception_in_main_fails_the_task_with_the_drivers_error_and_leaves_nothing(
    spark_local: SparkSetup, tmp_path: Path, private_tmp: Path
) -> None:
    spark_local.configure()
    caught: list[BaseException] = []
    BrokenWordCount.event_handler(Event.FAILURE)(lambda task, exc: caught.append(exc))
    source = str(write_words(tmp_path / "words.txt"))
    task = BrokenWordCount(source=source, destination=str(tmp_path / "counts"))
    result, record, scheduler = build(task)
    assert result.status == luigi.LuigiStatusCode.FAILED
    assert record["status"] == FAILED
    error = error_of(scheduler, task)
    assert error.startswith(f"{task}: the Spark application failed (Program failed with return code=1)")
    assert "the driver said:\nTraceback (most recent call last):" in error
    assert f"ValueError: no words to count in {source}" in error.split("COMMAND:")[0]
    [exc] = caught
    assert isinstance(exc, SparkJobError) and exc.returncode == 1
    assert exc.driver_error.endswith(f"ValueError: no words to count in {source}")
    assert not (tmp_path / "counts").exists() and not (tmp_path / "counts.staging").exists()
    assert leftover_run_directories(private_tmp) == []


@pytest.mark.slow
@pytest.mark.timeout(SPARK_TIMEOUT)
def test_a_spark_submit_task_passes_its_options_and_hands_secret_conf_over_privately(
    spark_local: SparkSetup, tmp_path: Path, private_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    app = tmp_path / "report_app.py"
    app.write_text(REPORTING_APP)
    spark_local.configure(conf=f"spark.luigi.colour=green|spark.luigi.api.token={SECRET}")
    task = AppReport(app_path=str(app), destination=str(tmp_path / "report.json"))
    with caplog.at_level(logging.DEBUG):
        result, record, _ = build(task)
    assert result.status == luigi.LuigiStatusCode.SUCCESS, result.summary_text
    report = json.loads((tmp_path / "report.json").read_text())
    assert report == {
        "args": ["alpha", "beta"],
        "name": "luigi-app-report",
        "colour": "green",
        "token": SECRET,  # it reached Spark ...
        "total": 45,
    }
    assert "--conf spark.luigi.colour=green" in caplog.text
    assert "--properties-file" in caplog.text
    assert SECRET not in caplog.text  # ... but never a log line
    assert SECRET not in json.dumps(record)
    assert leftover_run_directories(private_tmp) == []  # nor a file left behind


@pytest.mark.slow
@pytest.mark.timeout(SPARK_TIMEOUT)
def test_a_missing_application_fails_the_task_naming_it_without_showing_secret_conf(
    spark_local: SparkSetup, tmp_path: Path, private_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spark_local.configure(conf=f"spark.hadoop.fs.s3a.secret.key={SECRET}")
    missing = tmp_path / "no_such_app.py"
    task = AppReport(app_path=str(missing), destination=str(tmp_path / "report.json"))
    with caplog.at_level(logging.DEBUG):
        result, record, scheduler = build(task)
    assert result.status == luigi.LuigiStatusCode.FAILED
    error = error_of(scheduler, task)
    summary = error.split("COMMAND:")[0]
    assert f"can't open file '{missing}'" in summary
    assert SECRET not in error
    assert SECRET not in caplog.text
    assert not (tmp_path / "report.json").exists()
    assert leftover_run_directories(private_tmp) == []


def test_a_spark_submit_that_is_not_installed_fails_the_task_with_the_fix(tmp_path: Path) -> None:
    luigi.configuration.get_config().set("spark", "spark_submit", str(tmp_path / "bin" / "spark-submit"))
    task = AppReport(app_path=str(tmp_path / "app.py"), destination=str(tmp_path / "report.json"))
    result, _, scheduler = build(task)
    assert result.status == luigi.LuigiStatusCode.FAILED
    error = error_of(scheduler, task)
    assert f"{task}: spark-submit could not run: Program could not be started" in error
    assert "pip install 'luigi[spark]', or give its path as [spark] spark_submit" in error


def test_every_configured_option_becomes_its_spark_submit_flag() -> None:
    config = luigi.configuration.get_config()
    options = {
        "spark_submit": "/opt/spark/bin/spark-submit",
        "master": "yarn",
        "deploy_mode": "client",
        "jars": "a.jar, b.jar",
        "packages": "org.example:lib:1.0",
        "py_files": "deps.zip",
        "files": "lookup.csv",
        "archives": "env.tar.gz#env",
        "conf": "spark.a=1|spark.b=x=y",
        "properties_file": "/etc/spark.conf",
        "driver_memory": "2g",
        "driver_java_options": "-Dx=1",
        "driver_library_path": "/lib/native",
        "driver_class_path": "/lib/extra.jar",
        "executor_memory": "4g",
        "driver_cores": "2",
        "supervise": "true",
        "total_executor_cores": "8",
        "executor_cores": "4",
        "queue": "etl",
        "num_executors": "3",
    }
    for key, value in options.items():
        config.set("spark", key, value)
    args = AppReport(app_path="/jobs/report.py", destination="/tmp/out").program_args()
    assert args == [
        "/opt/spark/bin/spark-submit",
        *("--master", "yarn", "--deploy-mode", "client", "--name", "luigi-app-report"),
        *("--jars", "a.jar,b.jar", "--packages", "org.example:lib:1.0", "--py-files", "deps.zip"),
        *("--files", "lookup.csv", "--archives", "env.tar.gz#env"),
        *("--conf", "spark.a=1", "--conf", "spark.b=x=y", "--properties-file", "/etc/spark.conf"),
        *("--driver-memory", "2g", "--driver-java-options", "-Dx=1", "--driver-library-path", "/lib/native"),
        *("--driver-class-path", "/lib/extra.jar", "--executor-memory", "4g", "--driver-cores", "2"),
        *("--supervise", "--total-executor-cores", "8", "--executor-cores", "4", "--queue", "etl"),
        *("--num-executors", "3"),
        *("/jobs/report.py", "/tmp/out", "alpha", "beta"),
    ]


# -- a script run as __main__ ------------------------------------------------------------------------

MAIN_SCRIPT = """
import os
import luigi
from luigi.contrib.spark import PySparkTask


class Squares(PySparkTask):
    destination = luigi.Parameter()

    def output(self):
        return luigi.LocalTarget(self.destination)

    def main(self, sc, *args):
        total = sc.parallelize(range(1, 11), 2).map(lambda x: x * x).sum()
        with self.output().open("w") as handle:
            handle.write(f"{total}\\n")


if __name__ == "__main__":
    ok = luigi.build([Squares(destination=os.environ["OUT"])], local_scheduler=True, no_lock=True)
    raise SystemExit(0 if ok else 1)
"""


@pytest.mark.slow
@pytest.mark.timeout(SPARK_TIMEOUT)
def test_a_pyspark_task_defined_in_the_script_being_run_reaches_the_driver(
    spark_local: SparkSetup, tmp_path: Path
) -> None:
    script = tmp_path / "squares_pipeline.py"
    script.write_text(MAIN_SCRIPT)
    config = tmp_path / "luigi.cfg"
    config.write_text(spark_local.config_file_section())
    env = dict(os.environ, LUIGI_CONFIG_PATH=str(config), OUT=str(tmp_path / "squares.txt"))
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-5000:]
    assert (tmp_path / "squares.txt").read_text() == "385\n"


# -- a standalone cluster ------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(SPARK_TIMEOUT)
def test_on_a_standalone_cluster_the_executors_write_the_output_of_a_session_task(
    spark_standalone: SparkSetup, tmp_path: Path, private_tmp: Path
) -> None:
    spark_standalone.configure()
    config = luigi.configuration.get_config()
    config.set("pyspark_runner", "use_spark_session", "true")
    config.set("pyspark_runner", "enable_hive_support", "false")
    task = SessionWordCount(
        source=str(write_words(tmp_path / "words.txt")), destination=str(tmp_path / "counts")
    )
    result, record, _ = build(task)
    assert result.status == luigi.LuigiStatusCode.SUCCESS, result.summary_text
    assert counts_in(tmp_path / "counts") == EXPECTED_COUNTS
    assert str(record["tracking_url"]).startswith("http://127.0.0.1:")
    finished = [app for app in spark_standalone.applications() if app["name"] == "SessionWordCount"]
    assert [app["state"] for app in finished] == ["FINISHED"]  # it really ran on the cluster
    assert leftover_run_directories(private_tmp) == []


class HoldsALock(PySparkTask):
    """Keeps something that cannot be pickled, so it can never reach the driver."""

    destination = luigi.Parameter()

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(self.destination)

    def main(self, sc: Any, *args: Any) -> None:
        raise AssertionError("never runs")


def test_a_task_that_cannot_be_pickled_fails_before_spark_starts_and_says_why(
    tmp_path: Path, private_tmp: Path
) -> None:
    task = HoldsALock(destination=str(tmp_path / "never"))
    task.lock = threading.Lock()
    result, record, scheduler = build(task)
    assert result.status == luigi.LuigiStatusCode.FAILED
    assert record["status"] == FAILED
    error = error_of(scheduler, task)
    assert f"{task} cannot be pickled for the Spark driver" in error
    assert "keep only picklable values" in error
    assert leftover_run_directories(private_tmp) == []
