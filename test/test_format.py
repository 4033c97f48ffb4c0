"""Specification of luigi.format: the format singletons, `>>` chains and compression."""

from __future__ import annotations

import bz2
import gzip
import io
import os
import shutil
import subprocess

import pytest

import luigi.format
from luigi.format import (
    UTF8,
    Bzip2,
    Bzip2Format,
    ChainFormat,
    Format,
    Gzip,
    GzipFormat,
    MixedUnicodeBytes,
    NewlineFormat,
    Nop,
    SysNewLine,
    Text,
    TextFormat,
)
from luigi.local_target import LocalTarget, atomic_file
from luigi.mock import MockTarget


class Upper(Format):
    """A user-defined bytes -> bytes format, as people write them."""

    input = "bytes"
    output = "bytes"

    def pipe_reader(self, input_pipe):
        return io.BytesIO(input_pipe.read().lower())

    def pipe_writer(self, output_pipe):
        class Writer(io.RawIOBase):
            def writable(self):
                return True

            def write(self, data):
                return output_pipe.write(bytes(data).upper())

            def close(self):
                if not self.closed:
                    output_pipe.close()
                super().close()

        return Writer()


def test_formats_declare_what_they_take_and_give():
    assert (Text.input, Text.output) == ("unicode", "bytes")
    assert (UTF8.input, UTF8.output) == ("unicode", "bytes")
    for fmt in (Nop, SysNewLine, Gzip, Bzip2, MixedUnicodeBytes):
        assert (fmt.input, fmt.output) == ("bytes", "bytes"), fmt


def test_rshift_builds_a_chain():
    chain = Text >> Gzip
    assert isinstance(chain, ChainFormat)
    assert chain.args == (Text, Gzip)
    assert (chain.input, chain.output) == ("unicode", "bytes")
    longer = Text >> SysNewLine >> Gzip
    assert (longer.input, longer.output) == ("unicode", "bytes")


def test_chaining_incompatible_formats_is_a_type_error():
    with pytest.raises(TypeError, match="produces bytes but .* expects unicode"):
        Gzip >> Text
    with pytest.raises(TypeError):
        ChainFormat(Text, Text)


def test_chain_consistency_check_can_be_skipped():
    chain = ChainFormat(Gzip, Text, check_consistency=False)
    assert chain.args == (Gzip, Text)


def test_chain_with_nothing_is_rejected():
    with pytest.raises(ValueError, match="at least one"):
        ChainFormat()


def test_text_gzip_chain_round_trip_is_a_standard_gzip_file(tmp_path):
    target = LocalTarget(tmp_path / "lines.txt.gz", format=Text >> Gzip)
    with target.open("w") as f:
        f.write("ünïcode line\n" * 1000)
    assert gzip.decompress((tmp_path / "lines.txt.gz").read_bytes()) == ("ünïcode line\n" * 1000).encode()
    with target.open("r") as f:
        lines = list(f)
    assert lines == ["ünïcode line\n"] * 1000


def test_chains_apply_user_defined_formats_in_order(tmp_path):
    target = LocalTarget(tmp_path / "shout.gz", format=Text >> Upper() >> Gzip)
    with target.open("w") as f:
        f.write("quiet words")
    assert gzip.decompress((tmp_path / "shout.gz").read_bytes()) == b"QUIET WORDS"
    with target.open("r") as f:
        assert f.read() == "quiet words"


def test_gzip_file_is_readable_by_python_gzip_module(tmp_path):
    payload = os.urandom(200_000) + b"tail"
    target = LocalTarget(tmp_path / "blob.gz", format=Gzip)
    with target.open("w") as f:
        f.write(payload)
    with gzip.open(tmp_path / "blob.gz", "rb") as fh:
        assert fh.read() == payload


def test_gzip_reads_files_written_by_python_gzip_including_multiple_members(tmp_path):
    path = tmp_path / "multi.gz"
    path.write_bytes(gzip.compress(b"first\n") + gzip.compress(b"second\n"))
    with LocalTarget(path, format=Text >> Gzip).open("r") as f:
        assert f.readlines() == ["first\n", "second\n"]


@pytest.mark.skipif(shutil.which("gunzip") is None, reason="needs the gunzip command")
def test_gzip_file_is_readable_by_gunzip(tmp_path):
    target = LocalTarget(tmp_path / "x.gz", format=Text >> Gzip)
    with target.open("w") as f:
        f.write("for the command line\n")
    result = subprocess.run(["gunzip", "-c", str(tmp_path / "x.gz")], capture_output=True, check=True)
    assert result.stdout == b"for the command line\n"


def test_gzip_compression_level_trades_size_for_speed(tmp_path):
    payload = b"".join(b"%d,%d\n" % (i, i * i % 977) for i in range(50_000))
    sizes = {}
    for level in (1, 9):
        target = LocalTarget(tmp_path / f"l{level}.gz", format=GzipFormat(compression_level=level))
        with target.open("w") as f:
            f.write(payload)
        sizes[level] = (tmp_path / f"l{level}.gz").stat().st_size
        assert gzip.decompress((tmp_path / f"l{level}.gz").read_bytes()) == payload
    assert sizes[9] < sizes[1]


@pytest.mark.parametrize("level", [0, 10, "5", 2.5, True])
def test_compression_level_must_be_1_to_9(level):
    with pytest.raises(ValueError, match=f"compression_level must be an integer from 1 to 9, got {level!r}"):
        GzipFormat(compression_level=level)
    with pytest.raises(ValueError, match="1 to 9"):
        Bzip2Format(compression_level=level)


def test_bzip2_round_trip_is_a_standard_bzip2_file(tmp_path):
    target = LocalTarget(tmp_path / "data.bz2", format=Text >> Bzip2)
    with target.open("w") as f:
        f.write("bz line\n" * 500)
    assert bz2.decompress((tmp_path / "data.bz2").read_bytes()) == b"bz line\n" * 500
    with target.open("r") as f:
        assert f.read() == "bz line\n" * 500


def test_bzip2_reads_files_written_by_python_bz2(tmp_path):
    (tmp_path / "in.bz2").write_bytes(bz2.compress(b"abc") + bz2.compress(b"def"))
    with LocalTarget(tmp_path / "in.bz2", format=Bzip2).open("r") as f:
        assert f.read() == b"abcdef"


@pytest.mark.skipif(shutil.which("bzcat") is None, reason="needs the bzcat command")
def test_bzip2_file_is_readable_by_bzcat(tmp_path):
    with LocalTarget(tmp_path / "x.bz2", format=Bzip2).open("w") as f:
        f.write(b"bzcat me")
    result = subprocess.run(["bzcat", str(tmp_path / "x.bz2")], capture_output=True, check=True)
    assert result.stdout == b"bzcat me"


@pytest.mark.parametrize("fmt", [Text >> Gzip, Text >> Bzip2, Gzip, Text >> SysNewLine, UTF8])
def test_failure_inside_a_chain_leaves_no_output(tmp_path, fmt):
    target = LocalTarget(tmp_path / "out", format=fmt)
    data = "partial " if fmt.input == "unicode" else b"partial "
    with pytest.raises(ZeroDivisionError):
        with target.open("w") as f:
            f.write(data * 10000)
            raise ZeroDivisionError("midway")
    assert os.listdir(tmp_path) == []


def test_utf8_format_encodes_as_utf8(tmp_path):
    target = LocalTarget(tmp_path / "u.txt", format=UTF8)
    with target.open("w") as f:
        f.write("€")
    assert (tmp_path / "u.txt").read_bytes() == b"\xe2\x82\xac"


def test_text_format_takes_text_wrapper_options(tmp_path):
    target = LocalTarget(tmp_path / "l.txt", format=TextFormat(encoding="latin-1"))
    with target.open("w") as f:
        f.write("café")
    assert (tmp_path / "l.txt").read_bytes() == b"caf\xe9"
    with target.open("r") as f:
        assert f.read() == "café"


def test_nop_passes_bytes_through(tmp_path):
    target = MockTarget("nop", format=Nop)
    with target.open("w") as f:
        f.write(b"\r\n\x00")
    with target.open("r") as f:
        assert f.read() == b"\r\n\x00"


def test_sys_newline_normalises_line_endings_on_read():
    target = MockTarget("crlf", format=Nop)
    with target.open("w") as f:
        f.write(b"dos\r\nmac\runix\nend\r")
    with MockTarget("crlf", format=SysNewLine).open("r") as f:
        assert f.read() == b"dos\nmac\nunix\nend\n"
    with MockTarget("crlf", format=SysNewLine).open("r") as f:
        assert list(f) == [b"dos\n", b"mac\n", b"unix\n", b"end\n"]


def test_sys_newline_handles_crlf_split_across_reads_and_writes():
    with MockTarget("split", format=NewlineFormat(newline="\r\n")).open("w") as f:
        f.write(b"a\r")
        f.write(b"\nb\n")
    assert MockTarget.fs.get_data("split") == b"a\r\nb\r\n"
    reader = SysNewLine.pipe_reader(io.BytesIO(b"x\r\ny\r\n"))
    assert [reader.read(1) for _ in range(5)] == [b"x", b"\n", b"y", b"\n", b""]


def test_sys_newline_writes_the_system_line_separator():
    with MockTarget("sys", format=SysNewLine).open("w") as f:
        f.write(b"one\ntwo\r\n")
    assert MockTarget.fs.get_data("sys") == f"one{os.linesep}two{os.linesep}".encode()


def test_newline_format_validates_its_argument():
    with pytest.raises(ValueError, match="newline must be"):
        NewlineFormat(newline="\t")


def test_mixed_unicode_bytes_accepts_both_on_write():
    target = MockTarget("mixed", format=MixedUnicodeBytes)
    with target.open("w") as f:
        f.write("text ")
        f.write(b"bytes")
        f.writelines(["!", b"?"])
    with target.open("r") as f:
        assert f.read() == b"text bytes!?"


def test_module_exposes_the_public_names():
    for name in (
        "Format",
        "ChainFormat",
        "Text",
        "UTF8",
        "Nop",
        "SysNewLine",
        "Gzip",
        "GzipFormat",
        "Bzip2",
        "Bzip2Format",
        "MixedUnicodeBytes",
        "get_default_format",
        "InputPipeProcessWrapper",
        "OutputPipeProcessWrapper",
    ):
        assert hasattr(luigi.format, name), name


def test_file_wrapper_passes_through_and_discards_on_failure(tmp_path):
    wrapped = luigi.format.FileWrapper(atomic_file(str(tmp_path / "w")))
    with pytest.raises(RuntimeError):
        with wrapped as f:
            f.write(b"lost")
            raise RuntimeError()
    assert os.listdir(tmp_path) == []
    with luigi.format.FileWrapper(atomic_file(str(tmp_path / "w"))) as f:
        f.write(b"kept")
        assert "-luigi-tmp-" in f.tmp_path  # other attributes come from the wrapped file
    with luigi.format.FileWrapper(open(tmp_path / "w", "rb")) as f:
        assert f.readline() == b"kept"
    assert f.closed
