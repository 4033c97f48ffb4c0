"""Scalding jobs as tasks: a Scala source compiled against Scalding (or a ready jar), run with ``hadoop jar``.

The ``[scalding]`` section (read when used): ``scala-home`` (``$SCALA_HOME`` or ``/usr/share/scala``),
``scalding-home`` (``$SCALDING_HOME`` or ``/usr/share/scalding``), ``scalding-provided`` and
``scalding-libjars`` (``<scalding home>/provided`` and ``/libjars``). Every command runs from an argument
list, never through a shell.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
from typing import Any

import luigi
import luigi.configuration
from luigi.contrib import hadoop, hadoop_jar
from luigi.contrib.hdfs import load_hadoop_cmd
from luigi.local_target import LocalTarget

__all__ = ["ScaldingJobRunner", "ScaldingJobTask"]

logger = logging.getLogger("luigi-interface")

_PACKAGE = re.compile(r"^\s*package\s+([\w.]+)", re.M)
_JOB_CLASS = re.compile(r"^\s*class\s+(\w+)\b[^{]*\bextends\s+[\w.]*Job\b", re.M)


def _jars(folder: str) -> list[str]:
    """The ``*.jar`` files of ``folder`` (none when it does not exist)."""
    if not os.path.isdir(folder):
        return []
    return sorted(os.path.join(folder, name) for name in os.listdir(folder) if name.endswith(".jar"))


class ScaldingJobRunner(hadoop.JobRunner):
    """Builds the job's jar (compiling its Scala source when it has no jar) and runs it on Hadoop."""

    def __init__(self) -> None:
        config = luigi.configuration.get_config()
        default_home = os.environ.get("SCALDING_HOME", "/usr/share/scalding")
        default_scala = os.environ.get("SCALA_HOME", "/usr/share/scala")
        self.scala_home = config.get("scalding", "scala-home", default_scala)
        self.scalding_home = config.get("scalding", "scalding-home", default_home)
        provided, libjars = os.path.join(default_home, "provided"), os.path.join(default_home, "libjars")
        self.provided_dir = config.get("scalding", "scalding-provided", provided)
        self.libjars_dir = config.get("scalding", "scalding-libjars", libjars)
        self.tmp_dir = LocalTarget(is_tmp=True)

    def _get_jars(self, path: str) -> list[str]:
        return _jars(path)

    def get_scala_jars(self, include_compiler: bool = False) -> list[str]:
        """Scala's library (and reflect, and with ``include_compiler`` the compiler) jars."""
        lib = os.path.join(self.scala_home, "lib")
        jars = [os.path.join(lib, "scala-library.jar")]
        reflect = os.path.join(lib, "scala-reflect.jar")
        if os.path.exists(reflect):
            jars.append(reflect)
        if include_compiler:
            jars.append(os.path.join(lib, "scala-compiler.jar"))
        return jars

    def get_scalding_jars(self) -> list[str]:
        return _jars(os.path.join(self.scalding_home, "lib"))

    def get_scalding_core(self) -> str:
        """The ``scalding-core-*`` jar of the Scalding install."""
        lib = os.path.join(self.scalding_home, "lib")
        names = sorted(os.listdir(lib)) if os.path.isdir(lib) else []
        for name in names:
            if name.startswith("scalding-core-"):
                return os.path.join(lib, name)
        raise hadoop.HadoopJobError(
            f"Could not find scalding-core. (looked in {lib}: set [scalding] scalding-home)"
        )

    def get_provided_jars(self) -> list[str]:
        return _jars(self.provided_dir)

    def get_libjars(self) -> list[str]:
        return _jars(self.libjars_dir)

    def get_tmp_job_jar(self, source: str) -> str:
        job_name = os.path.basename(os.path.splitext(source)[0])
        return os.path.join(os.path.dirname(self.tmp_dir.path), f"{job_name}.jar")

    def get_build_dir(self, source: str) -> str:
        return os.path.join(self.tmp_dir.path, "build")

    def get_job_class(self, source: str) -> str:
        """``package.Class`` of the Scalding job in ``source`` (the class named like the file first)."""
        with open(source) as file:
            text = file.read()
        package = _PACKAGE.search(text)
        classes = _JOB_CLASS.findall(text)
        if package is None or not classes:
            raise hadoop.HadoopJobError(f"Could not find a package and a Job class in {source}")
        wanted = os.path.splitext(os.path.basename(source))[0]
        chosen = wanted if wanted in classes else classes[0]
        return f"{package.group(1)}.{chosen}"

    def build_job_jar(self, job: ScaldingJobTask) -> str:
        """The job's jar: its own ``jar()``, else its ``source()`` compiled with scalac into one."""
        jar = job.jar()
        if jar:
            if not os.path.exists(jar):
                raise hadoop.HadoopJobError(f"job jar does not exist: {jar}")
            if not job.job_class():
                raise hadoop.HadoopJobError("A job jar needs job_class() to name the job's class")
            return str(jar)
        source = job.source()
        if not source or not os.path.exists(source):
            raise hadoop.HadoopJobError(f"Scalding job source does not exist: {source}")
        build_dir = self.get_build_dir(source)
        os.makedirs(build_dir, exist_ok=True)
        classpath = ":".join(
            self.get_scalding_jars() + self.get_provided_jars() + self.get_libjars() + job.extra_jars()
        )
        compiler = ":".join(self.get_scala_jars(include_compiler=True))
        scalac = ["java", "-cp", compiler, "scala.tools.nsc.Main"]
        subprocess.check_call([*scalac, "-classpath", classpath, "-d", build_dir, source])
        job_jar = self.get_tmp_job_jar(source)
        subprocess.check_call(["jar", "cf", job_jar, "-C", build_dir, "."])
        return job_jar

    def run_job(self, job: ScaldingJobTask, tracking_url_callback: Any = None) -> None:
        job_jar = self.build_job_jar(job)
        job_class = job.job_class() or self.get_job_class(str(job.source()))
        core = self.get_scalding_core()
        libjars = [job_jar, *self.get_libjars(), *job.extra_jars()]
        tmp_files, job_args = hadoop_jar.fix_paths(job)
        arglist = [*load_hadoop_cmd(), "jar", core, "-libjars", ",".join(libjars)]
        arglist += ["-D" + conf for conf in job.jobconfs()]
        arglist += [job_class, "--hdfs", "--name", job.task_id.replace("=", ":"), *job_args]
        classpath = [*libjars, *self.get_scala_jars(), *self.get_scalding_jars(), core]
        env = dict(os.environ, HADOOP_CLASSPATH=":".join(classpath))
        hadoop.run_and_track_hadoop_job(arglist, job.set_tracking_url, env=env)
        for tmp, final_path in tmp_files:
            tmp.move(final_path)


class ScaldingJobTask(hadoop.BaseHadoopJobTask):
    """A Scalding job: give ``source()`` (a .scala file) or ``jar()`` and ``job_class()``."""

    @staticmethod
    def relpath(current_file: str, rel_path: str) -> str:
        """``rel_path`` taken from the folder of ``current_file`` (``relpath(__file__, 'job.scala')``)."""
        return os.path.join(os.path.dirname(os.path.abspath(current_file)), rel_path)

    def source(self) -> str | None:
        """The Scala source of the job."""
        return None

    def jar(self) -> str | None:
        """A ready jar of the job (then ``job_class()`` is needed)."""
        return None

    def extra_jars(self) -> list[str]:
        """More jars for the compiler's classpath and the job's ``-libjars``."""
        return []

    def job_class(self) -> str | None:
        """The job's class (found in ``source()`` when not given)."""
        return None

    def job_runner(self) -> ScaldingJobRunner:
        return ScaldingJobRunner()

    def atomic_output(self) -> bool:
        """Write outputs to temporary paths moved into place once the job succeeded."""
        return True

    def requires(self) -> Any:
        return {}

    def job_args(self) -> list[str]:
        """More arguments after the inputs and the output."""
        return []

    def args(self) -> list[Any]:
        """``--<name> <paths>`` for each required input, ``--output <target>``, then ``job_args()``."""
        arglist: list[Any] = []
        for name, value in self.requires_hadoop().items():
            arglist.append(f"--{name}")
            arglist.extend(target.path for target in luigi.task.flatten(luigi.task.getpaths(value)))
        arglist.extend(["--output", self.output()])
        arglist.extend(self.job_args())
        return arglist
