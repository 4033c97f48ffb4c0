"""The console a captured run echoes to: made per run, or held over a runner's runs (fewer system calls)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from luigi.worker.output_capture import OutputCapture, captured_output


def open_fds() -> set[int]:
    return {int(name) for name in os.listdir("/proc/self/fd")}


@contextlib.contextmanager
def console_at(path: Path) -> Iterator[None]:
    """Descriptors 1 and 2 pointing at ``path`` for the block (pytest's own are put back after)."""
    saved = os.dup(1), os.dup(2)
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        os.dup2(target, 1)
        os.dup2(target, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, target):
            os.close(fd)


def captured_run(text: str) -> dict | None:
    """One run that writes ``text`` to descriptor 1; its log's last chunk."""
    with captured_output(lambda *chunk: None, 1 << 20) as log:
        os.write(1, text.encode())
    assert log is not None
    return log.tail


def test_a_held_console_is_copied_once_for_all_runs_and_closed_at_release(tmp_path: Path) -> None:
    capture = OutputCapture.current()
    with console_at(tmp_path / "console"):
        before = open_fds()
        capture.hold_console()
        tails = [captured_run("first run\n")]
        held = open_fds() - before
        tails += [captured_run("second run\n"), captured_run("third run\n")]
        assert len(held) == 2 and open_fds() - before == held  # the same two copies, run after run
        capture.release_console()
        assert open_fds() == before
    assert [tail["chunk"] for tail in tails if tail] == ["first run\n", "second run\n", "third run\n"]
    assert (tmp_path / "console").read_text() == "first run\nsecond run\nthird run\n"


def test_without_a_hold_each_run_echoes_to_what_1_and_2_are_when_it_starts(tmp_path: Path) -> None:
    OutputCapture.current()
    with console_at(tmp_path / "one"):
        before = open_fds()
        captured_run("to the first console\n")
        assert open_fds() == before  # nothing kept between runs
    with console_at(tmp_path / "two"):
        captured_run("to the second console\n")
    assert (tmp_path / "one").read_text() == "to the first console\n"
    assert (tmp_path / "two").read_text() == "to the second console\n"


def test_a_hold_released_during_a_run_is_closed_when_that_run_ends(tmp_path: Path) -> None:
    capture = OutputCapture.current()
    with console_at(tmp_path / "console"):
        before = open_fds()
        capture.hold_console()
        captured_run("held run\n")
        with captured_output(lambda *chunk: None, 1 << 20) as log:
            capture.release_console()  # the worker shut down while a run went on
            os.write(1, b"still echoed\n")
        assert open_fds() == before
        assert log is not None and log.tail is not None and log.tail["chunk"] == "still echoed\n"
    assert (tmp_path / "console").read_text() == "held run\nstill echoed\n"
