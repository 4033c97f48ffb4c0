"""What the schedule tests share: a pipeline module for the runs, a luigid config naming it, and reading
``schedule_list`` from a real luigid."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from helpers.luigid import HttpProbe

PIPELINE = textwrap.dedent(
    '''
    import os
    import time

    import luigi

    HERE = os.environ["SCHED_DIR"]


    class Stamp(luigi.Task):
        """Appends its slot to ran.txt: a slot that ran twice would be there twice."""

        stamp = luigi.Parameter()

        def run(self):
            print("marker", self.stamp, flush=True)
            with open(os.path.join(HERE, "ran.txt"), "a") as ran:
                ran.write(self.stamp + "\\n")


    class Hold(luigi.Task):
        """Keeps running until the test creates the file 'release' (one minute at most)."""

        stamp = luigi.Parameter()

        def run(self):
            print("holding", self.stamp, flush=True)
            release = os.path.join(HERE, "release")
            deadline = time.monotonic() + 60
            while not os.path.exists(release) and time.monotonic() < deadline:
                time.sleep(0.02)
            print("released", self.stamp, flush=True)


    class Fail(luigi.Task):
        """Fails: luigi exits with [retcode] task_failed."""

        stamp = luigi.Parameter()

        def run(self):
            raise RuntimeError(f"no data for {self.stamp}")
    '''
)


def schedule_config(workdir: Path, *sections: str, extra: str = "") -> str:
    """A luigid config with ``sections`` (the pipeline module in ``workdir`` on their path)."""
    (workdir / "sched_pipeline.py").write_text(PIPELINE)
    common = f"cwd = {workdir}\nenv.PYTHONPATH = {workdir}\nenv.SCHED_DIR = {workdir}\n"
    return extra + "\n".join(f"{section.strip()}\n{common}" for section in sections)


STAMP = "{scheduled_time:%Y%m%dT%H%M%S}"


def every(name: str, period: str, task: str = "Stamp", more: str = "") -> str:
    """A ``[schedule:name]`` section running ``task`` with the slot as its stamp."""
    command = f"--module sched_pipeline {task} --stamp {STAMP}"
    return f"[schedule:{name}]\nevery = {period}\ncommand = {command}\n{more}"


def cron(name: str, expression: str, task: str = "Stamp", stamp: str = STAMP, more: str = "") -> str:
    """A ``[schedule:name]`` section with a cron cadence."""
    command = f"--module sched_pipeline {task} --stamp {stamp}"
    return f"[schedule:{name}]\ncron = {expression}\ncommand = {command}\n{more}"


def schedules(probe: HttpProbe) -> dict[str, Any]:
    """``schedule_list`` by name."""
    reply = probe.call("schedule_list", verb="GET")
    assert reply.status == 200, reply.body
    return {entry["name"]: entry for entry in reply.json()["response"]}


def runs(probe: HttpProbe, name: str) -> list[dict[str, Any]]:
    """The schedule's last runs, oldest first."""
    return list(reversed(schedules(probe)[name]["runs"]))


def ran_stamps(workdir: Path) -> list[str]:
    """The stamps the Stamp task wrote, one per run it really did."""
    path = workdir / "ran.txt"
    return path.read_text().split() if path.exists() else []
