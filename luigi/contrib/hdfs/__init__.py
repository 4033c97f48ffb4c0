"""HDFS for Luigi: `HdfsTarget` and the clients it reaches the cluster through.

``[hdfs] client`` picks the client: ``hadoopcli`` (default; the ``hadoop fs`` command, ``[hadoop] command``)
or ``webhdfs`` (the REST API, through the ``hdfs`` extra: ``pip install 'luigi[hdfs]'``). Importing this
package needs neither; it only registers the ``[hdfs]``, ``[hadoopcli]`` and ``[webhdfs]`` config classes.
"""

from __future__ import annotations

from luigi.contrib.hdfs import abstract_client as hdfs_abstract_client
from luigi.contrib.hdfs import clients as hdfs_clients
from luigi.contrib.hdfs import config as hdfs_config
from luigi.contrib.hdfs import error as hdfs_error
from luigi.contrib.hdfs import format as hdfs_format
from luigi.contrib.hdfs import hadoopcli_clients as hdfs_hadoopcli_clients
from luigi.contrib.hdfs import target as hdfs_target
from luigi.contrib.hdfs import webhdfs_client as hdfs_webhdfs_client
from luigi.contrib.hdfs.clients import exists, get_autoconfig_client, listdir, mkdir, remove, rename
from luigi.contrib.hdfs.config import (
    get_configured_hadoop_version,
    get_configured_hdfs_client,
    hdfs,
    load_hadoop_cmd,
    tmppath,
)
from luigi.contrib.hdfs.error import HDFSCliError
from luigi.contrib.hdfs.format import (
    CompatibleHdfsFormat,
    HdfsAtomicWriteDirPipe,
    HdfsAtomicWritePipe,
    HdfsReadPipe,
    Plain,
    PlainDir,
    PlainDirFormat,
    PlainFormat,
)
from luigi.contrib.hdfs.hadoopcli_clients import (
    HdfsClient,
    HdfsClientApache1,
    HdfsClientCdh3,
    create_hadoopcli_client,
)
from luigi.contrib.hdfs.target import HdfsFlagTarget, HdfsTarget
from luigi.contrib.hdfs.webhdfs_client import WebHdfsClient

call_check = HdfsClient.call_check

__all__ = [
    "CompatibleHdfsFormat",
    "HDFSCliError",
    "HdfsAtomicWriteDirPipe",
    "HdfsAtomicWritePipe",
    "HdfsClient",
    "HdfsClientApache1",
    "HdfsClientCdh3",
    "HdfsFlagTarget",
    "HdfsReadPipe",
    "HdfsTarget",
    "Plain",
    "PlainDir",
    "PlainDirFormat",
    "PlainFormat",
    "WebHdfsClient",
    "call_check",
    "create_hadoopcli_client",
    "exists",
    "get_autoconfig_client",
    "get_configured_hadoop_version",
    "get_configured_hdfs_client",
    "hdfs",
    "hdfs_abstract_client",
    "hdfs_clients",
    "hdfs_config",
    "hdfs_error",
    "hdfs_format",
    "hdfs_hadoopcli_clients",
    "hdfs_target",
    "hdfs_webhdfs_client",
    "listdir",
    "load_hadoop_cmd",
    "mkdir",
    "remove",
    "rename",
    "tmppath",
]
