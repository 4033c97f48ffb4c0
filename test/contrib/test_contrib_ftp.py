"""luigi.contrib.ftp end to end, against real servers started for the session: pyftpdlib for FTP and FTPS
(one without MLST/MLSD, like older servers), and OpenSSH's sshd for SFTP."""

from __future__ import annotations

import datetime
import gc
import logging
import os
import ssl
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from helpers.ftp_server import FtpServer, running_ftp_server
from helpers.luigid import free_port
from helpers.sshd_server import SshServer, running_sshd

import luigi
import luigi.format
from luigi.contrib.ftp import RemoteConnectionError, RemoteFileSystem, RemoteTarget
from luigi.event import Event
from luigi.target import FileAlreadyExists, MissingParentDirectory, NotADirectory

KINDS = ["ftp", "ftps", "ftp-legacy", "sftp"]


@dataclass
class Server:
    """How a test reaches one server, and where its files are on this machine's disk."""

    connection: dict[str, Any]
    remote_root: str  # a directory on the server, private to the test
    local_root: Path  # the same directory, seen on the local disk
    secret: str = field(default="", repr=False)

    def remote(self, *parts: str) -> str:
        return "/".join([self.remote_root, *parts])

    def local(self, *parts: str) -> Path:
        return self.local_root.joinpath(*parts)


# Task parameters name a server kind; the connection details stay out of the task id, as users keep them.
CONNECTIONS: dict[str, dict[str, Any]] = {}


@pytest.fixture(scope="session")
def ftp_plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FtpServer]:
    with running_ftp_server(tmp_path_factory.mktemp("ftp")) as server:
        yield server


@pytest.fixture(scope="session")
def ftp_tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FtpServer]:
    with running_ftp_server(tmp_path_factory.mktemp("ftps"), tls=True) as server:
        yield server


@pytest.fixture(scope="session")
def ftp_legacy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FtpServer]:
    with running_ftp_server(tmp_path_factory.mktemp("ftp-legacy"), machine_listings=False) as server:
        yield server


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    with running_sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server


def known_hosts_for(sshd: SshServer) -> str:
    host_key = (Path(sshd.key_file).parent / "ssh_host_ed25519_key.pub").read_text().split()
    path = Path(sshd.key_file).parent / "known_hosts"
    path.write_text(f"[127.0.0.1]:{sshd.port} {host_key[0]} {host_key[1]}\n")
    return str(path)


def ftp_connection(ftpd: FtpServer, **extra: Any) -> dict[str, Any]:
    return {
        "host": ftpd.host,
        "port": ftpd.port,
        "username": ftpd.username,
        "password": ftpd.password,
        **extra,
    }


def sftp_connection(sshd: SshServer, **options: Any) -> dict[str, Any]:
    options.setdefault("known_hosts", known_hosts_for(sshd))
    return {
        "host": sshd.host,
        "port": sshd.port,
        "username": sshd.username,
        "sftp": True,
        "pysftp_conn_kwargs": {"private_key": sshd.key_file, **options},
    }


@pytest.fixture(params=KINDS)
def server(request: pytest.FixtureRequest) -> Server:
    """Each test using this runs once per server kind, in a fresh directory there."""
    kind, name = request.param, request.node.originalname
    if kind == "sftp":
        sshd: SshServer = request.getfixturevalue("sshd")
        local_root = sshd.root / f"{name}"
        local_root.mkdir()
        connection, remote_root = sftp_connection(sshd), str(local_root)
    else:
        ftpd: FtpServer = request.getfixturevalue(
            {"ftp": "ftp_plain", "ftps": "ftp_tls"}.get(kind, "ftp_legacy")
        )
        local_root = ftpd.home / name
        local_root.mkdir()
        context = ssl.create_default_context(cafile=str(ftpd.certificate)) if ftpd.certificate else False
        connection, remote_root = ftp_connection(ftpd, tls=context), f"/{name}"
    CONNECTIONS[kind] = connection
    return Server(connection, remote_root, local_root, secret=connection.get("password") or "")


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.rglob("*") if "-luigi-tmp-" in p.name)


def kind_of(server: Server) -> str:
    return next(kind for kind, connection in CONNECTIONS.items() if connection is server.connection)


class Produce(luigi.Task):
    kind = luigi.Parameter()
    path = luigi.Parameter()

    def output(self) -> RemoteTarget:
        return RemoteTarget(self.path, **CONNECTIONS[self.kind])

    def run(self) -> None:
        with self.output().open("w") as out:
            out.write("alpha\nbeta\n")


class Shout(luigi.Task):
    kind = luigi.Parameter()
    source = luigi.Parameter()
    path = luigi.Parameter()

    def requires(self) -> Produce:
        return Produce(self.kind, self.source)

    def output(self) -> RemoteTarget:
        return RemoteTarget(self.path, format=luigi.format.Gzip, **CONNECTIONS[self.kind])

    def run(self) -> None:
        with self.input().open("r") as source, self.output().open("w") as out:
            out.write(source.read().upper().encode())


class HalfWrite(luigi.Task):
    kind = luigi.Parameter()
    path = luigi.Parameter()

    def output(self) -> RemoteTarget:
        return RemoteTarget(self.path, **CONNECTIONS[self.kind])

    def run(self) -> None:
        with self.output().open("w") as out:
            out.write("some of it\n" * 5000)
            out.flush()
            raise RuntimeError("crashed half way")


def test_a_pipeline_writes_and_reads_files_on_the_server(server: Server) -> None:
    kind = kind_of(server)
    source, shouted = server.remote("in", "words.txt"), server.remote("out", "deeper", "WORDS.gz")

    result = luigi.build([Shout(kind, source, shouted)], local_scheduler=True, detailed_summary=True)

    assert result.status == luigi.LuigiStatusCode.SUCCESS, result.summary_text
    assert server.local("in", "words.txt").read_text() == "alpha\nbeta\n"
    with RemoteTarget(shouted, format=luigi.format.Gzip, **server.connection).open("r") as back:
        assert back.read() == b"ALPHA\nBETA\n"
    assert leftovers(server.local_root) == []
    assert Shout(kind, source, shouted).complete()


def test_a_task_failing_mid_write_leaves_nothing_on_the_server(server: Server, events: Any) -> None:
    seen, listen = events
    listen(Event.FAILURE)
    before = {name for name in os.listdir(tempfile.gettempdir()) if name.startswith("luigi-ftp-")}

    assert not luigi.build([HalfWrite(kind_of(server), server.remote("half.txt"))], local_scheduler=True)

    assert [str(args[1]) for _, args in seen] == ["crashed half way"]
    assert list(server.local_root.iterdir()) == []
    after = {name for name in os.listdir(tempfile.gettempdir()) if name.startswith("luigi-ftp-")}
    assert after <= before


def test_file_system_operations(server: Server, tmp_path: Path) -> None:
    fs = RemoteFileSystem(**server.connection)

    assert not fs.exists(server.remote("no", "such", "folder", "file.txt"))  # Luigi 3.8 raised here
    assert not fs.isdir(server.remote("no"))
    fs.mkdir(server.remote("a", "b c", "d"))
    assert fs.isdir(server.remote("a", "b c")) and server.local("a", "b c", "d").is_dir()
    fs.mkdir(server.remote("a"))
    with pytest.raises(FileAlreadyExists, match="already exists"):
        fs.mkdir(server.remote("a"), raise_if_exists=True)
    with pytest.raises(MissingParentDirectory, match="parents=True"):
        fs.mkdir(server.remote("missing", "child"), parents=False)

    local = tmp_path / "upload.bin"
    local.write_bytes(os.urandom(200_000))
    fs.put(str(local), server.remote("a", "file.bin"))
    with pytest.raises(NotADirectory):
        fs.mkdir(server.remote("a", "file.bin"))
    assert fs.exists(server.remote("a", "file.bin")) and not fs.isdir(server.remote("a", "file.bin"))
    assert sorted(fs.listdir(server.remote("a"))) == ["b c", "file.bin"]
    fs.get(server.remote("a", "file.bin"), str(tmp_path / "back" / "file.bin"))
    assert (tmp_path / "back" / "file.bin").read_bytes() == local.read_bytes()

    fs.move(server.remote("a", "file.bin"), server.remote("moved", "file.bin"))
    assert server.local("moved", "file.bin").read_bytes() == local.read_bytes()
    fs.remove(server.remote("a"))
    assert not server.local("a").exists() and not fs.exists(server.remote("a"))
    assert leftovers(server.local_root) == [] and leftovers(tmp_path) == []


def test_mtime_makes_a_target_count_only_when_newer(server: Server) -> None:
    server.local("stamp.txt").write_text("now")
    an_hour_ago = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1)
    in_an_hour = an_hour_ago + datetime.timedelta(hours=2)

    assert RemoteTarget(server.remote("stamp.txt"), mtime=an_hour_ago, **server.connection).exists()
    assert RemoteTarget(
        server.remote("stamp.txt"), mtime=an_hour_ago.timestamp(), **server.connection
    ).exists()
    assert not RemoteTarget(server.remote("stamp.txt"), mtime=in_an_hour, **server.connection).exists()


def test_reading_a_missing_file_fails_naming_it(server: Server) -> None:
    target = RemoteTarget(server.remote("absent.txt"), **server.connection)

    with pytest.raises(FileNotFoundError, match="No such file") as missing:
        target.open("r")
    assert missing.value.filename == server.remote("absent.txt")
    assert f":{server.connection['port']}" in str(missing.value)


def test_put_without_atomic_writes_in_place(ftp_plain: FtpServer, tmp_path: Path) -> None:
    (ftp_plain.home / "plain").mkdir()
    local = tmp_path / "f.txt"
    local.write_text("direct")
    target = RemoteTarget("/plain/f.txt", **ftp_connection(ftp_plain))

    target.put(str(local), atomic=False)

    assert (ftp_plain.home / "plain" / "f.txt").read_text() == "direct"


# -- failures ------------------------------------------------------------------------------------------


class Stamp(luigi.Task):
    kind = luigi.Parameter()

    def output(self) -> RemoteTarget:
        return RemoteTarget("/stamps/stamp.txt", **CONNECTIONS[self.kind])

    def run(self) -> None:
        self.output().open("w").close()


def _scheduling_error(caplog: pytest.LogCaptureFixture) -> str:
    [report] = [r for r in caplog.records if r.getMessage().startswith("Will not run Stamp")]
    return report.getMessage()


@pytest.mark.parametrize("sftp", [False, True], ids=["ftp", "sftp"])
def test_a_refused_connection_fails_the_task_naming_host_and_port(
    sftp: bool, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()  # nothing listens there
    CONNECTIONS["refused"] = {"host": "127.0.0.1", "port": port, "username": "u", "password": "hunter2-x"}
    CONNECTIONS["refused"]["sftp"] = sftp

    assert not luigi.build([Stamp("refused")], local_scheduler=True)

    scheme = "sftp" if sftp else "ftp"
    assert f"RemoteConnectionError: Cannot connect to {scheme}://u@127.0.0.1:{port}" in _scheduling_error(
        caplog
    )
    with pytest.raises(RemoteConnectionError, match="refused") as refused:
        RemoteTarget("/x", **CONNECTIONS["refused"]).exists()
    assert "hunter2-x" not in str(refused.value) and "hunter2-x" not in caplog.text


def test_a_wrong_ftp_password_fails_naming_the_server_but_not_the_password(
    ftp_plain: FtpServer, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "Wr0ng-but-still-s3cret"
    caplog.set_level(logging.DEBUG)
    CONNECTIONS["wrong"] = ftp_connection(ftp_plain, password=secret)
    task = Stamp("wrong")

    assert not luigi.build([task], local_scheduler=True)

    url = f"ftp://luigi@127.0.0.1:{ftp_plain.port}"
    assert f"Cannot log in to {url}: 530" in _scheduling_error(caplog)
    with pytest.raises(RemoteConnectionError) as refused:
        task.output().exists()
    for text in (str(refused.value), repr(refused.value), caplog.text, task.task_id, repr(task.output().fs)):
        assert secret not in text


def test_a_wrong_sftp_password_fails_without_showing_it(
    sshd: SshServer, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "An0ther-s3cret"
    caplog.set_level(logging.DEBUG)
    connection = sftp_connection(sshd)
    connection["pysftp_conn_kwargs"].pop("private_key")
    target = RemoteTarget("/tmp/x", password=secret, **connection)

    with pytest.raises(
        RemoteConnectionError, match=f"sftp://{sshd.username}@127.0.0.1:{sshd.port}"
    ) as refused:
        target.exists()
    assert "Authentication" in str(refused.value) or "authentication" in str(refused.value)
    for text in (str(refused.value), repr(refused.value), caplog.text, repr(target.fs)):
        assert secret not in text


def test_ftps_checks_the_certificate_by_default(ftp_tls: FtpServer) -> None:
    target = RemoteTarget("/x", **ftp_connection(ftp_tls, tls=True))

    with pytest.raises(RemoteConnectionError, match="(?s)certificate verify failed.*cafile") as untrusted:
        target.exists()
    assert f"ftps://luigi@127.0.0.1:{ftp_tls.port}" in str(untrusted.value)


def test_sftp_refuses_an_unknown_host_key(sshd: SshServer, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    target = RemoteTarget("/tmp/x", **sftp_connection(sshd, known_hosts=str(empty)))

    with pytest.raises(RemoteConnectionError, match="(?s)not found in known_hosts.*no_host_key_check"):
        target.exists()
    trusting = RemoteTarget(str(sshd.root), **sftp_connection(sshd, known_hosts=None, no_host_key_check=True))
    assert trusting.exists()


def test_sftp_takes_host_keys_from_pysftp_style_cnopts(sshd: SshServer) -> None:
    paramiko = pytest.importorskip("paramiko")
    hostkeys = paramiko.HostKeys(known_hosts_for(sshd))
    for cnopts in (SimpleNamespace(hostkeys=hostkeys), SimpleNamespace(hostkeys=None)):
        connection = sftp_connection(sshd, known_hosts=None, cnopts=cnopts)
        assert RemoteTarget(str(sshd.root), **connection).exists()


def test_unknown_sftp_options_are_refused_by_name(sshd: SshServer) -> None:
    with pytest.raises(TypeError, match="Unsupported pysftp_conn_kwargs compression"):
        RemoteFileSystem("127.0.0.1", sftp=True, pysftp_conn_kwargs={"compression": True})


def test_sftp_without_paramiko_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from luigi.contrib.optional import MissingExtraError

    monkeypatch.setitem(sys.modules, "paramiko", None)  # as if the extra were not installed
    with pytest.raises(MissingExtraError, match=r"luigi\[sftp\]"):
        RemoteFileSystem("127.0.0.1", port=free_port(), sftp=True).exists("/x")


def test_a_read_keeps_its_download_on_the_target_until_the_target_is_collected(server: Server) -> None:
    server.local("kept.txt").write_text("kept\n")
    target = RemoteTarget(server.remote("kept.txt"), **server.connection)

    with target.open("r") as handle:
        assert handle.read() == "kept\n"
    downloaded = target._RemoteTarget__tmp_path  # where Luigi's own tests look for it
    assert os.path.exists(downloaded) and "-luigi-tmp-" in downloaded

    target = None
    gc.collect()

    assert not os.path.exists(downloaded)
