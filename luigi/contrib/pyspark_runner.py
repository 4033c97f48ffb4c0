"""The driver program of a ``PySparkTask``: ``spark-submit pyspark_runner.py TASK.pickle [ARGS...]``.

It loads the task that the worker pickled into the run's private directory (never anything from the
network), builds a SparkConf, lets the task ``setup(conf)``, creates a SparkContext (or a SparkSession
when ``[pyspark_runner] use_spark_session`` is true on the worker), calls ``setup_remote(sc)`` and then
``main(sc_or_session, *ARGS)``. If that raises, the exception is also written next to the pickle, so the
worker can report the driver's own error rather than Spark's log.

Importing this module needs no pyspark; running it does.
"""

from __future__ import annotations

import importlib
import logging
import os
import pickle
import sys
import traceback
from collections.abc import Sequence
from types import TracebackType
from typing import Any

__all__ = [
    "AbstractPySparkRunner",
    "PySparkRunner",
    "PySparkSessionRunner",
    "SparkContextEntryPoint",
    "SparkSessionEntryPoint",
]

# Written next to the pickle when main() fails: the driver's exception, formatted.
DRIVER_ERROR_FILE = "driver-error.txt"
# The task attribute holding the worker's runner options ({"use_spark_session": bool, ...}).
RUNNER_OPTIONS_ATTRIBUTE = "_pyspark_runner_options"


def import_attribute(module: str, qualname: str) -> Any:
    """``module.qualname``, importing the module: how references to a worker's ``__main__`` unpickle."""
    value: Any = importlib.import_module(module)
    for part in qualname.split("."):
        value = getattr(value, part)
    return value


def _require_pyspark() -> Any:
    from luigi.contrib.optional import require

    return require("pyspark", "spark", "luigi.contrib.pyspark_runner")


class _SparkEntryPoint:
    """Creates what ``main`` receives from a SparkConf on entry and stops it on exit."""

    def __init__(self, conf: Any) -> None:
        self.conf = conf

    def __enter__(self) -> tuple[Any, Any]:
        raise NotImplementedError

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        raise NotImplementedError


class SparkContextEntryPoint(_SparkEntryPoint):
    """``main`` gets a SparkContext."""

    sc: Any = None

    def __enter__(self) -> tuple[Any, Any]:
        _require_pyspark()
        from pyspark import SparkContext

        self.sc = SparkContext(conf=self.conf)
        return self.sc, self.sc

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.sc.stop()


class SparkSessionEntryPoint(_SparkEntryPoint):
    """``main`` gets a SparkSession (with Hive support unless ``enable_hive_support`` is false)."""

    spark: Any = None

    def __init__(self, conf: Any, enable_hive_support: bool = True) -> None:
        super().__init__(conf)
        self.enable_hive_support = enable_hive_support

    def __enter__(self) -> tuple[Any, Any]:
        _require_pyspark()
        from pyspark.sql import SparkSession

        builder = SparkSession.builder.config(conf=self.conf)
        if self.enable_hive_support:
            builder = builder.enableHiveSupport()
        self.spark = builder.getOrCreate()
        return self.spark, self.spark.sparkContext

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.spark.stop()


def _load_job(path: str) -> Any:
    """The task pickled at ``path``; its directory (holding a copy of the task's module) joins sys.path."""
    sys.path.append(os.path.dirname(os.path.abspath(path)))
    with open(path, "rb") as handle:
        return pickle.load(handle)  # written by this run's own worker into its private directory


def _runner_option(job: Any, name: str, default: bool) -> bool:
    """The worker's choice recorded in the job, else this driver's ``[pyspark_runner]`` configuration."""
    recorded = getattr(job, RUNNER_OPTIONS_ATTRIBUTE, None) or {}
    if name in recorded:
        return bool(recorded[name])
    from luigi import configuration

    return bool(configuration.get_config().getboolean("pyspark_runner", name, default))


class AbstractPySparkRunner:
    """Loads the pickled task at ``job`` and runs its ``main`` with a context made by the entry point.

    A subclass fixes ``_entry_point_class``; left None, the worker's ``use_spark_session`` decides.
    """

    _entry_point_class: type[_SparkEntryPoint] | None = None

    def __init__(self, job: str, *args: str) -> None:
        self.job_path = job
        self.job = _load_job(job)
        self.args = args

    def entry_point(self, conf: Any) -> _SparkEntryPoint:
        """What creates the context for ``main``."""
        entry_class = self._entry_point_class
        if entry_class is None:
            entry_class = SparkSessionEntryPoint if _use_spark_session(self.job) else SparkContextEntryPoint
        if entry_class is SparkSessionEntryPoint:
            return SparkSessionEntryPoint(conf, _runner_option(self.job, "enable_hive_support", True))
        return entry_class(conf)

    def run(self) -> None:
        pyspark = _require_pyspark()
        conf = pyspark.SparkConf()
        self.job.setup(conf)
        try:
            with self.entry_point(conf) as (entry_point, sc):
                self.job.setup_remote(sc)
                self.job.main(entry_point, *self.args)
        except BaseException as exc:  # any failure, Ctrl-C included: record it for the worker, re-raise
            self._record_error(exc)
            raise

    def _record_error(self, exc: BaseException) -> None:
        path = os.path.join(os.path.dirname(os.path.abspath(self.job_path)), DRIVER_ERROR_FILE)
        try:
            with open(path, "w") as handle:
                handle.write("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
        except OSError:
            pass  # the traceback still reaches the output; the file only makes it easier to find


class PySparkRunner(AbstractPySparkRunner):
    """Runs ``main`` with a SparkContext."""

    _entry_point_class = SparkContextEntryPoint


class PySparkSessionRunner(AbstractPySparkRunner):
    """Runs ``main`` with a SparkSession."""

    _entry_point_class = SparkSessionEntryPoint


class _WorkerConfiguredRunner(AbstractPySparkRunner):
    """Runs ``main`` with a SparkSession or a SparkContext, as the worker's configuration said."""


def _use_spark_session(job: Any = None) -> bool:
    return _runner_option(job, "use_spark_session", False)


def _get_runner_class() -> type[AbstractPySparkRunner]:
    """The runner this driver's own configuration asks for (as in Luigi; ``main()`` asks the worker's)."""
    return PySparkSessionRunner if _use_spark_session() else PySparkRunner


def _drop_own_directory() -> None:
    """Run as a script, this file's directory heads sys.path, where luigi.contrib's modules would shadow
    top-level ones of the same name (``ftp``, ``s3``, ``target``, ...)."""
    own = os.path.dirname(os.path.abspath(__file__))
    if sys.path and sys.path[0] and os.path.abspath(sys.path[0]) == own:
        del sys.path[0]


def main(argv: Sequence[str] | None = None) -> None:
    """Run the pickled task given on the command line."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        raise SystemExit("usage: pyspark_runner.py TASK.pickle [ARGS...] (run by PySparkTask)")
    logging.basicConfig(level=logging.WARNING)
    _WorkerConfiguredRunner(*args).run()


if __name__ == "__main__":
    _drop_own_directory()
    main()
