"""luigi.contrib.hdfs.WebHdfsClient and luigi.contrib.webhdfs.WebHdfsTarget over WebHDFS.

Against the stand-in of helpers/webhdfs_standin.py: Hadoop's documented REST operations (CREATE and OPEN
with their 307 redirect to a "datanode" URL, JSON FileStatus shapes, RemoteException errors) over a private
directory on a free loopback port, reached through the real ``hdfs`` library (the ``hdfs`` extra).
"""

from __future__ import annotations

import os
import socket

import pytest

import luigi
from luigi.contrib.hdfs import HdfsTarget, WebHdfsClient
from luigi.contrib.optional import MissingExtraError
from luigi.contrib.webhdfs import WebHdfsTarget
from luigi.target import FileAlreadyExists

hdfs_library = pytest.importorskip("hdfs")
requests = pytest.importorskip("requests")

from helpers.outcomes import build_failing  # noqa: E402
from helpers.webhdfs_standin import WebHdfsStandIn, webhdfs_standin  # noqa: E402, F401


@pytest.fixture
def namenode(webhdfs_standin: WebHdfsStandIn) -> WebHdfsStandIn:  # noqa: F811
    """The stand-in, configured as a user points Luigi at a NameNode."""
    config = luigi.configuration.get_config()
    config.set("hdfs", "namenode_host", webhdfs_standin.host)
    config.set("webhdfs", "port", str(webhdfs_standin.port))
    config.set("webhdfs", "user", "etl")
    return webhdfs_standin


def test_the_client_is_built_from_the_settings(namenode: WebHdfsStandIn):
    client = WebHdfsClient()

    assert client.url == f"http://{namenode.host}:{namenode.port}"
    assert isinstance(client.client, hdfs_library.InsecureClient)
    assert client.client._session.params["user.name"] == "etl"
    assert WebHdfsClient(host="nn1;nn2", port=9870).url == "http://nn1:9870;http://nn2:9870"


def test_kerberos_needs_its_extra_named_in_the_error():
    client = WebHdfsClient(host="nn", client_type="kerberos")
    try:
        kerberos = __import__("hdfs.ext.kerberos", fromlist=["KerberosClient"])
    except ImportError:
        with pytest.raises(MissingExtraError, match=r"hdfs\[kerberos\]"):
            client.client  # noqa: B018  # building the client is what fails
    else:
        assert isinstance(client.client, kerberos.KerberosClient)


def test_a_missing_namenode_host_is_refused_with_the_setting_to_fix():
    with pytest.raises(ValueError, match=r"set \[hdfs\] namenode_host"):
        WebHdfsClient().exists("/x")


def test_files_and_directories_through_the_client(namenode: WebHdfsStandIn, tmp_path):
    client = WebHdfsClient()
    client.mkdir("/data/sub")
    client.touchz("/data/empty")
    (tmp_path / "local.txt").write_text("line one\nline two\n")
    client.put(str(tmp_path / "local.txt"), "/data/sub/up.txt")

    assert client.exists("/data/sub/up.txt") and not client.exists("/data/none")
    assert client.listdir("/data") == ["empty", "sub"]
    assert client.listdir("/data", ignore_directories=True, include_size=True, include_type=True) == [
        ("empty", 0, "-")
    ]
    assert b"".join(client.read("/data/sub/up.txt")) == b"line one\nline two\n"
    assert list(client.read("/data/sub/up.txt", buffer_char="\n")) == [b"line one", b"line two"]
    assert [(path, files) for path, _, files in client.walk("/data", depth=0)] == [
        ("/data", ["empty"]),
        ("/data/sub", ["up.txt"]),
    ]
    client.get("/data/sub/up.txt", str(tmp_path / "down.txt"))
    assert (tmp_path / "down.txt").read_text() == "line one\nline two\n"


def test_move_creates_the_parent_and_remove_needs_skip_trash(namenode: WebHdfsStandIn):
    client = WebHdfsClient()
    client.touchz("hdfs://namenode:8020/a")  # a full hdfs:// URL names a path on this client's NameNode

    client.move("/a", "/b/c/d")

    assert not client.exists("/a") and client.exists("/b/c/d")
    with pytest.raises(AssertionError, match="skip_trash=True"):
        client.remove("/b")
    client.remove("/b", skip_trash=True)
    assert not client.exists("/b")


def test_mkdir_can_refuse_an_existing_directory(namenode: WebHdfsStandIn):
    client = WebHdfsClient()
    client.mkdir("/made", mode=0o700)
    assert os.stat(os.path.join(namenode.root, "made")).st_mode & 0o777 == 0o700
    with pytest.raises(FileAlreadyExists):
        client.mkdir("/made", raise_if_exists=True)


def test_what_webhdfs_cannot_do_says_which_client_can(namenode: WebHdfsStandIn):
    client = WebHdfsClient()
    for call in (
        lambda: client.chmod("/x", "755"),
        lambda: client.count("/x"),
        lambda: client.copy("/x", "/y"),
    ):
        with pytest.raises(NotImplementedError, match="use \\[hdfs\\] client = hadoopcli"):
            call()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_namenode_that_refuses_connections_gives_an_error_naming_it_and_the_settings():
    client = WebHdfsClient(host="127.0.0.1", port=_closed_port())

    with pytest.raises(requests.exceptions.ConnectionError) as refused:
        client.exists("/x")

    message = str(refused.value)
    assert message.startswith(f"Cannot reach WebHDFS at {client.url} (Connection refused)")
    assert "[hdfs] namenode_host and [webhdfs] port" in message


# --- the deprecated WebHdfsTarget ---


class Report(luigi.Task):
    fail = luigi.BoolParameter(default=False)

    def output(self) -> WebHdfsTarget:
        return WebHdfsTarget("/reports/today.txt")

    def run(self) -> None:
        with self.output().open("w") as out:
            out.write("all good\n")
            if self.fail:
                raise RuntimeError("report broke mid-write")


def test_a_webhdfs_target_is_written_atomically_by_a_task_and_read_back(namenode: WebHdfsStandIn):
    assert luigi.build([Report()], local_scheduler=True)

    with open(namenode.root + "/reports/today.txt") as stored:
        assert stored.read() == "all good\n"
    with Report().output().open("r") as back:
        assert back.read() == "all good\n"
    raw = WebHdfsTarget("/reports/today.txt", format=luigi.format.Nop).open("r")
    assert list(raw.readlines()) == [b"all good"]


def test_a_failing_task_leaves_no_webhdfs_output(namenode: WebHdfsStandIn):
    error = build_failing(Report(fail=True))

    assert "report broke mid-write" in str(error)
    assert not WebHdfsClient().exists("/reports/today.txt")
    assert not WebHdfsClient().exists("/tmp")  # nothing was uploaded at all


def test_reading_a_missing_webhdfs_file_says_it_does_not_exist(namenode: WebHdfsStandIn):
    with pytest.raises(hdfs_library.util.HdfsError, match="File does not exist: /reports/none.txt"):
        with WebHdfsTarget("/reports/none.txt").open("r") as back:
            back.read()


def test_writing_over_an_existing_webhdfs_file_is_refused(namenode: WebHdfsStandIn):
    WebHdfsClient().touchz("/reports/today.txt")

    with pytest.raises(FileAlreadyExists, match="remove it before writing"):
        with WebHdfsTarget("/reports/today.txt").open("w") as out:
            out.write("again\n")


def test_an_hdfs_target_without_the_hadoop_command_says_it_needs_it_even_with_webhdfs(
    namenode: WebHdfsStandIn,
):
    config = luigi.configuration.get_config()
    config.set("hdfs", "client", "webhdfs")
    config.set("hadoopcli", "command", "no-such-hadoop")

    with pytest.raises(
        FileNotFoundError, match=r"'no-such-hadoop'.*whichever \[hdfs\] client.*WebHdfsTarget"
    ):
        HdfsTarget("/reports/x.txt").open("w")
    assert not WebHdfsClient().exists("/reports/x.txt")


def test_the_standin_speaks_webhdfs_two_step_create_and_its_error_shapes(namenode: WebHdfsStandIn):
    """The stand-in itself, against Hadoop's documented exchanges, so the tests above mean what they say."""
    base = f"{namenode.url}/webhdfs/v1"
    step_one = requests.put(f"{base}/f.txt?op=CREATE&user.name=etl", allow_redirects=False, timeout=10)
    assert step_one.status_code == 307 and not os.path.exists(os.path.join(namenode.root, "f.txt"))
    step_two = requests.put(step_one.headers["Location"], data=b"payload", timeout=10)
    assert step_two.status_code == 201

    status = requests.get(f"{base}/f.txt?op=GETFILESTATUS", timeout=10).json()["FileStatus"]
    assert (status["type"], status["length"], status["pathSuffix"]) == ("FILE", 7, "")
    assert requests.get(f"{base}/f.txt?op=OPEN&offset=3&length=2", timeout=10).content == b"lo"
    missing = requests.get(f"{base}/none?op=GETFILESTATUS", timeout=10)
    assert missing.status_code == 404
    assert missing.json() == {
        "RemoteException": {
            "exception": "FileNotFoundException",
            "javaClassName": "java.io.FileNotFoundException",
            "message": "File does not exist: /none",
        }
    }
    assert requests.delete(f"{base}/none?op=DELETE", timeout=10).json() == {"boolean": False}
