"""Stream formats: layers between what a task reads or writes and the bytes a target stores.

A `Format` wraps a byte stream for reading (`pipe_reader`) or writing (`pipe_writer`); `a >> b` stacks
them, so `Text >> Gzip` writes str, encodes it, then compresses it. Every layer passes a failure down:
leaving a `with` block through an exception discards the output (an atomic file is not committed).
"""

from __future__ import annotations

import bz2
import gzip
import os
import zlib
from typing import Any

from luigi.format.pipes import InputPipeProcessWrapper, OutputPipeProcessWrapper
from luigi.format.streams import (
    CompressingWriter,
    DecompressingReader,
    FileWrapper,
    MixedUnicodeBytesWrapper,
    NewlineReader,
    NewlineWriter,
    TextWrapper,
)

__all__ = [
    "Bzip2",
    "Bzip2Format",
    "ChainFormat",
    "FileWrapper",
    "Format",
    "Gzip",
    "GzipFormat",
    "InputPipeProcessWrapper",
    "MixedUnicodeBytes",
    "MixedUnicodeBytesFormat",
    "MixedUnicodeBytesWrapper",
    "NewlineFormat",
    "Nop",
    "NopFormat",
    "OutputPipeProcessWrapper",
    "SysNewLine",
    "Text",
    "TextFormat",
    "TextWrapper",
    "UTF8",
    "get_default_format",
]

UNICODE = "unicode"
BYTES = "bytes"


class Format:
    """A stream layer: `input` is what its user side handles, `output` what it stores ('unicode'/'bytes')."""

    input: str | None = None
    output: str | None = None

    def pipe_reader(self, input_pipe: Any) -> Any:
        """Wrap a readable stream of `output`s into one yielding `input`s."""
        raise NotImplementedError(f"{type(self).__name__} cannot read")

    def pipe_writer(self, output_pipe: Any) -> Any:
        """Wrap a writable stream of `output`s into one accepting `input`s."""
        raise NotImplementedError(f"{type(self).__name__} cannot write")

    def __rshift__(self, other: Format) -> ChainFormat:
        return ChainFormat(self, other)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class ChainFormat(Format):
    """Formats stacked user side first: `ChainFormat(Text, Gzip)` (`Text >> Gzip`) encodes then compresses."""

    def __init__(self, *args: Format, check_consistency: bool = True) -> None:
        if not args:
            raise ValueError("ChainFormat needs at least one format")
        self.args = args
        if check_consistency:
            for upper, lower in zip(args, args[1:], strict=False):
                if upper.output and lower.input and upper.output != lower.input:
                    raise TypeError(
                        f"Cannot chain {upper!r} >> {lower!r}: {upper!r} produces {upper.output} but "
                        f"{lower!r} expects {lower.input}"
                    )
        self.input = args[0].input
        self.output = args[-1].output

    def pipe_reader(self, input_pipe: Any) -> Any:
        for fmt in reversed(self.args):
            input_pipe = fmt.pipe_reader(input_pipe)
        return input_pipe

    def pipe_writer(self, output_pipe: Any) -> Any:
        for fmt in reversed(self.args):
            output_pipe = fmt.pipe_writer(output_pipe)
        return output_pipe

    def __repr__(self) -> str:
        return " >> ".join(repr(fmt) for fmt in self.args)


class TextFormat(Format):
    """str on the user side, encoded bytes below; takes the arguments of `io.TextIOWrapper` (encoding...)."""

    input = UNICODE
    output = BYTES

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args = args
        self.kwargs = kwargs

    def pipe_reader(self, input_pipe: Any) -> TextWrapper:
        return TextWrapper(input_pipe, *self.args, **self.kwargs)

    def pipe_writer(self, output_pipe: Any) -> TextWrapper:
        return TextWrapper(output_pipe, *self.args, **self.kwargs)

    def __repr__(self) -> str:
        options = [repr(arg) for arg in self.args]
        options += [f"{key}={value!r}" for key, value in self.kwargs.items()]
        return f"TextFormat({', '.join(options)})"


class NopFormat(Format):
    """Bytes in, the same bytes out."""

    input = BYTES
    output = BYTES

    def pipe_reader(self, input_pipe: Any) -> Any:
        return input_pipe

    def pipe_writer(self, output_pipe: Any) -> Any:
        return output_pipe


class NewlineFormat(Format):
    """Bytes with normalised line endings: reads give b'\\n', writes use `newline` (default `os.linesep`).

    `newline=''` turns translation off.
    """

    input = BYTES
    output = BYTES

    def __init__(self, newline: str | None = None) -> None:
        if newline not in (None, "", "\n", "\r", "\r\n"):
            raise ValueError(f"newline must be None, '', '\\n', '\\r' or '\\r\\n', got {newline!r}")
        self.newline = newline

    def pipe_reader(self, input_pipe: Any) -> Any:
        return input_pipe if self.newline == "" else NewlineReader(input_pipe)

    def pipe_writer(self, output_pipe: Any) -> Any:
        if self.newline == "":
            return output_pipe
        return NewlineWriter(output_pipe, (self.newline or os.linesep).encode("ascii"))


class MixedUnicodeBytesFormat(Format):
    """Bytes stream whose writer also accepts str, encoded with `encoding` (UTF-8 by default)."""

    input = BYTES
    output = BYTES

    def __init__(self, encoding: str | None = None) -> None:
        self.encoding = encoding

    def pipe_reader(self, input_pipe: Any) -> MixedUnicodeBytesWrapper:
        return MixedUnicodeBytesWrapper(input_pipe, self.encoding)

    def pipe_writer(self, output_pipe: Any) -> MixedUnicodeBytesWrapper:
        return MixedUnicodeBytesWrapper(output_pipe, self.encoding)


def _check_level(format_name: str, level: int | None, default: int) -> int:
    if level is None:
        return default
    if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= 9:
        raise ValueError(f"{format_name} compression_level must be an integer from 1 to 9, got {level!r}")
    return level


class GzipFormat(Format):
    """Standard gzip files (as `gzip`/`gunzip` handle); `compression_level` 1-9, default 6 like gzip."""

    input = BYTES
    output = BYTES

    def __init__(self, compression_level: int | None = None) -> None:
        self.compression_level = _check_level("GzipFormat", compression_level, 6)

    def pipe_reader(self, input_pipe: Any) -> DecompressingReader:
        return DecompressingReader(input_pipe, gzip.GzipFile(fileobj=input_pipe, mode="rb"))

    def pipe_writer(self, output_pipe: Any) -> CompressingWriter:
        # wbits 31 makes zlib write the gzip header and CRC trailer (no file name, mtime 0: reproducible).
        compressor = zlib.compressobj(self.compression_level, zlib.DEFLATED, 31)
        return CompressingWriter(output_pipe, compressor)

    def __repr__(self) -> str:
        return f"GzipFormat(compression_level={self.compression_level})"


class Bzip2Format(Format):
    """Standard bzip2 files (as `bzip2`/`bzcat` read and write); `compression_level` 1-9, default 9."""

    input = BYTES
    output = BYTES

    def __init__(self, compression_level: int | None = None) -> None:
        self.compression_level = _check_level("Bzip2Format", compression_level, 9)

    def pipe_reader(self, input_pipe: Any) -> DecompressingReader:
        return DecompressingReader(input_pipe, bz2.BZ2File(input_pipe, mode="rb"))

    def pipe_writer(self, output_pipe: Any) -> CompressingWriter:
        return CompressingWriter(output_pipe, bz2.BZ2Compressor(self.compression_level))


Text = TextFormat()
UTF8 = TextFormat(encoding="utf8")
Nop = NopFormat()
SysNewLine = NewlineFormat()
Gzip = GzipFormat()
Bzip2 = Bzip2Format()
MixedUnicodeBytes = MixedUnicodeBytesFormat()


def get_default_format() -> Format:
    """The format targets use when none is given: `Text`."""
    return Text
