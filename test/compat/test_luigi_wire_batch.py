"""Batch tasks through ``luigid`` as a real Luigi worker sends them (LUIGI_COMPAT f.1, f.4 steps 10-12).

Luigi's ``Task.max_batch_size`` defaults to ``float('inf')`` and its client writes kwargs with Python's
``json``, so ``add_task_batcher`` arrives as a form field holding ``"max_batch_size": Infinity``. luigid
reads that as "no limit"; NaN, -Infinity, and Infinity anywhere a finite number is due are still refused.
"""

from __future__ import annotations

import json
from urllib.parse import urlencode

from helpers.luigid import HttpProbe, running_luigid, wait_until
from helpers.worker_process import start_worker, write_module

WORKER = "luigi-3.8.1-worker"
DAYS = ["2024-01-01", "2024-01-02", "2024-01-03"]


def daily_id(day: str) -> str:
    return f"Daily_{day}_0123456789"


def luigi_form(kwargs: dict) -> str:
    """The body Luigi's ``RemoteScheduler`` posts: ``data=<json.dumps(kwargs)>``, Python's constants kept."""
    return urlencode({"data": json.dumps(kwargs)})


def luigi_call(probe: HttpProbe, method: str, kwargs: dict):
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    return probe.request("POST", f"/api/{method}", body=luigi_form(kwargs), headers=headers)


def register_daily_tasks(probe: HttpProbe) -> None:
    """What Luigi's worker sends for three batchable ``Daily`` tasks: the batcher first, then each task."""
    batcher = {
        "worker": WORKER,
        "task_family": "Daily",
        "batched_args": ["day"],
        "max_batch_size": float("inf"),
    }
    assert "Infinity" in json.dumps(batcher)  # what goes over the wire, as Luigi's client writes it
    reply = luigi_call(probe, "add_task_batcher", batcher)
    assert reply.status == 200, reply.body
    for day in DAYS:
        task = {
            "worker": WORKER,
            "task_id": daily_id(day),
            "status": "PENDING",
            "runnable": True,
            "deps": [],
            "family": "Daily",
            "module": "pipeline",
            "params": {"day": day},
            "param_visibilities": {"day": 0},
            "batchable": True,
            "priority": 0,
            "resources": {},
            "retry_policy_dict": {},
            "owners": [],
            "accepts_messages": False,
            "assistant": False,
            "tracking_url": None,
        }
        assert luigi_call(probe, "add_task", task).status == 200


def test_a_luigi_worker_with_a_batch_task_class_gets_its_tasks_as_one_batch_and_finishes_them(tmp_path):
    with running_luigid(tmp_path) as luigid:
        probe = luigid.probe()
        register_daily_tasks(probe)

        work = luigi_call(probe, "get_work", {"worker": WORKER, "host": "h", "assistant": False})
        reply = work.json()["response"]
        assert reply["task_id"] is None  # a batch: its members and the combined params instead
        assert sorted(reply["batch_task_ids"]) == [daily_id(day) for day in DAYS]
        assert sorted(reply["task_params"]["day"]) == DAYS
        batch_id = reply["batch_id"]
        statuses = luigi_call(probe, "task_list", {"status": "BATCH_RUNNING", "upstream_status": ""})
        assert sorted(statuses.json()["response"]) == [daily_id(day) for day in DAYS]

        # Luigi's worker builds the combined task (batch_method=max: the last day) and reports it.
        combined = {"worker": WORKER, "task_id": daily_id(DAYS[-1]), "batch_id": batch_id}
        assert luigi_call(probe, "add_task", {**combined, "status": "RUNNING"}).status == 200
        assert luigi_call(probe, "add_task", {**combined, "status": "DONE", "runnable": None}).status == 200

        done = luigi_call(probe, "task_list", {"status": "DONE", "upstream_status": ""}).json()["response"]
        assert sorted(done) == [daily_id(day) for day in DAYS]


def test_a_batcher_limit_still_refuses_nan_and_minus_infinity(tmp_path):
    with running_luigid(tmp_path) as luigid:
        probe = luigid.probe()
        for constant in ("NaN", "-Infinity"):
            data = (
                '{"worker": "w", "task_family": "Daily", "batched_args": ["day"], '
                f'"max_batch_size": {constant}}}'
            )
            reply = probe.request(
                "POST",
                "/api/add_task_batcher",
                body=urlencode({"data": data}),
                headers={"Content-Type": "application/x-www-form-urlencoded"},
            )
            assert reply.status == 400
            assert f"{constant} is not a JSON number" in reply.json()["error"]


def test_infinity_where_a_finite_number_is_due_is_refused_and_names_the_argument(tmp_path):
    with running_luigid(tmp_path) as luigid:
        probe = luigid.probe()
        task = {"worker": "w", "task_id": "T", "family": "T", "priority": float("inf")}
        reply = luigi_call(probe, "add_task", task)
        assert reply.status == 400
        assert "argument 'priority' is inf, which is not a finite number" in reply.json()["error"]
        resources = {"worker": "w", "task_id": "T", "family": "T", "resources": {"cpu": float("inf")}}
        assert luigi_call(probe, "add_task", resources).status == 400
        listed = probe.call("task_list", {"status": "", "upstream_status": ""}, verb="GET")
        assert listed.json()["response"] == {}  # nothing half-registered


PIPELINE = """
    import datetime

    import luigi


    class Daily(luigi.Task):
        day = luigi.DateParameter(batch_method=max)  # max_batch_size: Luigi's default, float('inf')

        def output(self):
            return luigi.LocalTarget(f"out/{self.day}")

        def run(self):
            with open("runs.log", "a") as log:
                log.write(f"{self.day}\\n")
            for day in ("2024-01-01", "2024-01-02", "2024-01-03"):
                with luigi.LocalTarget(f"out/{day}").open("w") as out:
                    out.write("done")


    class AllDays(luigi.WrapperTask):
        def requires(self):
            return [Daily(day=datetime.date(2024, 1, day)) for day in (1, 2, 3)]
"""


def test_our_own_worker_runs_a_batch_task_class_through_luigid(tmp_path):
    write_module(tmp_path, "pipeline", PIPELINE)
    (tmp_path / "luigid").mkdir()
    with running_luigid(tmp_path / "luigid") as luigid:
        worker = start_worker(tmp_path, "pipeline", ["AllDays"], scheduler_url=luigid.url)
        try:
            wait_until(lambda: worker.poll() is not None, timeout=60, what="the worker to finish")
        finally:
            if worker.poll() is None:
                worker.kill()
            worker.wait()
        log = (tmp_path / "worker.log").read_text()
        assert worker.returncode == 0, log
        assert (tmp_path / "runs.log").read_text() == "2024-01-03\n", log  # one run for the three days
        assert "This progress looks :)" in log
        done = luigid.probe().call("task_list", {"status": "DONE", "upstream_status": ""}, verb="GET")
        assert len([t for t in done.json()["response"] if t.startswith("Daily_")]) == 3
