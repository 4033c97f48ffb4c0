"""HDFS settings: the ``[hdfs]`` section, the ``hadoop`` command, and temporary paths beside a target."""

from __future__ import annotations

import getpass
import os
import random
from urllib.parse import urlparse, urlunparse

import luigi

__all__ = [
    "get_configured_hadoop_version",
    "get_configured_hdfs_client",
    "hadoopcli",
    "hdfs",
    "load_hadoop_cmd",
    "tmppath",
]


class hdfs(luigi.Config):
    """``[hdfs]``: which client talks to the cluster, where its NameNode is, where temporary files go."""

    client_version = luigi.IntParameter(default=None)
    namenode_host = luigi.OptionalParameter(default=None)
    namenode_port = luigi.IntParameter(default=None)
    client = luigi.Parameter(default="hadoopcli", description="hadoopcli (the hadoop command) or webhdfs")
    tmp_dir = luigi.OptionalParameter(
        default=None,
        config_path=dict(section="core", name="hdfs-tmp-dir"),
        description="where atomic writes stage their data; default /tmp on the target's file system",
    )
    effective_user = luigi.OptionalParameter(
        default=None, description="the user to act as on the cluster (read by clients that support it)"
    )


class hadoopcli(luigi.Config):
    """The ``hadoop`` command line (``[hadoop] command``) and the Hadoop version it speaks."""

    command = luigi.Parameter(
        default="hadoop",
        config_path=dict(section="hadoop", name="command"),
        description="the hadoop executable, with any leading arguments",
    )
    version = luigi.Parameter(
        default="cdh4",
        config_path=dict(section="hadoop", name="version"),
        description="cdh4 (Hadoop 2 and later), cdh3 or apache1",
    )


def load_hadoop_cmd() -> list[str]:
    """The ``hadoop`` command as an argument list (``[hadoop] command`` split on spaces)."""
    return str(hadoopcli().command).split()


def get_configured_hadoop_version() -> str:
    """The ``[hadoop] version``, lowercased."""
    return str(hadoopcli().version).lower()


def get_configured_hdfs_client() -> str:
    """The name of the client ``[hdfs] client`` asks for: ``hadoopcli`` or ``webhdfs``."""
    return str(hdfs().client)


def tmppath(path: str | None = None, include_unix_username: bool = True) -> str:
    """A fresh temporary path for ``path`` on the same file system: ``<tmp dir>/<user>/<path>-luigitemp-<n>``.

    The directory is ``[hdfs] tmp_dir`` (or ``[core] hdfs-tmp-dir``) when set, else ``/tmp`` on the scheme and
    host of ``path``, so a rename from it into place never crosses file systems.
    """
    addon = f"luigitemp-{random.randrange(10**10):09d}"
    configured = hdfs().tmp_dir
    subpath = ""
    if path is not None:
        parsed = urlparse(path)
        base = configured or urlunparse((parsed.scheme, parsed.netloc, "/tmp", "", "", ""))
        subpath = path[len("/tmp") :] if path.startswith("/tmp/") else parsed.path
        subpath = subpath.lstrip("/") + "-"
    else:
        base = configured or "/tmp"
    if include_unix_username:
        subpath = f"{getpass.getuser()}/{subpath}"
    return os.path.join(base, subpath + addon)
