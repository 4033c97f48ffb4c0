"""luigi.contrib.hadoop_jar: jar jobs through the ``hadoop`` stand-in, which records each ``hadoop jar`` call.

No JVM runs here: the stand-in (helpers/hadoop_jar_standin.py) runs a jar as a Python zip application,
so each test's "jar" is a zipapp that does what the job would: write its arguments to HDFS, or fail.
"""

from __future__ import annotations

import json
import os
import sys
import zipfile
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from helpers.hdfs_cluster import HadoopCli, hadoop_cli  # noqa: F401
from helpers.outcomes import build_failing

import luigi
from luigi.contrib.hadoop import HadoopJobError
from luigi.contrib.hadoop_jar import HadoopJarJobError, HadoopJarJobTask, fix_paths
from luigi.contrib.hdfs import HdfsTarget

JOB_PROGRAM = """\
import subprocess, sys
args = sys.argv[1:]
if "fail" in args:
    print("Exception in thread main java.lang.IllegalStateException: bad input", file=sys.stderr)
    sys.exit(3)
output = args[-1]
subprocess.run(["hadoop", "fs", "-mkdir", "-p", output], check=True)
put = ["hadoop", "fs", "-put", "-", output + "/part-00000"]
subprocess.run(put, input=" ".join(args).encode(), check=True)
"""


@pytest.fixture
def jar(tmp_path: Path) -> str:
    """A jar standing in for a MapReduce program: writes its arguments into its last argument's directory."""
    path = tmp_path / "wordcount.jar"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("__main__.py", JOB_PROGRAM)
    return str(path)


class JarJob(HadoopJarJobTask):
    """Runs ``jar_path`` on the existing ``/data/in`` into ``destination``."""

    jar_path = luigi.Parameter()
    destination = luigi.Parameter()
    mode = luigi.Parameter(default="ok")
    ssh_config = luigi.DictParameter(default={})

    def jar(self) -> str:
        return self.jar_path

    def main(self) -> str:
        return "org.example.WordCount"

    def ssh(self) -> dict[str, Any] | None:
        return dict(self.ssh_config) or None

    def output(self) -> HdfsTarget:
        return HdfsTarget(self.destination)

    def args(self) -> list[Any]:
        return [self.mode, HdfsTarget("/data/in"), self.output()]


@pytest.fixture
def cli(hadoop_cli: HadoopCli) -> HadoopCli:  # noqa: F811
    (hadoop_cli.root / "data").mkdir()
    (hadoop_cli.root / "data" / "in").write_text("words\n")
    return hadoop_cli


def test_a_jar_job_runs_with_hadoops_command_line_and_its_output_is_moved_into_place(
    cli: HadoopCli, jar: str
):
    task = JarJob(jar_path=jar, destination="/counts")
    assert luigi.build([task], local_scheduler=True)
    [call] = cli.jar_calls()
    assert call[:4] == ["jar", jar, "org.example.WordCount", f"-Dmapred.job.name={task}"]
    mode, existing, temporary = call[4:]
    assert (mode, existing) == ("ok", "/data/in")
    assert temporary.startswith("/counts-luigi-tmp-")  # written beside, then moved
    assert (
        cli.local("/counts/part-00000").read_text()
        == f"org.example.WordCount -Dmapred.job.name={task} ok /data/in {temporary}"
    )
    assert [path for path in cli.listing() if "luigi-tmp" in path] == []


def test_a_jar_that_exits_non_zero_fails_the_task_with_hadoop_jar_job_error(cli: HadoopCli, jar: str):
    error = build_failing(JarJob(jar_path=jar, destination="/counts", mode="fail"))
    assert isinstance(error, HadoopJarJobError) and isinstance(error, HadoopJobError)
    assert "exit code 3" in str(error)
    assert "IllegalStateException: bad input" in str(error.err)
    assert [path for path in cli.listing() if "counts" in path] == []


def test_a_missing_or_undefined_jar_is_a_hadoop_jar_job_error(cli: HadoopCli, tmp_path: Path):
    error = build_failing(JarJob(jar_path=str(tmp_path / "nowhere.jar"), destination="/counts"))
    assert isinstance(error, HadoopJarJobError) and "job jar does not exist" in str(error)
    error = build_failing(JarJob(jar_path="", destination="/counts"))
    assert isinstance(error, HadoopJarJobError) and "Jar not defined" in str(error)
    assert cli.jar_calls() == []


@pytest.fixture
def ssh_standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An ``ssh`` first on PATH that records its arguments and runs the remote command here with ``sh -c``."""
    record = tmp_path / "ssh-calls.jsonl"
    script = tmp_path / "ssh-bin" / "ssh"
    script.parent.mkdir()
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, subprocess, sys\n"
        f"open({str(record)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        "sys.exit(subprocess.call(['sh', '-c', sys.argv[-1]]))\n"
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")
    return record


def test_over_ssh_the_hadoop_command_is_one_quoted_argument(cli: HadoopCli, jar: str, ssh_standin: Path):
    config = {"host": "gateway", "key_file": "/keys/id", "username": "etl", "no_host_key_check": True}
    task = JarJob(jar_path=jar, destination="/with space", ssh_config=config)
    assert luigi.build([task], local_scheduler=True)
    [ssh_args] = [json.loads(line) for line in ssh_standin.read_text().splitlines()]
    assert ssh_args[:9] == [
        "-i", "/keys/id", "-o", "BatchMode=yes", "-o", "UserKnownHostsFile=/dev/null",
        "-o", "StrictHostKeyChecking=no", "etl@gateway",
    ]  # fmt: skip
    [call] = cli.jar_calls()
    assert call[3] == f"-Dmapred.job.name={task}"  # the task id's spaces survived the remote shell
    assert cli.local("/with space/part-00000").exists()


def test_over_ssh_missing_settings_are_named(cli: HadoopCli, jar: str):
    error = build_failing(JarJob(jar_path=jar, destination="/counts", ssh_config={"host": "gateway"}))
    assert isinstance(error, HadoopJarJobError) and "missing some config" in str(error)


def test_fix_paths_uses_a_targets_path_or_else_its_string(cli: HadoopCli):
    job = mock.Mock()
    job.args.return_value = [mock.Mock(path="right_path")]
    assert fix_paths(job) == ([], ["right_path"])
    plain = mock.Mock(spec=[])
    job.args.return_value = [plain]
    assert fix_paths(job) == ([], [str(plain)])
