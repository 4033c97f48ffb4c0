"""Hadoop streaming: `JobTask` runs its ``mapper``/``combiner``/``reducer`` as a Hadoop streaming job.

`HadoopJobRunner` (``[hadoop] streaming-jar``) builds the ``hadoop jar`` command line, ships Luigi, the
task's modules and ``mrrunner.py`` to the cluster, and the task itself as ``job.json`` (module, family
and serialized parameters, the one job-file mechanism of ``luigi.contrib._job_dir``; never a pickle):
``mrrunner`` rebuilds the task from it on each node. `LocalJobRunner` runs the same steps in-process,
which is what a task whose outputs are not all on HDFS gets. GCS paths are recognised only when
``luigi.contrib.gcs`` has been imported by the pipeline; this module never imports it.
"""

from __future__ import annotations

import abc
import ast
import datetime
import io
import itertools
import json
import logging
import os
import random
import shutil
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator
from types import ModuleType
from typing import IO, Any

import luigi
import luigi.contrib.hdfs
import luigi.contrib.s3
from luigi import configuration
from luigi.contrib import _job_dir, mrrunner
from luigi.contrib._hadoop_packages import (
    _attached_packages,
    _importable_module_name,
    attach,
    create_packages_archive,
    dereference,
    flatten,
    get_extra_files,
)
from luigi.contrib._hadoop_tracking import (
    HadoopJobError,
    HadoopRunContext,
    fetch_task_failures,
    run_and_track_hadoop_job,
)
from luigi.task import flatten as flatten_targets

__all__ = [
    "BaseHadoopJobTask",
    "DataInterchange",
    "DefaultHadoopJobRunner",
    "HadoopJobError",
    "HadoopJobRunner",
    "HadoopRunContext",
    "JobRunner",
    "JobTask",
    "LocalJobRunner",
    "attach",
    "create_packages_archive",
    "dereference",
    "fetch_task_failures",
    "flatten",
    "get_extra_files",
    "hadoop",
    "run_and_track_hadoop_job",
]

logger = logging.getLogger("luigi-interface")

JOB_FILE = _job_dir.JOB_FILE
LINKS_FIELD = "hadoop_links"  # job.json's field for the distributed-cache links the node sets up


class hadoop(luigi.task.Config):
    """``[hadoop] pool``: the scheduler pool (fair) or queue (capacity) jobs go to; ``--hadoop-pool``."""

    pool = luigi.OptionalParameter(
        default=None, description="Hadoop pool (fair scheduler) or queue (capacity) for every job"
    )
    # [hadoop] keys the runners and luigi.contrib.hdfs read themselves, not flags of this class.
    ignore_unconsumed = {"streaming_jar", "python_executable", "scheduler", "command", "version"}


DataInterchange: dict[str, dict[str, Callable[[Any], Any]]] = {
    # Literals only: what repr() wrote is read back without evaluating code.
    "python": {"serialize": str, "internal_serialize": repr, "deserialize": ast.literal_eval},
    "json": {"serialize": json.dumps, "internal_serialize": json.dumps, "deserialize": json.loads},
}


def _single_output(job: luigi.Task) -> Any:
    """The job's output: one target (a file, or a directory on HDFS/S3/GCS), as Hadoop writes one."""
    return job.output()


class JobRunner:
    """How a `BaseHadoopJobTask` is run: ``run_job(job)``."""

    run_job: Any = NotImplemented


def _gcs_classes(*names: str) -> tuple[type, ...]:
    """GCS target classes, when the pipeline has imported ``luigi.contrib.gcs`` (never imported here)."""
    gcs = sys.modules.get("luigi.contrib.gcs")
    return tuple(getattr(gcs, name) for name in names) if gcs is not None else ()


class HadoopJobRunner(JobRunner):
    """Runs a `JobTask` as a Hadoop streaming job through ``hadoop jar <streaming_jar>``."""

    def __init__(
        self,
        streaming_jar: str,
        modules: list[ModuleType] | None = None,
        streaming_args: list[str] | None = None,
        libjars: list[str] | None = None,
        libjars_in_hdfs: list[str] | None = None,
        jobconfs: dict[str, str] | None = None,
        input_format: str | None = None,
        output_format: str | None = None,
        end_job_with_atomic_move_dir: bool = True,
        archives: list[str] | None = None,
    ) -> None:
        self.streaming_jar = streaming_jar
        self.modules = modules or []
        self.streaming_args = streaming_args or []
        self.libjars = libjars or []
        self.libjars_in_hdfs = libjars_in_hdfs or []
        self.jobconfs = jobconfs or {}
        self.input_format = input_format
        self.output_format = output_format
        self.end_job_with_atomic_move_dir = end_job_with_atomic_move_dir
        self.archives = archives or []
        self.tmp_dir: str | None = None

    def run_job(self, job: JobTask, tracking_url_callback: Callable[[str], Any] | None = None) -> None:
        """Ship and run ``job``; its output appears at ``job.output()`` only if the job succeeded."""
        if tracking_url_callback is not None:
            warnings.warn(
                "tracking_url_callback is deprecated: the job's set_tracking_url is used",
                DeprecationWarning,
                stacklevel=2,
            )
        self.tmp_dir = self._make_tmp_dir()
        output_final = _single_output(job).path
        output_hadoop = self._output_path(job, output_final)
        arglist = self._arglist(job, self.tmp_dir, output_hadoop)
        job.dump(self.tmp_dir)
        self._ship_code(job, self.tmp_dir)
        try:
            run_and_track_hadoop_job(arglist, tracking_url_callback=job.set_tracking_url)  # patchable here
        except HadoopJobError:
            self._remove_partial_output(output_hadoop, output_final)
            raise
        if output_hadoop != output_final:
            luigi.contrib.hdfs.HdfsTarget(output_hadoop).move_dir(output_final)
        self.finish()

    def _make_tmp_dir(self) -> str:
        base = configuration.get_config().get("core", "tmp-dir", None)
        if not base:
            return tempfile.mkdtemp()
        warnings.warn(
            "[core] tmp-dir is deprecated: the system temporary directory is used by default", stacklevel=3
        )
        path = os.path.join(base, f"hadoop_job_{random.randrange(16**16):016x}")
        os.makedirs(path)
        return path

    def _output_path(self, job: JobTask, output_final: str) -> str:
        """Where Hadoop writes: beside the final path, moved into place once the job succeeded."""
        output = _single_output(job)
        allowed = (
            luigi.contrib.hdfs.HdfsTarget,
            luigi.contrib.s3.S3FlagTarget,
            *_gcs_classes("GCSFlagTarget"),
        )
        if not isinstance(output, allowed):
            raise TypeError(f"output must be an HdfsTarget, S3FlagTarget or GCSFlagTarget, got {output!r}")
        if not self.end_job_with_atomic_move_dir:
            return output_final
        flag_targets = (luigi.contrib.s3.S3FlagTarget, *_gcs_classes("GCSFlagTarget"))
        if isinstance(output, flag_targets):
            raise TypeError(
                f"end_job_with_atomic_move_dir is not supported for {flag_targets}: pass "
                "end_job_with_atomic_move_dir=False to the runner"
            )
        stamp = datetime.datetime.now().isoformat().replace(":", "-")
        return f"{output_final}-temp-{stamp}"

    def _step_command(self, job: JobTask, step: str) -> str:
        python = configuration.get_config().get("hadoop", "python_executable", "python")
        runner = "mrrunner.pex" if job.package_binary is not None else "mrrunner.py"
        return f"{python} {runner} {step}"

    def _arglist(self, job: JobTask, tmp_dir: str, output_hadoop: str) -> list[str]:
        """The ``hadoop jar`` command line, in the order Hadoop streaming expects its options."""
        arglist = [*luigi.contrib.hdfs.load_hadoop_cmd(), "jar", self.streaming_jar]
        arglist += self._cache_args(job, tmp_dir)
        for conf in [*job.jobconfs(), *(f"{key}={value}" for key, value in self.jobconfs.items())]:
            arglist += ["-D", conf]
        arglist += self.streaming_args
        for arg, value in job.extra_streaming_arguments():
            arglist += [arg if arg.startswith("-") else "-" + arg, value]
        arglist += ["-mapper", self._step_command(job, "map")]
        if job.combiner is not NotImplemented:
            arglist += ["-combiner", self._step_command(job, "combiner")]
        if job.reducer is not NotImplemented:
            arglist += ["-reducer", self._step_command(job, "reduce")]
        arglist += self._shipped_files(job, tmp_dir)
        if self.output_format:
            arglist += ["-outputformat", self.output_format]
        if self.input_format:
            arglist += ["-inputformat", self.input_format]
        arglist += self._input_args(job)
        return [*arglist, "-output", output_hadoop]

    def _cache_args(self, job: JobTask, tmp_dir: str) -> list[str]:
        """``-libjars``, ``-archives`` and ``-files`` (recording each file's link for the node)."""
        args: list[str] = []
        libjars = list(self.libjars)
        for jar in self.libjars_in_hdfs:
            subprocess.check_call([*luigi.contrib.hdfs.load_hadoop_cmd(), "fs", "-get", jar, tmp_dir])
            libjars.append(os.path.join(tmp_dir, os.path.basename(jar)))
        if libjars:
            args += ["-libjars", ",".join(libjars)]
        archives = [*self.archives, *job.extra_archives()]
        if archives:
            args += ["-archives", ",".join(archives)]
        files = []
        for src, dst in get_extra_files(job.extra_files()):
            dst_tmp = f"{dst.replace('/', '_')}_{random.randrange(10**9):09d}"
            files.append(f"{src}#{dst_tmp}")
            job.add_link(dst_tmp, dst)
        if files:
            args += ["-files", ",".join(files)]
        return args

    def _shipped_files(self, job: JobTask, tmp_dir: str) -> list[str]:
        """``-file`` for the runner, the code (packages.tar or the pex) and the job file."""
        args = []
        if job.package_binary is None:
            runner_path = mrrunner.__file__
            args += ["-file", runner_path[:-1] if runner_path.endswith(".pyc") else runner_path]
            args += ["-file", os.path.join(tmp_dir, "packages.tar")]
        else:
            args += ["-file", os.path.join(tmp_dir, "mrrunner.pex")]
        return [*args, "-file", os.path.join(tmp_dir, JOB_FILE)]

    def _input_args(self, job: JobTask) -> list[str]:
        allowed = (luigi.contrib.hdfs.HdfsTarget, luigi.contrib.s3.S3Target, *_gcs_classes("GCSTarget"))
        args = []
        for target in flatten_targets(job.input_hadoop()):
            if not isinstance(target, allowed):
                raise TypeError(f"target must be an HdfsTarget, S3Target or GCSTarget, got {target!r}")
            args += ["-input", target.path]  # type: ignore[attr-defined]  # one of the allowed targets
        return args

    def _ship_code(self, job: JobTask, tmp_dir: str) -> None:
        """The pex the task names, or an archive of Luigi and every module the job needs."""
        if job.package_binary is not None:
            shutil.copy(job.package_binary, os.path.join(tmp_dir, "mrrunner.pex"))
            return
        job_module = sys.modules[type(job).__module__]
        packages = [luigi, *self.modules, *job.extra_modules(), *_attached_packages, job_module]
        create_packages_archive(packages, os.path.join(tmp_dir, "packages.tar"))

    @staticmethod
    def _remove_partial_output(output_hadoop: str, output_final: str) -> None:
        """A failed job leaves no half-written output (Hadoop keeps the job's empty output directory)."""
        if output_hadoop == output_final:
            return
        target = luigi.contrib.hdfs.HdfsTarget(output_hadoop)
        try:
            if target.exists():
                target.remove(skip_trash=True)
        except Exception as error:  # cleanup is best effort; the job's own error is what the user needs
            logger.warning("could not remove the failed job's output %s: %s", output_hadoop, error)

    def finish(self) -> None:
        """Remove the local directory the job's files were shipped from."""
        if self.tmp_dir and os.path.exists(self.tmp_dir):
            logger.debug("removing the job directory %s", self.tmp_dir)
            shutil.rmtree(self.tmp_dir)
        self.tmp_dir = None

    def __del__(self) -> None:
        if getattr(self, "tmp_dir", None):
            self.finish()


class DefaultHadoopJobRunner(HadoopJobRunner):
    """The streaming runner with ``[hadoop] streaming-jar``."""

    def __init__(self) -> None:
        streaming_jar = configuration.get_config().get("hadoop", "streaming_jar", None)
        if not streaming_jar:
            raise luigi.parameter.MissingParameterException(
                "[hadoop] streaming-jar is not set: set it to the path of the hadoop-streaming jar"
            )
        super().__init__(streaming_jar=streaming_jar)


class LocalJobRunner(JobRunner):
    """Runs the map, combine and reduce steps in this process over the inputs' lines (for tests, and for
    outputs not on HDFS). ``samplelines`` reads at most that many lines of each input."""

    def __init__(self, samplelines: int | None = None) -> None:
        self.samplelines = samplelines

    def sample(self, input_stream: Iterable[str], n: int | None, output: IO[str]) -> None:
        """Copy the first ``n`` lines (all when None) of ``input_stream`` to ``output``."""
        for line in itertools.islice(input_stream, n):
            output.write(line if line.endswith("\n") else line + "\n")

    def group(self, input_stream: Iterable[str]) -> list[str]:
        """The lines sorted (stably) on their key fields: everything before the last tab."""
        keyed = [(line.rstrip("\n").split("\t")[:-1], index, line) for index, line in enumerate(input_stream)]
        keyed.sort()
        return [line for _key, _index, line in keyed]

    def run_job(self, job: JobTask, tracking_url_callback: Callable[[str], Any] | None = None) -> None:
        """Map, then (with a reducer) group, combine, group and reduce, writing to ``job.output()``."""
        map_input = io.StringIO()
        for target in flatten_targets(job.input_hadoop()):
            with target.open("r") as stream:
                self.sample(stream, self.samplelines, map_input)
        map_input.seek(0)
        if job.reducer is NotImplemented:
            with _single_output(job).open("w") as output:
                job.run_mapper(map_input, output)
            return
        map_output = io.StringIO()
        job.run_mapper(map_input, map_output)
        map_output.seek(0)
        reduce_input: list[str] = self.group(map_output)
        if job.combiner is not NotImplemented:
            combine_output = io.StringIO()
            job.run_combiner(reduce_input, combine_output)
            combine_output.seek(0)
            reduce_input = self.group(combine_output)
        with _single_output(job).open("w") as output:
            job.run_reducer(reduce_input, output)


class BaseHadoopJobTask(luigi.Task):
    """A task run as a Hadoop job: its jobconfs (name, priority, pool) and the runner it goes through."""

    pool = luigi.OptionalParameter(default=None, significant=False, positional=False)
    batch_counter_default = 1
    final_mapper: Any = NotImplemented
    final_combiner: Any = NotImplemented
    final_reducer: Any = NotImplemented
    mr_priority: Any = NotImplemented
    package_binary: str | None = None
    _counter_dict: dict[tuple[str, ...], int] = {}
    data_interchange_format = "python"

    def _get_pool(self) -> str | None:
        """The task's pool, else ``[hadoop] pool``."""
        return self.pool or hadoop().pool

    def jobconfs(self) -> list[str]:
        """The ``-D`` settings every job gets: its name, priority and pool or queue."""
        confs = [f"mapred.job.name={self}"]
        if self.mr_priority is not NotImplemented:
            confs.append(f"mapred.job.priority={self.mr_priority()}")
        pool = self._get_pool()
        if pool is not None:
            scheduler = configuration.get_config().get("hadoop", "scheduler", "fair")
            if scheduler == "fair":
                confs.append(f"mapred.fairscheduler.pool={pool}")
            elif scheduler == "capacity":
                confs.append(f"mapred.job.queue.name={pool}")
        return confs

    def init_local(self) -> None:
        """Called where the worker runs, before the job is submitted."""

    def init_hadoop(self) -> None:
        """Called on each node before a map, combine or reduce step."""

    @abc.abstractmethod
    def job_runner(self) -> JobRunner:
        """The runner this task's job goes through."""

    def _set_data_interchange(self) -> None:
        interchange = DataInterchange[self.data_interchange_format]
        self.serialize = interchange["serialize"]
        self.internal_serialize = interchange["internal_serialize"]
        self.deserialize = interchange["deserialize"]

    def run(self) -> None:
        self._set_data_interchange()
        self.init_local()
        self.job_runner().run_job(self)

    def requires_local(self) -> Any:
        """Tasks whose outputs the worker reads itself (not shipped to Hadoop as inputs)."""
        return []

    def requires_hadoop(self) -> Any:
        """Tasks whose outputs are the job's Hadoop inputs."""
        return self.requires()

    def input_local(self) -> Any:
        return luigi.task.getpaths(self.requires_local())

    def input_hadoop(self) -> Any:
        return luigi.task.getpaths(self.requires_hadoop())

    def deps(self) -> list[luigi.Task]:
        return [*flatten_targets(self.requires_hadoop()), *flatten_targets(self.requires_local())]

    def on_failure(self, exception: BaseException) -> str | None:
        if isinstance(exception, HadoopJobError):
            return (
                f"Hadoop job failed with message: {exception.message}\n\n"
                f"    stdout:\n{exception.out}\n\n    stderr:\n{exception.err}"
            )
        return super().on_failure(exception)


class JobTask(BaseHadoopJobTask):
    """A Hadoop streaming job: override ``mapper`` and, optionally, ``combiner`` and ``reducer``."""

    jobconf_truncate = 20000
    n_reduce_tasks = 25
    reducer: Any = NotImplemented
    combiner: Any = NotImplemented

    def jobconfs(self) -> list[str]:
        confs = super().jobconfs()
        confs.append(
            "mapred.reduce.tasks=0"
            if self.reducer is NotImplemented
            else f"mapred.reduce.tasks={self.n_reduce_tasks}"
        )
        if self.jobconf_truncate >= 0:
            confs.append(f"stream.jobconf.truncate.limit={self.jobconf_truncate}")
        return confs

    def init_mapper(self) -> None:
        """Called on the node before the first record is mapped."""

    def init_combiner(self) -> None:
        """Called on the node before the first key is combined."""

    def init_reducer(self) -> None:
        """Called on the node before the first key is reduced."""

    def _setup_remote(self) -> None:
        self._set_data_interchange()
        self._setup_links()

    def job_runner(self) -> JobRunner:
        """The streaming runner when every output is on HDFS, else the local runner (with a warning)."""
        for output in flatten_targets(self.output()):
            if not isinstance(output, luigi.contrib.hdfs.HdfsTarget):
                warnings.warn(
                    "Job is using one or more non-HdfsTarget outputs so it will be run in local mode",
                    stacklevel=2,
                )
                return LocalJobRunner()
        return DefaultHadoopJobRunner()

    def reader(self, input_stream: Iterable[str]) -> Iterator[tuple[Any, ...]]:
        """The mapper's records: one ``(line,)`` per input line."""
        for line in input_stream:
            yield (line,)

    def writer(self, outputs: Iterable[Any], stdout: IO[str], stderr: IO[str] = sys.stderr) -> None:
        """Write each final output record as one tab-separated line."""
        for output in outputs:
            try:
                fields = list(flatten(output))
                if self.data_interchange_format == "json":
                    line = "\t".join(field for field in fields if field)  # already JSON text
                else:
                    line = "\t".join(map(self.serialize, fields))
                print(line, file=stdout)
            except Exception:  # name the record that could not be written, then fail the step
                print(output, file=stderr)
                raise

    def mapper(self, item: Any) -> Iterator[tuple[Any, Any]]:
        """The identity mapper: ``(None, item)``."""
        yield None, item

    def incr_counter(self, *args: Any, **kwargs: Any) -> None:
        """``incr_counter(group, name, count)`` or ``incr_counter(group, count)``; sent to Hadoop once a
        counter's batch reaches ``threshold`` (default ``batch_counter_default``)."""
        threshold = kwargs.get("threshold", self.batch_counter_default)
        key, count = tuple(args[:-1]), args[-1]
        counters = self.__dict__.setdefault("_counter_dict", {})
        total = counters.get(key, 0) + count
        if total < threshold:
            counters[key] = total
            return
        self._incr_counter(*key, total)
        counters[key] = 0

    def _flush_batch_incr_counter(self) -> None:
        """Send every counter's pending increments."""
        for key, count in self.__dict__.get("_counter_dict", {}).items():
            if count:
                self._incr_counter(*key, count)
        self.__dict__["_counter_dict"] = {}

    def _incr_counter(self, *args: Any) -> None:
        """Hadoop streaming's counter line on stderr: ``reporter:counter:<group>,<name>,<count>``."""
        print("reporter:counter:" + ",".join(str(arg) for arg in args), file=sys.stderr)

    def extra_modules(self) -> list[ModuleType]:
        """More modules to ship with the job."""
        return []

    def extra_files(self) -> list[str | tuple[str, str]]:
        """Files (or ``(src, dst)`` pairs, directories expanded) to put in each node's working directory."""
        return []

    def extra_streaming_arguments(self) -> list[tuple[str, str]]:
        """More ``(option, value)`` pairs for the streaming command line."""
        return []

    def extra_archives(self) -> list[str]:
        """Archives Hadoop unpacks on each node (``-archives``)."""
        return []

    def add_link(self, src: str, dst: str) -> None:
        """Record that the distributed-cache file ``src`` is to appear as ``dst`` on the node."""
        self.__dict__.setdefault("_links", []).append((src, dst))

    def _setup_links(self) -> None:
        """Hard-link each distributed-cache file to its ``dst``, on the node."""
        links = self.__dict__.get("_links", [])
        missing = [src for src, _dst in links if not os.path.exists(src)]
        if missing:
            raise HadoopJobError(f"Missing files for distributed cache: {', '.join(missing)}")
        for src, dst in links:
            if os.path.dirname(dst):
                os.makedirs(os.path.dirname(dst), exist_ok=True)
            if not os.path.exists(dst):
                os.link(os.path.realpath(src), dst)

    def dump(self, directory: str = "") -> None:
        """Write ``job.json`` (module, family, parameters, links; JSON, never a pickle) into ``directory``.

        Raises `luigi.contrib._job_dir.TaskNotRebuildableError` naming why when a node could not rebuild
        this task from it.
        """
        cls = type(self)
        module = _importable_module_name(cls.__module__)
        params = _job_dir.serialized_params(self)
        if cls.__module__ == "__main__":
            where = f"{self.task_family} (class {cls.__qualname__} in the script {module})"
            _job_dir.check_parameters_survive(self, params, where)
        else:
            _job_dir.check_rebuildable(self, params)
        links = [list(link) for link in self.__dict__.get("_links", [])]
        _job_dir.write_job_spec(self, directory or os.curdir, module=module, extra={LINKS_FIELD: links})

    def _map_input(self, input_stream: Iterable[str]) -> Iterator[Any]:
        for record in self.reader(input_stream):
            yield from self.mapper(*record)
        if self.final_mapper is not NotImplemented:
            yield from self.final_mapper()
        self._flush_batch_incr_counter()

    def _reduce_input(
        self, inputs: Iterable[list[Any]], reducer: Callable[..., Iterable[Any]], final: Any
    ) -> Iterator[Any]:
        for key, values in itertools.groupby(inputs, key=lambda fields: self.internal_serialize(fields[0])):
            yield from reducer(self.deserialize(key), (fields[1] for fields in values))
        if final is not NotImplemented:
            yield from final()
        self._flush_batch_incr_counter()

    def run_mapper(self, stdin: Iterable[str] = sys.stdin, stdout: IO[str] = sys.stdout) -> None:
        """The map step: records from ``stdin`` through ``mapper`` to ``stdout``."""
        self.init_hadoop()
        self.init_mapper()
        outputs = self._map_input(_chomp(stdin))
        if self.reducer is NotImplemented:
            self.writer(outputs, stdout)
        else:
            self.internal_writer(outputs, stdout)

    def run_reducer(self, stdin: Iterable[str] = sys.stdin, stdout: IO[str] = sys.stdout) -> None:
        """The reduce step: sorted map output from ``stdin``, one ``reducer`` call per key."""
        self.init_hadoop()
        self.init_reducer()
        outputs = self._reduce_input(self.internal_reader(_chomp(stdin)), self.reducer, self.final_reducer)
        self.writer(outputs, stdout)

    def run_combiner(self, stdin: Iterable[str] = sys.stdin, stdout: IO[str] = sys.stdout) -> None:
        """The combine step: like reduce, on one mapper's output, written in the internal format."""
        self.init_hadoop()
        self.init_combiner()
        outputs = self._reduce_input(self.internal_reader(_chomp(stdin)), self.combiner, self.final_combiner)
        self.internal_writer(outputs, stdout)

    def internal_reader(self, input_stream: Iterable[str]) -> Iterator[list[Any]]:
        """Each line's tab-separated fields, deserialized."""
        for line in input_stream:
            yield [self.deserialize(field) for field in line.split("\t")]

    def internal_writer(self, outputs: Iterable[Any], stdout: IO[str]) -> None:
        """Each record's fields, serialized for the next step, tab-joined."""
        for output in outputs:
            print("\t".join(map(self.internal_serialize, output)), file=stdout)


def _chomp(lines: Iterable[str]) -> Iterator[str]:
    """Lines without their newline."""
    for line in lines:
        yield line[:-1] if line.endswith("\n") else line


def links_from_spec(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """The distributed-cache links ``dump`` recorded in ``job.json``."""
    return [(str(src), str(dst)) for src, dst in spec.get(LINKS_FIELD, [])]
