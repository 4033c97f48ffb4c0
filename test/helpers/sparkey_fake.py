"""A FAKE of the ``sparkey`` bindings' ``LogWriter`` (their C library, libsparkey, cannot install here).

Like the real one, ``LogWriter(filename, mode="NEW")`` creates the log file at once, takes ``w[key] = value``
and ``put(key, value)`` as str or bytes, refuses writes after ``close()`` and writes the entries out when
closed. Its file is a readable stand-in for Sparkey's binary log: ``key<TAB>value`` lines, in write order,
after the header line ``FAKE-SPARKEY-LOG``. ``written`` lists every writer made, for the tests to inspect.
"""

from __future__ import annotations

HEADER = "FAKE-SPARKEY-LOG\n"


class SparkeyException(Exception):
    """What the real bindings raise for a misuse, such as writing to a closed writer."""


class LogWriter:
    """Appends puts to a Sparkey log file, flushed on ``close()``."""

    def __init__(self, filename: str, mode: str = "NEW") -> None:
        if mode != "NEW":
            raise SparkeyException(f"the fake only creates new logs, not mode {mode!r}")
        self.filename = filename
        self.entries: list[tuple[str, str]] = []
        self.closed = False
        with open(filename, "w") as log:  # the real writer creates (truncates) the file when made
            log.write(HEADER)
        written.append(self)

    def __setitem__(self, key: str | bytes, value: str | bytes) -> None:
        self.put(key, value)

    def put(self, key: str | bytes, value: str | bytes) -> None:
        if self.closed:
            raise SparkeyException("Writer is closed")
        self.entries.append((_text(key), _text(value)))

    def close(self) -> None:
        if not self.closed:
            with open(self.filename, "a") as log:
                log.writelines(f"{key}\t{value}\n" for key, value in self.entries)
            self.closed = True


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


written: list[LogWriter] = []
