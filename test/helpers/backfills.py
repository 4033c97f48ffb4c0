"""What the backfill tests share: a daily task module whose runs wait on gate files the test opens, and
the counts of the runs it really started and finished."""

from __future__ import annotations

import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

from helpers.luigid import HttpProbe

PIPELINE = textwrap.dedent(
    '''
    import os
    import time

    import luigi

    HERE = os.environ["BACKFILL_DIR"]


    def note(name, line):
        with open(os.path.join(HERE, name), "a") as log:
            log.write(line + "\\n")


    class Day(luigi.Task):
        """One day's file; waits (a minute at most) for gates/<date> or gates/all before writing it."""

        date = luigi.DateParameter()
        region = luigi.Parameter(default="eu")

        def output(self):
            return luigi.LocalTarget(os.path.join(HERE, "out", f"{self.region}-{self.date}"))

        def run(self):
            note("started.txt", f"{self.region}-{self.date}")
            gates = [os.path.join(HERE, "gates", name) for name in (str(self.date), "all")]
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not any(os.path.exists(gate) for gate in gates):
                time.sleep(0.02)
            with self.output().open("w") as out:
                out.write("done")
            note("finished.txt", f"{self.region}-{self.date}")


    class Hour(Day):
        """The same, for one hour (its first parameter, as the Range task needs)."""

        date = luigi.DateHourParameter()
        region = luigi.Parameter(default="eu")
    '''
)


def backfill_workdir(workdir: Path, open_all: bool = False) -> dict[str, str]:
    """Write the module into ``workdir`` (luigid's working directory, so its children import it); the
    environment luigid needs."""
    (workdir / "backfill_pipeline.py").write_text(PIPELINE)
    (workdir / "gates").mkdir()
    if open_all:
        open_gate(workdir, "all")
    return {"BACKFILL_DIR": str(workdir)}


def open_gate(workdir: Path, name: str) -> None:
    (workdir / "gates" / name).touch()


def counted(workdir: Path, name: str) -> Counter[str]:
    """How many times each day was started (``started.txt``) or finished (``finished.txt``)."""
    path = workdir / name
    return Counter(path.read_text().splitlines() if path.exists() else [])


def backfills(probe: HttpProbe) -> dict[int, dict[str, Any]]:
    """``backfill_list`` by id."""
    reply = probe.call("backfill_list", verb="GET")
    assert reply.status == 200, reply.body
    return {entry["id"]: entry for entry in reply.json()["response"]}


def start_backfill(probe: HttpProbe, **arguments: Any) -> dict[str, Any]:
    """``backfill_start`` over five January days of ``backfill_pipeline.Day`` unless told otherwise."""
    call = {"module": "backfill_pipeline", "family": "Day", "start": "2024-01-01", "stop": "2024-01-06"}
    reply = probe.call("backfill_start", {**call, **arguments})
    assert reply.status == 200, reply.body
    return reply.json()["response"]
