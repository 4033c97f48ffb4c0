"""Generated pipelines for the engine benchmark: wide, chain, lattice, noop-complete (no-op tasks), cpu.

Every task writes a tiny LocalTarget under ``BENCH_DIR`` so that completion checks touch the filesystem
the way a real pipeline does.
"""

from __future__ import annotations

import os
import time

import luigi

SPIN_SECONDS = 0.01  # the CPU each Spin task uses


def _target(name: str) -> luigi.LocalTarget:
    return luigi.LocalTarget(os.path.join(os.environ["BENCH_DIR"], name[:3], name))


class Noop(luigi.Task):
    """A task that only writes its marker file."""

    i = luigi.IntParameter()

    def output(self) -> luigi.LocalTarget:
        return _target(f"noop-{self.i}")

    def run(self) -> None:
        with self.output().open("w") as out:
            out.write("x")


class Wide(luigi.WrapperTask):
    """One wrapper over n independent tasks."""

    n = luigi.IntParameter()

    def requires(self) -> list[Noop]:
        return [Noop(i=i) for i in range(self.n)]


class Spin(Noop):
    """Spends 10 ms of CPU, then writes its marker file: a task short enough for the engine to matter, long
    enough for several worker processes to pay off."""

    def run(self) -> None:
        until = time.process_time() + SPIN_SECONDS
        while time.process_time() < until:
            pass
        super().run()


class WideSpin(luigi.WrapperTask):
    """One wrapper over n independent 10 ms CPU tasks."""

    n = luigi.IntParameter()

    def requires(self) -> list[Spin]:
        return [Spin(i=i) for i in range(self.n)]


class Link(luigi.Task):
    """Link i of a chain requires link i-1."""

    i = luigi.IntParameter()

    def requires(self) -> list[Link]:
        return [Link(i=self.i - 1)] if self.i > 0 else []

    def output(self) -> luigi.LocalTarget:
        return _target(f"link-{self.i}")

    def run(self) -> None:
        with self.output().open("w") as out:
            out.write("x")


class Cell(luigi.Task):
    """Cell (layer, k) requires cells k and k+1 (mod width) of the previous layer."""

    layer = luigi.IntParameter()
    k = luigi.IntParameter()
    width = luigi.IntParameter()

    def requires(self) -> list[Cell]:
        if self.layer == 0:
            return []
        prev = self.layer - 1
        return [
            Cell(layer=prev, k=self.k, width=self.width),
            Cell(layer=prev, k=(self.k + 1) % self.width, width=self.width),
        ]

    def output(self) -> luigi.LocalTarget:
        return _target(f"cell-{self.layer}-{self.k}-{self.width}")

    def run(self) -> None:
        with self.output().open("w") as out:
            out.write("x")


class Lattice(luigi.WrapperTask):
    """Layers of `width` cells; the wrapper needs the last layer, which pulls in all the others."""

    n = luigi.IntParameter()
    width = luigi.IntParameter(default=100)

    def requires(self) -> list[Cell]:
        layers = max(1, self.n // self.width)
        return [Cell(layer=layers - 1, k=k, width=self.width) for k in range(self.width)]
