"""Luigi compatibility, j.19: InputPipeProcessWrapper stops a command as a shell pipeline would.

Closing after a partial read closes the command's output and waits: the command gets SIGPIPE (at its
default action, so a shell ``trap`` on it runs) and is never killed. Statuses 0, 141 and -13 pass.
"""

from __future__ import annotations

import io
import shutil

import pytest

from luigi.format import InputPipeProcessWrapper

pytestmark = pytest.mark.skipif(not shutil.which("sh"), reason="needs a POSIX shell")

# Writes lines until its output is closed; the SIGPIPE trap records that it ran, then exits with $2.
# The loop is bounded so that, were SIGPIPE ignored (no trap possible), the test fails instead of hanging.
TRAPPING_WRITER = (
    'trap \'echo trapped > "$1"; exit "$2"\' PIPE; '
    "i=0; while [ $i -lt 200000 ]; do echo line $i; i=$((i+1)); done; exit 9"
)


def failure_text(status: int) -> str:
    return f"Error reading from pipe. Subcommand exited with non-zero exit status {status}."


def test_closing_after_a_partial_read_gives_the_child_sigpipe_and_its_trap_runs(tmp_path):
    marker = tmp_path / "marker"
    pipe = InputPipeProcessWrapper(["sh", "-c", TRAPPING_WRITER, "sh", str(marker), "0"])
    assert pipe.readline() == b"line 0\n"
    pipe.close()
    assert marker.read_text() == "trapped\n"  # close() waited for the trap to finish: no kill
    assert pipe.closed


@pytest.mark.parametrize("status", [0, 141])
def test_a_trap_exiting_zero_or_141_is_not_a_failure(tmp_path, status):
    marker = tmp_path / "marker"
    with InputPipeProcessWrapper(["sh", "-c", TRAPPING_WRITER, "sh", str(marker), str(status)]) as pipe:
        pipe.read(10)
    assert marker.exists()


def test_a_trap_exiting_with_another_status_is_a_failure(tmp_path):
    marker = tmp_path / "marker"
    pipe = InputPipeProcessWrapper(["sh", "-c", TRAPPING_WRITER, "sh", str(marker), "3"])
    pipe.readline()
    with pytest.raises(RuntimeError) as caught:
        pipe.close()
    assert str(caught.value) == failure_text(3)
    assert marker.exists()


def test_death_by_sigpipe_is_not_a_failure():
    # `yes` has no trap: SIGPIPE's default action kills it, status -13.
    with InputPipeProcessWrapper(["yes"]) as pipe:
        assert pipe.readline() == b"y\n"
    assert pipe.closed


def test_death_by_another_signal_is_a_failure():
    with pytest.raises(RuntimeError) as caught:
        with InputPipeProcessWrapper(["sh", "-c", "echo start; kill -TERM $$"]) as pipe:
            assert pipe.read() == b"start\n"
    assert str(caught.value) == failure_text(-15)


def test_a_failing_command_read_to_the_end_raises_on_close():
    pipe = InputPipeProcessWrapper(["sh", "-c", "echo partial; exit 2"])
    assert pipe.read() == b"partial\n"
    with pytest.raises(RuntimeError) as caught:
        pipe.close()
    assert str(caught.value) == failure_text(2)


def test_iterating_to_the_end_closes_and_checks_the_status():
    pipe = InputPipeProcessWrapper(["sh", "-c", "printf 'a\\nb\\n'; exit 4"])
    lines = []
    with pytest.raises(RuntimeError) as caught:
        for line in pipe:
            lines.append(line)
    assert lines == [b"a\n", b"b\n"]
    assert str(caught.value) == failure_text(4)
    assert pipe.closed


def test_iterating_a_successful_command_closes_it():
    pipe = InputPipeProcessWrapper(["sh", "-c", "printf 'a\\nb\\n'"])
    assert list(pipe) == [b"a\n", b"b\n"]
    assert pipe.closed


def test_close_closes_the_input_pipe_and_lets_the_command_finish(tmp_path):
    # The command reads all of its input before it finishes; close() must wait for that, not kill it.
    done = tmp_path / "done"
    script = f'read first; echo "$first"; cat > /dev/null; echo finished > "{done}"'
    source = io.BytesIO(b"hello\n" + b"x" * 1_000_000)
    pipe = InputPipeProcessWrapper(["sh", "-c", script], source)
    assert pipe.readline() == b"hello\n"
    pipe.close()
    assert source.closed
    assert done.read_text() == "finished\n"


def test_an_exception_in_the_with_block_does_not_hide_behind_the_status():
    with pytest.raises(LookupError):
        with InputPipeProcessWrapper(["sh", "-c", "echo x; exit 7"]):
            raise LookupError("the reader broke")
