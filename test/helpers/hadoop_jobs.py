"""Hadoop streaming jobs the hadoop tests run: importable on the "nodes" as ``helpers.hadoop_jobs``.

A path starting ``hdfs://`` is an HdfsTarget (the job goes through the streaming runner and the ``hadoop``
stand-in); any other path is a LocalTarget (the job runs in the worker through LocalJobRunner).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import IO, Any

import luigi
from luigi.contrib import hadoop
from luigi.contrib.hadoop import JobTask
from luigi.contrib.hdfs import HdfsTarget, PlainDir


def target(path: str, directory: bool = False) -> luigi.Target:
    """An HdfsTarget for ``hdfs://`` paths (a directory with ``directory``), else a LocalTarget."""
    if path.startswith("hdfs://"):
        return HdfsTarget(path, format=PlainDir if directory else None)
    return luigi.LocalTarget(path)


class Text(luigi.ExternalTask):
    """An input that already exists."""

    path = luigi.Parameter()

    def output(self) -> luigi.Target:
        return target(self.path)


class StreamingJob(JobTask):
    """A job reading ``sources`` and writing the directory (or file) ``destination``."""

    sources = luigi.ListParameter()
    destination = luigi.Parameter()

    def requires(self) -> list[Text]:  # type: ignore[override]
        return [Text(path) for path in self.sources]

    def output(self) -> luigi.Target:
        return target(self.destination, directory=True)


class WordCount(StreamingJob):
    """Counts words; counters: each line read (``lines,read``), each word (``words,seen``, batches of 3)."""

    n_reduce_tasks = 2

    def mapper(self, line: str) -> Iterator[tuple[str, int]]:
        self.incr_counter("lines", "read", 1)
        for word in line.split():
            self.incr_counter("words", "seen", 1, threshold=3)
            yield word, 1

    def combiner(self, word: str, counts: Iterable[int]) -> Iterator[tuple[str, int]]:
        yield word, sum(counts)

    def reducer(self, word: str, counts: Iterable[int]) -> Iterator[tuple[str, int]]:
        yield word, sum(counts)


class Join(StreamingJob):
    """Joins ``users`` lines (``user<TAB>id<TAB>name``) with ``orders`` (``order<TAB>id<TAB>amount``): a
    name and the total of its orders, only for users with orders."""

    def mapper(self, line: str) -> Iterator[tuple[int, tuple[str, str]]]:
        kind, key, value = line.split("\t")
        yield int(key), (kind, value)

    def reducer(self, key: int, values: Iterable[tuple[str, str]]) -> Iterator[tuple[str, int]]:
        records = list(values)
        names = [value for kind, value in records if kind == "user"]
        amounts = [int(value) for kind, value in records if kind == "order"]
        if names and amounts:
            yield names[0], sum(amounts)


class Hooks(StreamingJob):
    """Every hook of a step leaves its mark; a jobconf reaches the nodes' environment."""

    marker = luigi.Parameter(default="x")
    n_reduce_tasks = 1  # one reducer: its init and final hooks run once

    def jobconfs(self) -> list[str]:
        return [*super().jobconfs(), f"hooks.marker={self.marker}"]

    def init_mapper(self) -> None:
        self.seen = 0

    def mapper(self, line: str) -> Iterator[tuple[str, str]]:
        self.seen += 1
        yield "line", line

    def final_mapper(self) -> Iterator[tuple[str, str]]:
        yield "mapped", str(self.seen)

    def init_reducer(self) -> None:
        self.keys: list[str] = []
        self.jobconf = os.environ.get("hooks_marker", "not on a node")

    def reducer(self, key: str, values: Iterable[str]) -> Iterator[tuple[str, str]]:
        self.keys.append(key)
        yield key, ",".join(sorted(values))

    def final_reducer(self) -> Iterator[tuple[str, str]]:
        yield "keys", ",".join(self.keys)
        yield "jobconf", self.jobconf


class CsvInOut(StreamingJob):
    """A custom ``reader`` (comma-separated records) and ``writer`` (``key=value``), map only."""

    def reader(self, input_stream: Iterable[str]) -> Iterator[tuple[Any, ...]]:
        for line in input_stream:
            yield tuple(line.split(","))

    def mapper(self, name: str, value: str) -> Iterator[tuple[str, str]]:
        yield name.upper(), value

    def writer(self, outputs: Iterable[Any], stdout: IO[str], stderr: IO[str] | None = None) -> None:
        for key, value in outputs:
            print(f"{key}={value}", file=stdout)


class JsonRecords(StreamingJob):
    """``data_interchange_format = "json"``: keys and values travel as JSON between the steps."""

    data_interchange_format = "json"

    def mapper(self, line: str) -> Iterator[tuple[list[str], dict[str, int]]]:
        word, count = line.split()
        yield [word, "k"], {"n": int(count)}

    def reducer(self, key: list[str], values: Iterable[dict[str, int]]) -> Iterator[tuple[str, str]]:
        import json

        yield json.dumps(key), json.dumps({"total": sum(value["n"] for value in values)})


class FailingMapper(WordCount):
    """Its mapper raises on the word ``poison``."""

    def mapper(self, line: str) -> Iterator[tuple[str, int]]:
        for word in line.split():
            if word == "poison":
                raise ValueError(f"refusing the record {line!r}")
            yield word, 1


class WithSettings(StreamingJob):
    """Ships ``settings`` (a local file) as ``conf/settings.txt`` in each node's working directory and
    prefixes every line with its content."""

    settings = luigi.Parameter()
    n_reduce_tasks = 1

    def extra_files(self) -> list[str | tuple[str, str]]:
        return [(self.settings, "conf/settings.txt")]

    def init_mapper(self) -> None:
        with open("conf/settings.txt") as handle:
            self.prefix = handle.read().strip()

    def mapper(self, line: str) -> Iterator[tuple[str, str]]:
        yield self.prefix, line

    def reducer(self, key: str, values: Iterable[str]) -> Iterator[tuple[str, str]]:
        yield key, "|".join(sorted(values))


class RunnerOptions(StreamingJob):
    """Map only, through a runner given ``archives``, jobconfs and streaming arguments; ``package_binary``
    (a pex) when ``binary`` is set. Each line gets ``$GREETING`` and the word in ``tools/word.txt``."""

    archive = luigi.Parameter(default="")
    binary = luigi.Parameter(default="")

    @property
    def package_binary(self) -> str | None:  # type: ignore[override]
        return self.binary or None

    def extra_streaming_arguments(self) -> list[tuple[str, str]]:
        return [("cmdenv", "GREETING=hello")]

    def job_runner(self) -> hadoop.HadoopJobRunner:
        streaming_jar = luigi.configuration.get_config().get("hadoop", "streaming_jar")
        archives = [f"{self.archive}#tools"] if self.archive else []
        return hadoop.HadoopJobRunner(streaming_jar, archives=archives, jobconfs={"mapred.map.tasks": "1"})

    def mapper(self, line: str) -> Iterator[tuple[str, str]]:
        word = "no archive"
        if self.archive:
            with open("tools/word.txt") as handle:
                word = handle.read().strip()
        yield os.environ["GREETING"], f"{word}: {line}"
