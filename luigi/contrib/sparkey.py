"""Exporting a task's key/value input to a Sparkey log file (Spotify's constant key/value store format).

``SparkeyExportTask.run()`` reads ``key<separator>value`` lines from every input target and writes them,
through ``sparkey.LogWriter``, to a temporary file that becomes ``output()`` only once it is complete.
The ``sparkey`` module comes from ``pip install 'luigi[sparkey]'`` (the ``sparkey-python`` bindings), which
need Spotify's C library ``libsparkey`` installed on the machine.
"""

from __future__ import annotations

from types import ModuleType

import luigi
from luigi.contrib.optional import MissingExtraError, require
from luigi.task import flatten

__all__ = ["SparkeyExportTask"]

_NO_LIBSPARKEY = (
    "luigi.contrib.sparkey: the 'sparkey' bindings are installed but cannot load Spotify's C library "
    "libsparkey: build and install it (https://github.com/spotify/sparkey), then run ldconfig"
)


def _sparkey() -> ModuleType:
    """The ``sparkey`` module, or MissingExtraError naming what to install."""
    try:
        return require("sparkey", "sparkey", "luigi.contrib.sparkey", package="sparkey-python")
    except (AttributeError, OSError) as exc:  # the bindings look libsparkey's symbols up when imported
        raise MissingExtraError(_NO_LIBSPARKEY) from exc


class SparkeyExportTask(luigi.Task):
    """Writes each ``key<separator>value`` line of the task's inputs into the Sparkey log ``output()``.

    ``output()`` must be a ``LocalTarget``; later lines win over earlier ones with the same key.
    """

    separator = "\t"

    def run(self) -> None:
        self._write_sparkey_file()

    def _write_sparkey_file(self) -> None:
        output = self.output()
        if not isinstance(output, luigi.LocalTarget):
            raise TypeError("output must be a LocalTarget")
        sparkey = _sparkey()
        # Written aside and moved into place whole, so a failed export leaves no partial store behind.
        temp_output = luigi.LocalTarget(is_tmp=True)
        writer = sparkey.LogWriter(temp_output.path)
        for target in flatten(self.input()):
            with target.open("r") as lines:
                for number, line in enumerate(lines, 1):
                    key, value = self._split(line, number, target)
                    writer[key] = value
        writer.close()
        temp_output.move(output.path)

    def _split(self, line: str, number: int, target: luigi.Target) -> tuple[str, str]:
        fields = line.strip().split(self.separator, 1)
        if len(fields) != 2:
            raise ValueError(
                f"{self}: line {number} of input {target!r} is not key{self.separator!r}value: "
                f"{line.strip()!r} (set the task's separator to the one the input uses)"
            )
        return fields[0], fields[1]
