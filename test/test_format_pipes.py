"""Specification of the pipe wrappers: reading from and writing through external commands."""

from __future__ import annotations

import gzip
import io
import os
import pathlib
import shutil
import sys

import pytest

from luigi.format import InputPipeProcessWrapper, Nop, OutputPipeProcessWrapper, Text, TextWrapper
from luigi.local_target import atomic_file
from luigi.mock import MockTarget

pytestmark = pytest.mark.skipif(
    not all(shutil.which(cmd) for cmd in ("cat", "gzip", "head")), reason="needs cat, gzip and head"
)

PY = sys.executable


def test_input_pipe_reads_a_command_output():
    with InputPipeProcessWrapper(["printf", "a\\nb\\n"]) as pipe:
        assert list(pipe) == [b"a\n", b"b\n"]


def test_input_pipe_feeds_a_file_to_the_command(tmp_path):
    (tmp_path / "in.gz").write_bytes(gzip.compress(b"unzipped by gzip -dc"))
    with open(tmp_path / "in.gz", "rb") as source:
        with InputPipeProcessWrapper(["gzip", "-dc"], source) as pipe:
            assert pipe.read() == b"unzipped by gzip -dc"
    assert source.closed


def test_input_pipe_feeds_an_in_memory_stream_to_the_command():
    payload = b"x" * 1_000_000
    with InputPipeProcessWrapper(["cat"], io.BytesIO(payload)) as pipe:
        assert pipe.read() == payload


def test_input_pipe_can_be_wrapped_as_text():
    with Text.pipe_reader(InputPipeProcessWrapper(["cat"], io.BytesIO("lïgne\n".encode()))) as f:
        assert isinstance(f, TextWrapper)
        assert f.readline() == "lïgne\n"


def test_input_pipe_reports_a_failing_command():
    script = "import sys; sys.stdout.write('some'); sys.stderr.write('broken input'); sys.exit(3)"
    pipe = InputPipeProcessWrapper([PY, "-c", script])
    assert pipe.read() == b"some"
    with pytest.raises(RuntimeError) as caught:
        pipe.close()
    assert str(caught.value) == "Error reading from pipe. Subcommand exited with non-zero exit status 3."
    if sys.version_info >= (3, 11):  # the child's stderr rides along as a note, outside Luigi's text
        assert "broken input" in caught.value.__notes__[0]


def test_input_pipe_closed_early_stops_the_command_quietly():
    # 'yes' writes forever; stopping after one line must neither hang nor count as a failure (SIGPIPE).
    pipe = InputPipeProcessWrapper(["yes"])
    assert pipe.readline() == b"y\n"
    pipe.close()
    assert pipe.closed


def test_input_pipe_exception_in_with_block_kills_the_command():
    with pytest.raises(LookupError):
        with InputPipeProcessWrapper([PY, "-c", "import time; time.sleep(600)"]) as pipe:
            raise LookupError("stop")
    assert pipe.closed


def test_missing_command_is_a_clear_error():
    with pytest.raises(OSError, match="Cannot run .*no-such-command-xyz"):
        InputPipeProcessWrapper(["no-such-command-xyz"])
    with pytest.raises(OSError, match="Cannot run"):
        OutputPipeProcessWrapper(["no-such-command-xyz"], io.BytesIO())


def test_output_pipe_writes_through_gzip_into_an_atomic_file(tmp_path):
    path = str(tmp_path / "out.gz")
    with OutputPipeProcessWrapper(["gzip", "-c"], atomic_file(path)) as pipe:
        pipe.write(b"through the gzip command\n" * 100)
        assert not os.path.exists(path)
    assert gzip.decompress(pathlib.Path(path).read_bytes()) == b"through the gzip command\n" * 100
    assert os.listdir(tmp_path) == ["out.gz"]


def test_output_pipe_copies_into_a_stream_without_a_file_descriptor():
    target = MockTarget("piped", format=Nop)
    with OutputPipeProcessWrapper(["cat"], target.open("w")) as pipe:
        pipe.write(b"via a thread")
    assert MockTarget.fs.get_data("piped") == b"via a thread"


def test_output_pipe_exception_in_with_block_commits_nothing(tmp_path):
    path = str(tmp_path / "out.gz")
    with pytest.raises(ArithmeticError):
        with OutputPipeProcessWrapper(["gzip", "-c"], atomic_file(path)) as pipe:
            pipe.write(b"half")
            raise ArithmeticError()
    assert os.listdir(tmp_path) == []


def test_output_pipe_abort_commits_nothing(tmp_path):
    pipe = OutputPipeProcessWrapper(["cat"], atomic_file(str(tmp_path / "f")))
    pipe.write(b"data")
    pipe.abort()
    assert pipe.closed
    assert os.listdir(tmp_path) == []


def test_output_pipe_failing_command_raises_and_commits_nothing(tmp_path):
    script = "import sys; sys.stdin.read(); sys.stderr.write('no space'); sys.exit(1)"
    pipe = OutputPipeProcessWrapper([PY, "-c", script], atomic_file(str(tmp_path / "f")))
    pipe.write(b"data")
    with pytest.raises(RuntimeError, match="exit status 1; stderr: no space"):
        pipe.close()
    assert os.listdir(tmp_path) == []


def test_output_pipe_command_failing_before_reading_everything_fails_the_write(tmp_path):
    script = "import sys; sys.stdin.buffer.read(1); sys.exit(4)"
    pipe = OutputPipeProcessWrapper([PY, "-c", script], atomic_file(str(tmp_path / "f")))
    with pytest.raises(RuntimeError, match="exit status 4"):
        for _ in range(1000):  # far more than a pipe buffer, so the write must notice the closed pipe
            pipe.write(b"z" * 65536)
            pipe.flush()
    assert pipe.closed
    assert os.listdir(tmp_path) == []


def test_output_pipe_command_that_succeeds_without_reading_everything_is_fine(tmp_path):
    # Like `producer | head -c 1 > f` in a shell: the pipeline's status is head's.
    pipe = OutputPipeProcessWrapper(["head", "-c", "1"], atomic_file(str(tmp_path / "f")))
    for _ in range(100):
        pipe.write(b"z" * 65536)
        pipe.flush()
    pipe.close()
    assert (tmp_path / "f").read_bytes() == b"z"


def test_output_pipe_as_text_writer(tmp_path):
    path = str(tmp_path / "t.gz")
    with Text.pipe_writer(OutputPipeProcessWrapper(["gzip"], atomic_file(path))) as f:
        f.write("text through a command\n")
    assert gzip.decompress(pathlib.Path(path).read_bytes()) == b"text through a command\n"


def test_text_writer_over_a_pipe_discards_on_exception(tmp_path):
    with pytest.raises(NameError):
        with Text.pipe_writer(OutputPipeProcessWrapper(["gzip"], atomic_file(str(tmp_path / "t")))) as f:
            f.write("never")
            raise NameError()
    assert os.listdir(tmp_path) == []


class AtomicUpload(OutputPipeProcessWrapper):
    """The pattern remote file systems use: write through a command to a temp path, publish on close."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path, self.tmp = path, path.with_name(path.name + ".part")
        self.tmp_handle = open(self.tmp, "wb")
        super().__init__(["cat"], self.tmp_handle)

    def close(self) -> None:
        super().close()
        self.tmp.rename(self.path)

    def abort(self) -> None:
        super().abort()
        self.tmp.unlink()


def test_subclass_close_and_abort_hooks_run(tmp_path):
    with AtomicUpload(tmp_path / "ok") as pipe:
        pipe.write(b"published")
    assert (tmp_path / "ok").read_bytes() == b"published"
    with pytest.raises(OverflowError):
        with AtomicUpload(tmp_path / "bad") as pipe:
            pipe.write(b"never")
            raise OverflowError()
    assert sorted(os.listdir(tmp_path)) == ["ok"]
