"""Tasks that run an Apache Pig script with the ``pig`` command, as Luigi's ``luigi.contrib.pig`` does.

``PigJobTask.run()`` writes the task's parameters and properties to two temporary files, runs
``<[pig] home>/bin/pig [options] [-param_file f] [-propertyFile g] -f <script>``, logs what Pig prints
while it runs and raises ``PigJobError`` (with Pig's stdout and stderr) when it exits non-zero. A worker
stopped while the script runs (SIGTERM, Ctrl-C) kills the ``pig`` client and the Hadoop job it launched
(``pig -e "kill <job id>"``), so no job keeps running on the cluster for a task that is gone.
"""

from __future__ import annotations

import logging
import os
import re
import selectors
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from types import FrameType
from typing import IO, Any

import luigi
from luigi.contrib.external_program import (
    _kill_program_tree,
    _KilledBySignal,
    _ProgramOutputError,
    _SigtermContext,
)

__all__ = ["PigJobError", "PigJobTask", "PigRunContext"]

logger = logging.getLogger("luigi-interface")

# The line Pig's MapReduce launcher logs for each Hadoop job it submits.
_HADOOP_JOB_ID = re.compile(r"HadoopJobId: (\S+)")


class PigJobError(_ProgramOutputError):
    """A Pig script exited non-zero; ``out`` and ``err`` hold what Pig printed."""

    def __str__(self) -> str:
        info = self.message
        if self.out:
            info += "\nSTDOUT: " + str(self.out)
        if self.err:
            info += "\nSTDERR: " + str(self.err)
        return info


class PigRunContext(_SigtermContext):
    """While active, a SIGTERM or Ctrl-C kills the running ``pig`` client and the Hadoop job it launched.

    ``proc`` and ``job_id`` are filled in by whoever runs Pig inside the block; a SIGTERM then exits with
    ``128 + 15``, as ``ExternalProgramRunContext`` does. Outside the main thread only Ctrl-C is handled.
    """

    def __init__(self, pig_command: str = "pig") -> None:
        super().__init__()
        self.pig_command = pig_command
        self.proc: subprocess.Popen[Any] | None = None
        self.job_id: str | None = None

    def on_exception(self, exc_type: type[BaseException]) -> None:
        if exc_type is KeyboardInterrupt:
            self.kill_job()

    def kill_job(self, captured_signal: int | None = None, stack_frame: FrameType | None = None) -> None:
        """Kill the ``pig`` client and its Hadoop job; as the SIGTERM handler, then exit 128 + signal."""
        if self.proc is not None:
            _kill_program_tree(self.proc)
        if self.job_id is not None:
            logger.info("Killing Pig job %s", self.job_id)
            subprocess.call([self.pig_command, "-e", f"kill {self.job_id}"])
            self.job_id = None  # killed once, even if the handler and __exit__ both get here
        if captured_signal is not None:
            raise _KilledBySignal(captured_signal)


class PigJobTask(luigi.Task):
    """A task that runs the Pig script ``pig_script_path()``; override ``output()`` and that method."""

    def pig_home(self) -> str:
        """Where Pig is installed: ``[pig] home``."""
        return luigi.configuration.get_config().get("pig", "home", "/usr/share/pig")

    def pig_command_path(self) -> str:
        """The ``pig`` launcher this task runs."""
        return os.path.join(self.pig_home(), "bin", "pig")

    def pig_env_vars(self) -> dict[str, str]:
        """Extra environment variables for Pig (``PIG_HOME`` is always set)."""
        return {}

    def pig_properties(self) -> dict[str, str]:
        """Java properties for Pig, handed over with ``-propertyFile``."""
        return {}

    def pig_parameters(self) -> dict[str, str]:
        """Values for the script's ``$name`` parameters, handed over with ``-param_file``."""
        return {}

    def pig_options(self) -> list[str]:
        """Options placed before everything else on Pig's command line (``["-x", "local"]``)."""
        return []

    def output(self) -> Any:
        raise NotImplementedError("subclass should define output path")

    def pig_script_path(self) -> str:
        """The Pig Latin script to run."""
        raise NotImplementedError("subclass should define pig_script_path")

    @contextmanager
    def _build_pig_cmd(self) -> Iterator[list[str]]:
        """Pig's command line, with the parameter and property files it names alive while it is used."""
        with ExitStack() as files:  # closed, so removed, when the command has run
            param_file = tempfile.NamedTemporaryFile()
            files.callback(param_file.close)
            prop_file = tempfile.NamedTemporaryFile()
            files.callback(prop_file.close)
            options = list(self.pig_options())
            parameters = self.pig_parameters()
            if parameters:
                _write_settings(param_file, parameters)
                options += ["-param_file", param_file.name]
            properties = self.pig_properties()
            if properties:
                _write_settings(prop_file, properties)
                options += ["-propertyFile", prop_file.name]
            yield [self.pig_command_path(), *options, "-f", self.pig_script_path()]

    def run(self) -> None:
        with self._build_pig_cmd() as cmd:
            self.track_and_progress(cmd)

    def track_and_progress(self, cmd: list[str]) -> None:
        """Run Pig's command line, logging its output as it comes; PigJobError when it exits non-zero."""
        env = dict(os.environ)
        env["PIG_HOME"] = self.pig_home()
        env.update(self.pig_env_vars())
        logger.info("Running Pig: %s", " ".join(cmd))
        with PigRunContext(self.pig_command_path()) as context:
            try:
                proc = subprocess.Popen(
                    cmd, shell=False, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
                )
            except FileNotFoundError as exc:
                raise PigJobError(
                    f"Pig is not installed at {cmd[0]}: set [pig] home to the directory that holds bin/pig"
                ) from exc
            context.proc = proc
            try:
                out, err = _follow(proc, context)
            except BaseException:
                context.kill_job()  # a SIGTERM (the handler killed it already) or an error while following
                proc.wait()  # reap it
                raise
        if proc.returncode != 0:
            raise PigJobError(f"Pig script failed with return value: {proc.returncode}", out=out, err=err)


def _write_settings(file: IO[bytes], settings: dict[str, str]) -> None:
    """``key=value`` lines, the format of both Pig's parameter file and its property file."""
    for key, value in settings.items():
        file.write(f"{key}={value}{os.linesep}".encode())
    file.flush()


def _follow(proc: subprocess.Popen[bytes], context: PigRunContext) -> tuple[str, str]:
    """Log Pig's two streams line by line until it exits, noting each Hadoop job id; both texts."""
    assert proc.stdout is not None and proc.stderr is not None  # opened with PIPE
    out, err = _Lines("stdout", proc.stdout), _Lines("stderr", proc.stderr)
    # poll(), not epoll: it also takes the regular files that stand in for pipes in tests.
    with selectors.PollSelector() as selector:
        for lines in (out, err):
            selector.register(lines.pipe, selectors.EVENT_READ, lines)
        while proc.poll() is None:
            for key, _ in selector.select(timeout=0.2):
                _note_and_log(key.data, context)
                if key.data.exhausted:  # closed early: polling it again would spin
                    selector.unregister(key.fileobj)
    for lines in (out, err):  # what Pig wrote after the last poll
        while not lines.exhausted:
            _note_and_log(lines, context)
    return out.text(), err.text()


def _note_and_log(stream: _Lines, context: PigRunContext) -> None:
    """Log the lines ``stream`` has now; a Hadoop job id among them is noted before its line is logged."""
    for line in stream.read():
        found = _HADOOP_JOB_ID.search(line)
        if found:
            context.job_id = found.group(1)
        logger.info("pig %s: %s", stream.name, line)


class _Lines:
    """One of Pig's output streams: read in chunks, split into lines, kept whole."""

    def __init__(self, name: str, pipe: IO[bytes]) -> None:
        self.name = name
        self.pipe = pipe
        self.exhausted = False
        self._chunks: list[bytes] = []
        self._partial = b""

    def read(self) -> list[str]:
        """The lines completed by what is there now (one read, so it never blocks past it)."""
        chunk = os.read(self.pipe.fileno(), 65536)
        self._chunks.append(chunk)
        self.exhausted = not chunk
        if self.exhausted and self._partial:
            chunk = b"\n"  # the last line had no newline: log it all the same
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        return [raw.decode("utf-8", "replace").rstrip("\r") for raw in lines]

    def text(self) -> str:
        """Everything read from the stream."""
        return b"".join(self._chunks).decode("utf-8", "replace")
