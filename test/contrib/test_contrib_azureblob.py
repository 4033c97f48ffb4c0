"""luigi.contrib.azureblob through luigi.build against a real Azurite Blob service on loopback."""

from __future__ import annotations

import glob
import os
import sys
import tempfile
import uuid
from typing import Any

import pytest
from helpers.azurite_server import ACCOUNT, KEY, Azurite
from helpers.luigid import free_port

import luigi
from luigi.contrib.azureblob import AzureBlobClient, AzureBlobTarget, ReadableAzureBlobFile
from luigi.contrib.optional import MissingExtraError
from luigi.target import FileAlreadyExists

pytest_plugins = ["helpers.azurite_server"]


def _client(azurite: Azurite, **kwargs: Any) -> AzureBlobClient:
    return AzureBlobClient(ACCOUNT, KEY, custom_domain=azurite.custom_domain, protocol="http", **kwargs)


@pytest.fixture
def client(azurite: Azurite) -> AzureBlobClient:
    return _client(azurite)


@pytest.fixture
def container() -> str:
    return f"c{uuid.uuid4().hex[:20]}"


class _OnAzure(luigi.Task):
    container = luigi.Parameter()
    client: AzureBlobClient  # set by the test: a client is not a parameter value


class Sales(_OnAzure):
    day = luigi.Parameter()

    def output(self) -> AzureBlobTarget:
        return AzureBlobTarget(self.container, f"raw/{self.day}.csv", self.client)

    def run(self) -> None:
        with self.output().open("w") as out:
            out.write("apples,3\npears,5\n")


class Totals(_OnAzure):
    day = luigi.Parameter()

    def requires(self) -> Sales:
        return Sales(container=self.container, day=self.day)

    def output(self) -> AzureBlobTarget:
        return AzureBlobTarget(self.container, f"totals/{self.day}.txt", self.client)

    def run(self) -> None:
        with self.input().open("r") as rows:
            total = sum(int(line.split(",")[1]) for line in rows)
        with self.output().open("w") as out:
            out.write(f"{total}\n")


def test_a_pipeline_writes_and_reads_blobs(client: AzureBlobClient, container: str) -> None:
    _OnAzure.client = client
    task = Totals(container=container, day="2024-01-01")
    assert not task.complete()

    assert luigi.build([task], local_scheduler=True)

    assert task.complete()
    assert client.download_as_bytes(container, "totals/2024-01-01.txt") == b"8\n"
    assert sorted(client.listdir(f"{container}/")) == [
        f"{container}/raw/2024-01-01.csv", f"{container}/totals/2024-01-01.txt"
    ]


def test_a_blob_does_not_exist_until_its_stream_closes(client: AzureBlobClient, container: str) -> None:
    target = AzureBlobTarget(container, "out.txt", client)
    stream = target.open("w")
    stream.write("half")
    assert not target.exists()
    stream.close()
    assert target.exists()
    with target.open("r") as back:
        assert back.read() == "half"


def test_an_error_while_writing_leaves_no_blob_and_no_local_file(
    client: AzureBlobClient, container: str
) -> None:
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "luigi-azureblob-*")))
    target = AzureBlobTarget(container, "broken.txt", client)
    with pytest.raises(RuntimeError, match="disk on fire"):
        with target.open("w") as out:
            out.write("partial")
            raise RuntimeError("disk on fire")
    assert not target.exists()
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "luigi-azureblob-*"))) == before


def test_writing_again_replaces_the_blob_under_a_lease(client: AzureBlobClient, container: str) -> None:
    target = AzureBlobTarget(container, "v.txt", client)
    for version in ("one", "two"):
        with target.open("w") as out:
            out.write(version)
    assert client.download_as_bytes(container, "v.txt") == b"two"
    assert client.blob_client(container, "v.txt").get_blob_properties().lease.state == "available"


def test_a_large_upload_goes_in_blocks_and_reports_progress(azurite: Azurite, container: str) -> None:
    client = _client(azurite, max_single_put_size=1024 * 1024, max_block_size=1024 * 1024)
    progress: list[int] = []
    target = AzureBlobTarget(
        container, "big.bin", client, format=luigi.format.Nop,
        progress_callback=lambda current, total: progress.append(current),
    )
    payload = os.urandom(5 * 1024 * 1024 + 17)
    with target.open("w") as out:
        out.write(payload)
    assert client.download_as_bytes(container, "big.bin") == payload
    assert len(client.blob_client(container, "big.bin").get_block_list()[0]) == 6
    assert progress[-1] == len(payload) and len(progress) >= 6
    assert client.download_as_bytes(container, "big.bin", bytes_to_read=4) == payload[:4]


def test_copy_move_and_remove_within_a_container(client: AzureBlobClient, container: str) -> None:
    AzureBlobTarget(container, "a.txt", client)._touchz()
    assert client.copy(f"{container}/a.txt", f"{container}/b.txt")["copy_status"] == "success"
    assert client.move(f"{container}/b.txt", f"{container}/c.txt") is True
    assert not client.exists(f"{container}/b.txt") and client.exists(f"{container}/c.txt")
    assert client.remove(f"{container}/c.txt") is True
    assert client.remove(f"{container}/c.txt") is False
    assert client.exists(container) and not client.exists(f"{container}-absent")


def test_a_copy_across_containers_is_refused_with_the_reason(client: AzureBlobClient, container: str) -> None:
    AzureBlobTarget(container, "a.txt", client)._touchz()
    with pytest.raises(ValueError, match="stay in one container"):
        client.copy(f"{container}/a.txt", "elsewhere/a.txt")


def test_directories_do_not_exist_in_blob_storage(client: AzureBlobClient, container: str) -> None:
    client.mkdir(f"{container}/dir")
    assert not client.exists(f"{container}/dir") and not client.isdir(f"{container}/dir")
    AzureBlobTarget(container, "dir", client)._touchz()
    with pytest.raises(FileAlreadyExists):
        client.mkdir(f"{container}/dir", raise_if_exists=True)


def test_reading_with_download_gives_a_local_text_file_removed_after(
    client: AzureBlobClient, container: str
) -> None:
    with AzureBlobTarget(container, "notes/today.txt", client).open("w") as out:
        out.write("line one\n")
    readable = ReadableAzureBlobFile(container, "notes/today.txt", client, download_when_reading=True)
    with readable as local:
        assert local.read() == "line one\n"
        assert os.path.exists(readable.download_file_location)
    assert not os.path.exists(readable.download_file_location)


def test_a_connection_string_reaches_the_same_account(azurite: Azurite, container: str) -> None:
    connection_string = (
        f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
        f"BlobEndpoint=http://{azurite.custom_domain}/{ACCOUNT};"
    )
    client = AzureBlobClient(connection_string=connection_string)
    AzureBlobTarget(container, "x.txt", client)._touchz()
    assert _client(azurite).exists(f"{container}/x.txt")


def test_account_urls_are_luigis() -> None:
    assert AzureBlobClient("acct").options["account_url"] == "https://acct.blob.core.windows.net"
    assert (
        AzureBlobClient("acct", endpoint_suffix="core.chinacloudapi.cn").options["account_url"]
        == "https://acct.blob.core.chinacloudapi.cn"
    )
    assert (
        AzureBlobClient("acct", custom_domain="localhost:10000", protocol="http").options["account_url"]
        == "http://localhost:10000/acct"
    )
    assert AzureBlobClient.splitfilepath("abc") == ("abc", None)
    assert AzureBlobClient.splitfilepath("abc/cde/xyz.txt") == ("abc", "cde/xyz.txt")
    assert KEY not in repr(AzureBlobClient(ACCOUNT, KEY))


def test_a_refused_service_stops_the_task_naming_the_address(caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()
    client = AzureBlobClient(
        ACCOUNT, KEY, custom_domain=f"127.0.0.1:{port}", protocol="http", retry_total=0
    )
    _OnAzure.client = client
    with caplog.at_level("WARNING", logger="luigi-interface"):
        assert not luigi.build([Sales(container="c1", day="2024-01-02")], local_scheduler=True)
    (record,) = [r for r in caplog.records if "error in complete() method" in r.getMessage()]
    assert f"host='127.0.0.1', port={port}" in record.getMessage() and "refused" in record.getMessage()


def test_without_the_sdk_the_client_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "azure.storage.blob", None)
    with pytest.raises(MissingExtraError, match=r"luigi\[azureblob\]"):
        _ = AzureBlobClient(ACCOUNT, KEY).connection
