"""Fixtures standing in for an HDFS cluster (none can run here): a ``hadoop`` command and a WebHDFS server
over one private directory, configured as a user configures Luigi for a real cluster.

`hadoop_cli` puts a ``hadoop`` launcher for `hadoop_cli_standin` first on PATH; `hdfs_cluster` adds the
WebHDFS stand-in (`webhdfs_standin`) over the same directory and is parametrized over ``[hdfs] client``
(``hadoopcli`` and ``webhdfs``), so one test runs against both clients.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import luigi
from helpers.webhdfs_standin import WebHdfsStandIn, serving_webhdfs

__all__ = ["HadoopCli", "HdfsCluster", "hadoop_cli", "hdfs_cluster"]

_SCRIPT = Path(__file__).with_name("hadoop_cli_standin.py")
NAMENODE = "localhost:8020"


@dataclass
class HadoopCli:
    """The ``hadoop`` stand-in: the directory that is HDFS's ``/`` and switches for the NameNode."""

    root: Path
    command: Path

    def local(self, hdfs_path: str) -> Path:
        """Where an absolute HDFS path lives on the local disk."""
        return self.root / hdfs_path.lstrip("/")

    def listing(self) -> list[str]:
        """Every HDFS path that exists, sorted (to show nothing was left behind)."""
        return sorted("/" + str(p.relative_to(self.root)) for p in self.root.rglob("*"))

    def jar_calls(self) -> list[list[str]]:
        """The argument list of every ``hadoop jar`` call so far (recorded by `hadoop_jar_standin`)."""
        record = Path(f"{self.root}.jobs.jsonl")
        if not record.exists():
            return []
        return [json.loads(line) for line in record.read_text().splitlines()]

    def take_namenode_down(self) -> None:
        """Make every ``hadoop fs`` command fail as a refused connection to the NameNode does."""
        Path(f"{self.root}.down").touch()


@dataclass
class HdfsCluster(HadoopCli):
    """Both stand-ins over one directory, and the client ``[hdfs] client`` names for this test."""

    client: str
    webhdfs: WebHdfsStandIn


def _launcher(bin_dir: Path) -> Path:
    command = bin_dir / "hadoop"
    command.write_text(
        f"#!{sys.executable} -S\n"
        "import sys\n"
        f"sys.path.insert(0, {str(_SCRIPT.parent)!r})\n"  # imported, not run: its compiled form is cached
        "import hadoop_cli_standin\n"
        "sys.exit(hadoop_cli_standin.main(sys.argv[1:]))\n"
    )
    command.chmod(0o755)
    return command


@pytest.fixture
def hadoop_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> HadoopCli:
    """A ``hadoop`` command first on PATH, over a fresh directory with ``/tmp`` and ``/user`` in it."""
    root = tmp_path / "hdfs-root"
    (root / "tmp").mkdir(parents=True)
    (root / "user").mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    command = _launcher(bin_dir)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("HADOOP_STANDIN_ROOT", str(root))
    monkeypatch.setenv("HADOOP_STANDIN_NAMENODES", "localhost,127.0.0.1")
    return HadoopCli(root=root, command=command)


@pytest.fixture(params=["hadoopcli", "webhdfs"])
def hdfs_cluster(request: pytest.FixtureRequest, hadoop_cli: HadoopCli) -> Iterator[HdfsCluster]:
    """Both stand-ins over one directory; ``[hdfs] client`` is this run's parameter."""
    with serving_webhdfs(str(hadoop_cli.root)) as webhdfs:
        config = luigi.configuration.get_config()
        config.set("hdfs", "client", request.param)
        config.set("hdfs", "namenode_host", webhdfs.host)
        config.set("webhdfs", "port", str(webhdfs.port))
        yield HdfsCluster(
            root=hadoop_cli.root, command=hadoop_cli.command, client=request.param, webhdfs=webhdfs
        )
