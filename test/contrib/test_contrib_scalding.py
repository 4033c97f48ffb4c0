"""luigi.contrib.scalding: a Scalding job compiled and run through stand-ins (no JVM, Scala or Hadoop runs
here): ``java``/``jar`` commands that record the compile and make the job jar, a Scalding install whose
``scalding-core`` jar is a Python zip application standing for Scalding's Tool, and the ``hadoop`` stand-in
(helpers/hadoop_jar_standin.py), which runs any jar but the streaming one as a zip application."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest
from helpers.hdfs_cluster import HadoopCli, hadoop_cli  # noqa: F401

import luigi
from luigi.contrib import hadoop, scalding
from luigi.contrib.hdfs import HdfsTarget

# Scalding's Tool, as far as the test needs it: records its arguments and environment, then copies
# --input to --output upper-cased through `hadoop fs` (or fails with a Scala-style error for "Broken").
SCALDING_TOOL = """\
import json, os, subprocess, sys
args = sys.argv[1:]
with open(os.environ["SCALDING_CALLS"], "a") as calls:
    calls.write(json.dumps({"args": args, "classpath": os.environ.get("HADOOP_CLASSPATH")}) + "\\n")
if "com.example.Broken" in args:
    print("Exception in thread main cascading.flow.FlowException: step failed", file=sys.stderr)
    sys.exit(2)
source = args[args.index("--input") + 1]
output = args[args.index("--output") + 1]
text = subprocess.run(["hadoop", "fs", "-cat", source], capture_output=True, check=True).stdout
subprocess.run(["hadoop", "fs", "-mkdir", "-p", output], check=True)
subprocess.run(["hadoop", "fs", "-put", "-", output + "/part-00000"], input=text.upper(), check=True)
"""

# `java ... scala.tools.nsc.Main ... -d BUILD SRC` and `jar cf JAR -C BUILD .`, recorded; jar makes the file.
COMPILER = """#!/bin/sh
echo "$(basename "$0") $*" >> "$SCALDING_CALLS.compile"
if [ "$(basename "$0")" = jar ]; then : > "$2"; fi
"""

SOURCE = """\
package com.example

import com.twitter.scalding._

class Shout(args: Args) extends Job(args) {
  TextLine(args("input")).map('line -> 'upper) { l: String => l.toUpperCase }.write(Tsv(args("output")))
}
"""


@pytest.fixture
def install(tmp_path: Path, hadoop_cli: HadoopCli, monkeypatch: pytest.MonkeyPatch) -> Path:  # noqa: F811
    """SCALDING_HOME and SCALA_HOME as the packages lay them out, java/jar stand-ins, and the input."""
    home, scala = tmp_path / "scalding", tmp_path / "scala"
    (home / "lib").mkdir(parents=True)
    (scala / "lib").mkdir(parents=True)
    with zipfile.ZipFile(home / "lib" / "scalding-core-0.17.4.jar", "w") as core:
        core.writestr("__main__.py", SCALDING_TOOL)
    for jar in ("scala-library.jar", "scala-compiler.jar"):
        (scala / "lib" / jar).touch()
    (home / "lib" / "cascading-core-2.6.jar").touch()
    bin_dir = tmp_path / "jvm-bin"
    bin_dir.mkdir()
    for name in ("java", "jar"):
        (bin_dir / name).write_text(COMPILER)
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SCALDING_HOME", str(home))
    monkeypatch.setenv("SCALA_HOME", str(scala))
    monkeypatch.setenv("SCALDING_CALLS", str(tmp_path / "calls.jsonl"))
    (tmp_path / "Shout.scala").write_text(SOURCE)
    (hadoop_cli.root / "data").mkdir()
    (hadoop_cli.root / "data" / "words.txt").write_text("hello\nworld\n")
    return tmp_path


class Words(luigi.ExternalTask):
    def output(self) -> HdfsTarget:
        return HdfsTarget("/data/words.txt")


class Shout(scalding.ScaldingJobTask):
    source_path = luigi.Parameter()
    job_class_name = luigi.OptionalParameter(default=None)

    def source(self) -> str:
        return self.source_path

    def job_class(self) -> str | None:
        return self.job_class_name

    def requires(self) -> dict[str, luigi.Task]:
        return {"input": Words()}

    def output(self) -> HdfsTarget:
        return HdfsTarget("/out/shout")


def _calls(install: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (install / "calls.jsonl").read_text().splitlines()]


def test_a_scala_source_is_compiled_and_run_and_its_output_appears_whole(
    install: Path, hadoop_cli: HadoopCli  # noqa: F811
) -> None:
    task = Shout(source_path=str(install / "Shout.scala"))
    assert luigi.build([task], local_scheduler=True)

    assert (hadoop_cli.root / "out" / "shout" / "part-00000").read_text() == "HELLO\nWORLD\n"
    assert not [p for p in hadoop_cli.listing() if "luigi-tmp" in p]
    compile_lines = (install / "calls.jsonl.compile").read_text().splitlines()
    assert compile_lines[0].startswith(f"java -cp {install}/scala/lib/scala-library.jar:")
    assert "scala.tools.nsc.Main -classpath" in compile_lines[0] and compile_lines[0].endswith("Shout.scala")
    assert compile_lines[1].startswith("jar cf ") and " -C " in compile_lines[1]
    (call,) = _calls(install)
    args = call["args"]
    assert isinstance(args, list)
    # the class is found in the source; the name is the task id with '=' made ':'
    job_class_at = args.index("com.example.Shout")
    assert args[job_class_at + 1 : job_class_at + 4] == ["--hdfs", "--name", task.task_id.replace("=", ":")]
    assert args[args.index("--input") + 1] == "/data/words.txt"
    assert args[args.index("--output") + 1].startswith("/out/shout-luigi-tmp-")
    assert str(call["classpath"]).endswith("scalding-core-0.17.4.jar")


def test_a_failed_job_fails_the_task_and_leaves_no_output(install: Path, hadoop_cli: HadoopCli) -> None:  # noqa: F811
    failures: list[BaseException] = []
    task = Shout(source_path=str(install / "Shout.scala"), job_class_name="com.example.Broken")
    Shout.event_handler(luigi.Event.FAILURE)(lambda task, error: failures.append(error))
    assert not luigi.build([task], local_scheduler=True)
    assert isinstance(failures[-1], hadoop.HadoopJobError)
    assert "FlowException: step failed" in failures[-1].err
    assert not (hadoop_cli.root / "out").exists() or not list((hadoop_cli.root / "out").iterdir())


def test_the_job_class_is_read_from_the_source(install: Path) -> None:
    runner = scalding.ScaldingJobRunner()
    assert runner.get_job_class(str(install / "Shout.scala")) == "com.example.Shout"
    (install / "Plain.scala").write_text("object X { def main() = 1 }\n")
    with pytest.raises(hadoop.HadoopJobError, match="Could not find a package and a Job class"):
        runner.get_job_class(str(install / "Plain.scala"))


def test_a_missing_scalding_core_is_named(install: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCALDING_HOME", str(install / "nowhere"))
    with pytest.raises(hadoop.HadoopJobError, match="Could not find scalding-core"):
        scalding.ScaldingJobRunner().get_scalding_core()


def test_a_jar_needs_its_job_class(install: Path) -> None:
    class FromJar(Shout):
        def jar(self) -> str:
            return str(install / "Shout.scala")  # exists

    with pytest.raises(hadoop.HadoopJobError, match="needs job_class"):
        scalding.ScaldingJobRunner().build_job_jar(FromJar(source_path="x"))


def test_relpath_is_taken_from_the_callers_folder(tmp_path: Path) -> None:
    assert scalding.ScaldingJobTask.relpath(str(tmp_path / "jobs.py"), "Shout.scala") == str(
        tmp_path / "Shout.scala"
    )
