"""luigi.contrib.ssh end to end: pipelines whose targets live on a real sshd started for the test session."""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.luigid import free_port
from helpers.sshd_server import SshServer, running_sshd

import luigi
import luigi.format
from luigi.contrib.ssh import RemoteCalledProcessError, RemoteContext, RemoteFileSystem, RemoteTarget
from luigi.event import Event
from luigi.target import FileAlreadyExists, MissingParentDirectory, NotADirectory


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    with running_sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server


@pytest.fixture
def remote_dir(sshd: SshServer, request: pytest.FixtureRequest) -> Path:
    """A fresh directory on the "remote" host for one test (the host is this machine)."""
    path = sshd.root / request.node.name
    path.mkdir()
    return path


def login(sshd: SshServer, **overrides: Any) -> dict[str, Any]:
    options: dict[str, Any] = {
        "username": sshd.username,
        "key_file": sshd.key_file,
        "port": sshd.port,
        "no_host_key_check": True,
        "connect_timeout": 10,
    }
    options.update(overrides)
    return options


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.rglob("*") if "-luigi-tmp-" in p.name)


def local_temporaries() -> set[str]:
    return {name for name in os.listdir(tempfile.gettempdir()) if name.startswith("luigi-ssh-luigi-tmp-")}


class Produce(luigi.Task):
    path = luigi.Parameter()
    port = luigi.IntParameter()
    key_file = luigi.Parameter()
    username = luigi.Parameter()

    def output(self) -> RemoteTarget:
        return RemoteTarget(
            self.path,
            "127.0.0.1",
            username=self.username,
            key_file=self.key_file,
            port=self.port,
            no_host_key_check=True,
        )

    def run(self) -> None:
        with self.output().open("w") as out:
            for number in range(1, 4):
                out.write(f"line {number}\n")


class Shout(luigi.Task):
    source = luigi.Parameter()
    path = luigi.Parameter()
    port = luigi.IntParameter()
    key_file = luigi.Parameter()
    username = luigi.Parameter()

    def requires(self) -> Produce:
        return Produce(self.source, self.port, self.key_file, self.username)

    def output(self) -> RemoteTarget:
        return RemoteTarget(
            self.path,
            "127.0.0.1",
            username=self.username,
            key_file=self.key_file,
            port=str(self.port),  # Luigi 3.8 only took a string: both work
            no_host_key_check=True,
        )

    def run(self) -> None:
        with self.input().open("r") as source, self.output().open("w") as out:
            for line in source:
                out.write(line.upper())


class HalfWrite(luigi.Task):
    path = luigi.Parameter()
    port = luigi.IntParameter()
    key_file = luigi.Parameter()
    username = luigi.Parameter()

    def output(self) -> RemoteTarget:
        return RemoteTarget(
            self.path,
            "127.0.0.1",
            username=self.username,
            key_file=self.key_file,
            port=self.port,
            no_host_key_check=True,
        )

    def run(self) -> None:
        with self.output().open("w") as out:
            out.write("the first half\n" * 1000)
            out.flush()
            raise RuntimeError("crashed half way")


def task_args(sshd: SshServer) -> dict[str, Any]:
    return {"port": sshd.port, "key_file": sshd.key_file, "username": sshd.username}


def test_a_pipeline_writes_and_reads_files_on_the_host(sshd: SshServer, remote_dir: Path) -> None:
    source, shouted = remote_dir / "in" / "words.txt", remote_dir / "out dir" / "SHOUTED 1.txt"

    result = luigi.build(
        [Shout(str(source), str(shouted), **task_args(sshd))], local_scheduler=True, detailed_summary=True
    )

    assert result.status == luigi.LuigiStatusCode.SUCCESS, result.summary_text
    assert source.read_text() == "line 1\nline 2\nline 3\n"
    assert shouted.read_text() == "LINE 1\nLINE 2\nLINE 3\n"
    assert leftovers(remote_dir) == []


def test_a_task_is_complete_when_its_remote_output_exists(sshd: SshServer, remote_dir: Path) -> None:
    done = remote_dir / "done.txt"
    done.write_text("made elsewhere\n")

    assert Produce(str(done), **task_args(sshd)).complete()
    assert luigi.build([Produce(str(done), **task_args(sshd))], local_scheduler=True)
    assert done.read_text() == "made elsewhere\n"  # not run again


def test_a_task_failing_mid_write_leaves_nothing_on_the_host(
    sshd: SshServer, remote_dir: Path, events: Any
) -> None:
    seen, listen = events
    listen(Event.FAILURE)
    before = local_temporaries()
    target = remote_dir / "half.txt"

    assert not luigi.build([HalfWrite(str(target), **task_args(sshd))], local_scheduler=True)

    assert [str(args[1]) for _, args in seen] == ["crashed half way"]
    assert not target.exists()
    assert leftovers(remote_dir) == []
    assert local_temporaries() <= before


def test_binary_and_compressed_formats_round_trip(sshd: SshServer, remote_dir: Path) -> None:
    payload = bytes(range(256)) * 64
    for fmt in (luigi.format.Nop, luigi.format.Gzip):
        target = RemoteTarget(str(remote_dir / f"blob-{fmt!r}"), "127.0.0.1", format=fmt, **login(sshd))
        with target.open("w") as out:
            out.write(payload)
        with target.open("r") as back:
            assert back.read() == payload
    assert (remote_dir / "blob-NopFormat()").read_bytes() == payload


def test_file_system_operations(sshd: SshServer, remote_dir: Path) -> None:
    fs = RemoteFileSystem("127.0.0.1", **login(sshd))
    base = str(remote_dir)

    fs.mkdir(f"{base}/a/b c/d")
    assert fs.isdir(f"{base}/a/b c") and fs.exists(f"{base}/a/b c/d")
    fs.mkdir(f"{base}/a")  # already there: fine unless raise_if_exists
    with pytest.raises(FileAlreadyExists, match="already exists"):
        fs.mkdir(f"{base}/a", raise_if_exists=True)
    with pytest.raises(MissingParentDirectory, match="parents=True"):
        fs.mkdir(f"{base}/missing/child", parents=False)
    (remote_dir / "a" / "f *.txt").write_text("glob characters are literal")
    with pytest.raises(NotADirectory):
        fs.mkdir(f"{base}/a/f *.txt")

    assert fs.exists(f"{base}/a/f *.txt") and not fs.isdir(f"{base}/a/f *.txt")
    assert not fs.exists(f"{base}/a/f")
    assert sorted(fs.listdir(f"{base}/a/")) == [f"{base}/a/f *.txt"]

    fs.copy(f"{base}/a/f *.txt", f"{base}/copies/g.txt")
    fs.move(f"{base}/copies/g.txt", f"{base}/moved/h.txt")
    assert (remote_dir / "moved" / "h.txt").read_text() == "glob characters are literal"
    assert not (remote_dir / "copies" / "g.txt").exists()
    with pytest.raises(FileAlreadyExists):
        fs.rename_dont_move(f"{base}/moved/h.txt", f"{base}/a/f *.txt")
    assert (remote_dir / "moved" / "h.txt").exists()

    fs.remove(f"{base}/a")
    assert not (remote_dir / "a").exists()
    assert not fs.exists(f"{base}/a")


def test_put_and_get_copy_whole_files(sshd: SshServer, remote_dir: Path, tmp_path: Path) -> None:
    local = tmp_path / "local.bin"
    local.write_bytes(os.urandom(300_000))
    target = RemoteTarget(str(remote_dir / "deep" / "copy.bin"), "127.0.0.1", **login(sshd))

    target.put(str(local))
    target.get(str(tmp_path / "back" / "copy.bin"))

    assert (remote_dir / "deep" / "copy.bin").read_bytes() == local.read_bytes()
    assert (tmp_path / "back" / "copy.bin").read_bytes() == local.read_bytes()
    assert leftovers(remote_dir) == [] and leftovers(tmp_path) == []


def test_commands_run_on_the_host(sshd: SshServer, remote_dir: Path) -> None:
    context = RemoteContext("127.0.0.1", **login(sshd))

    assert context.check_output(["echo", "hello"]) == b"hello\n"
    process = context.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert process.communicate(b"piped through")[0] == b"piped through"
    with pytest.raises(RemoteCalledProcessError) as failed:
        context.check_output(["ls", str(remote_dir / "nothing-here")])
    assert failed.value.returncode == 2
    assert f"127.0.0.1:{sshd.port}" in str(failed.value) and "No such file" in str(failed.value)


def test_a_tunnel_forwards_a_local_port_to_one_the_host_sees(sshd: SshServer) -> None:
    with _echo_server() as echo_port:
        local_port = free_port()
        context = RemoteContext("127.0.0.1", **login(sshd))
        with context.tunnel(local_port, echo_port, remote_host="127.0.0.1"):
            with socket.create_connection(("127.0.0.1", local_port), timeout=10) as conn:
                conn.sendall(b"through the tunnel")
                assert conn.recv(100) == b"through the tunnel"


def test_reading_a_missing_file_fails_naming_it(sshd: SshServer, remote_dir: Path) -> None:
    target = RemoteTarget(str(remote_dir / "absent.txt"), "127.0.0.1", **login(sshd))

    with pytest.raises(RuntimeError, match="absent.txt: No such file"):
        with target.open("r") as source:
            source.read()


class Stamp(luigi.Task):
    port = luigi.IntParameter()
    key_file = luigi.Parameter()
    sshpass = luigi.BoolParameter()

    def output(self) -> RemoteTarget:
        return RemoteTarget(
            "/tmp/stamp",
            "127.0.0.1",
            username="nobody-here",
            key_file=self.key_file,
            port=self.port,
            no_host_key_check=True,
            sshpass=self.sshpass,
            connect_timeout=5,
        )

    def run(self) -> None:
        self.output().open("w").close()


def test_a_refused_connection_fails_the_task_naming_host_and_port(caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()  # nothing listens there
    task = Stamp(port, "/nonexistent/key", False)

    assert not luigi.build([task], local_scheduler=True)

    [report] = [r for r in caplog.records if r.getMessage().startswith("Will not run Stamp")]
    assert f"on host 127.0.0.1:{port} returned non-zero exit status 255" in report.getMessage()
    assert "Connection refused" in report.getMessage()
    with pytest.raises(
        RemoteCalledProcessError, match=f"(?s)127.0.0.1:{port}.*Connection refused"
    ) as refused:
        task.output().exists()
    assert refused.value.returncode == 255


def test_a_key_the_server_does_not_accept_is_refused(sshd: SshServer, tmp_path: Path) -> None:
    stranger = tmp_path / "stranger_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    fs = RemoteFileSystem("127.0.0.1", **login(sshd, key_file=str(stranger)))

    with pytest.raises(RemoteCalledProcessError, match=f"(?s)127.0.0.1:{sshd.port}.*Permission denied"):
        fs.exists(str(sshd.root))


def test_a_password_for_sshpass_never_shows(
    sshd: SshServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "s3cret-Pa55word"
    monkeypatch.setenv("SSHPASS", secret)
    caplog.set_level(logging.DEBUG)
    task = Stamp(sshd.port, sshd.key_file, True)

    assert not luigi.build([task], local_scheduler=True)

    # Without sshpass installed this is the "install sshpass" error; with it, sshd refuses passwords.
    with pytest.raises(
        (FileNotFoundError, RemoteCalledProcessError), match=f"127.0.0.1:{sshd.port}"
    ) as failed:
        task.output().exists()
    assert "Will not run Stamp" in caplog.text
    for text in (str(failed.value), repr(failed.value), caplog.text, task.task_id, repr(task.output().fs)):
        assert secret not in text


@contextlib.contextmanager
def _echo_server() -> Iterator[int]:
    """A TCP server on 127.0.0.1 that sends back what one client sends, until it hangs up."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        with contextlib.suppress(OSError):
            conn, _ = listener.accept()
            with conn:
                while data := conn.recv(4096):
                    conn.sendall(data)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()
        thread.join(timeout=10)


def test_temporary_path_lets_a_remote_command_write_the_output_atomically(
    sshd: SshServer, remote_dir: Path
) -> None:
    target = RemoteTarget(str(remote_dir / "made" / "remotely.txt"), "127.0.0.1", **login(sshd))

    with target.temporary_path() as tmp:
        target.fs.remote_context.check_output(["echo", "made on the host", ">", shlex.quote(tmp)])
        assert not target.exists()

    assert (remote_dir / "made" / "remotely.txt").read_text() == "made on the host\n"
    assert leftovers(remote_dir) == []
    with pytest.raises(FileAlreadyExists), target.temporary_path() as tmp:
        target.fs.remote_context.check_output(["touch", shlex.quote(tmp)])


# -- the atomic write's temporary path, where users' tests (written for Luigi) look for it ----------------


@pytest.mark.parametrize("fmt", [None, luigi.format.Gzip, luigi.format.Nop], ids=["text", "gzip", "nop"])
def test_the_remote_temporary_path_is_reachable_through_what_open_returns(
    sshd: SshServer, remote_dir: Path, fmt: Any
) -> None:
    target = RemoteTarget(str(remote_dir / "sub" / "file"), "127.0.0.1", format=fmt, **login(sshd))
    handle = target.open("w")
    tmp_path = getattr(handle, "tmp_path", "")
    assert tmp_path.startswith(f"{target.path}-luigi-tmp-")
    assert handle.path == target.path and handle.fs is target.fs
    handle.write(b"data" if fmt else "data")
    assert not target.exists()

    handle.close()

    assert target.exists() and not target.fs.exists(tmp_path)
    assert leftovers(remote_dir) == []


def test_an_aborted_write_leaves_neither_the_target_nor_the_temporary_path(
    sshd: SshServer, remote_dir: Path
) -> None:
    target = RemoteTarget(str(remote_dir / "file"), "127.0.0.1", **login(sshd))
    with pytest.raises(RuntimeError), target.open("w") as handle:
        tmp_path = handle.tmp_path
        handle.write("some")
        raise RuntimeError("failed half way")

    assert not target.exists() and not target.fs.exists(tmp_path)


def test_opening_for_writing_creates_the_folder_as_luigi_does(sshd: SshServer, remote_dir: Path) -> None:
    target = RemoteTarget(str(remote_dir / "new" / "deeper" / "file"), "127.0.0.1", **login(sshd))
    handle = target.open("w")
    assert (remote_dir / "new" / "deeper").is_dir() and not target.exists()
    handle.abort()
    (remote_dir / "plain").write_text("a file")
    with pytest.raises(NotADirectory):
        RemoteTarget(str(remote_dir / "plain" / "file"), "127.0.0.1", **login(sshd)).open("w")


def test_the_writer_keeps_luigis_private_attribute_names(sshd: SshServer, remote_dir: Path) -> None:
    target = RemoteTarget(str(remote_dir / "file"), "127.0.0.1", **login(sshd))
    writer = target.open("w").buffer  # under the text format, the writer is the buffer
    assert writer._AtomicRemoteFileWriter__tmp_path == writer.tmp_path
    assert writer._fs is target.fs
    writer.abort()
