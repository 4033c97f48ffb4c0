"""Azure Blob Storage: blobs as targets, written atomically (uploaded whole when the stream closes).

Paths are ``<container>/<blob>``. ``AzureBlobClient`` reaches the account at
``https://<account>.blob.core.windows.net`` by default, or at ``<protocol>://<custom_domain>/<account>``
(Azurite, a proxy), or through a ``connection_string``. Needs the Azure SDK:
``pip install 'luigi[azureblob]'``.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import IO, Any, cast

from luigi.contrib._remote_reader import RemoteReader
from luigi.contrib.optional import require
from luigi.contrib.staged_upload import StagedUpload
from luigi.format import Format, get_default_format
from luigi.target import FileAlreadyExists, FileSystem, FileSystemTarget

__all__ = ["AtomicAzureBlobFile", "AzureBlobClient", "AzureBlobTarget", "ReadableAzureBlobFile"]

# Settings that say where the account is; the other keyword arguments go to the SDK's client.
_ADDRESS_KEYS = ("custom_domain", "protocol", "endpoint_suffix", "connection_string")


def _sdk() -> Any:
    return require("azure.storage.blob", "azureblob", "luigi.contrib.azureblob", "azure-storage-blob")


class AzureBlobClient(FileSystem):
    """The blobs of one storage account."""

    def __init__(
        self,
        account_name: str | None = None,
        account_key: str | None = None,
        sas_token: str | None = None,
        **kwargs: Any,
    ) -> None:
        protocol = kwargs.get("protocol") or "https"
        if kwargs.get("custom_domain"):
            account_url = f"{protocol}://{kwargs['custom_domain']}/{account_name}"
        else:
            suffix = kwargs.get("endpoint_suffix") or "core.windows.net"
            account_url = f"{protocol}://{account_name}.blob.{suffix}"
        self.options = {
            "account_name": account_name,
            "account_key": account_key,
            "account_url": account_url,
            "sas_token": sas_token,
        }
        self.kwargs = kwargs

    def __repr__(self) -> str:  # the key and token stay out of logs
        return f"AzureBlobClient(account_url={self.options['account_url']!r})"

    @property
    def connection(self) -> Any:
        """A new ``BlobServiceClient`` for the account."""
        sdk_options = {k: v for k, v in self.kwargs.items() if k not in _ADDRESS_KEYS}
        service = _sdk().BlobServiceClient
        if self.kwargs.get("connection_string"):
            return service.from_connection_string(conn_str=self.kwargs["connection_string"], **sdk_options)
        credential = self.options["account_key"] or self.options["sas_token"]
        return service(account_url=self.options["account_url"], credential=credential, **sdk_options)

    def container_client(self, container_name: str) -> Any:
        return self.connection.get_container_client(container_name)

    def blob_client(self, container_name: str, blob_name: str) -> Any:
        return self.container_client(container_name).get_blob_client(blob_name)

    def upload(self, tmp_path: str, container: str, blob: str, **kwargs: Any) -> None:
        """Upload the local file ``tmp_path`` as the blob, replacing it under a lease if it exists;
        the container is created when missing. ``progress_callback`` gets the SDK's progress hook calls."""
        self.create_container(container)
        client = self.blob_client(container, blob)
        with self._leased(client) as lease, open(tmp_path, "rb") as data:
            client.upload_blob(
                data, overwrite=True, lease=lease, progress_hook=kwargs.get("progress_callback")
            )

    @contextlib.contextmanager
    def _leased(self, client: Any) -> Iterator[Any]:
        """A lease on the blob while the block runs (None when there is no blob yet)."""
        lease = client.acquire_lease() if client.exists() else None
        try:
            yield lease
        finally:
            if lease is not None:
                with contextlib.suppress(Exception):  # deleted under the lease: nothing left to release
                    lease.release()

    def download_as_bytes(self, container: str, blob: str, bytes_to_read: int | None = None) -> bytes:
        """The blob's content (its first ``bytes_to_read`` bytes when given)."""
        client = self.blob_client(container, blob)
        if bytes_to_read is not None:
            return bytes(client.download_blob(offset=0, length=bytes_to_read).readall())
        return bytes(client.download_blob().readall())

    def download_as_file(self, container: str, blob: str, location: str) -> Any:
        """Write the blob to the local file ``location``; returns the blob's properties."""
        client = self.blob_client(container, blob)
        with open(location, "wb") as file:
            client.download_blob().readinto(file)
        return client.get_blob_properties()

    def create_container(self, container_name: str) -> Any:
        """The container, created if it does not exist yet."""
        client = self.container_client(container_name)
        if not client.exists():
            with contextlib.suppress(_sdk_error("ResourceExistsError")):  # created meanwhile: fine
                client.create_container()
        return client

    def delete_container(self, container_name: str) -> None:
        """Delete the container and its blobs, under a lease so no other writer races the delete."""
        client = self.container_client(container_name)
        lease = client.acquire_lease()
        client.delete_container(lease=lease)

    def exists(self, path: str) -> bool:
        container, blob = self.splitfilepath(path)
        if blob is None:
            return bool(self.container_client(container).exists())
        return bool(self.blob_client(container, blob).exists())

    def remove(self, path: str, recursive: bool = True, skip_trash: bool = True) -> bool:  # type: ignore[override]
        """Delete the blob; False when there was none."""
        container, blob = self._blob_path(path)
        client = self.blob_client(container, blob)
        if not client.exists():
            return False
        lease = client.acquire_lease()
        client.delete_blob(lease=lease)
        return True

    def mkdir(self, path: str, parents: bool = True, raise_if_exists: bool = False) -> None:
        """Blob storage has no directories: this creates nothing (Luigi's behaviour)."""
        if raise_if_exists and self.exists(path):
            raise FileAlreadyExists(f"{path} exists already")

    def isdir(self, path: str) -> bool:
        """Always False: blob storage has no directories."""
        return False

    def listdir(self, path: str) -> Iterator[str]:
        """The ``container/blob`` paths of the blobs whose names start with the path's blob part."""
        container, prefix = self.splitfilepath(path)
        for blob in self.container_client(container).list_blobs(name_starts_with=prefix or None):
            yield f"{container}/{blob.name}"

    def copy(self, path: str, dest: str) -> dict[str, Any]:  # type: ignore[override]  # the copy status
        """Copy a blob within its container (the service copies it; both blobs leased meanwhile)."""
        source_container, source_blob = self._blob_path(path)
        dest_container, dest_blob = self._blob_path(dest)
        if source_container != dest_container:
            raise ValueError(
                f"cannot copy {path} to {dest}: Azure Blob copies stay in one container; "
                "download and upload to copy across containers"
            )
        source = self.blob_client(source_container, source_blob)
        target = self.blob_client(dest_container, dest_blob)
        with self._leased(source) as source_lease, self._leased(target) as dest_lease:
            return dict(
                target.start_copy_from_url(
                    source_url=source.url, source_lease=source_lease, destination_lease=dest_lease
                )
            )

    def move(self, path: str, dest: str) -> bool:  # type: ignore[override]
        """Copy then delete the source; on an I/O error the copy is removed and False returned."""
        try:
            return bool(self.copy(path, dest)) and self.remove(path)
        except OSError:
            self.remove(dest)
            return False

    def rename_dont_move(self, path: str, dest: str) -> None:
        self.move(path, dest)

    def _blob_path(self, path: str) -> tuple[str, str]:
        container, blob = self.splitfilepath(path)
        if blob is None:
            raise ValueError(f"{path!r} names a container, not a blob: use <container>/<blob>")
        return container, blob

    @staticmethod
    def splitfilepath(filepath: str) -> tuple[str, str | None]:
        """``container/name/with/slashes`` as (container, blob); a bare container gives (container, None)."""
        container, _, blob = filepath.partition("/")
        return container, blob or None


def _sdk_error(name: str) -> type[BaseException]:
    exceptions = require("azure.core.exceptions", "azureblob", "luigi.contrib.azureblob", "azure-core")
    error: type[BaseException] = getattr(exceptions, name)
    return error


class ReadableAzureBlobFile(RemoteReader):
    """A blob opened for reading; with ``download_when_reading`` its ``with`` block reads a local copy."""

    def __init__(
        self,
        container: str,
        blob: str,
        client: AzureBlobClient,
        download_when_reading: bool,
        **kwargs: Any,
    ) -> None:
        self.container = container
        self.blob = blob
        self.client = client
        self.download_when_reading = download_when_reading
        self.azure_blob_options = kwargs
        self.download_file_location = os.path.join(
            tempfile.mkdtemp(prefix=str(datetime.datetime.now(datetime.timezone.utc))), blob
        )
        self.fid: IO[str] | None = None
        self._download: Any = None

    def read(self, n: int | None = None) -> bytes:
        """The next ``n`` bytes of the blob (all the rest by default), streamed from one download."""
        if self._download is None:
            self._download = self.client.blob_client(self.container, self.blob).download_blob()
        return bytes(self._download.read(-1 if n is None or n < 0 else n))

    def __iter__(self) -> Iterator[bytes]:
        return iter(io.BufferedReader(cast(Any, self)))  # lines, buffered over this raw stream

    def __enter__(self) -> Any:
        if not self.download_when_reading:
            return self
        os.makedirs(os.path.dirname(self.download_file_location), exist_ok=True)
        self.client.download_as_file(self.container, self.blob, self.download_file_location)
        self.fid = open(self.download_file_location)  # noqa: SIM115  # closed by __exit__
        return self.fid

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if self.fid is not None:
            self.fid.close()
        shutil.rmtree(os.path.dirname(self.download_file_location), ignore_errors=True)
        self.closed = True

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            shutil.rmtree(os.path.dirname(self.download_file_location), ignore_errors=True)


class AtomicAzureBlobFile(StagedUpload):
    """A local file uploaded as the blob when it closes: the blob appears whole or not at all."""

    local_prefix = "luigi-azureblob"

    def __init__(self, container: str, blob: str, client: AzureBlobClient, **kwargs: Any) -> None:
        self.container = container
        self.blob = blob
        self.client = client
        self.azure_blob_options = kwargs
        super().__init__(client, os.path.join(container, blob))

    def _upload(self, staged_path: str) -> None:
        self.client.upload(staged_path, self.container, self.blob, **self.azure_blob_options)


class AzureBlobTarget(FileSystemTarget):
    """The blob ``blob`` in ``container``; ``open('w')`` uploads it when the stream closes."""

    def __init__(
        self,
        container: str,
        blob: str,
        client: AzureBlobClient | None = None,
        format: Format | None = None,
        download_when_reading: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(os.path.join(container, blob))
        self.container = container
        self.blob = blob
        self.client = client or AzureBlobClient()
        self.format = format if format is not None else get_default_format()
        self.download_when_reading = download_when_reading
        self.azure_blob_options = kwargs

    @property
    def fs(self) -> AzureBlobClient:
        return self.client

    def open(self, mode: str = "r") -> Any:
        """Open for reading ('r') or atomic writing ('w')."""
        if mode == "r":
            readable = ReadableAzureBlobFile(
                self.container, self.blob, self.client, self.download_when_reading,
                **self.azure_blob_options,
            )
            return self.format.pipe_reader(readable)
        if mode == "w":
            writer = AtomicAzureBlobFile(
                self.container, self.blob, self.client, **self.azure_blob_options
            )
            return self.format.pipe_writer(writer)
        raise ValueError(f"Unsupported open mode {mode!r} for AzureBlobTarget {self.path}: use 'r' or 'w'")
