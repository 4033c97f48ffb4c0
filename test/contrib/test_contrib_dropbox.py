"""luigi.contrib.dropbox through luigi.build, with the official SDK against a stand-in of the Dropbox API
v2 file endpoints (test/helpers/dropbox_standin.py; Dropbox cannot be reached from here)."""

from __future__ import annotations

import glob
import os
import sys
import tempfile
from collections.abc import Iterator

import pytest

pytest.importorskip("dropbox")
pytest.importorskip("responses")

import dropbox  # noqa: E402
from helpers.dropbox_standin import TOKEN, DropboxStandIn, dropbox_standin  # noqa: E402

import luigi  # noqa: E402
from luigi.contrib import dropbox as luigi_dropbox  # noqa: E402
from luigi.contrib.dropbox import DropboxClient, DropboxTarget  # noqa: E402
from luigi.contrib.optional import MissingExtraError  # noqa: E402
from luigi.target import FileAlreadyExists, NotADirectory  # noqa: E402


@pytest.fixture
def account() -> Iterator[DropboxStandIn]:
    with dropbox_standin() as standin:
        yield standin


@pytest.fixture
def client(account: DropboxStandIn) -> DropboxClient:
    return DropboxClient(TOKEN)


class Sales(luigi.Task):
    day = luigi.Parameter()

    def output(self) -> DropboxTarget:
        return DropboxTarget(f"/Reports/raw/{self.day}.csv", TOKEN)

    def run(self) -> None:
        with self.output().open("w") as out:
            out.write("apples,3\npears,5\n")


class Totals(luigi.Task):
    day = luigi.Parameter()

    def requires(self) -> Sales:
        return Sales(day=self.day)

    def output(self) -> DropboxTarget:
        return DropboxTarget(f"/Reports/totals/{self.day}.txt", TOKEN)

    def run(self) -> None:
        with self.input().open("r") as rows:
            total = sum(int(line.split(",")[1]) for line in rows)
        with self.output().temporary_path() as local:
            with open(local, "w") as out:
                out.write(f"{total}\n")


def test_a_pipeline_writes_and_reads_dropbox_files(account: DropboxStandIn, client: DropboxClient) -> None:
    task = Totals(day="2024-01-01")
    assert not task.complete()

    assert luigi.build([task], local_scheduler=True)

    assert task.complete()
    assert client.download_as_bytes("/Reports/totals/2024-01-01.txt") == b"8\n"
    assert client.listdir("/Reports") == [
        "/Reports", "/Reports/raw", "/Reports/raw/2024-01-01.csv", "/Reports/totals",
        "/Reports/totals/2024-01-01.txt",
    ]


def test_a_file_does_not_exist_until_its_stream_closes_and_a_failed_write_leaves_nothing(
    account: DropboxStandIn,
) -> None:
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "luigi-dropbox-*")))
    target = DropboxTarget("/out.txt", TOKEN)
    stream = target.open("w")
    stream.write("half")
    assert not target.exists()
    stream.close()
    assert target.exists()
    with pytest.raises(RuntimeError, match="disk on fire"):
        with DropboxTarget("/broken.txt", TOKEN).open("w") as out:
            out.write("partial")
            raise RuntimeError("disk on fire")
    assert not DropboxTarget("/broken.txt", TOKEN).exists()
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "luigi-dropbox-*"))) == before


def test_a_large_file_goes_up_in_chunks_at_the_right_offsets(
    account: DropboxStandIn, client: DropboxClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(luigi_dropbox, "CHUNK_SIZE", 1000)
    payload = os.urandom(3500)
    with DropboxTarget("/big.bin", TOKEN, format=luigi.format.Nop).open("w") as out:
        out.write(payload)
    assert client.download_as_bytes("/big.bin") == payload
    uploads = [c for c in account.calls if c.startswith("upload_session")]
    assert uploads == ["upload_session/start"] + ["upload_session/append_v2"] * 2 + ["upload_session/finish"]


def test_exists_isdir_and_trailing_slashes(account: DropboxStandIn, client: DropboxClient) -> None:
    account.put("/data/file.txt", b"x")
    assert client.exists("/") and client.isdir("/")
    assert client.exists("/data/") and client.isdir("/data")
    assert client.exists("/data/file.txt") and not client.exists("/data/file.txt/")
    assert not client.exists("/nothing") and not client.isdir("/nothing")
    assert client.exists("/DATA/FILE.TXT")  # Dropbox paths are case-insensitive


def test_mkdir_remove_move_and_copy(account: DropboxStandIn, client: DropboxClient) -> None:
    client.mkdir("/a/b")
    assert client.isdir("/a") and client.isdir("/a/b")
    client.mkdir("/a/b")  # exists: nothing to do
    with pytest.raises(FileAlreadyExists):
        client.mkdir("/a/b", raise_if_exists=True)
    account.put("/a/f.txt", b"1")
    with pytest.raises(NotADirectory):
        client.mkdir("/a/f.txt")
    with pytest.raises(dropbox.exceptions.ApiError):
        client.mkdir("/bad//path")
    client.copy("/a/f.txt", "/c/f.txt")
    client.move("/a/f.txt", "/d/g.txt")
    assert not client.exists("/a/f.txt")
    assert client.download_as_bytes("/c/f.txt") == client.download_as_bytes("/d/g.txt") == b"1"
    assert client.remove("/a") is True and not client.exists("/a/b")
    assert client.remove("/a") is False


def test_listing_pages_and_a_missing_folder(account: DropboxStandIn, client: DropboxClient) -> None:
    account.page_size = 2
    for n in range(5):
        account.put(f"/many/{n}.txt", b"")
    assert client.listdir("/many") == ["/many"] + [f"/many/{n}.txt" for n in range(5)]
    assert account.calls.count("list_folder/continue") == 2
    with pytest.raises(dropbox.exceptions.ApiError):
        client.listdir("/missing")


def test_reading_a_missing_file_fails_and_a_wrong_token_is_refused(account: DropboxStandIn) -> None:
    with pytest.raises(dropbox.exceptions.ApiError, match="not_found"):
        DropboxTarget("/missing.txt", TOKEN).open("r").read()
    with pytest.raises(dropbox.exceptions.AuthError, match="invalid_access_token"):
        DropboxClient("sl.wrong").exists("/x")


def test_a_task_reading_a_missing_input_fails_and_writes_nothing(account: DropboxStandIn) -> None:
    class Broken(Totals):
        def requires(self) -> list[luigi.Task]:
            return []

        def input(self) -> DropboxTarget:  # type: ignore[override]
            return DropboxTarget("/Reports/raw/none.csv", TOKEN)

    failures: list[BaseException] = []
    Broken.event_handler(luigi.Event.FAILURE)(lambda task, error: failures.append(error))
    assert not luigi.build([Broken(day="2024-01-02")], local_scheduler=True)
    assert "not_found" in str(failures[0])
    assert not DropboxTarget("/Reports/totals/2024-01-02.txt", TOKEN).exists()


def test_an_empty_token_is_refused_and_the_token_stays_out_of_reprs() -> None:
    with pytest.raises(ValueError, match="OAuth2 access token"):
        DropboxTarget("/x", "")
    with pytest.raises(ValueError, match="OAuth2 access token"):
        DropboxClient("")
    assert TOKEN not in repr(DropboxClient(TOKEN))


def test_a_team_space_root_reaches_the_sdk(account: DropboxStandIn) -> None:
    client = DropboxClient(TOKEN, root_namespace_id="12345")
    assert client.conn._headers["Dropbox-API-Path-Root"] == '{".tag": "root", "root": "12345"}'


def test_without_the_sdk_the_client_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "dropbox", None)
    with pytest.raises(MissingExtraError, match=r"luigi\[dropbox\]"):
        DropboxClient(TOKEN)
