"""``TaskProcess``: one run of one task, as the worker performs it in-process or inside a child."""

from __future__ import annotations

import queue

from luigi.local_target import LocalTarget
from luigi.scheduler import Scheduler
from luigi.task import ExternalTask, Task
from luigi.task_status import DONE, FAILED, PENDING
from luigi.worker import TaskProcess, Worker
from luigi.worker.task_process import EXTERNAL_DATA_MISSING, TaskRunOptions


class RecordingReporter:
    """Stands in for the scheduler-facing status reporter; remembers every report."""

    def __init__(self, scheduler_messages=None):
        self.reports = []
        self.scheduler_messages = scheduler_messages

    def update_tracking_url(self, url):
        self.reports.append(("tracking_url", url))

    def update_status_message(self, message):
        self.reports.append(("status_message", message))

    def update_progress_percentage(self, percentage):
        self.reports.append(("progress", percentage))

    def decrease_running_resources(self, resources):
        self.reports.append(("decrease", resources))


def run_task(task, **options):
    reporter = RecordingReporter(options.pop("scheduler_messages", None))
    outcome = TaskProcess(task, reporter, TaskRunOptions(worker_id="w", **options)).run()
    return outcome, reporter


def test_successful_run_is_done_with_on_success_as_explanation():
    class Fine(Task):
        def complete(self):
            return False

        def on_success(self):
            return "all good"

    outcome, _ = run_task(Fine())
    assert (outcome.task_id, outcome.status, outcome.expl) == (Fine().task_id, DONE, "all good")


def test_progress_callables_exist_only_while_run_executes():
    queue_for_messages = queue.Queue()
    seen = {}

    class Chatty(Task):
        accepts_messages = True

        def complete(self):
            return False

        def run(self):
            seen["queue"] = self.scheduler_messages
            self.set_tracking_url("http://tracker")
            self.set_status_message("working")
            self.set_progress_percentage(10)
            self.decrease_running_resources({"cpu": 1})

    task = Chatty()
    outcome, reporter = run_task(task, scheduler_messages=queue_for_messages)
    assert outcome.status == DONE
    assert seen["queue"] is queue_for_messages
    assert reporter.reports == [
        ("tracking_url", "http://tracker"),
        ("status_message", "working"),
        ("progress", 10),
        ("decrease", {"cpu": 1}),
    ]
    assert task.set_status_message is None and task.set_tracking_url is None
    assert task.decrease_running_resources is None and task.scheduler_messages is None


def test_incomplete_dependency_fails_the_run_naming_it_and_its_missing_outputs(tmp_path):
    class Upstream(Task):
        def output(self):
            return LocalTarget(str(tmp_path / "upstream.csv"))

    class Downstream(Task):
        def requires(self):
            return Upstream()

        def complete(self):
            return False

        def run(self):
            raise AssertionError("must not run")

    outcome, _ = run_task(Downstream())
    assert outcome.status == FAILED
    assert outcome.missing == [Upstream().task_id]
    assert (
        f"Unfulfilled dependency at run time: {Upstream().task_id} ({tmp_path / 'upstream.csv'})"
        in outcome.expl
    )


def test_dependency_check_can_be_turned_off():
    class Upstream(Task):
        def complete(self):
            return False

    class Downstream(Task):
        def requires(self):
            return Upstream()

        def complete(self):
            return False

    outcome, _ = run_task(Downstream(), check_unfulfilled_deps=False)
    assert outcome.status == DONE


def test_external_task_run_checks_for_its_data(tmp_path):
    class Data(ExternalTask):
        def output(self):
            return LocalTarget(str(tmp_path / "data"))

    outcome, _ = run_task(Data())
    assert (outcome.status, outcome.expl) == (FAILED, EXTERNAL_DATA_MISSING)
    (tmp_path / "data").write_text("")
    outcome, _ = run_task(Data())
    assert outcome.status == DONE


def test_yielding_incomplete_requirements_returns_them_as_new_dependencies():
    class Later(Task):
        n = 0

        def complete(self):
            return False

    class Dynamic(Task):
        def complete(self):
            return False

        def run(self):
            yield Later()
            raise AssertionError("the generator is abandoned until Later is done")

    outcome, _ = run_task(Dynamic())
    assert outcome.status == PENDING
    assert outcome.new_deps == [(Later().task_module, "Later", {})]


def test_a_broken_on_failure_still_gives_an_explanation():
    class Unlucky(Task):
        def complete(self):
            return False

        def run(self):
            raise ValueError("first problem")

        def on_failure(self, exception):
            raise RuntimeError("second problem")

    outcome, _ = run_task(Unlucky())
    assert outcome.status == FAILED
    assert "second problem" in outcome.expl


def test_completion_cache_is_filled_by_a_successful_run():
    class Cached(Task):
        def complete(self):
            return False

    cache: dict[str, bool] = {}
    run_task(Cached(), completion_cache=cache)
    assert cache == {Cached().task_id: True}


def test_progress_callables_are_taken_back_when_run_raises():
    class Broken(Task):
        def complete(self):
            return False

        def run(self):
            self.set_status_message("about to fail")
            raise ValueError("boom")

    task = Broken()
    outcome, reporter = run_task(task)
    assert outcome.status == FAILED
    assert "boom" in outcome.expl
    assert reporter.reports == [("status_message", "about to fail")]
    assert task.set_status_message is None and task.set_tracking_url is None
    assert task.decrease_running_resources is None and task.scheduler_messages is None


def test_an_explanation_that_json_cannot_encode_is_sent_as_its_string():
    class Odd:
        def __str__(self):
            return "odd explanation"

    class Quirky(Task):
        def complete(self):
            return False

        def on_success(self):
            return {"detail": Odd()}

    class RecordingScheduler(Scheduler):
        def __init__(self):
            super().__init__()
            self.expls = []

        def add_task(self, *args, **kwargs):
            if "expl" in kwargs:
                self.expls.append(kwargs["expl"])
            return super().add_task(*args, **kwargs)

    scheduler = RecordingScheduler()
    with Worker(scheduler=scheduler, no_install_shutdown_handler=True) as worker:
        worker.add(Quirky())
        assert worker.run()
    assert scheduler.expls == ['{"detail": "odd explanation"}']
