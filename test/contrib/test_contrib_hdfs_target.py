"""luigi.contrib.hdfs.HdfsTarget through luigi.build, with each client ``[hdfs] client`` offers.

Every test runs twice (``hdfs_cluster`` is parametrized): with ``hadoopcli`` and with ``webhdfs``. Data is
streamed by the ``hadoop fs`` stand-in in both (as Luigi does: ``-cat`` and ``-put -``); existence,
renames, removals and listings go through the configured client, the WebHDFS stand-in for ``webhdfs``.
Both stand-ins serve one private directory (helpers/cluster.py).
"""

from __future__ import annotations

import gzip
import pickle
import sys

import pytest

import luigi
import luigi.format
from luigi.contrib.hdfs import (
    HdfsFlagTarget,
    HdfsTarget,
    Plain,
    PlainDir,
    get_autoconfig_client,
)
from luigi.contrib.hdfs.format import HdfsAtomicWriteError

pytest.importorskip("hdfs")

from helpers.hdfs_cluster import HdfsCluster, hadoop_cli, hdfs_cluster  # noqa: E402, F401
from helpers.outcomes import build_failing  # noqa: E402


@pytest.fixture
def cluster(hdfs_cluster: HdfsCluster) -> HdfsCluster:  # noqa: F811
    """The stand-ins, once per client."""
    return hdfs_cluster


class WordCounts(luigi.Task):
    """Reads its input from HDFS and writes a count per word back to HDFS."""

    source = luigi.Parameter()
    destination = luigi.Parameter()

    def requires(self) -> luigi.Task:
        return Words(path=self.source)

    def output(self) -> HdfsTarget:
        return HdfsTarget(self.destination)

    def run(self) -> None:
        counts: dict[str, int] = {}
        with self.input().open("r") as words:
            for line in words:
                for word in line.split():
                    counts[word] = counts.get(word, 0) + 1
        with self.output().open("w") as out:
            for word in sorted(counts):
                out.write(f"{word}\t{counts[word]}\n")


class Words(luigi.Task):
    path = luigi.Parameter()

    def output(self) -> HdfsTarget:
        return HdfsTarget(self.path)

    def run(self) -> None:
        with self.output().open("w") as out:
            out.write("to be or not to be\nthat is the question\n")


class Broken(luigi.Task):
    """Writes half of its output, then fails."""

    path = luigi.Parameter()

    def output(self) -> HdfsTarget:
        return HdfsTarget(self.path)

    def run(self) -> None:
        with self.output().open("w") as out:
            out.write("half of the data\n")
            raise RuntimeError("the task broke mid-write")


class Compressed(luigi.Task):
    path = luigi.Parameter()

    def output(self) -> HdfsTarget:
        return HdfsTarget(self.path, format=luigi.format.Gzip)

    def run(self) -> None:
        with self.output().open("w") as out:
            out.write(b"squeezed " * 100)


def test_a_pipeline_writes_reads_and_completes_on_hdfs(cluster: HdfsCluster):
    task = WordCounts(source="/data/words.txt", destination="hdfs://localhost:8020/out/counts.tsv")

    assert luigi.build([task], local_scheduler=True)

    assert (cluster.local("/out/counts.tsv")).read_text().splitlines()[:3] == [
        "be\t2",
        "is\t1",
        "not\t1",
    ]
    assert task.complete()
    assert not any("luigitemp" in path for path in cluster.listing() if not path.startswith("/tmp/"))


def test_a_task_failing_mid_write_leaves_no_output_and_no_temporary_file(cluster: HdfsCluster):
    error = build_failing(Broken(path="/out/broken.txt"))

    assert "the task broke mid-write" in str(error)
    assert not cluster.local("/out/broken.txt").exists()
    assert [
        path for path in cluster.listing() if "luigitemp" in path and "." in path.rsplit("/", 1)[-1]
    ] == []
    assert not HdfsTarget("/out/broken.txt").exists()


def test_the_output_does_not_exist_while_it_is_being_written(cluster: HdfsCluster):
    target = HdfsTarget("/out/slow.txt")
    with target.open("w") as out:
        out.write("line\n")
        assert not target.exists()
    assert target.exists()
    with target.open("r") as back:
        assert back.read() == "line\n"


def test_a_writer_dropped_without_close_leaves_nothing(cluster: HdfsCluster):
    target = HdfsTarget("/out/dropped.txt")
    out = target.open("w")
    out.write("never committed\n")
    del out

    assert not target.exists()
    assert not [path for path in cluster.listing() if "dropped" in path]


def test_gzip_round_trips_and_the_file_on_hdfs_is_plain_gzip(cluster: HdfsCluster):
    assert luigi.build([Compressed(path="/out/data.gz")], local_scheduler=True)

    assert gzip.decompress(cluster.local("/out/data.gz").read_bytes()) == b"squeezed " * 100
    with HdfsTarget("/out/data.gz", format=luigi.format.Gzip).open("r") as back:
        assert back.read() == b"squeezed " * 100


def test_text_in_utf8_and_binary_round_trip(cluster: HdfsCluster):
    text = HdfsTarget("/out/unicode.txt")
    with text.open("w") as out:
        out.write("我éçф\n")
    raw = HdfsTarget("/out/raw.bin", format=luigi.format.Nop)
    with raw.open("w") as out:
        out.write(b"a\xf2\xf3\r\nfd")

    with text.open("r") as back:
        assert back.read() == "我éçф\n"
    with raw.open("r") as back:
        assert back.read() == b"a\xf2\xf3\r\nfd"


def test_move_into_a_missing_grandparent_and_remove(cluster: HdfsCluster):
    target = HdfsTarget("/out/first.txt")
    target._touchz()

    target.move("/elsewhere/deeper/second.txt")

    assert not target.exists()
    moved = HdfsTarget("/elsewhere/deeper/second.txt")
    assert moved.exists()
    moved.remove(skip_trash=True)
    assert not moved.exists()
    assert not cluster.local("/elsewhere/deeper/second.txt").exists()


def test_rename_refuses_an_existing_destination_when_asked(cluster: HdfsCluster):
    HdfsTarget("/out/a.txt")._touchz()
    HdfsTarget("/out/b.txt")._touchz()

    with pytest.raises(RuntimeError, match="Destination exists: /out/b.txt"):
        HdfsTarget("/out/a.txt").rename(HdfsTarget("/out/b.txt"), raise_if_exists=True)
    assert HdfsTarget("/out/a.txt").exists()


def test_rename_dont_move_refuses_an_existing_destination(cluster: HdfsCluster):
    HdfsTarget("/out/a.txt")._touchz()
    HdfsTarget("/out/b.txt")._touchz()
    client = get_autoconfig_client()

    with pytest.warns(UserWarning), pytest.raises(luigi.target.FileAlreadyExists):
        client.rename_dont_move("/out/a.txt", "/out/b.txt")


def test_a_directory_of_parts_is_read_without_its_underscore_files(cluster: HdfsCluster):
    for part, text in (("part-00000", "one\n"), ("part-00001", "two\n"), ("_SUCCESS", "")):
        with HdfsTarget(f"/job/{part}").open("w") as out:
            out.write(text)

    with HdfsTarget("/job", format=PlainDir).open("r") as back:
        assert back.read() == b"one\ntwo\n"
    assert HdfsFlagTarget("/job/").exists()
    assert not HdfsFlagTarget("/job/", flag="_DONE").exists()


def test_a_directory_output_is_written_atomically_and_an_existing_one_is_refused(cluster: HdfsCluster):
    target = HdfsTarget("/dirout", format=luigi.format.get_default_format() >> PlainDir)
    with target.open("w") as out:
        out.write("in a directory\n")
    assert cluster.local("/dirout/data").read_text() == "in a directory\n"

    with pytest.raises(HdfsAtomicWriteError, match="existed already"), target.open("w") as out:
        out.write("again\n")
    assert not target.exists()


def test_a_temporary_target_is_removed_when_collected(cluster: HdfsCluster):
    target = HdfsTarget(is_tmp=True)
    with target.open("w") as out:
        out.write("scratch\n")
    local = cluster.local(target.path)
    assert local.exists()

    del target

    assert not local.exists()


def test_a_target_pickles_with_its_format_and_client(cluster: HdfsCluster):
    for path, fmt, data in (("/out/text.txt", None, "text\n"), ("/out/plain.bin", Plain, b"bytes\n")):
        again = pickle.loads(pickle.dumps(HdfsTarget(path, format=fmt)))
        with again.open("w") as out:
            out.write(data)
        assert again.exists()
    assert cluster.local("/out/text.txt").read_bytes() == b"text\n"
    assert cluster.local("/out/plain.bin").read_bytes() == b"bytes\n"


def test_is_writable_probes_the_nearest_existing_directory(cluster: HdfsCluster):
    assert HdfsTarget("/tmp/not/yet/here.txt").is_writable()
    assert [p for p in cluster.listing() if "test_write_access" in p] == []


def test_a_missing_input_fails_the_reader_with_the_commands_error(cluster: HdfsCluster):
    with pytest.raises(RuntimeError, match="non-zero exit status 1") as failed:
        with HdfsTarget("/nope.txt").open("r") as back:
            back.read()
    if sys.version_info >= (3, 11):  # the command's stderr rides along as a note on the error
        assert "cat: `/nope.txt': No such file or directory" in "".join(failed.value.__notes__)
