"""The configured HDFS client (``[hdfs] client``), one per thread, and shortcuts to its operations."""

from __future__ import annotations

import threading
from typing import Any

from luigi.contrib.hdfs import abstract_client as hdfs_abstract_client
from luigi.contrib.hdfs import config as hdfs_config
from luigi.contrib.hdfs import hadoopcli_clients as hdfs_hadoopcli_clients
from luigi.contrib.hdfs import webhdfs_client as hdfs_webhdfs_client

__all__ = ["exists", "get_autoconfig_client", "listdir", "mkdir", "remove", "rename"]

_AUTOCONFIG_CLIENT = threading.local()


def _settings_key() -> tuple[Any, ...]:
    """What a client is built from; a client built from other settings is not reused."""
    settings = hdfs_config.hdfs()
    return (
        settings.client,
        settings.namenode_host,
        hdfs_config.hadoopcli().command,
        hdfs_config.get_configured_hadoop_version(),
        hdfs_webhdfs_client.webhdfs().port,
        hdfs_webhdfs_client.webhdfs().user,
        hdfs_webhdfs_client.webhdfs().client_type,
    )


def get_autoconfig_client(client_cache: Any = _AUTOCONFIG_CLIENT) -> hdfs_abstract_client.HdfsFileSystem:
    """The client ``[hdfs] client`` names (``hadoopcli`` or ``webhdfs``), made once per thread."""
    key = _settings_key()
    if getattr(client_cache, "key", None) == key:
        return client_cache.client
    name = hdfs_config.get_configured_hdfs_client()
    client: hdfs_abstract_client.HdfsFileSystem
    if name == "webhdfs":
        client = hdfs_webhdfs_client.WebHdfsClient()
    elif name == "hadoopcli":
        client = hdfs_hadoopcli_clients.create_hadoopcli_client()
    else:
        raise Exception(f"Unknown hdfs client {name}: set [hdfs] client to hadoopcli or webhdfs")
    client_cache.client, client_cache.key = client, key
    return client


def exists(*args: Any, **kwargs: Any) -> bool:
    """`exists` of the configured client."""
    return get_autoconfig_client().exists(*args, **kwargs)


def rename(*args: Any, **kwargs: Any) -> Any:
    """`rename` (a move) of the configured client."""
    return get_autoconfig_client().rename(*args, **kwargs)


def remove(*args: Any, **kwargs: Any) -> Any:
    """`remove` of the configured client."""
    return get_autoconfig_client().remove(*args, **kwargs)


def mkdir(*args: Any, **kwargs: Any) -> None:
    """`mkdir` of the configured client."""
    get_autoconfig_client().mkdir(*args, **kwargs)


def listdir(*args: Any, **kwargs: Any) -> Any:
    """`listdir` of the configured client."""
    return get_autoconfig_client().listdir(*args, **kwargs)
