"""Run gcp-storage-emulator on a free loopback port, for `helpers.gcs_emulator` (run as a script).

Prints ``port <n>`` once it listens, then serves until terminated. Two calls the emulator gets wrong are
put right first, as the JSON API documents them:
- a simple (``uploadType=media``) upload of zero bytes creates an empty object (the emulator reads the
  empty body as "no body" and fails the request);
- a batch answer's parts each start with ``Content-Type: application/http``, ``Content-ID:
  <response-ID>`` (ID being the request part's) and a blank line before the embedded HTTP response (the
  emulator leaves out the Content-ID, the blank line and, after a body-less 204, the CRLF that belongs to
  the next boundary, so no client can match or parse the answers).
"""

from __future__ import annotations

import secrets
import sys
import threading
from typing import Any

from gcp_storage_emulator import server as emulator
from gcp_storage_emulator.handlers import objects
from gcp_storage_emulator.server import create_server

_media_upload = objects._media_upload


def _media_upload_of_any_size(request: Any, response: Any, storage: Any) -> Any:
    if request.data is None:  # an empty body is an empty object, not a missing body
        request._data = b""
    return _media_upload(request, response, storage)


_parse_batch_item = emulator._parse_batch_item


def _parse_batch_item_keeping_id(item: Any) -> dict[str, Any]:
    parsed: dict[str, Any] = _parse_batch_item(item)
    parsed["content_id"] = str(item["Content-ID"]).strip("<>")
    return parsed


def _batch(request: Any, response: Any, storage: Any, *args: Any, **kwargs: Any) -> None:
    """The emulator's batch handler, each answer in a well-formed part naming its request."""
    boundary = f"batch_{secrets.token_hex(16)}"
    response["Content-Type"] = f"multipart/mixed; boundary={boundary}"
    for item in request.data:
        # the CRLF before a boundary belongs to the boundary (RFC 2046): without it an empty body is lost
        response.write(f"\r\n--{boundary}\r\nContent-Type: application/http\r\n")
        response.write(f"Content-ID: <response-{item['content_id']}>\r\n\r\n")
        handler = objects._BATCH_METHOD_HANDLERS.get(item.get("method"))
        bucket, name = item.get("bucket_name"), item.get("object_id")
        if handler is None or not handler(request, item, storage, bucket, name, item.get("meta"), response):
            objects._batch_write_not_found(response, bucket, name)
    response.write(f"\r\n--{boundary}--")


def _put_right() -> None:
    objects._media_upload = _media_upload_of_any_size
    emulator._parse_batch_item = _parse_batch_item_keeping_id
    for _pattern, methods in emulator.HANDLERS:
        if methods.get("POST") is objects.batch:
            methods["POST"] = _batch


def main(host: str, data_dir: str, bucket: str) -> None:
    _put_right()
    server = create_server(host, 0, in_memory=False, default_bucket=bucket, data_dir=data_dir)
    server.start()
    print(f"port {server._api._httpd.server_address[1]}", flush=True)  # the port the OS chose
    threading.Event().wait()  # serve until SIGTERM


if __name__ == "__main__":
    main(*sys.argv[1:4])
