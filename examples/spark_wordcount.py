"""Word count on Spark: text files made locally, counted by a PySparkTask, summed up in a report.

luigi --module examples.spark_wordcount SparkWordCountReport --texts 3 --local-scheduler

Spark runs where ``[spark] master`` says (``local[*]`` when unset); ``pip install 'luigi[spark]'`` and a
Java runtime are all it needs on one machine. On a cluster whose executors share this file system, set
for example ``[spark] master = spark://host:7077`` and ``pyspark_python = /path/to/python``.
"""

from __future__ import annotations

import operator
import os
import random
import shutil
import uuid
from typing import Any

import luigi
from examples._paths import output_path
from luigi.contrib.spark import PySparkTask

WORDS = "spark luigi driver executor partition shuffle stage task target worker".split()


class SparkSampleText(luigi.Task):
    """One file of pseudo-random words; the seed makes every run write the same text."""

    index = luigi.IntParameter()
    lines = luigi.IntParameter(default=100)

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(output_path("spark_wordcount", "text", f"part-{self.index:03d}.txt"))

    def run(self) -> None:
        rng = random.Random(self.index)
        with self.output().open("w") as out:
            for _ in range(self.lines):
                out.write(" ".join(rng.choice(WORDS) for _ in range(10)) + "\n")


class SparkWordCount(PySparkTask):
    """Counts the words of every text file on Spark; the executors write ``word<TAB>count`` part files."""

    texts = luigi.IntParameter(default=3)

    def requires(self) -> list[SparkSampleText]:
        return [SparkSampleText(index=i) for i in range(self.texts)]

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(output_path("spark_wordcount", f"counts-{self.texts}"))

    def main(self, sc: Any, *args: Any) -> None:
        paths = ",".join(os.path.abspath(target.path) for target in self.input())
        counts = sc.textFile(paths).flatMap(str.split).map(lambda word: (word, 1)).reduceByKey(operator.add)
        destination = os.path.abspath(self.output().path)
        staging = f"{destination}.staging-{uuid.uuid4().hex[:8]}"
        try:
            counts.map(lambda pair: f"{pair[0]}\t{pair[1]}").saveAsTextFile(staging)
            os.rename(staging, destination)  # the counts appear whole, or not at all
        finally:
            shutil.rmtree(staging, ignore_errors=True)


class SparkWordCountReport(luigi.Task):
    """Every word's total, most frequent first, read from the part files Spark wrote."""

    texts = luigi.IntParameter(default=3)

    def requires(self) -> SparkWordCount:
        return SparkWordCount(texts=self.texts)

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(output_path("spark_wordcount", f"report-{self.texts}.tsv"))

    def run(self) -> None:
        totals: dict[str, int] = {}
        counts_dir = self.input().path
        for name in sorted(os.listdir(counts_dir)):
            if not name.startswith("part-"):
                continue
            with open(os.path.join(counts_dir, name)) as part:
                for line in part:
                    word, count = line.rstrip("\n").split("\t")
                    totals[word] = totals.get(word, 0) + int(count)
        with self.output().open("w") as out:
            for word, total in sorted(totals.items(), key=lambda item: (-item[1], item[0])):
                out.write(f"{word}\t{total}\n")
