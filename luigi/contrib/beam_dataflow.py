"""Apache Beam for Luigi: `BeamDataflowJobTask` runs a Beam pipeline program as a command and waits for it.

The command is ``dataflow_executable()`` (``["java", "-jar", ...]``, ``["python", "pipeline.py"]``), then
the Dataflow service options the task sets, ``args()``, and one flag per input and output. Flag spellings
differ between Beam SDKs (``--tempLocation`` in Java, ``--temp_location`` in Python): a `DataflowParamKeys`
subclass names them. Nothing of the task is pickled, and no library is imported here: the program brings
its own Beam SDK.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from abc import ABCMeta, abstractmethod
from collections.abc import Iterator
from typing import Any

import luigi
from luigi.task import MixinNaiveBulkComplete, flatten

__all__ = ["BeamDataflowJobTask", "DataflowJobError", "DataflowParamKeys"]

logger = logging.getLogger("luigi-interface")

_RUNNERS = ("DirectRunner", "DataflowRunner")
_LAST_LINES = 20  # of a failed program's output, in the error's message
# the task attributes passed as service options, in Luigi's order (runner first, labels last)
_SERVICE_OPTIONS = (
    "project",
    "zone",
    "region",
    "staging_location",
    "temp_location",
    "gcp_temp_location",
    "num_workers",
    "autoscaling_algorithm",
    "max_num_workers",
    "disk_size_gb",
    "worker_machine_type",
    "worker_disk_type",
    "network",
    "subnetwork",
    "job_name",
    "service_account",
)


class DataflowParamKeys(metaclass=ABCMeta):
    """The flag names one Beam SDK uses for the Dataflow service options (without the leading ``--``)."""

    @property
    @abstractmethod
    def runner(self) -> str: ...

    @property
    @abstractmethod
    def project(self) -> str: ...

    @property
    @abstractmethod
    def zone(self) -> str: ...

    @property
    @abstractmethod
    def region(self) -> str: ...

    @property
    @abstractmethod
    def staging_location(self) -> str: ...

    @property
    @abstractmethod
    def temp_location(self) -> str: ...

    @property
    @abstractmethod
    def gcp_temp_location(self) -> str: ...

    @property
    @abstractmethod
    def num_workers(self) -> str: ...

    @property
    @abstractmethod
    def autoscaling_algorithm(self) -> str: ...

    @property
    @abstractmethod
    def max_num_workers(self) -> str: ...

    @property
    @abstractmethod
    def disk_size_gb(self) -> str: ...

    @property
    @abstractmethod
    def worker_machine_type(self) -> str: ...

    @property
    @abstractmethod
    def worker_disk_type(self) -> str: ...

    @property
    @abstractmethod
    def job_name(self) -> str: ...

    @property
    @abstractmethod
    def service_account(self) -> str: ...

    @property
    @abstractmethod
    def network(self) -> str: ...

    @property
    @abstractmethod
    def subnetwork(self) -> str: ...

    @property
    @abstractmethod
    def labels(self) -> str: ...


class DataflowJobError(subprocess.CalledProcessError):
    """The pipeline program exited non-zero; the message ends with the last lines it printed."""

    def __str__(self) -> str:
        tail = "\n".join(str(self.output or "").splitlines()[-_LAST_LINES:])
        return (
            f"Beam pipeline exited {self.returncode} ({' '.join(self.cmd[:3])} ...); its last output:\n{tail}"
        )


class _CmdLineRunner:
    """Runs the pipeline program, logging its output (stderr merged into stdout) line by line."""

    @staticmethod
    def run(cmd: list[str], task: luigi.Task | None = None) -> None:
        """Run ``cmd`` to its end; CalledProcessError with everything it printed when it exits non-zero."""
        lines = []
        with subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, close_fds=True
        ) as process:
            assert process.stdout is not None  # piped above
            for raw in process.stdout:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                lines.append(line)
                logger.info(line)
        if process.returncode:
            raise subprocess.CalledProcessError(process.returncode, cmd, output="\n".join(lines))


def _is_instance(target: luigi.Target, module: str, name: str) -> bool:
    """Whether ``target`` is a ``module.name``; only if that module is loaded, as a target of it must be."""
    loaded = sys.modules.get(module)
    cls = loaded.__dict__.get(name) if loaded is not None else None
    return isinstance(cls, type) and isinstance(target, cls)


class BeamDataflowJobTask(MixinNaiveBulkComplete, luigi.Task, metaclass=ABCMeta):
    """Run a Beam pipeline program with the Dataflow options set here and one flag per input and output.

    Set ``dataflow_params`` to a `DataflowParamKeys` for the program's SDK and implement
    `dataflow_executable`. Inputs become ``--<name>=<path>/<pattern>`` (``part-*`` unless `file_pattern`
    says otherwise), outputs ``--<name>=<path>``; the names are ``input`` and ``output`` for single targets,
    or the keys of ``requires()`` and ``output()`` dicts.
    """

    project: str | None = None
    runner: str | None = None
    temp_location: str | None = None
    staging_location: str | None = None
    gcp_temp_location: str | None = None
    num_workers: int | None = None
    autoscaling_algorithm: str | None = None
    max_num_workers: int | None = None
    network: str | None = None
    subnetwork: str | None = None
    disk_size_gb: int | None = None
    worker_machine_type: str | None = None
    job_name: str | None = None
    worker_disk_type: str | None = None
    service_account: str | None = None
    zone: str | None = None
    region: str | None = None
    labels: dict[str, str] = {}

    cmd_line_runner: Any = _CmdLineRunner
    dataflow_params: DataflowParamKeys | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not isinstance(self.dataflow_params, DataflowParamKeys):
            raise ValueError(
                f"{type(self).__name__}.dataflow_params must be a DataflowParamKeys instance naming the "
                f"flags of your Beam SDK, not {self.dataflow_params!r}"
            )

    @abstractmethod
    def dataflow_executable(self) -> list[str]:
        """The command that starts the pipeline program, before any flag (``["java", "-jar", "job.jar"]``)."""

    def args(self) -> list[str]:
        """More arguments for the program, after the Dataflow options."""
        return []

    def before_run(self) -> None:
        """Called before the program starts."""

    def on_successful_run(self) -> None:
        """Called after the program exited 0, before the output is validated."""

    def validate_output(self) -> bool:
        """Whether the output is right; False fails the task (``ValueError("Output validation failed")``)."""
        return True

    def file_pattern(self) -> dict[str, str]:
        """The file pattern read under each input's path, by input name; ``part-*`` when absent."""
        return {}

    def on_successful_output_validation(self) -> None:
        """Called when `validate_output` returned True."""

    def cleanup_on_error(self, error: BaseException) -> None:
        """Called with the error when the program fails or the output is not valid, before the task fails."""

    def run(self) -> None:
        cmd_line = self._mk_cmd_line()
        logger.info("Running Beam pipeline: %s", " ".join(cmd_line))
        self.before_run()
        try:
            self.cmd_line_runner.run(cmd_line, self)
        except subprocess.CalledProcessError as error:
            logger.error("Beam pipeline of %s exited %s", self.task_id, error.returncode)
            self.cleanup_on_error(error)
            raise DataflowJobError(error.returncode, error.cmd, output=error.output) from error
        self.on_successful_run()
        if not self.validate_output():
            invalid = ValueError("Output validation failed")
            self.cleanup_on_error(invalid)
            raise invalid
        self.on_successful_output_validation()

    def _mk_cmd_line(self) -> list[str]:
        """The whole command: executable, Dataflow options, `args`, inputs, outputs."""
        return [
            *self.dataflow_executable(),
            *self._get_dataflow_args(),
            *self.args(),
            *self._format_input_args(),
            *self._format_output_args(),
        ]

    def _get_runner(self) -> str:
        if not self.runner:
            logger.warning("%s sets no runner: using DirectRunner", type(self).__name__)
            return "DirectRunner"
        if self.runner in _RUNNERS:
            return self.runner
        raise ValueError(
            f"{type(self).__name__}.runner is {self.runner!r}: set it to 'DirectRunner' or 'DataflowRunner'"
        )

    def _get_dataflow_args(self) -> list[str]:
        """``--<key>=<value>`` for the runner and each service option set (truthy), in Luigi's order."""
        keys = self.dataflow_params
        assert keys is not None  # checked in __init__
        flags = [f"--{keys.runner}={self._get_runner()}"]
        for option in _SERVICE_OPTIONS:
            value = getattr(self, option)
            if value:
                flags.append(f"--{getattr(keys, option)}={value}")
        if self.labels:
            flags.append(f"--{keys.labels}={json.dumps(self.labels)}")
        return flags

    def _format_input_args(self) -> list[str]:
        """``--<name>=<path>/<pattern>[,...]`` for each named input (several paths comma-joined)."""
        patterns = self.file_pattern()
        if not isinstance(patterns, dict):
            raise ValueError(f"{type(self).__name__}.file_pattern() must return a dict, not {patterns!r}")
        flags = []
        for name, targets in _named_inputs(self.input()):
            pattern = patterns.get(name) or "part-*"
            paths = [self.get_target_path(target).rstrip("/") + "/" + pattern for target in targets]
            flags.append(f"--{name}={','.join(paths)}")
        return flags

    def _format_output_args(self) -> list[str]:
        """``--<name>=<path>`` for the output (``output``) or each output of a dict."""
        job_output = self.output()
        if isinstance(job_output, luigi.Target):
            job_output = {"output": job_output}
        if not isinstance(job_output, dict):
            raise ValueError(
                f"{type(self).__name__}.output() must be a Target or a dict of them, not {job_output!r}"
            )
        return [f"--{name}={self.get_target_path(target)}" for name, target in job_output.items()]

    @staticmethod
    def get_target_path(target: luigi.Target) -> str:
        """The path the program reads or writes: a file's path, or ``project:dataset.table`` in BigQuery."""
        if isinstance(target, luigi.LocalTarget):
            return str(target.path)
        other: Any = target  # a GCS or BigQuery target: their modules (and clients) are not imported here
        if _is_instance(target, "luigi.contrib.gcs", "GCSTarget"):
            return str(other.path)
        if _is_instance(target, "luigi.contrib.bigquery", "BigQueryTarget"):
            table = other.table
            return f"{table.project_id}:{table.dataset_id}.{table.table_id}"
        raise ValueError(
            f"Beam jobs read and write LocalTarget, GCSTarget or BigQueryTarget, not {type(target).__name__}"
        )


def _named_inputs(job_input: Any) -> Iterator[tuple[str, list[luigi.Target]]]:
    """Each input's flag name and its targets, from what ``input()`` returned."""
    if isinstance(job_input, luigi.Target):
        job_input = {"input": job_input}
    elif isinstance(job_input, tuple):
        job_input = dict([job_input])
    elif isinstance(job_input, list):
        pairs = all(isinstance(item, tuple) for item in job_input)
        job_input = dict(job_input) if job_input and pairs else {"input": job_input}
    if not isinstance(job_input, dict):
        raise ValueError(f"Cannot pass the input {job_input!r} to a Beam job: use a Target, a list or a dict")
    for name, value in job_input.items():
        if isinstance(value, dict):
            # a required task with several outputs: one flag per output, named <input>-<output>
            for key, target in value.items():
                yield f"{name}-{key}", flatten(target)
        else:
            yield name, flatten(value)
