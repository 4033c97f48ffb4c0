"""Work that reaches the worker in less plain ways: batches, assistants, external data that appears later."""

from __future__ import annotations

from luigi.local_target import LocalTarget
from luigi.parameter import IntParameter
from luigi.scheduler import Scheduler
from luigi.task import ExternalTask, Task, WrapperTask
from luigi.task_status import DONE, PENDING
from luigi.worker import Worker


def test_batchable_tasks_run_once_as_their_combined_task(tmp_path):
    class Daily(Task):
        day = IntParameter(batch_method=max)

        def output(self):
            return LocalTarget(str(tmp_path / f"day{self.day}"))

        def run(self):
            with open(tmp_path / "runs.log", "a") as log:
                log.write(f"{self.day}\n")
            for day in range(1, self.day + 1):  # the batched run covers every earlier day too
                LocalTarget(str(tmp_path / f"day{day}")).open("w").close()

    class AllDays(WrapperTask):
        def requires(self):
            return [Daily(day=day) for day in (1, 2, 3)]

    scheduler = Scheduler()
    worker = Worker(scheduler=scheduler)
    worker.add(AllDays())
    assert worker.run() is True
    assert (tmp_path / "runs.log").read_text() == "3\n"
    done = {task for task, status, _ in worker._add_task_history if status == DONE}
    assert {Daily(day=1), Daily(day=2), Daily(day=3), AllDays()} <= done
    statuses = {task_id: task["status"] for task_id, task in scheduler.task_list("", "").items()}
    assert set(statuses.values()) == {DONE}


def test_assistant_runs_tasks_another_worker_scheduled(tmp_path):
    class Shared(Task):
        n = IntParameter()

        def output(self):
            return LocalTarget(str(tmp_path / f"shared{self.n}"))

        def run(self):
            self.output().open("w").close()

    scheduler = Scheduler()
    scheduling = Worker(scheduler=scheduler, worker_id="scheduling-only")
    scheduling.add(Shared(n=1))
    scheduling.add(Shared(n=2))
    assistant = Worker(scheduler=scheduler, worker_id="assistant", assistant=True)
    assert assistant.run() is True
    assert Shared(n=1).complete() and Shared(n=2).complete()
    assert {task.task_id for task in assistant._scheduled_tasks.values()} == {
        Shared(n=1).task_id,
        Shared(n=2).task_id,
    }


def external_input(tmp_path):
    class Input(ExternalTask):
        def output(self):
            return LocalTarget(str(tmp_path / "input.csv"))

    class Report(Task):
        def requires(self):
            return Input()

        def output(self):
            return LocalTarget(str(tmp_path / "report.csv"))

        def run(self):
            self.output().open("w").close()

    return Input, Report


def test_external_data_that_appears_is_picked_up_with_retry_external_tasks(tmp_path):
    Input, Report = external_input(tmp_path)
    worker = Worker(scheduler=Scheduler(), retry_external_tasks=True)
    worker.add(Report())
    assert (Input(), PENDING, True) in worker._add_task_history
    (tmp_path / "input.csv").write_text("arrived")
    assert worker.run() is True
    assert Report().complete()


def test_external_data_is_not_rechecked_without_retry_external_tasks(tmp_path):
    Input, Report = external_input(tmp_path)
    worker = Worker(scheduler=Scheduler())
    worker.add(Report())
    assert (Input(), PENDING, False) in worker._add_task_history
    (tmp_path / "input.csv").write_text("arrived")
    assert worker.run() is True
    assert not Report().complete()


def test_a_task_the_assistant_cannot_build_is_failed_and_reported(monkeypatch):
    from luigi import notifications

    sent = []
    monkeypatch.setattr(notifications, "send_error_email", lambda subject, message, *a: sent.append(subject))
    scheduler = Scheduler()
    scheduler.add_task(
        worker="elsewhere", task_id="Ghost__99914b932b", family="Ghost", module=None, params={}, runnable=True
    )
    assistant = Worker(scheduler=scheduler, worker_id="assistant", assistant=True)
    assert assistant.run() is False
    assert scheduler.task_list("", "")["Ghost__99914b932b"]["status"] == "FAILED"
    assert sent == ["Luigi: Cannot find task(s) sent by scheduler: Ghost__99914b932b"]
