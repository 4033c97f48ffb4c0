"""``PySparkTask``: a Spark application written as the task's own ``main(sc, *args)``."""

from __future__ import annotations

import importlib
import inspect
import os
import pickle
import re
import shutil
import sys
import sysconfig
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from luigi import configuration
from luigi.contrib.pyspark_runner import DRIVER_ERROR_FILE, RUNNER_OPTIONS_ATTRIBUTE, import_attribute
from luigi.contrib.spark.driver_output import shorten
from luigi.contrib.spark.submit import SparkSubmitTask

__all__ = ["PySparkTask"]

RUNNER = str(Path(__file__).resolve().parent.parent / "pyspark_runner.py")


class PySparkTask(SparkSubmitTask):
    """A Spark application written as this task's ``main(sc, *args)``, run on the driver.

    The task is pickled into the run's private directory and ``luigi.contrib.pyspark_runner`` loads it on
    the driver, creates the SparkContext (or, with ``[pyspark_runner] use_spark_session``, a SparkSession)
    and calls ``main`` with it and ``app_options()``. In client mode the driver can import whatever this
    worker can: the worker's own import path is passed on.
    """

    app = RUNNER

    run_pickle: str | None = None

    @property
    def name(self) -> str:  # type: ignore[override]
        return type(self).__name__

    @property
    def py_packages(self) -> list[str]:
        """Packages zipped up and shipped to the executors (``[spark] py_packages``)."""
        return self._list_config(self._config("py_packages"))

    @property
    def files(self) -> list[str]:
        shipped = list(super().files)
        if not self._driver_is_local() and self.run_pickle:
            shipped.append(self.run_pickle)  # the remote driver finds it in its working directory
        return shipped

    @property
    def py_files(self) -> list[str]:
        shipped = list(super().py_files)
        module_copy = self._module_copy()
        if not self._driver_is_local() and module_copy:
            shipped.append(module_copy)
        return shipped

    @property
    def pickle_protocol(self) -> int:
        """The pickle protocol: lower it when the driver's Python is older than the worker's."""
        protocol = configuration.get_config().getint(
            self.spark_version, "pickle_protocol", pickle.DEFAULT_PROTOCOL
        )
        return int(protocol)

    def setup(self, conf: Any) -> None:
        """Called on the driver with the SparkConf before the context is made from it."""

    def setup_remote(self, sc: Any) -> None:
        """Called on the driver with the SparkContext before ``main``: ships ``py_packages``."""
        self._setup_packages(sc)

    def main(self, sc: Any, *args: Any) -> None:
        """The Spark application: ``sc`` is the SparkContext (or SparkSession), ``args`` the app_options()."""
        raise NotImplementedError(f"{type(self).__name__} must define main(self, sc, *args)")

    def app_command(self) -> list[str]:
        if self.run_pickle is None:
            raise RuntimeError(f"{self}: the task is pickled for the driver only while it runs")
        pickle_location = self.run_pickle if self._driver_is_local() else os.path.basename(self.run_pickle)
        return [str(self.app), pickle_location] + [str(option) for option in self.app_options()]

    def program_environment(self) -> dict[str, str]:
        env = super().program_environment()
        if self._driver_is_local():
            env["PYTHONPATH"] = os.pathsep.join(_import_path_for_driver(env.get("PYTHONPATH")))
        return env

    def _prepare_run(self) -> None:
        assert self.run_path is not None
        fragment = re.sub(r"\W", "_", self.name)
        self.run_pickle = os.path.join(self.run_path, f"{fragment}.pickle")
        module_file = inspect.getfile(type(self))
        if os.path.isfile(module_file):
            shutil.copy(module_file, self.run_path)  # lets the driver import a module it has no path to
        with open(self.run_pickle, "wb") as handle:
            self._dump(handle)

    @contextmanager
    def _run_directory(self) -> Iterator[str]:
        with super()._run_directory() as path:
            try:
                yield path
            finally:
                self.run_pickle = None

    def _driver_error(self, stdout: str | None, stderr: str | None) -> str:
        """The exception the runner recorded on a local driver, else what the output shows."""
        recorded = os.path.join(self.run_path, DRIVER_ERROR_FILE) if self.run_path else None
        if recorded and os.path.isfile(recorded):
            return shorten(Path(recorded).read_text(errors="replace").strip())
        return super()._driver_error(stdout, stderr)

    def _module_copy(self) -> str | None:
        if self.run_path is None:
            return None
        copy = os.path.join(self.run_path, os.path.basename(inspect.getfile(type(self))))
        return copy if os.path.isfile(copy) else None

    def _dump(self, fd: IO[bytes]) -> None:
        """Pickle the task for the driver, with the worker's choices for the runner."""
        config = configuration.get_config()
        options = {
            "use_spark_session": config.getboolean("pyspark_runner", "use_spark_session", False),
            "enable_hive_support": config.getboolean("pyspark_runner", "enable_hive_support", True),
        }
        setattr(self, RUNNER_OPTIONS_ATTRIBUTE, options)
        try:
            with self.no_unpicklable_properties():
                _MainModulePickler(fd, protocol=self.pickle_protocol).dump(self)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            raise pickle.PicklingError(
                f"{self} cannot be pickled for the Spark driver ({exc}); keep only picklable values "
                "(no open files, connections or locks) in the task's attributes"
            ) from exc
        finally:
            delattr(self, RUNNER_OPTIONS_ATTRIBUTE)

    def _setup_packages(self, sc: Any) -> None:
        """Zip each of ``py_packages`` into the run directory and add it to the context's Python files."""
        packages = self.py_packages
        if not packages:
            return
        run_path = self.run_path or tempfile.mkdtemp(prefix="luigi-pyspark-packages-")
        os.makedirs(run_path, exist_ok=True)
        for package in packages:
            module = importlib.import_module(package)
            paths = getattr(module, "__path__", None)
            module_path = list(paths)[0] if paths else module.__file__
            assert module_path is not None
            tar_path = os.path.join(run_path, f"{package}.tar.gz")
            with tarfile.open(tar_path, "w:gz") as tar:
                tar.add(module_path, os.path.basename(module_path))
            sc.addPyFile(tar_path)


class _MainModulePickler(pickle.Pickler):
    """Pickles classes and functions of ``__main__`` by the name the driver can import them as.

    A script run as ``python pipeline.py`` is ``__main__`` here but a plain module on the driver (its copy
    sits in the run directory), so references to it must name ``pipeline`` instead.
    """

    def reducer_override(self, obj: Any) -> Any:
        by_name = isinstance(obj, type) or inspect.isfunction(obj)
        if not by_name or getattr(obj, "__module__", None) != "__main__":
            return NotImplemented
        return (import_attribute, (_main_module_name(), obj.__qualname__))


def _main_module_name() -> str:
    """The importable name of the ``__main__`` module (its -m name, or its file's stem)."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name and spec.name != "__main__":
        return str(spec.name)
    path = getattr(main, "__file__", None)
    if not path:
        raise pickle.PicklingError(
            "a PySparkTask defined interactively cannot be sent to the Spark driver; define it in a module"
        )
    return Path(path).stem


def _import_path_for_driver(existing: str | None) -> list[str]:
    """This process's import path minus the Python installation's own, then ``existing`` (PYTHONPATH)."""
    installation = [
        os.path.realpath(path)
        for key in ("stdlib", "platstdlib", "purelib", "platlib")
        if (path := sysconfig.get_paths().get(key))
    ]
    entries = []
    for entry in sys.path:
        resolved = os.path.realpath(entry or os.getcwd())
        inside = any(resolved == root or resolved.startswith(root + os.sep) for root in installation)
        if os.path.isdir(resolved) and not inside:
            entries.append(resolved)
    entries += [entry for entry in (existing or "").split(os.pathsep) if entry]
    return list(dict.fromkeys(entries))
