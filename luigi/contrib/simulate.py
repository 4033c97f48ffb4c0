"""``RunAnywayTarget``: an output that makes its task run once in every run of the ``luigi`` command.

A task returns ``RunAnywayTarget(self)`` from ``output()`` and calls ``self.output().done()`` at the end
of ``run()``. The target exists once ``done()`` was called by this process (or a worker child of it), so
the next ``luigi`` command runs the task again, as in Luigi: markers are empty files under
``temp_dir/<unique>/``, ``unique`` being the PID of the process that made the first target. Directories
of other processes older than ``temp_time`` seconds are removed when the first target is made.
"""

from __future__ import annotations

import hashlib
import logging
import multiprocessing
import os
import shutil
import tempfile
import threading
import time

import luigi

__all__ = ["RunAnywayTarget", "RunAnywayTargetError"]

logger = logging.getLogger("luigi-interface")

_cleaned: set[str] = set()  # the temp_dirs whose old directories this process already removed
_cleaned_lock = threading.Lock()


class RunAnywayTargetError(OSError):
    """A RunAnywayTarget could not record that its task ran (its ``temp_dir`` is not writable)."""


class RunAnywayTarget(luigi.Target):
    """A target that exists once its task called ``done()`` in this run (so it runs in every run).

    Subclass to move ``temp_dir`` (where the marker files live) or change ``temp_time`` (the age in
    seconds past which marker directories of earlier runs are deleted).
    """

    temp_dir = os.path.join(tempfile.gettempdir(), "luigi-simulate")
    temp_time = 24 * 3600
    # PID of the process that made the first target: separates concurrent pipelines' markers (shared
    # memory, so a worker's child processes see what the first of them set).
    unique = multiprocessing.Value("i", 0)

    def __init__(self, task_obj: luigi.Task) -> None:
        self.task_id = task_obj.task_id
        if self.unique.value == 0:
            with self.unique.get_lock():
                if self.unique.value == 0:
                    self.unique.value = os.getpid()
        self._remove_old_runs()

    def __str__(self) -> str:
        return self.task_id

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.task_id!r})"

    def get_path(self) -> str:
        """The marker file for this task in this run (named by the md5 of the task id)."""
        digest = hashlib.md5(self.task_id.encode(), usedforsecurity=False).hexdigest()
        return os.path.join(self.temp_dir, str(self.unique.value), digest)

    def exists(self) -> bool:
        return os.path.isfile(self.get_path())

    def done(self) -> None:
        """Record that the task ran in this run: from now on the target exists (until the next run)."""
        path = self.get_path()
        logger.info("Marking %s as done", self)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.utime(os.path.join(self.temp_dir, str(self.unique.value)))  # in use: not old, keep it
            with open(path, "w"):
                pass
        except OSError as exc:
            raise RunAnywayTargetError(
                f"Could not mark {self} as done: cannot write {path} ({exc.strerror or exc}); "
                f"set temp_dir on a RunAnywayTarget subclass to a writable directory"
            ) from exc

    def _remove_old_runs(self) -> None:
        """Delete other runs' marker directories older than ``temp_time``, once per ``temp_dir``."""
        with _cleaned_lock:
            if self.temp_dir in _cleaned:
                return
            _cleaned.add(self.temp_dir)
        limit = time.time() - self.temp_time
        try:
            entries = os.listdir(self.temp_dir)
        except OSError:  # nothing there yet (or unreadable: done() will say so)
            return
        for name in entries:
            path = os.path.join(self.temp_dir, name)
            try:
                mine = name == str(self.unique.value)
                old = not mine and os.path.isdir(path) and os.stat(path).st_mtime < limit
            except OSError:  # removed meanwhile by another pipeline's clean-up
                continue
            if old:
                shutil.rmtree(path, ignore_errors=True)
                logger.debug("Deleted temporary directory %s", path)
