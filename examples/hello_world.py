"""The smallest pipeline: one task that writes a greeting.

luigi --module examples.hello_world HelloWorld --name you --local-scheduler
"""

from __future__ import annotations

import luigi
from examples._paths import output_path


class HelloWorld(luigi.Task):
    """Writes ``Hello, <name>!`` to a text file."""

    name = luigi.Parameter(default="world")

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(output_path("hello", f"{self.name}.txt"))

    def run(self) -> None:
        with self.output().open("w") as out:
            out.write(f"Hello, {self.name}!\n")
