"""Apache Hive: queries as tasks, tables and partitions as targets, and the clients that ask Hive.

The ``[hive]`` section (read when used): ``command`` (default ``hive``), ``release`` (``cdh4``; ``apache``,
``metastore`` and ``warehouse`` pick the other clients), ``warehouse_location``, ``ignored_file_masks``,
``metastore_host``/``metastore_port`` and ``hiverc-location``. The Hive command runs from an argument
list, never through a shell.
"""

from __future__ import annotations

import abc
import logging
import os
import re
import subprocess
import tempfile
from collections.abc import Mapping
from typing import Any

import luigi
import luigi.configuration
from luigi.contrib import hadoop
from luigi.target import FileAlreadyExists, FileSystemTarget

__all__ = [
    "ApacheHiveCommandClient",
    "ExternalHiveTask",
    "HiveClient",
    "HiveCommandClient",
    "HiveCommandError",
    "HivePartitionTarget",
    "HiveQueryRunner",
    "HiveQueryTask",
    "HiveTableTarget",
    "HiveThriftContext",
    "MetastoreClient",
    "WarehouseHiveClient",
    "get_default_client",
    "get_hive_syntax",
    "get_hive_warehouse_location",
    "get_ignored_file_masks",
    "load_hive_cmd",
    "run_hive",
    "run_hive_cmd",
    "run_hive_script",
]

logger = logging.getLogger("luigi-interface")


def _config() -> Any:
    return luigi.configuration.get_config()


def load_hive_cmd() -> list[str]:
    """``[hive] command``, split on spaces (``hive`` by default)."""
    return str(_config().get("hive", "command", "hive")).split(" ")


def get_hive_syntax() -> str:
    """``[hive] release``: which client asks Hive (``cdh4`` by default)."""
    return str(_config().get("hive", "release", "cdh4"))


def get_hive_warehouse_location() -> str:
    return str(_config().get("hive", "warehouse_location", "/user/hive/warehouse"))


def get_ignored_file_masks() -> str | None:
    """``[hive] ignored_file_masks``: a regular expression of files that do not make a table exist."""
    masks = _config().get("hive", "ignored_file_masks", None)
    return None if masks is None else str(masks)


class HiveCommandError(RuntimeError):
    """The Hive command exited non-zero; ``out`` and ``err`` are what it printed."""

    def __init__(self, message: str, out: Any = None, err: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.out = out
        self.err = err

    def __str__(self) -> str:
        err = self.err.decode("utf-8", "replace") if isinstance(self.err, bytes) else self.err
        return f"{self.message}\n{err.strip()}" if err and str(err).strip() else self.message


def run_hive(args: list[str], check_return_code: bool = True) -> str:
    """Run the Hive command with ``args`` and return what it printed; a failure raises HiveCommandError
    unless ``check_return_code`` is False."""
    cmd = load_hive_cmd() + args
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stdout, stderr = process.communicate()
    if check_return_code and process.returncode != 0:
        raise HiveCommandError(
            f"Hive command: {' '.join(cmd)} failed with error code: {process.returncode}", stdout, stderr
        )
    return stdout.decode("utf-8") if isinstance(stdout, bytes) else str(stdout)


def run_hive_cmd(hivecmd: str, check_return_code: bool = True) -> str:
    """Run one HiveQL text (``hive -e``) and return what it printed."""
    return run_hive(["-e", hivecmd], check_return_code)


def run_hive_script(script: str) -> str:
    """Run a HiveQL file (``hive -f``) and return what it printed."""
    if not os.path.isfile(script):
        raise RuntimeError(f"Hive script: {script} does not exist.")
    return run_hive(["-f", script])


def _literal(value: Any) -> str:
    """``value`` as a HiveQL string literal's inside (quotes and backslashes escaped)."""
    return str(value).replace("\\", "\\\\").replace("'", "\\'")


class HiveClient(abc.ABC):
    """What a Hive target asks: where a table (or partition) is, its columns, whether it exists."""

    @abc.abstractmethod
    def table_location(
        self, table: str, database: str = "default", partition: Mapping[str, Any] | None = None
    ) -> Any:
        """The table's (or partition's) storage location."""

    @abc.abstractmethod
    def table_schema(self, table: str, database: str = "default") -> Any:
        """The table's columns as ``(name, type, ...)`` tuples, or None when there is no table."""

    @abc.abstractmethod
    def table_exists(
        self, table: str, database: str = "default", partition: Mapping[str, Any] | None = None
    ) -> bool:
        """Whether the table (or the partition) exists."""

    @abc.abstractmethod
    def partition_spec(self, partition: Mapping[str, Any]) -> str:
        """The partition as the client writes it in its requests."""


class HiveCommandClient(HiveClient):
    """Asks Hive through its command line (``hive -e``)."""

    def table_location(
        self, table: str, database: str = "default", partition: Mapping[str, Any] | None = None
    ) -> Any:
        command = f"use {database}; describe formatted {table}"
        if partition is not None:
            command += f" PARTITION ({self.partition_spec(partition)})"
        for line in run_hive_cmd(command).split("\n"):
            if "Location:" in line:
                return line.split("\t")[1]
        return None

    def table_exists(
        self, table: str, database: str = "default", partition: Mapping[str, Any] | None = None
    ) -> bool:
        if partition is None:
            stdout = run_hive_cmd(f'use {database}; show tables like "{table}";')
            return bool(stdout) and table.lower() in stdout
        stdout = run_hive_cmd(
            f"use {database}; show partitions {table} partition\n({self.partition_spec(partition)})"
        )
        return bool(stdout)

    def table_schema(self, table: str, database: str = "default") -> Any:
        described = run_hive_cmd(f"use {database}; describe {table}")
        if not described or "does not exist" in described:
            return None
        return _schema_rows(described)

    def partition_spec(self, partition: Mapping[str, Any]) -> str:
        """``\\`k\\`='v'`` for each key in sorted order, joined by commas."""
        return ",".join(f"`{key}`='{_literal(value)}'" for key, value in sorted(partition.items()))


def _schema_rows(described: str) -> list[tuple[str, ...]]:
    """Each line of ``describe``'s answer as the tuple of its tab-separated fields."""
    lines = described.strip().split("\n")
    return [tuple(field.strip() for field in line.strip().split("\t")) for line in lines]


class ApacheHiveCommandClient(HiveCommandClient):
    """Apache Hive's command line, which exits non-zero (``Table not found``) for a missing table."""

    def table_schema(self, table: str, database: str = "default") -> Any:
        described = run_hive_cmd(f"use {database}; describe {table}", False)
        if not described or "Table not found" in described:
            return None
        return _schema_rows(described)


class HiveThriftContext:
    """A Hive metastore client over Thrift for one ``with`` block (``[hive] metastore_host``/``_port``)."""

    def __enter__(self) -> Any:
        try:
            from hive_metastore import ThriftHiveMetastore
            from thrift.protocol import TBinaryProtocol
            from thrift.transport import TSocket, TTransport
        except ImportError as error:
            raise Exception(f"Could not import Hive thrift library: {error}") from error
        host = _config().get("hive", "metastore_host")
        port = _config().getint("hive", "metastore_port")
        self.transport = TTransport.TBufferedTransport(TSocket.TSocket(host, port))
        protocol = TBinaryProtocol.TBinaryProtocol(self.transport)
        self.transport.open()
        return ThriftHiveMetastore.Client(protocol)

    def __exit__(self, *exc: Any) -> None:
        self.transport.close()


class MetastoreClient(HiveClient):
    """Asks the Hive metastore directly, over Thrift."""

    def table_location(
        self, table: str, database: str = "default", partition: Mapping[str, Any] | None = None
    ) -> Any:
        with HiveThriftContext() as client:
            if partition is None:
                return client.get_table(database, table).sd.location
            try:
                found = client.get_partition_by_name(database, table, self.partition_spec(partition))
            except Exception as error:
                if type(error).__name__ != "NoSuchObjectException":
                    raise
                return ""
            return found.sd.location

    def table_exists(
        self, table: str, database: str = "default", partition: Mapping[str, Any] | None = None
    ) -> bool:
        with HiveThriftContext() as client:
            if partition is None:
                return table in client.get_all_tables(database)
            wanted = {str(key): str(value) for key, value in partition.items()}
            for name in client.get_partition_names(database, table, -1):
                if dict(part.split("=", 1) for part in name.split("/")) == wanted:
                    return True
            return False

    def table_schema(self, table: str, database: str = "default") -> Any:
        with HiveThriftContext() as client:
            return [(field.name, field.type) for field in client.get_schema(database, table)]

    def partition_spec(self, partition: Mapping[str, Any]) -> str:
        """``k=v`` for each key in sorted order, joined by ``/`` (the metastore's partition name)."""
        return "/".join(f"{key}={value}" for key, value in sorted(partition.items()))


class WarehouseHiveClient(HiveClient):
    """Answers from the warehouse's files on HDFS: a table exists once its folder holds a file that
    ``[hive] ignored_file_masks`` does not ignore."""

    def __init__(self, hdfs_client: Any = None, warehouse_location: str | None = None) -> None:
        if hdfs_client is None:
            from luigi.contrib.hdfs import get_autoconfig_client

            hdfs_client = get_autoconfig_client()
        self.hdfs_client = hdfs_client
        self.warehouse_location = warehouse_location or get_hive_warehouse_location()

    def table_location(
        self, table: str, database: str = "default", partition: Mapping[str, Any] | None = None
    ) -> str:
        return os.path.join(
            self.warehouse_location, f"{database}.db", table, self.partition_spec(partition)
        )

    def table_exists(
        self, table: str, database: str = "default", partition: Mapping[str, Any] | None = None
    ) -> bool:
        path = self.table_location(table, database, partition)
        if not self.hdfs_client.exists(path):
            return False
        masks = get_ignored_file_masks()
        if masks is None:
            return True
        ignored = re.compile(masks)
        return any(not ignored.search(entry) for entry in self.hdfs_client.listdir(path))

    def table_schema(self, table: str, database: str = "default") -> Any:
        return NotImplemented

    def partition_spec(self, partition: Any) -> str:
        """``k=v/k2=v2`` in the partition's own order ('' for none); a partition that is not a dict must
        have one key."""
        if not partition:
            return ""
        if not isinstance(partition, Mapping):
            if len(partition) > 1:
                raise ValueError(
                    f"partition {partition!r} has several keys but no order: give it as a dict"
                )
            partition = dict(partition)
        return "/".join(f"{key}={value}" for key, value in partition.items())


def get_default_client() -> HiveClient:
    """The client ``[hive] release`` names."""
    syntax = get_hive_syntax()
    if syntax == "apache":
        return ApacheHiveCommandClient()
    if syntax == "metastore":
        return MetastoreClient()
    if syntax == "warehouse":
        return WarehouseHiveClient()
    return HiveCommandClient()


client = get_default_client()  # Luigi's module-level client (made without asking Hive anything)


class HiveQueryTask(hadoop.BaseHadoopJobTask):
    """Run the HiveQL ``query()`` with the Hive command; its outputs are the tables it writes."""

    n_reduce_tasks: int | None = None
    bytes_per_reducer: int | None = None
    reducers_max: int | None = None

    @abc.abstractmethod
    def query(self) -> str:
        """The HiveQL to run."""

    def hiverc(self) -> str | list[str] | None:
        """Initialisation files run first (``hive -i``): ``[hive] hiverc-location``, one or a list."""
        return _config().get("hive", "hiverc-location", default=None)

    def hivevars(self) -> dict[str, Any]:
        """Variables for the query (``--hivevar k=v``)."""
        return {}

    def hiveconfs(self) -> dict[str, Any]:
        """Hive settings for the run (``--hiveconf k=v``): the job's name, and reducer and pool limits."""
        confs: dict[str, Any] = {"mapred.job.name": f"'{self.task_id}'"}
        if self.n_reduce_tasks is not None:
            confs["mapred.reduce.tasks"] = self.n_reduce_tasks
        pool = self._get_pool()
        if pool is not None:
            scheduler = _config().get("hadoop", "scheduler", "fair")
            key = "mapred.fairscheduler.pool" if scheduler == "fair" else "mapred.job.queue.name"
            confs[key] = pool
        if self.bytes_per_reducer is not None:
            confs["hive.exec.reducers.bytes.per.reducer"] = self.bytes_per_reducer
        if self.reducers_max is not None:
            confs["hive.exec.reducers.max"] = self.reducers_max
        return confs

    def job_runner(self) -> HiveQueryRunner:
        return HiveQueryRunner()


class HiveQueryRunner(hadoop.JobRunner):
    """Runs a HiveQueryTask's query from a file with the Hive command, tracking the Hadoop job it starts."""

    def prepare_outputs(self, job: Any) -> None:
        """Create the missing parent folder of each file output (Hive writes into it)."""
        for target in luigi.task.flatten(job.output()):
            if not isinstance(target, FileSystemTarget):
                continue
            parent = os.path.dirname(target.path.rstrip("/"))
            if parent and not target.fs.exists(parent):
                try:
                    target.fs.mkdir(parent)
                except FileAlreadyExists:
                    pass  # made meanwhile by another task

    def get_arglist(self, f_name: str, job: Any) -> list[str]:
        """``hive -f <file>``, then ``-i`` per hiverc file, ``--hiveconf k=v`` and ``--hivevar k=v``."""
        arglist = load_hive_cmd() + ["-f", f_name]
        hiverc = job.hiverc()
        for rc_file in [hiverc] if isinstance(hiverc, str) else (hiverc or []):
            arglist += ["-i", rc_file]
        for key, value in job.hiveconfs().items():
            arglist += ["--hiveconf", f"{key}={value}"]
        for key, value in job.hivevars().items():
            arglist += ["--hivevar", f"{key}={value}"]
        return arglist

    def run_job(self, job: Any, tracking_url_callback: Any = None) -> None:
        if tracking_url_callback is not None:
            logger.warning("tracking_url_callback is unused: the job's set_tracking_url is used instead")
        self.prepare_outputs(job)
        with tempfile.NamedTemporaryFile(suffix=".hql") as query_file:
            query_file.write(job.query().encode("utf-8"))
            query_file.flush()
            arglist = self.get_arglist(query_file.name, job)
            logger.info("Running Hive: %s", " ".join(arglist))
            hadoop.run_and_track_hadoop_job(arglist, job.set_tracking_url)


class HivePartitionTarget(luigi.Target):
    """A partition of a Hive table; it exists once Hive has it."""

    def __init__(
        self,
        table: str,
        partition: Mapping[str, Any] | None,
        database: str = "default",
        fail_missing_table: bool = True,
        client: HiveClient | None = None,
    ) -> None:
        self.database = database
        self.table = table
        self.partition = partition
        self.client = client or get_default_client()
        self.fail_missing_table = fail_missing_table

    def __str__(self) -> str:
        return self.path

    def exists(self) -> bool:
        """Whether the partition exists; a missing table is an error unless ``fail_missing_table`` is off."""
        try:
            return bool(self.client.table_exists(self.table, self.database, self.partition))
        except HiveCommandError:
            if self.fail_missing_table or self.client.table_exists(self.table, self.database):
                raise
            return False

    @property
    def path(self) -> str:
        """The partition's storage location."""
        location = self.client.table_location(self.table, self.database, self.partition)
        if not location:
            raise Exception(f"Couldn't find location for table: {self.database}.{self.table}")
        return str(location)


class HiveTableTarget(HivePartitionTarget):
    """A whole Hive table; it exists once Hive has it."""

    def __init__(self, table: str, database: str = "default", client: HiveClient | None = None) -> None:
        super().__init__(table, None, database, fail_missing_table=False, client=client)


class ExternalHiveTask(luigi.ExternalTask):
    """A Hive table (or partition) made outside this pipeline."""

    database = luigi.Parameter(default="default")
    table = luigi.Parameter()
    partition = luigi.DictParameter(default={}, description="the partition, as column=value pairs")

    def output(self) -> HivePartitionTarget:
        return HivePartitionTarget(
            database=self.database, table=self.table, partition=dict(self.partition) or None
        )
