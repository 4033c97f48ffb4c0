"""Word count over generated text files: fan-out generation, per-file counts, one merged report.

luigi --module examples.wordcount WordCountReport --files 5 --local-scheduler --workers 2
"""

from __future__ import annotations

import collections
import random

import luigi
from examples._paths import output_path

WORDS = "luigi task target worker scheduler pipeline batch cron graph output input run".split()


class GenerateText(luigi.Task):
    """Writes one file of pseudo-random words; the seed makes every run produce the same text."""

    index = luigi.IntParameter()
    lines = luigi.IntParameter(default=200)

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(output_path("wordcount", "text", f"part-{self.index:03d}.txt"))

    def run(self) -> None:
        rng = random.Random(self.index)
        with self.output().open("w") as out:
            for _ in range(self.lines):
                out.write(" ".join(rng.choice(WORDS) for _ in range(12)) + "\n")


class CountWords(luigi.Task):
    """Counts the words of one generated file, written as ``word<TAB>count`` lines."""

    index = luigi.IntParameter()

    def requires(self) -> GenerateText:
        return GenerateText(index=self.index)

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(output_path("wordcount", "counts", f"part-{self.index:03d}.tsv"))

    def run(self) -> None:
        counts: collections.Counter[str] = collections.Counter()
        with self.input().open("r") as text:
            for line in text:
                counts.update(line.split())
        with self.output().open("w") as out:
            for word, count in sorted(counts.items()):
                out.write(f"{word}\t{count}\n")


class WordCountReport(luigi.Task):
    """Merges every file's counts into one report, most frequent words first."""

    files = luigi.IntParameter(default=5)

    def requires(self) -> list[CountWords]:
        return [CountWords(index=i) for i in range(self.files)]

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(output_path("wordcount", f"report-{self.files}.tsv"))

    def run(self) -> None:
        totals: collections.Counter[str] = collections.Counter()
        for target in self.input():
            with target.open("r") as counts:
                for line in counts:
                    word, count = line.rstrip("\n").split("\t")
                    totals[word] += int(count)
        with self.output().open("w") as out:
            for word, count in totals.most_common():
                out.write(f"{word}\t{count}\n")
