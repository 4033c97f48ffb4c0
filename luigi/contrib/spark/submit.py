"""``SparkSubmitTask``: a Spark application run with ``spark-submit``, its options from ``[spark]``."""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from luigi import configuration
from luigi.contrib.external_program import ExternalProgramRunError, ExternalProgramTask
from luigi.contrib.spark.driver_output import (
    TRACKING_URL_PATTERN,
    SparkJobError,
    SparkUiUrlReader,
    driver_error,
)
from luigi.contrib.spark.private_properties import split_secret_conf, write_private_properties

__all__ = ["SparkSubmitTask"]


class SparkSubmitTask(ExternalProgramTask):
    """Runs a Spark application (``app``: a .jar, .py or .R file) with ``spark-submit``.

    Every ``spark-submit`` option is a property read from the config section named by ``spark_version``
    (``[spark]``): override one in a subclass to fix it for that task. ``app_options()`` are the
    application's own arguments.
    """

    name: str | None = None
    entry_class: str | None = None
    app: str | None = None

    # spark-submit is chatty on stderr: show it only when the job fails.
    always_log_stderr = False
    # The driver logs to stderr, so that is where the Spark UI's address is found.
    stream_for_searching_tracking_url = "stderr"

    # Set while run() runs: a private directory for the run's files, removed afterwards.
    run_path: str | None = None
    _ui_url_reader: SparkUiUrlReader | None = None

    def app_options(self) -> list[Any]:
        """The arguments given to the application after its path."""
        return []

    # Spark fixes the pattern that ExternalProgramTask takes as a parameter: a property replaces it.
    @property
    def tracking_url_pattern(self) -> str:  # type: ignore[override]
        return TRACKING_URL_PATTERN

    def build_tracking_url(self, logs_output: str) -> str:
        """The Spark UI's URL for a line the pattern matched ("" while it is not known yet)."""
        reader = self._ui_url_reader or SparkUiUrlReader()
        self._ui_url_reader = reader
        return reader.url_for(logs_output)

    # -- configuration ---------------------------------------------------------------------------------

    @property
    def spark_version(self) -> str:
        """The config section the options are read from."""
        return "spark"

    def _config(self, option: str, default: Any = None) -> Any:
        return configuration.get_config().get(self.spark_version, option, default)

    @property
    def spark_submit(self) -> str:
        """The spark-submit program: ``[spark] spark_submit``, else the one on PATH or pyspark's own."""
        configured = self._config("spark_submit")
        return str(configured) if configured else _default_spark_submit()

    @property
    def master(self) -> str | None:
        return self._config("master")

    @property
    def deploy_mode(self) -> str | None:
        return self._config("deploy_mode")

    @property
    def jars(self) -> list[str]:
        return self._list_config(self._config("jars"))

    @property
    def packages(self) -> list[str]:
        return self._list_config(self._config("packages"))

    @property
    def exclude_packages(self) -> list[str]:
        return self._list_config(self._config("exclude_packages"))

    @property
    def repositories(self) -> list[str]:
        return self._list_config(self._config("repositories"))

    @property
    def py_files(self) -> list[str]:
        return self._list_config(self._config("py_files"))

    @property
    def files(self) -> list[str]:
        return self._list_config(self._config("files"))

    @property
    def archives(self) -> list[str]:
        return self._list_config(self._config("archives"))

    @property
    def conf(self) -> dict[str, str]:
        """Spark properties, from ``[spark] conf`` written as ``key=value|key2=value2`` (or a TOML table)."""
        return self._dict_config(self._config("conf"))

    @property
    def properties_file(self) -> str | None:
        return self._config("properties_file")

    @property
    def driver_memory(self) -> str | None:
        return self._config("driver_memory")

    @property
    def driver_java_options(self) -> str | None:
        return self._config("driver_java_options")

    @property
    def driver_library_path(self) -> str | None:
        return self._config("driver_library_path")

    @property
    def driver_class_path(self) -> str | None:
        return self._config("driver_class_path")

    @property
    def executor_memory(self) -> str | None:
        return self._config("executor_memory")

    @property
    def driver_cores(self) -> str | None:
        return self._config("driver_cores")

    @property
    def supervise(self) -> bool:
        return bool(configuration.get_config().getboolean(self.spark_version, "supervise", False))

    @property
    def total_executor_cores(self) -> str | None:
        return self._config("total_executor_cores")

    @property
    def executor_cores(self) -> str | None:
        return self._config("executor_cores")

    @property
    def queue(self) -> str | None:
        return self._config("queue")

    @property
    def num_executors(self) -> str | None:
        return self._config("num_executors")

    @property
    def hadoop_conf_dir(self) -> str | None:
        return self._config("hadoop_conf_dir")

    @property
    def hadoop_user_name(self) -> str | None:
        return self._config("hadoop_user_name")

    @property
    def pyspark_python(self) -> str | None:
        return self._config("pyspark_python")

    @property
    def pyspark_driver_python(self) -> str | None:
        return self._config("pyspark_driver_python")

    @property
    def env(self) -> dict[str, str]:
        """Extra environment variables for spark-submit, ``[spark] env`` as ``NAME=value|NAME2=value``."""
        return self._dict_config(self._config("env"))

    # -- environment and command line -------------------------------------------------------------------

    def get_environment(self) -> dict[str, str]:
        """This process's environment with the Hadoop and PySpark variables the properties give."""
        env = os.environ.copy()
        for name in ("HADOOP_CONF_DIR", "HADOOP_USER_NAME", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
            value = getattr(self, name.lower(), None)
            if value:
                env[name] = str(value)
        env.update(self.env)
        self._default_python(env)
        return env

    def _default_python(self, env: dict[str, str]) -> None:
        """Run Python on this machine with this interpreter unless told otherwise.

        Spark's own default, ``python3``, is often an interpreter without pyspark (or another version,
        which breaks the pickled closures); only what runs here is changed: the driver in client mode,
        and the executors too with a local master.
        """
        if not self._driver_is_local() or "PYSPARK_PYTHON" in env or "PYSPARK_DRIVER_PYTHON" in env:
            return  # Spark runs the driver with PYSPARK_PYTHON when only that is set
        name = "PYSPARK_PYTHON" if _is_local_master(self.master) else "PYSPARK_DRIVER_PYTHON"
        env[name] = sys.executable

    def _driver_is_local(self) -> bool:
        return (self.deploy_mode or "client") != "cluster"

    def program_environment(self) -> dict[str, str]:
        return self.get_environment()

    def program_args(self) -> list[str]:
        return self.spark_command() + self.app_command()

    def spark_command(self) -> list[str]:
        """``spark-submit`` and its options, without the application."""
        public_conf, secret_conf = split_secret_conf(self.conf)
        properties_file = self.properties_file
        if secret_conf:
            properties_file = self._private_properties_file(secret_conf, properties_file)
        command = [self.spark_submit]
        command += self._text_arg("--master", self.master)
        command += self._text_arg("--deploy-mode", self.deploy_mode)
        command += self._text_arg("--name", self.name)
        command += self._text_arg("--class", self.entry_class)
        command += self._list_arg("--jars", self.jars)
        command += self._list_arg("--packages", self.packages)
        command += self._list_arg("--exclude-packages", self.exclude_packages)
        command += self._list_arg("--repositories", self.repositories)
        command += self._list_arg("--py-files", self.py_files)
        command += self._list_arg("--files", self.files)
        command += self._list_arg("--archives", self.archives)
        command += self._dict_arg("--conf", public_conf)
        command += self._text_arg("--properties-file", properties_file)
        command += self._resource_args()
        return command

    def _resource_args(self) -> list[str]:
        command = self._text_arg("--driver-memory", self.driver_memory)
        command += self._text_arg("--driver-java-options", self.driver_java_options)
        command += self._text_arg("--driver-library-path", self.driver_library_path)
        command += self._text_arg("--driver-class-path", self.driver_class_path)
        command += self._text_arg("--executor-memory", self.executor_memory)
        command += self._text_arg("--driver-cores", self.driver_cores)
        command += self._flag_arg("--supervise", self.supervise)
        command += self._text_arg("--total-executor-cores", self.total_executor_cores)
        command += self._text_arg("--executor-cores", self.executor_cores)
        command += self._text_arg("--queue", self.queue)
        command += self._text_arg("--num-executors", self.num_executors)
        return command

    def app_command(self) -> list[str]:
        """The application and its options."""
        if not self.app:
            raise NotImplementedError(f"{type(self).__name__} must set app (the .jar, .py or .R file to run)")
        return [str(self.app)] + [str(option) for option in self.app_options()]

    # -- running -------------------------------------------------------------------------------------

    def run(self) -> None:
        self._ui_url_reader = SparkUiUrlReader()
        with self._run_directory():
            self._prepare_run()
            try:
                super().run()
            except ExternalProgramRunError as exc:
                raise self._spark_job_error(exc) from None

    def _prepare_run(self) -> None:
        """Hook for subclasses: write what the application needs into ``run_path`` before it starts."""

    @contextmanager
    def _run_directory(self) -> Iterator[str]:
        """A private directory (mode 700) for the run's files, removed with everything in it afterwards."""
        prefix = "luigi-spark-" + re.sub(r"\W", "_", self.name or type(self).__name__)[:40] + "-"
        self.run_path = tempfile.mkdtemp(prefix=prefix)
        try:
            yield self.run_path
        finally:
            shutil.rmtree(self.run_path, ignore_errors=True)
            self.run_path = None

    def _private_properties_file(self, secret_conf: Mapping[str, str], base: str | None) -> str:
        if self.run_path is None:
            raise RuntimeError(
                f"{self}: conf holds secret values ({', '.join(sorted(secret_conf))}), which are written to "
                "a private properties file only while the task runs; call program_args() from run()"
            )
        return write_private_properties(self.run_path, secret_conf, base)

    def _spark_job_error(self, exc: ExternalProgramRunError) -> SparkJobError:
        """The program's failure as a SparkJobError that leads with the driver's error."""
        if exc.returncode is None:  # spark-submit did not start at all
            message = f"{self}: spark-submit could not run: {exc.message} " + _SPARK_SUBMIT_HINT
            return SparkJobError(message, exc.command, exc.env, exc.out, exc.err, None, "")
        driver_error = self._driver_error(exc.out, exc.err)
        message = (
            f"{self}: the Spark application failed ({exc.message.rstrip(':')}); the driver said:\n"
            f"{driver_error}\n"
        )
        return SparkJobError(message, exc.command, exc.env, exc.out, exc.err, exc.returncode, driver_error)

    def _driver_error(self, stdout: str | None, stderr: str | None) -> str:
        """What the driver said about its failure."""
        return driver_error(stdout, stderr)

    # -- helpers that turn values into options (names as in Luigi) ----------------------------------------

    def _list_config(self, config: Any) -> list[str]:
        if not config:
            return []
        if isinstance(config, str):
            return [item.strip() for item in config.split(",") if item.strip()]
        return [str(item) for item in config]

    def _dict_config(self, config: Any) -> dict[str, str]:
        if not config:
            return {}
        if isinstance(config, Mapping):
            return {str(key): str(value) for key, value in config.items()}
        result = {}
        for item in str(config).split("|"):
            if not item.strip():
                continue
            key, sep, value = item.partition("=")
            if not sep:
                raise ValueError(
                    f"{self}: [{self.spark_version}] entry {key.strip()!r} has no value; "
                    "write key=value pairs separated by |"
                )
            result[key.strip()] = value.strip()
        return result

    def _text_arg(self, name: str, value: Any) -> list[str]:
        return [name, str(value)] if value else []

    def _list_arg(self, name: str, value: Iterable[Any] | None) -> list[str]:
        items = [str(item) for item in value or []]
        return [name, ",".join(items)] if items else []

    def _dict_arg(self, name: str, value: Mapping[str, Any] | None) -> list[str]:
        command: list[str] = []
        for key, item in (value or {}).items():
            command += [name, f"{key}={item}"]
        return command

    def _flag_arg(self, name: str, value: bool) -> list[str]:
        return [name] if value else []


def _is_local_master(master: str | None) -> bool:
    return master is None or master == "local" or master.startswith("local[")


_SPARK_SUBMIT_HINT = (
    "(install Spark, e.g. pip install 'luigi[spark]', or give its path as [spark] spark_submit)"
)


def _default_spark_submit() -> str:
    """``spark-submit`` from PATH, else the one inside the pyspark package (which finds its own home)."""
    if shutil.which("spark-submit"):
        return "spark-submit"
    try:
        import pyspark  # only to find the spark-submit it ships

        bundled = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    except ImportError:
        return "spark-submit"  # fails to start, with a message naming the fix
    return str(bundled) if bundled.is_file() else "spark-submit"
