"""luigi.contrib.hdfs: the package surface, its settings, the client choice and the ``hadoop fs`` client.

The ``hadoop`` command is the stand-in of helpers/hadoop_cli_standin.py, first on PATH (the `hadoop_cli`
fixture); it answers with Hadoop's output formats and exit codes over a private directory.
"""

from __future__ import annotations

import datetime
import re
import subprocess
import threading

import pytest
from helpers.hdfs_cluster import HadoopCli, hadoop_cli  # noqa: F401
from helpers.outcomes import printed_without

import luigi
import luigi.contrib.hdfs as hdfs_package
from luigi.contrib.hdfs import (
    HdfsClient,
    HdfsClientApache1,
    HdfsClientCdh3,
    HDFSCliError,
    HdfsFlagTarget,
    HdfsTarget,
    WebHdfsClient,
    get_autoconfig_client,
    tmppath,
)
from luigi.target import FileAlreadyExists


@pytest.fixture
def cli(hadoop_cli: HadoopCli) -> HadoopCli:  # noqa: F811
    """The ``hadoop`` stand-in, with ``[hdfs] client = hadoopcli`` (the default)."""
    return hadoop_cli


# --- the package ---


def test_the_package_reexports_luigis_names_and_submodule_aliases():
    names = (
        "hdfs load_hadoop_cmd get_configured_hadoop_version get_configured_hdfs_client tmppath HDFSCliError "
        "call_check HdfsClient HdfsClientCdh3 HdfsClientApache1 create_hadoopcli_client WebHdfsClient "
        "get_autoconfig_client exists rename remove mkdir listdir HdfsReadPipe HdfsAtomicWritePipe "
        "HdfsAtomicWriteDirPipe PlainFormat PlainDirFormat Plain PlainDir CompatibleHdfsFormat HdfsTarget "
        "HdfsFlagTarget hdfs_clients hdfs_config hdfs_error hdfs_format hdfs_hadoopcli_clients hdfs_target "
        "hdfs_webhdfs_client"
    ).split()
    assert [name for name in names if not hasattr(hdfs_package, name)] == []
    assert hdfs_package.call_check is HdfsClient.call_check
    assert hdfs_package.hdfs_target.HdfsTarget is HdfsTarget


def test_importing_needs_neither_hadoop_nor_the_hdfs_library_and_webhdfs_names_the_extra():
    code = (
        "import luigi.contrib.hdfs as h\n"
        "from luigi.task_register import Register\n"
        "print(sorted(n for n in ('hdfs', 'hadoopcli', 'webhdfs') if n in Register._get_reg()))\n"
        "try:\n"
        "    h.WebHdfsClient(host='nn').exists('/x')\n"
        "except ImportError as err:\n"
        "    print(err)\n"
    )
    registered, error = printed_without("hdfs", code).splitlines()
    assert registered == "['hadoopcli', 'hdfs', 'webhdfs']"
    assert "pip install 'luigi[hdfs]'" in error


@pytest.mark.parametrize(
    ("path", "pattern"),
    [
        ("/dir1/dir2/file", r"^/tmp/dir1/dir2/file-luigitemp-\d+$"),
        ("hdfs:///dir1/dir2/file", r"^hdfs:/tmp/dir1/dir2/file-luigitemp-\d+$"),
        ("hdfs://somehost/dir1/dir2/file", r"^hdfs://somehost/tmp/dir1/dir2/file-luigitemp-\d+$"),
        ("file:///dir1/dir2/file", r"^file:///tmp/dir1/dir2/file-luigitemp-\d+$"),
        ("/tmp/dir/file", r"^/tmp/dir/file-luigitemp-\d+$"),
        (None, r"^/tmp/luigitemp-\d+$"),
        ("/tmpdir/file", r"^/tmp/tmpdir/file-luigitemp-\d+$"),
    ],
)
def test_tmppath_stays_on_the_targets_file_system(path: str | None, pattern: str):
    assert re.match(pattern, tmppath(path, include_unix_username=False))


def test_tmppath_puts_the_user_first_and_honours_the_configured_tmp_dir():
    assert re.match(r"^/tmp/[a-z0-9_]+/path/to/stuff-luigitemp-\d+$", tmppath("/path/to/stuff"))
    luigi.configuration.get_config().set("core", "hdfs-tmp-dir", "/scratch")
    assert re.match(r"^/scratch/x-luigitemp-\d+$", tmppath("/x", include_unix_username=False))


def test_the_cli_error_carries_the_exit_code_and_both_outputs():
    error = HDFSCliError(["hadoop", "fs", "-ls"], 2, "out", "err")
    assert (error.returncode, error.stdout, error.stderr) == (2, "out", "err")
    assert str(error).startswith("Command ['hadoop', 'fs', '-ls'] failed [exit code 2]\n---stdout---\nout")
    assert "---stderr---\nerr" in str(error)


# --- choosing the client ---


def test_the_autoconfig_client_is_one_per_thread_and_follows_the_settings():
    mine = {id(get_autoconfig_client()) for _ in range(100)}
    theirs: list[object] = []  # the clients themselves: ids of collected objects could repeat
    threads = [threading.Thread(target=lambda: theirs.append(get_autoconfig_client())) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(mine) == 1
    assert len({id(client) for client in theirs}) == 10

    luigi.configuration.get_config().set("hdfs", "client", "webhdfs")
    assert isinstance(get_autoconfig_client(), WebHdfsClient)


@pytest.mark.parametrize(
    ("version", "client"), [("cdh4", HdfsClient), ("CDH3", HdfsClientCdh3), ("apache1", HdfsClientApache1)]
)
def test_the_hadoop_version_picks_the_command_line_dialect(version: str, client: type):
    luigi.configuration.get_config().set("hadoop", "version", version)
    assert type(get_autoconfig_client()) is client


def test_an_unknown_client_or_version_is_refused_with_the_setting_to_fix():
    luigi.configuration.get_config().set("hdfs", "client", "snakebite")
    with pytest.raises(Exception, match="Unknown hdfs client snakebite: set \\[hdfs\\] client"):
        get_autoconfig_client()
    luigi.configuration.get_config().set("hdfs", "client", "hadoopcli")
    luigi.configuration.get_config().set("hadoop", "version", "cdh9")
    with pytest.raises(ValueError, match=r"\[hadoop\] version = 'cdh9' is not known"):
        get_autoconfig_client()


# --- the hadoop fs client ---


def test_a_missing_hadoop_command_names_the_setting(cli: HadoopCli):
    luigi.configuration.get_config().set("hadoop", "command", "no-such-hadoop")
    with pytest.raises(FileNotFoundError, match=r"'no-such-hadoop'.*set \[hadoop\] command"):
        HdfsTarget("/x").exists()


def test_the_hadoop_command_may_carry_arguments(cli: HadoopCli):
    luigi.configuration.get_config().set("hadoop", "command", f"{cli.command} --config /etc/hadoop/conf")
    HdfsTarget("/x")._touchz()

    assert HdfsTarget("/x").exists()
    assert cli.local("/x").exists()


def test_listdir_gives_paths_or_the_fields_asked_for(cli: HadoopCli):
    client = HdfsClient()
    client.mkdir("/data/sub")
    HdfsTarget("/data/a.txt")._touchz()
    with HdfsTarget("/data/sub/b.txt").open("w") as out:
        out.write("12345")

    assert list(client.listdir("/data")) == ["/data/a.txt", "/data/sub"]
    assert list(client.listdir("/data", ignore_directories=True)) == ["/data/a.txt"]
    assert list(client.listdir("/data", ignore_files=True)) == ["/data/sub"]
    assert list(client.listdir("/data", recursive=True, ignore_directories=True, include_size=True)) == [
        ("/data/a.txt", 0),
        ("/data/sub/b.txt", 5),
    ]
    [(path, kind, when)] = client.listdir("/data/sub", include_type=True, include_time=True)
    assert (path, kind) == ("/data/sub/b.txt", "-")
    assert abs(datetime.datetime.now() - when) < datetime.timedelta(minutes=2)


def test_count_chmod_chown_copy_and_getmerge(cli: HadoopCli, tmp_path):
    client = HdfsClient()
    for name, text in (("p0", "ab\n"), ("p1", "cde\n")):
        with HdfsTarget(f"/job/{name}").open("w") as out:
            out.write(text)

    assert client.count("/job") == {"content_size": "7", "dir_count": "1", "file_count": "2"}
    client.chmod("/job/p0", "600")
    client.chown("/job", "etl", "analysts", recursive=True)
    client.copy("/job/p1", "/job/p2")
    client.getmerge("/job", str(tmp_path / "merged"))

    assert (cli.local("/job/p0").stat().st_mode & 0o777) == 0o600
    listing = client.call_check(["hadoop", "fs", "-ls", "/job"])
    assert re.search(r"^-rw-------\s+3 etl\s+analysts\s+3 \S+ \S+ /job/p0$", listing, re.MULTILINE)
    assert (tmp_path / "merged").read_text() == "ab\ncde\ncde\n"


def test_put_and_get_copy_local_files(cli: HadoopCli, tmp_path):
    client = HdfsClient()
    (tmp_path / "local.txt").write_text("from disk\n")
    client.mkdir("/in")
    client.put(str(tmp_path / "local.txt"), "/in/copied.txt")
    client.get("/in/copied.txt", str(tmp_path / "back.txt"))

    assert (tmp_path / "back.txt").read_text() == "from disk\n"


def test_mkdir_reports_an_existing_directory_only_when_asked(cli: HadoopCli):
    client = HdfsClient()
    client.mkdir("/made")
    client.mkdir("/made")  # -p: fine

    with pytest.raises(FileAlreadyExists, match="File exists"):
        client.mkdir("/made", parents=False, raise_if_exists=True)
    with pytest.raises(NotImplementedError, match="pass parents=False"):
        client.mkdir("/made", parents=True, raise_if_exists=True)


def test_removing_a_missing_path_or_a_directory_without_recursion_fails_with_the_commands_words(
    cli: HadoopCli,
):
    client = HdfsClient()
    client.mkdir("/full")
    HdfsTarget("/full/f")._touchz()

    with pytest.raises(HDFSCliError, match="No such file or directory") as missing:
        client.remove("/nothing")
    with pytest.raises(HDFSCliError, match="Is a directory"):
        client.remove("/full", recursive=False)
    assert missing.value.returncode == 1
    client.remove("/full", skip_trash=True)
    assert not client.exists("/full")


def test_the_older_dialects_use_their_own_commands(cli: HadoopCli):
    cdh3, apache1 = HdfsClientCdh3(), HdfsClientApache1()
    cdh3.mkdir("/old")  # "-mkdir" without "-p", which the stand-in (Hadoop 2) accepts for an existing parent
    cdh3.mkdir("/old/deep")
    assert apache1.exists("/old/deep") and not apache1.exists("/old/none")
    assert list(apache1.listdir("/old", recursive=True)) == ["/old/deep"]
    cdh3.remove("/old", skip_trash=True)  # -rmr
    assert not apache1.exists("/old")


def test_glob_exists_counts_what_a_hadoop_glob_matches(cli: HadoopCli):
    # The hadoop fs client only: WebHDFS has no globs.
    for part in ("part-00000", "part-00001", "_SUCCESS"):
        HdfsTarget(f"/job/{part}")._touchz()

    assert HdfsTarget("/job/part-0000*").glob_exists(2)
    assert not HdfsTarget("/job/part-0000*").glob_exists(3)
    assert HdfsTarget("/job/{part-00000,_SUCCESS}").glob_exists(2)


def test_an_unknown_namenode_host_is_an_error_not_a_missing_file(cli: HadoopCli):
    with pytest.raises(HDFSCliError, match="UnknownHostException: doesnotexist"):
        HdfsClient().exists("hdfs://doesnotexist/foo")


class Produce(luigi.Task):
    def output(self) -> HdfsTarget:
        return HdfsTarget("/out/produced.txt")

    def run(self) -> None:
        with self.output().open("w") as out:
            out.write("data\n")


def test_a_namenode_that_refuses_connections_fails_scheduling_with_hadoops_message(cli: HadoopCli, caplog):
    cli.take_namenode_down()

    result = luigi.build([Produce()], local_scheduler=True, detailed_summary=True)

    assert result.status == luigi.LuigiStatusCode.SCHEDULING_FAILED  # complete() could not ask HDFS
    assert "java.net.ConnectException: Connection refused" in caplog.text
    with pytest.raises(HDFSCliError, match="Connection refused") as refused:
        Produce().complete()
    assert refused.value.returncode == 1
    assert not cli.local("/out/produced.txt").exists()


# --- targets: arguments refused before any command runs ---


def test_bad_target_arguments_are_refused_with_the_fix():
    with pytest.raises(ValueError, match="colon is not allowed in hdfs filenames"):
        HdfsTarget("/data/a:b")
    with pytest.raises(ValueError, match="ending with '/'"):
        HdfsFlagTarget("/home/file.txt")
    with pytest.raises(ValueError, match="is_tmp=True"):
        HdfsTarget()
    with pytest.raises(ValueError, match="use 'r' or 'w'"):
        HdfsTarget("/x").open("a")


def test_a_flag_targets_client_is_its_file_system_and_it_is_not_temporary():
    client = HdfsClient()
    target = HdfsFlagTarget("/job/", client=client)
    assert target.fs is client and not target.is_tmp


def test_an_old_style_format_is_adapted_with_a_deprecation_warning():
    class OldFormat:
        def hdfs_writer(self, path: str) -> str:
            return f"writer for {path}"

        def hdfs_reader(self, path: str) -> str:
            return f"reader for {path}"

    with pytest.warns(DeprecationWarning, match="subclass luigi.format.Format"):
        target = HdfsTarget("/old", format=OldFormat())
    assert target.open("w") == "writer for /old"
    assert target.open("r") == "reader for /old"


def test_the_standin_answers_with_hadoops_exit_codes_and_formats(cli: HadoopCli):
    """The stand-in itself, against FsShell's documented behaviour, so the tests above mean what they say."""

    def hadoop(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(cli.command), "fs", *args], capture_output=True, text=True, check=False)

    assert hadoop("-test", "-e", "/none").returncode == 1
    assert hadoop("-frobnicate").returncode == 255
    assert hadoop("-mkdir", "/a/b").stderr == "mkdir: `/a/b': No such file or directory\n"
    assert hadoop("-mkdir", "-p", "/a/b").returncode == 0
    listing = hadoop("-ls", "/a").stdout.splitlines()
    assert listing[0] == "Found 1 items"
    assert re.fullmatch(r"drwxr-xr-x\s+- \S+\s+supergroup\s+0 \d{4}-\d\d-\d\d \d\d:\d\d /a/b", listing[1])
    assert hadoop("-count", "/a").stdout == f"{2:>12} {0:>12} {0:>18} /a\n"
