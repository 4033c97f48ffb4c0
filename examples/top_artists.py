"""Top artists: a day's stream records, plays per artist over a date interval, the N most played.

luigi --module examples.top_artists TopArtists --date-interval 2024-01-01-2024-01-08 --local-scheduler

Each day's streams (``<time> <user> <artist> <track>``, tab-separated, made up from the date) are counted
per artist over the interval, and the ``--top-n`` most played artists written to a local report.
``--use-hdfs`` keeps the streams and the counts on HDFS (``luigi.contrib.hdfs``: the ``hadoop`` command,
or WebHDFS with ``[hdfs] client = webhdfs``); ``--use-spark`` counts with Spark (``pip install
'luigi[spark]'`` and a Java runtime; ``[spark] master`` says where it runs, ``local[*]`` when unset).
"""

from __future__ import annotations

import datetime
import os
import random
from collections import Counter
from typing import Any

import luigi
from examples._paths import output_path
from luigi.contrib.hdfs import HdfsTarget
from luigi.contrib.spark import PySparkTask

ARTISTS = [
    "The Lanterns",
    "Mira Okafor",
    "Northbound",
    "Static Bloom",
    "Juno & the Owls",
    "Teodor Vass",
    "Low Orbit",
    "Pale Harbour",
    "Kestrel",
    "Ada Quinn",
]
HDFS_ROOT = "/examples/top_artists"


def _target(relative: str, use_hdfs: bool) -> luigi.target.FileSystemTarget:
    """Where an intermediate file lives: on HDFS with ``--use-hdfs``, else under the examples folder."""
    if use_hdfs:
        return HdfsTarget(f"{HDFS_ROOT}/{relative}")
    return luigi.LocalTarget(output_path("top_artists", relative))


class DailyStreams(luigi.Task):
    """One day's stream records; the date seeds them, so every run writes the same day."""

    date = luigi.DateParameter()
    use_hdfs = luigi.BoolParameter(default=False)
    streams = luigi.IntParameter(default=500)

    def output(self) -> luigi.target.FileSystemTarget:
        return _target(f"streams/{self.date:%Y-%m-%d}.tsv", self.use_hdfs)

    def run(self) -> None:
        rng = random.Random(self.date.toordinal())
        # Popularity falls off along the list, with some day-to-day luck on top.
        weights = [(len(ARTISTS) - rank) * rng.uniform(0.5, 1.5) for rank in range(len(ARTISTS))]
        midnight = datetime.datetime.combine(self.date, datetime.time())
        with self.output().open("w") as out:
            for _ in range(self.streams):
                played_at = midnight + datetime.timedelta(seconds=rng.randrange(86_400))
                artist = rng.choices(ARTISTS, weights)[0]
                user, track = f"user{rng.randrange(100):03d}", f"track{rng.randrange(20):02d}"
                out.write(f"{played_at:%Y-%m-%dT%H:%M:%S}\t{user}\t{artist}\t{track}\n")


class ArtistPlays(luigi.Task):
    """Plays per artist over the interval, ``artist<TAB>plays``, counted in the worker."""

    date_interval = luigi.DateIntervalParameter()
    use_hdfs = luigi.BoolParameter(default=False)

    def requires(self) -> list[DailyStreams]:
        return [DailyStreams(date=day, use_hdfs=self.use_hdfs) for day in self.date_interval.dates()]

    def output(self) -> luigi.target.FileSystemTarget:
        return _target(f"plays/{self.date_interval}.tsv", self.use_hdfs)

    def run(self) -> None:
        plays: Counter[str] = Counter()
        for day in self.input():
            with day.open("r") as streams:
                plays.update(line.rstrip("\n").split("\t")[2] for line in streams)
        with self.output().open("w") as out:
            out.writelines(f"{artist}\t{count}\n" for artist, count in sorted(plays.items()))


class SparkArtistPlays(PySparkTask):
    """The same counts, computed by Spark over the daily files (local paths, which every executor sees)."""

    date_interval = luigi.DateIntervalParameter()

    def requires(self) -> list[DailyStreams]:
        return [DailyStreams(date=day) for day in self.date_interval.dates()]

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(output_path("top_artists", "plays", f"{self.date_interval}-spark.tsv"))

    def main(self, sc: Any, *args: Any) -> None:
        paths = ",".join(os.path.abspath(day.path) for day in self.input())
        plays = sc.textFile(paths).map(lambda line: (line.split("\t")[2], 1)).reduceByKey(lambda a, b: a + b)
        with self.output().open("w") as out:  # the counts are few: the driver writes them, atomically
            out.writelines(f"{artist}\t{count}\n" for artist, count in sorted(plays.collect()))


class TopArtists(luigi.Task):
    """The ``top_n`` most played artists over the interval, most played first (ties by name)."""

    date_interval = luigi.DateIntervalParameter()
    top_n = luigi.IntParameter(default=10)
    use_hdfs = luigi.BoolParameter(default=False)
    use_spark = luigi.BoolParameter(default=False)

    def requires(self) -> luigi.Task:
        if self.use_spark and self.use_hdfs:
            raise ValueError("--use-spark counts local files here: run it without --use-hdfs")
        if self.use_spark:
            return SparkArtistPlays(date_interval=self.date_interval)
        return ArtistPlays(date_interval=self.date_interval, use_hdfs=self.use_hdfs)

    def output(self) -> luigi.LocalTarget:
        engine = "spark" if self.use_spark else "hdfs" if self.use_hdfs else "local"
        return luigi.LocalTarget(
            output_path("top_artists", f"top{self.top_n}-{self.date_interval}-{engine}.tsv")
        )

    def run(self) -> None:
        with self.input().open("r") as plays:
            counts = [
                (artist, int(count)) for artist, count in (line.rstrip("\n").split("\t") for line in plays)
            ]
        ranked = sorted(counts, key=lambda pair: (-pair[1], pair[0]))[: self.top_n]
        with self.output().open("w") as out:
            out.writelines(f"{rank}\t{artist}\t{count}\n" for rank, (artist, count) in enumerate(ranked, 1))
