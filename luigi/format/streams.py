"""Byte-stream layers the formats stack: each passes a close down, and a failure down as a discard."""

from __future__ import annotations

import contextlib
import io
import re
from typing import Any

CHUNK = 64 * 1024

ExcInfo = tuple[Any, Any, Any]


class StreamAborted(Exception):
    """Stands in for the failure when a stream is aborted explicitly rather than by an exception."""


def aborted() -> ExcInfo:
    err = StreamAborted("stream aborted")
    return StreamAborted, err, None


def forwarded(wrapper: Any, below_name: str, name: str) -> Any:
    """Attribute ``name`` of the stream a wrapper holds as ``below_name``, for ``__getattr__``.

    As in Luigi, a wrapper shows the attributes of the stream below it (an atomic writer's ``tmp_path``
    through any depth of formats). Dunders and the name of the stream itself are never forwarded, so a
    half-built or half-destroyed wrapper raises AttributeError instead of recursing.
    """
    if name == below_name or name.startswith("__"):
        raise AttributeError(name)
    return getattr(object.__getattribute__(wrapper, below_name), name)


def discard(stream: Any, exc_info: ExcInfo) -> None:
    """Abandon `stream` after a failure: atomic streams drop their output, plain ones are just closed."""
    exit_stream = getattr(stream, "__exit__", None)
    if exit_stream is None:
        stream.close()
    else:
        exit_stream(*exc_info)


class LayeredStream(io.BufferedIOBase):
    """A byte stream stacked on `stream`: closing finishes this layer then closes the one below."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._done = False

    def __getattr__(self, name: str) -> Any:
        return forwarded(self, "_stream", name)

    @property
    def closed(self) -> bool:
        return self._done

    def _finish(self) -> None:
        """Write out whatever this layer still holds (called once, before the stream below is closed)."""

    def close(self) -> None:
        if self._done:
            return
        try:
            self._finish()
        except BaseException as err:
            self._done = True
            discard(self._stream, (type(err), err, err.__traceback__))
            raise
        self._done = True
        self._stream.close()

    def abort(self, exc_info: ExcInfo | None = None) -> None:
        """Close without finishing, discarding the stream below."""
        if self._done:
            return
        self._done = True
        discard(self._stream, exc_info or aborted())

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort((exc_type, exc, tb))

    def flush(self) -> None:
        if not self._done:
            self._stream.flush()

    def __del__(self) -> None:
        # Collected while still open means unfinished: discard, never finish (which would commit below).
        if not getattr(self, "_done", True):
            with contextlib.suppress(Exception):  # a finalizer must not raise
                self.abort()

    def _check_open(self) -> None:
        if self._done:
            raise ValueError("I/O operation on closed file")


class FileWrapper(LayeredStream):
    """Expose any file-like object through the layered-stream protocol, delegating other attributes."""

    def readable(self) -> bool:
        return bool(self._stream.readable())

    def writable(self) -> bool:
        return bool(self._stream.writable())

    def read(self, size: int | None = -1) -> bytes:
        self._check_open()
        return bytes(self._stream.read(size))

    def read1(self, size: int = -1) -> bytes:
        self._check_open()
        read1 = getattr(self._stream, "read1", self._stream.read)
        return bytes(read1(size))

    def readline(self, size: int | None = -1) -> bytes:
        self._check_open()
        return bytes(self._stream.readline(size))

    def write(self, data: Any) -> int:
        self._check_open()
        return int(self._stream.write(data))


class TextWrapper(io.TextIOWrapper):
    """`io.TextIOWrapper` that discards, rather than commits, the stream below when a `with` block fails.

    Only `close()` or a clean `with` exit commits: a wrapper collected while open discards the stream below
    (io's own finalizer would close it, publishing a half-written file).
    """

    def __getattr__(self, name: str) -> Any:
        try:
            below = self.buffer
        except ValueError:  # detached: nothing below to ask
            raise AttributeError(name) from None
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(below, name)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            discard(self.buffer, (exc_type, exc, tb))

    def __del__(self) -> None:
        try:
            if self.closed:
                return
            below = self.buffer
        except ValueError:  # detached: the stream below is someone else's now
            return
        with contextlib.suppress(Exception):  # a finalizer must not raise
            discard(below, aborted())


class MixedUnicodeBytesWrapper(FileWrapper):
    """A byte stream that also accepts str on write (encoded), for code written before the str/bytes split."""

    def __init__(self, stream: Any, encoding: str | None = None) -> None:
        super().__init__(stream)
        self.encoding = encoding or "utf-8"

    def write(self, data: Any) -> int:
        self._check_open()
        if isinstance(data, str):
            data = data.encode(self.encoding)
        self._stream.write(data)
        return len(data)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)


_NEWLINES = re.compile(rb"\r\n|\r|\n")


class NewlineReader(LayeredStream):
    """Reads bytes with every line ending (\\r\\n, \\r, \\n) turned into `newline`."""

    def __init__(self, stream: Any, newline: bytes = b"\n") -> None:
        super().__init__(stream)
        self._newline = newline
        self._ready = bytearray()
        self._carry = b""  # a trailing \r might be the first half of \r\n
        self._eof = False

    def readable(self) -> bool:
        return True

    def _fill(self) -> bool:
        """Convert one more chunk from the stream below; False once it is exhausted."""
        if self._eof:
            return False
        chunk = self._stream.read(CHUNK)
        data = self._carry + chunk
        self._carry = b""
        if not chunk:
            self._eof = True
        elif data.endswith(b"\r"):
            data, self._carry = data[:-1], b"\r"
        self._ready += _NEWLINES.sub(self._newline, data)
        return not self._eof

    def _take(self, size: int) -> bytes:
        taken = bytes(self._ready[:size])
        del self._ready[:size]
        return taken

    def read(self, size: int | None = -1) -> bytes:
        self._check_open()
        if size is None or size < 0:
            while self._fill():
                pass
            return self._take(len(self._ready))
        while len(self._ready) < size and self._fill():
            pass
        return self._take(size)

    def read1(self, size: int = -1) -> bytes:
        return self.read(size)

    def readline(self, size: int | None = -1) -> bytes:
        self._check_open()
        while self._newline not in self._ready and self._fill():
            pass
        end = self._ready.find(self._newline)
        length = len(self._ready) if end < 0 else end + len(self._newline)
        if size is not None and size >= 0:
            length = min(length, size)
        return self._take(length)


class NewlineWriter(LayeredStream):
    """Writes bytes with every line ending turned into `newline`."""

    def __init__(self, stream: Any, newline: bytes) -> None:
        super().__init__(stream)
        self._newline = newline
        self._carry = b""

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self._check_open()
        chunk = bytes(data)
        text = self._carry + chunk
        self._carry = b""
        if text.endswith(b"\r"):
            text, self._carry = text[:-1], b"\r"
        self._stream.write(_NEWLINES.sub(self._newline, text))
        return len(chunk)

    def _finish(self) -> None:
        if self._carry:
            self._stream.write(self._newline)
            self._carry = b""


class DecompressingReader(LayeredStream):
    """Reads the decompressed content of `stream` through a `gzip.GzipFile` or `bz2.BZ2File`."""

    def __init__(self, stream: Any, decompressed: Any) -> None:
        super().__init__(stream)
        self._decompressed = decompressed

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        self._check_open()
        return bytes(self._decompressed.read(-1 if size is None else size))

    def read1(self, size: int = -1) -> bytes:
        self._check_open()
        return bytes(self._decompressed.read1(size))

    def readline(self, size: int | None = -1) -> bytes:
        self._check_open()
        return bytes(self._decompressed.readline(-1 if size is None else size))

    def peek(self, size: int = 0) -> bytes:
        self._check_open()
        return bytes(self._decompressed.peek(size))

    def _finish(self) -> None:
        self._decompressed.close()  # leaves the stream below open: our close() handles it

    def abort(self, exc_info: ExcInfo | None = None) -> None:
        if not self._done:
            self._decompressed.close()
        super().abort(exc_info)


class CompressingWriter(LayeredStream):
    """Compresses what is written with a zlib/bz2 compressor object, writing the result to `stream`."""

    def __init__(self, stream: Any, compressor: Any) -> None:
        super().__init__(stream)
        self._compressor = compressor

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self._check_open()
        view = memoryview(data)
        compressed = self._compressor.compress(view)
        if compressed:
            self._stream.write(compressed)
        return view.nbytes

    def _finish(self) -> None:
        self._stream.write(self._compressor.flush())
