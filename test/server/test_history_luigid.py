"""History through a real ``luigid``: PostgreSQL stops while a pipeline runs, and nothing is lost.

The pipeline (written to a module in the test's folder) has a ``Gate`` task that waits for a file:
the test stops PostgreSQL while the gate holds, opens it, lets the pipeline finish against a scheduler
whose history database is down, then brings the database back and checks that every event is in it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from helpers.luigid import HttpProbe, free_port, running_luigid, wait_until
from helpers.postgres import private_cluster
from sqlalchemy import create_engine, text

PIPELINE = '''
import os
import time

import luigi

FOLDER = os.environ["PIPELINE_DIR"]


class Step(luigi.Task):
    stage = luigi.Parameter()
    n = luigi.IntParameter()

    def requires(self):
        return Gate() if self.stage == "after" else []

    def output(self):
        return luigi.LocalTarget(os.path.join(FOLDER, f"{self.stage}-{self.n}"))

    def run(self):
        with self.output().open("w") as out:
            out.write("done")


class Gate(luigi.Task):
    """Runs once every 'before' step is done, and waits until the test opens it."""

    def requires(self):
        return [Step(stage="before", n=n) for n in range(3)]

    def output(self):
        return luigi.LocalTarget(os.path.join(FOLDER, "gate-passed"))

    def run(self):
        open(os.path.join(FOLDER, "gate-waiting"), "w").close()
        deadline = time.monotonic() + 120
        while not os.path.exists(os.path.join(FOLDER, "gate-open")):
            if time.monotonic() > deadline:
                raise RuntimeError("the test never opened the gate")
            time.sleep(0.05)
        with self.output().open("w") as out:
            out.write("passed")


class Root(luigi.WrapperTask):
    def requires(self):
        return [Step(stage="after", n=n) for n in range(3)]
'''


@pytest.mark.postgres
@pytest.mark.slow
def test_a_pipeline_completes_while_postgres_is_down_and_every_event_is_written_when_it_returns(
    tmp_path: Path,
) -> None:
    (tmp_path / "outage_pipeline.py").write_text(PIPELINE)
    with private_cluster(free_port()) as cluster:
        config = f"""
            [scheduler]
            record_task_history = true
            [task_history]
            db_connection = {cluster.url}
            flush_interval = 0.05
            retry_max_delay = 0.5
        """
        with running_luigid(tmp_path, config=textwrap.dedent(config)) as luigid:
            client = start_pipeline(tmp_path, luigid.port)
            wait_until(
                lambda: (tmp_path / "gate-waiting").exists() or client.poll() is not None, 60, "the gate"
            )
            cluster.stop()
            (tmp_path / "gate-open").touch()
            assert client.wait(timeout=120) == 0, (tmp_path / "client.log").read_text()

            status = history_status(luigid.probe())
            assert status["outage_since"] is not None and status["buffered"] > 0
            cluster.start()
            wait_until(lambda: history_status(luigid.probe())["buffered"] == 0, 60, "the history to catch up")
            final = history_status(luigid.probe())
            assert (final["outage_since"], final["lost"]) == (None, 0)

        events = recorded_events(cluster.url)
    assert len(events) == final["written"]  # every event the scheduler reported is in the database
    finished = {"Step": 6, "Gate": 1, "Root": 1}
    for event in ("RUNNING", "DONE"):
        assert {name: events.count((name, event)) for name in finished} == finished
    assert {name for name, event in events if event == "PENDING"} == set(finished)


def start_pipeline(folder: Path, port: int) -> subprocess.Popen[str]:
    env = dict(os.environ, PIPELINE_DIR=str(folder), PYTHONPATH=str(folder))
    env.pop("LUIGI_CONFIG_PATH", None)
    argv = [
        str(Path(sys.executable).parent / "luigi"),
        "--module",
        "outage_pipeline",
        "Root",
        "--scheduler-host",
        "127.0.0.1",
        "--scheduler-port",
        str(port),
        "--workers",
        "2",
    ]
    with open(folder / "client.log", "w") as log:
        return subprocess.Popen(argv, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)


def history_status(probe: HttpProbe) -> dict[str, Any]:
    reply = probe.request("GET", "/history/api/status")
    assert reply.status == 200, reply.body
    return reply.json()


def recorded_events(url: str) -> list[tuple[str, str]]:
    engine = create_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT t.name, e.event_name FROM task_events e "
                "JOIN tasks t ON t.id = e.task_id ORDER BY e.id"
            )
        ).all()
    engine.dispose()
    return [(name, event) for name, event in rows]
