"""Retries and disabling (LUIGI_COMPAT f.3 FAILED handling, f.5 retry and re-enable)."""

from __future__ import annotations

from helpers.scheduler import WORKER, granted, make_scheduler, status_of

from luigi.scheduler import ManualClock, Scheduler, SchedulerConfig


def fail(sch: Scheduler, task_id: str = "A", **kwargs) -> None:
    sch.add_task(worker=WORKER, task_id=task_id, status="FAILED", **kwargs)


def test_a_failed_task_is_retried_once_retry_delay_has_passed():
    sch, clock = make_scheduler(retry_delay=100)
    fail(sch)
    clock.advance(100)
    sch.prune()
    assert status_of(sch, "A") == "FAILED"
    clock.advance(1)
    sch.prune()
    assert status_of(sch, "A") == "PENDING"


def test_a_retried_task_is_granted_again_to_its_worker():
    sch, clock = make_scheduler(retry_delay=100, prune_on_get_work=True)
    sch.add_task(worker=WORKER, task_id="A")
    assert granted(sch) == "A"
    fail(sch)
    assert granted(sch) is None
    clock.advance(101)
    sch.add_task(worker=WORKER, task_id="A")  # the worker's next scheduling round
    assert granted(sch) == "A"


def test_a_negative_retry_delay_never_retries():
    sch, clock = make_scheduler(retry_delay=-1)
    fail(sch)
    clock.advance(10**6)
    sch.prune()
    assert status_of(sch, "A") == "FAILED"


def test_retry_count_failures_within_the_window_disable_the_task():
    sch, clock = make_scheduler(retry_count=3, disable_window=100)
    for _ in range(2):
        fail(sch)
        clock.advance(10)
    assert status_of(sch, "A") == "FAILED"
    fail(sch)
    assert status_of(sch, "A") == "DISABLED"
    assert sch.task_list("DISABLED")["A"]["re_enable_able"] is True


def test_failures_older_than_the_window_do_not_count():
    sch, clock = make_scheduler(retry_count=3, disable_window=100)
    fail(sch)
    fail(sch)
    clock.advance(150)
    fail(sch)
    assert status_of(sch, "A") == "FAILED"


def test_disable_hard_timeout_disables_after_that_long_since_the_first_failure():
    sch, clock = make_scheduler(disable_hard_timeout=1000)
    fail(sch)
    clock.advance(999)
    fail(sch)
    assert status_of(sch, "A") == "FAILED"
    clock.advance(1)
    fail(sch)
    assert status_of(sch, "A") == "DISABLED"


def test_a_disabled_task_comes_back_as_failed_after_disable_persist_then_pending_after_retry_delay():
    sch, clock = make_scheduler(retry_count=1, disable_persist=500, retry_delay=60)
    fail(sch)
    clock.advance(500)
    sch.prune()
    assert status_of(sch, "A") == "DISABLED"
    clock.advance(1)
    sch.prune()
    assert status_of(sch, "A") == "FAILED"
    clock.advance(61)
    sch.prune()
    assert status_of(sch, "A") == "PENDING"


def test_an_explicitly_disabled_task_is_never_re_enabled_by_time():
    sch, clock = make_scheduler(disable_persist=10)
    sch.add_task(worker=WORKER, task_id="A", status="DISABLED")
    clock.advance(1000)
    sch.prune()
    assert status_of(sch, "A") == "DISABLED"
    assert sch.re_enable_task(task_id="A") == {}


def test_re_enable_task_forgets_the_failures():
    sch, clock = make_scheduler(retry_count=2, retry_delay=10)
    fail(sch)
    fail(sch)
    assert status_of(sch, "A") == "DISABLED"
    serialized = sch.re_enable_task(task_id="A")
    assert serialized["status"] == "FAILED"
    assert serialized["display_name"] == "()"
    fail(sch)  # one failure after re-enabling is below retry_count again
    assert status_of(sch, "A") == "FAILED"


def test_the_tasks_retry_policy_overrides_the_scheduler_defaults():
    sch, _ = make_scheduler(retry_count=100)
    policy = {"retry_count": 2, "disable_hard_timeout": None, "disable_window": None}
    sch.add_task(worker=WORKER, task_id="A", retry_policy_dict=policy)
    fail(sch, retry_policy_dict=policy)
    fail(sch, retry_policy_dict=policy)
    assert status_of(sch, "A") == "DISABLED"


def test_an_unknown_retry_policy_key_is_refused():
    sch, _ = make_scheduler()
    try:
        sch.add_task(worker=WORKER, task_id="A", retry_policy_dict={"retries": 3})
    except ValueError as error:
        assert "'retries'" in str(error)
    else:
        raise AssertionError("expected a ValueError")


def test_an_unknown_retry_policy_key_is_refused_even_when_its_value_is_none():
    sch, _ = make_scheduler()
    try:
        sch.add_task(worker=WORKER, task_id="A", retry_policy_dict={"retry_count": None, "retries": None})
    except ValueError as error:
        assert "'retries'" in str(error)
    else:
        raise AssertionError("expected a ValueError")


def test_a_retry_policy_of_none_values_keeps_the_scheduler_defaults():
    sch, _ = make_scheduler(retry_count=2)
    policy = {"retry_count": None, "disable_hard_timeout": None, "disable_window": None}
    sch.add_task(worker=WORKER, task_id="A", retry_policy_dict=policy)
    fail(sch, retry_policy_dict=policy)
    assert status_of(sch, "A") == "FAILED"
    fail(sch, retry_policy_dict=policy)
    assert status_of(sch, "A") == "DISABLED"


def test_disabling_notifies_with_luigis_subject_and_the_owners():
    notices = []
    config = SchedulerConfig(retry_count=1, disable_persist=7)
    sch = Scheduler(config, clock=ManualClock(0), notifier=lambda *notice: notices.append(notice))
    fail(sch, owners=["ops@example.com"])
    assert notices == [
        (
            "Luigi Scheduler: DISABLED A due to excessive failures",
            "A failed 1 times in the last 3600 seconds, so it is being disabled for 7 seconds",
            ["ops@example.com"],
        )
    ]


def test_the_default_notifier_goes_through_luigi_scheduler_notifications(monkeypatch):
    import luigi.scheduler

    sent = []

    class FakeNotifications:
        @staticmethod
        def send_error_email(subject, message, owners=None):
            sent.append(subject)

    monkeypatch.setattr(luigi.scheduler, "notifications", FakeNotifications, raising=False)
    sch, _ = make_scheduler(retry_count=1)
    fail(sch)
    assert sent == ["Luigi Scheduler: DISABLED A due to excessive failures"]


def test_a_failing_notifier_does_not_stop_disabling(caplog):
    def broken(*notice):
        raise OSError("no mail server")

    sch = Scheduler(SchedulerConfig(retry_count=1), clock=ManualClock(0), notifier=broken)
    fail(sch)
    assert status_of(sch, "A") == "DISABLED"
    assert "Could not send the notice" in caplog.text


def test_batch_emails_collect_failures_instead_of_notifying():
    class Batcher:
        def __init__(self):
            self.calls = []

        def add_failure(self, *args):
            self.calls.append(("failure", *args))

        def add_disable(self, *args):
            self.calls.append(("disable", *args))

        def add_scheduling_fail(self, *args):
            self.calls.append(("scheduling", *args))

        def update(self):
            self.calls.append(("update",))

    notices = []
    batcher = Batcher()
    sch = Scheduler(
        SchedulerConfig(batch_emails=True, retry_count=1),
        clock=ManualClock(0),
        notifier=lambda *notice: notices.append(notice),
        batch_notifier=batcher,
    )
    sch.add_task_batcher(worker=WORKER, task_family="F", batched_args=["day"])
    sch.add_task(worker=WORKER, task_id="A", family="F", params={"day": "1", "kind": "x"})
    fail(sch, expl='"boom"', owners=["me@example.com"])
    sch.announce_scheduling_failure(
        task_name="F(day=2)",
        family="F",
        params={"day": "2", "kind": "y"},
        expl="bad",
        owners=[],
        worker=WORKER,
    )
    sch.prune()
    assert notices == []
    assert batcher.calls == [
        ("failure", "F(day=1, kind=x)", "F", {"kind": "x"}, "boom", ["me@example.com"]),
        ("disable", "F(day=1, kind=x)", "F", {"kind": "x"}, ["me@example.com"]),
        ("scheduling", "F(day=2)", "F", {"kind": "y"}, "bad", []),
        ("update",),
    ]
