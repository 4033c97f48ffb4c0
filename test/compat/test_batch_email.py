"""Batched failure e-mails (LUIGI_COMPAT j.2, j.6): ``[scheduler] batch_emails`` with ``[batch_email]``.

Every e-mail here goes through a real SMTP server (aiosmtpd on localhost), from failures that real tasks
raise in a worker, through a ``Scheduler`` in this process or a real ``luigid`` subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from helpers.luigid import running_luigid
from helpers.scheduler import HeldSchedulerFactory as Factory
from helpers.smtp_server import Mailbox, smtp_on_localhost

import luigi
import luigi.batch_notifier
import luigi.scheduler
from luigi import configuration
from luigi.batch_notifier import BatchNotifier
from luigi.rpc import RemoteScheduler
from luigi.scheduler import Scheduler

LUIGI = Path(sys.executable).parent / "luigi"
RECEIVER = "ops@example.com"
OWNER = "owner@example.com"


def _set(section: str, option: str, value: str) -> None:
    configuration.get_config().set(section, option, value)


@pytest.fixture
def mailbox():
    """A real SMTP server that ``[smtp]`` points at, ``[email] receiver`` set, worker e-mails off."""
    with smtp_on_localhost() as box:
        _set("smtp", "host", "127.0.0.1")
        _set("smtp", "port", str(box.port))
        _set("email", "receiver", RECEIVER)
        _set("email", "sender", "luigi@example.com")
        _set("email", "force_send", "true")  # pytest -s gives the tests a terminal
        _set("worker", "send_failure_email", "false")  # only the scheduler's e-mails in the box
        yield box


class Clock:
    """Stands in for the ``time`` module the notifier reads, so a test moves time instead of waiting."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def time(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    fake = Clock()
    monkeypatch.setattr(luigi.batch_notifier, "time", fake)
    return fake


def _summaries(box: Mailbox) -> list[Any]:
    return [d for d in box.deliveries if " in the last " in d.subject]


# -- what a summary says (j.6) ----------------------------------------------------------------------------


def test_the_reference_example_arrives_with_luigis_subject_and_plain_body(mailbox):
    notifier = BatchNotifier()
    notifier.add_failure("A(a=1)", "A", {"a": 1}, "err X", [])
    notifier.add_failure("A(a=1)", "A", {"a": 1}, "err X", [])
    notifier.add_failure("B()", "B", {}, "err X", None)
    notifier.add_failure("C()", "C", {}, "err Y", [])
    notifier.add_disable("C()", "C", {}, [])
    notifier.send_email()
    delivery = mailbox.only()
    assert delivery.rcpt_tos == [RECEIVER]
    assert delivery.mail_from == "luigi@example.com"
    assert delivery.subject == "Luigi: 4 failures, 1 disable in the last 60 minutes"
    assert delivery.body == textwrap.dedent(
        """\
        - A(a=1) (2 failures)
          B() (1 failure)

              err X

        - C() (1 failure, 1 disable)

              err Y"""
    )


def test_owners_get_their_own_tasks_under_your_tasks_have(mailbox):
    notifier = BatchNotifier()
    notifier.add_failure("Mine(x=1)", "Mine", {"x": 1}, "boom", [OWNER])
    notifier.add_scheduling_fail("Other()", "Other", {}, "bad complete", [])
    notifier.send_email()
    (owner_mail,) = mailbox.to(OWNER)
    assert owner_mail.subject == "Luigi: Your tasks have 1 failure in the last 60 minutes"
    assert owner_mail.body == "- Mine(x=1) (1 failure)\n\n      boom"
    (ops_mail,) = mailbox.to(RECEIVER)
    assert ops_mail.subject == "Luigi: 1 failure, 1 scheduling failure in the last 60 minutes"


def test_html_format_lists_groups_with_escaped_preformatted_errors(mailbox):
    _set("email", "format", "html")
    notifier = BatchNotifier()
    notifier.add_failure("A(a=<b>)", "A", {"a": "<b>"}, "Traceback\n  File <module>\nValueError", [])
    notifier.add_failure("B()", "B", {}, "Traceback\n  File <module>\nValueError", [])
    notifier.send_email()
    delivery = mailbox.only()
    assert delivery.message.get_payload()[0].get_content_type() == "text/html"
    assert delivery.body == (
        "<ul>\n<li>A(a=&lt;b&gt;) (1 failure)\n<br>B() (1 failure)\n"
        "<pre>Traceback\n  File &lt;module&gt;\nValueError</pre>\n</ul>"
    )


def test_batch_modes_choose_the_key(mailbox):
    for mode, expected in [("all", "A(a=1, b=2)"), ("family", "A"), ("unbatched_params", "A(b=2)")]:
        notifier = BatchNotifier(batch_mode=mode)
        notifier.add_failure("A(a=1, b=2)", "A", {"b": 2}, "err", [])
        notifier.send_email()
        assert mailbox.deliveries[-1].body.startswith(f"- {expected} (1 failure)"), mode


def test_only_the_last_error_lines_and_distinct_messages_are_kept(mailbox):
    notifier = BatchNotifier(error_lines=2, error_messages=2)
    for expl in ["one\ntwo\nthree\n", "first", "one\ntwo\nthree\n", "second"]:
        notifier.add_failure("A()", "A", {}, expl, [])
    notifier.send_email()
    assert mailbox.only().body == "- A() (4 failures)\n\n      two\n      three\n\n      second"


def test_without_grouping_each_key_stands_alone_sorted_by_failures(mailbox):
    notifier = BatchNotifier(group_by_error_messages=False)
    notifier.add_failure("B()", "B", {}, "same", [])
    notifier.add_failure("A()", "A", {}, "same", [])
    notifier.add_failure("A()", "A", {}, "same", [])
    notifier.send_email()
    assert mailbox.only().body == "- A() (2 failures)\n\n      same\n\n- B() (1 failure)\n\n      same"


def test_update_sends_once_the_interval_has_passed_then_starts_a_new_one(mailbox, clock):
    notifier = BatchNotifier(email_interval=5)
    notifier.add_failure("A()", "A", {}, "err", [])
    clock.now += 5 * 60 - 1
    notifier.update()
    assert mailbox.deliveries == []
    clock.now += 1
    notifier.update()
    assert mailbox.only().subject == "Luigi: 1 failure in the last 5 minutes"
    notifier.add_failure("A()", "A", {}, "err", [])
    notifier.update()  # a new interval began at the send
    assert len(mailbox.deliveries) == 1


def test_a_failed_send_still_clears_and_restarts_the_interval(monkeypatch, clock):
    def refuse(*args: Any) -> None:
        raise OSError("mail relay down")

    monkeypatch.setattr(luigi.batch_notifier, "send_email", refuse)  # looked up at each send
    notifier = BatchNotifier()
    notifier.add_failure("A()", "A", {}, "err", [OWNER])
    with pytest.raises(OSError, match="mail relay down"):
        notifier.send_email()
    sent: list[tuple[Any, ...]] = []
    monkeypatch.setattr(luigi.batch_notifier, "send_email", lambda *args: sent.append(args))
    notifier.send_email()
    assert sent == []  # nothing left from before the failure


# -- the scheduler's side (j.2) ------------------------------------------------------------------------------


class Explodes(luigi.Task):
    """Fails in run() with a marker in its traceback."""

    n = luigi.IntParameter()

    def run(self) -> None:
        raise ValueError(f"explodes number {self.n}")

    def complete(self) -> bool:
        return False


def test_real_failures_through_a_scheduler_are_summarised_when_it_is_dumped(mailbox):
    scheduler = Scheduler(batch_emails=True, retry_count=1, prune_on_get_work=True)
    ok = luigi.build(
        [Explodes(n=1), Explodes(n=2)],
        worker_scheduler_factory=Factory(scheduler),
        local_scheduler=True,
    )
    assert ok is False
    assert mailbox.deliveries == []  # batched: nothing before the interval ends
    scheduler.dump()
    (summary,) = mailbox.wait_for(1)
    assert summary.subject == "Luigi: 2 failures, 2 disables in the last 60 minutes"
    body = summary.body
    assert body.startswith("- Explodes(n=1) (1 failure, 1 disable)\n\n")
    assert "ValueError: explodes number 1" in body and "ValueError: explodes number 2" in body


def test_prune_sends_the_summary_once_it_is_due(mailbox, clock):
    scheduler = Scheduler(batch_emails=True)
    luigi.build([Explodes(n=3)], worker_scheduler_factory=Factory(scheduler), local_scheduler=True)
    scheduler.prune()
    assert mailbox.deliveries == []
    clock.now += 60 * 60
    scheduler.prune()
    assert mailbox.wait_for(1)[0].subject == "Luigi: 1 failure in the last 60 minutes"


def test_the_scheduler_builds_the_notifier_through_luigi_scheduler_batchnotifier(monkeypatch):
    built: list[Recorder] = []

    class Recorder:
        def __init__(self) -> None:
            self.events: list[tuple[Any, ...]] = []
            built.append(self)

        def add_failure(self, *args: Any) -> None:
            self.events.append(("failure", *args))

        def add_disable(self, *args: Any) -> None:
            self.events.append(("disable", *args))

        def add_scheduling_fail(self, *args: Any) -> None:
            self.events.append(("scheduling", *args))

        def update(self) -> None:
            self.events.append(("update",))

        def send_email(self) -> None:
            self.events.append(("send",))

    monkeypatch.setattr(luigi.scheduler, "BatchNotifier", Recorder)
    scheduler = Scheduler(batch_emails=True, retry_count=1)
    scheduler.add_worker("w", {})
    scheduler.add_task_batcher("w", "A", ["day"])
    params = {"day": "2024-01-01", "kind": "x"}
    scheduler.add_task("A(day=2024-01-01, kind=x)", family="A", params=params, worker="w")
    scheduler.get_work(worker="w")
    expl = '"Traceback: boom"'  # workers send the explanation JSON-encoded
    scheduler.add_task(
        "A(day=2024-01-01, kind=x)", status="FAILED", family="A", expl=expl, owners=[OWNER], worker="w"
    )
    scheduler.announce_scheduling_failure("B()", "B", {}, "bad", [OWNER], worker="w")
    scheduler.prune()
    scheduler.dump()
    (notifier,) = built
    assert notifier.events == [
        ("failure", "A(day=2024-01-01, kind=x)", "A", {"kind": "x"}, "Traceback: boom", [OWNER]),
        ("disable", "A(day=2024-01-01, kind=x)", "A", {"kind": "x"}, [OWNER]),
        ("scheduling", "B()", "B", {}, "bad", [OWNER]),
        ("update",),
        ("send",),
    ]


def test_without_batching_a_disable_is_mailed_at_once(mailbox):
    scheduler = Scheduler(retry_count=1, disable_window=3600, disable_persist=86400)
    assert (
        luigi.build([Explodes(n=4)], worker_scheduler_factory=Factory(scheduler), local_scheduler=True)
        is False
    )
    task_id = Explodes(n=4).task_id
    (notice,) = mailbox.wait_for(1)
    assert notice.subject == f"Luigi Scheduler: DISABLED {task_id} due to excessive failures"
    assert notice.body == (
        f"{task_id} failed 1 times in the last 3600 seconds, so it is being disabled for 86400 seconds"
    )


def test_with_batching_no_disable_notice_goes_out_at_once(mailbox):
    scheduler = Scheduler(batch_emails=True, retry_count=1)
    luigi.build([Explodes(n=5)], worker_scheduler_factory=Factory(scheduler), local_scheduler=True)
    assert mailbox.deliveries == []


# -- through a real luigid ---------------------------------------------------------------------------------

PIPELINE = """
import luigi


class Breaks(luigi.Task):
    n = luigi.IntParameter()
    owner_email = "owner@example.com"

    def run(self):
        raise ValueError(f"breaks number {self.n}")


class Both(luigi.WrapperTask):
    def requires(self):
        return [Breaks(n=1), Breaks(n=2)]
"""


def test_luigid_mails_the_summary_of_real_worker_failures_when_it_stops(tmp_path):
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    with smtp_on_localhost() as box:
        config = f"""
            [scheduler]
            batch_emails = true
            retry_count = 1
            [email]
            receiver = {RECEIVER}
            sender = luigid@example.com
            [smtp]
            host = 127.0.0.1
            port = {box.port}
            [batch_email]
            email_interval = 30
        """
        with running_luigid(tmp_path, config=config) as luigid:
            worker = subprocess.run(
                [str(LUIGI), "--module", "pipeline", "Both", "--scheduler-url", luigid.url, "--no-lock"],
                cwd=tmp_path,
                env=_worker_env(tmp_path),
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert "ValueError: breaks number 2" in worker.stderr, worker.stderr
            RemoteScheduler(luigid.url).announce_scheduling_failure(
                task_name="Breaks(n=9)",
                family="Breaks",
                params={"n": "9"},
                expl="Traceback\nRuntimeError: complete() cannot tell",
                owners=[OWNER],
                worker="another-worker",
            )
            assert box.deliveries == []
            assert luigid.stop() == 0
        deliveries = box.wait_for(2)
    (ops,) = [d for d in deliveries if d.rcpt_tos == [RECEIVER]]
    (owner,) = [d for d in deliveries if d.rcpt_tos == [OWNER]]
    assert ops.mail_from == "luigid@example.com"
    assert ops.subject == "Luigi: 2 failures, 2 disables, 1 scheduling failure in the last 30 minutes"
    assert owner.subject == (
        "Luigi: Your tasks have 2 failures, 2 disables, 1 scheduling failure in the last 30 minutes"
    )
    for delivery in (ops, owner):
        assert "- Breaks(n=1) (1 failure, 1 disable)" in delivery.body
        assert "- Breaks(n=9) (1 scheduling failure)" in delivery.body
        assert "RuntimeError: complete() cannot tell" in delivery.body
        assert "ValueError: breaks number 1" in delivery.body
        assert "ValueError: breaks number 2" in delivery.body


def _worker_env(tmp_path: Path) -> dict[str, str]:
    """The worker's environment: the pipeline importable, its own config with worker e-mails off."""
    config = tmp_path / "worker.cfg"
    config.write_text("[worker]\nsend_failure_email = false\n")
    env = {k: v for k, v in os.environ.items() if k != "LUIGI_CONFIG_PARSER"}
    env["LUIGI_CONFIG_PATH"] = str(config)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    return env


def test_the_batch_email_section_is_read_from_the_config(mailbox):
    _set("batch_email", "email_interval", "15")
    _set("batch_email", "batch_mode", "family")
    notifier = BatchNotifier()
    notifier.add_failure("A(a=1)", "A", {"a": 1}, "err", [])
    notifier.send_email()
    assert mailbox.only().subject == "Luigi: 1 failure in the last 15 minutes"
    assert mailbox.only().body.startswith("- A (1 failure)")
