"""The pipeline the fault runs build, and what it leaves behind: a module of short tasks and their markers.

``write_pipeline`` writes ``faultpipe.py``: ``Step(i)`` for ``i < tasks``, each needing up to two earlier
steps and sleeping 20-200 ms (both drawn from the seed), and ``All`` needing every step. A step appends
``<task id> <pid> <ppid> <wall time> <i>`` to ``markers.log`` in one ``write`` of an ``O_APPEND`` file when
it starts, so concurrent runs never interleave, then writes its output ``out/step-<i>.done``.
"""

from __future__ import annotations

import random
import textwrap
from dataclasses import dataclass
from pathlib import Path

MODULE = "faultpipe"
MARKERS = "markers.log"
OUTPUTS = "out"

_SOURCE = """
    import os, time
    import luigi

    DEPS = {deps!r}
    MILLIS = {millis!r}
    HERE = os.path.dirname(os.path.abspath(__file__))

    class Step(luigi.Task):
        i = luigi.IntParameter()

        def requires(self):
            return [Step(i=j) for j in DEPS[self.i]]

        def output(self):
            return luigi.LocalTarget(os.path.join(HERE, "{outputs}", f"step-{{self.i}}.done"))

        def run(self):
            line = f"{{self.task_id}} {{os.getpid()}} {{os.getppid()}} {{time.time():.6f}} {{self.i}}\\n"
            fd = os.open(os.path.join(HERE, "{markers}"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)
            time.sleep(MILLIS[self.i] / 1000)
            with self.output().open("w") as out:
                out.write("done")

    class All(luigi.WrapperTask):
        def requires(self):
            return [Step(i=i) for i in range(len(MILLIS))]
"""


def write_pipeline(directory: Path, tasks: int, seed: int) -> None:
    """Write the pipeline module of ``tasks`` steps (shape and durations from ``seed``) into ``directory``."""
    rng = random.Random(f"pipeline-{seed}")
    deps = {
        i: sorted({rng.randrange(i) for _ in range(rng.randint(0, 2))}) if i else [] for i in range(tasks)
    }
    millis = [rng.randint(20, 200) for _ in range(tasks)]
    source = _SOURCE.format(deps=deps, millis=millis, outputs=OUTPUTS, markers=MARKERS)
    (directory / f"{MODULE}.py").write_text(textwrap.dedent(source))
    (directory / OUTPUTS).mkdir(exist_ok=True)


@dataclass(frozen=True)
class Run:
    """One start of one task, as its marker line tells it."""

    task_id: str
    pid: int
    ppid: int
    started: float
    index: int


def read_runs(directory: Path) -> list[Run]:
    """Every run recorded so far, in the order written (a torn last line is left for the next read)."""
    path = directory / MARKERS
    if not path.exists():
        return []
    runs = []
    for line in path.read_text().splitlines():
        fields = line.split()
        if len(fields) == 5:
            runs.append(Run(fields[0], int(fields[1]), int(fields[2]), float(fields[3]), int(fields[4])))
    return runs


def missing_outputs(directory: Path, tasks: int) -> list[int]:
    """The steps whose output does not exist."""
    return [i for i in range(tasks) if not (directory / OUTPUTS / f"step-{i}.done").exists()]
