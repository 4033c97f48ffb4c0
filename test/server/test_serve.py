"""Serving a scheduler: where it listens, periodic pruning, the durable-state hooks, and stopping."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading

import pytest
from helpers.luigid import HttpProbe, free_port, listening_addresses, probe_for, serving_in_thread, wait_until
from helpers.scheduler import make_scheduler

import luigi.server
from luigi.scheduler import Scheduler
from luigi.server import CannotListenError, SchedulerServer, ServerSettings
from luigi.server.channel import Channels
from luigi.server.serve import BUSY_WITHIN, FOLD_BUSY_KEYS, FOLD_STEP_KEYS


class LifecycleScheduler(Scheduler):
    """A scheduler that records the lifecycle hooks the server calls around serving (and does nothing else
    in them), so the whole ``ServedScheduler`` is there as in luigid."""

    def __init__(self, fail_load: Exception | None = None) -> None:
        super().__init__()
        self.calls: list[str] = []
        self.fail_load = fail_load

    def load(self) -> None:
        self.calls.append("load")
        if self.fail_load is not None:
            raise self.fail_load

    def dump(self) -> None:
        self.calls.append("dump")

    def close(self) -> None:
        self.calls.append("close")

    def prune(self) -> None:
        self.calls.append("prune")


def run_in_thread(**kwargs) -> tuple[threading.Thread, list[BaseException]]:
    failures: list[BaseException] = []

    def target() -> None:
        try:
            luigi.server.run(**kwargs)
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, failures


def test_the_default_address_is_loopback_only():
    scheduler, _clock = make_scheduler()
    with serving_in_thread(scheduler, port=0) as server:
        port = server.bound_port()
        assert [s.getsockname()[0] for s in server.sockets] == ["127.0.0.1"]
        assert listening_addresses(os.getpid(), port) == ["127.0.0.1"]
        assert server.where() == f"127.0.0.1:{port}"


def test_run_loads_serves_until_stopped_then_dumps_and_closes(caplog):
    scheduler = LifecycleScheduler()
    port = free_port()
    settings = ServerSettings(prune_interval=3600)
    with caplog.at_level(logging.INFO, logger="luigi.server"):
        thread, failures = run_in_thread(api_port=port, scheduler=scheduler, settings=settings)
        probe = HttpProbe(port=port)
        wait_until(lambda: probe.health() == 204, what="run() to serve")
        assert probe.call("is_paused", verb="GET").json() == {"response": {"paused": False}}
        luigi.server.stop()
        thread.join(timeout=30)
    assert not thread.is_alive() and not failures
    assert scheduler.calls == ["load", "dump", "close"]
    assert (
        f"luigid listening on 127.0.0.1:{port}; visualiser at http://127.0.0.1:{port}/static/visualiser/index.html"
        in caplog.text
    )


def test_run_without_load_does_not_load():
    scheduler = LifecycleScheduler()
    port = free_port()
    thread, failures = run_in_thread(api_port=port, scheduler=scheduler, load=False)
    wait_until(lambda: HttpProbe(port=port).health() == 204, what="run() to serve")
    luigi.server.stop()
    thread.join(timeout=30)
    assert scheduler.calls == ["dump", "close"] and not failures


def test_a_store_that_cannot_load_stops_run_with_its_error():
    scheduler = LifecycleScheduler(fail_load=OSError("state file unreadable"))
    with pytest.raises(OSError, match="state file unreadable"):
        luigi.server.run(api_port=0, scheduler=scheduler)
    assert scheduler.calls == ["load", "dump", "close"]


def test_a_busy_port_is_a_clear_error_before_anything_is_loaded():
    scheduler = LifecycleScheduler()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(CannotListenError, match=rf"cannot listen on 127\.0\.0\.1:{port}: .*in use"):
            luigi.server.run(api_port=port, scheduler=scheduler)
    assert scheduler.calls == []


def test_the_scheduler_is_pruned_periodically():
    scheduler = LifecycleScheduler()
    with serving_in_thread(scheduler, ServerSettings(prune_interval=0.01)):
        wait_until(lambda: scheduler.calls.count("prune") >= 3, what="three prunes")


def test_a_failing_prune_is_logged_and_pruning_goes_on(caplog):
    scheduler = LifecycleScheduler()
    attempts: list[int] = []

    def prune() -> None:
        attempts.append(1)
        raise RuntimeError("prune broke")

    scheduler.prune = prune
    with caplog.at_level(logging.ERROR, logger="luigi.server"):
        with serving_in_thread(scheduler, ServerSettings(prune_interval=0.01)):
            wait_until(lambda: len(attempts) >= 3, what="pruning to go on after failures")
    assert "Periodic prune failed" in caplog.text


def test_the_store_journal_is_folded_on_a_timer_and_a_failure_is_logged_once_until_it_changes(caplog):
    scheduler = LifecycleScheduler()
    failures = iter(["disk full", "disk full", "disk full", "locked", None, None])

    def checkpoint(**_slice: object) -> None:
        scheduler.calls.append("checkpoint")
        failure = next(failures, None)
        if failure is not None:
            raise RuntimeError(failure)

    scheduler.checkpoint = checkpoint  # type: ignore[method-assign]
    with caplog.at_level(logging.INFO, logger="luigi.server"):
        with serving_in_thread(scheduler):
            wait_until(lambda: scheduler.calls.count("checkpoint") >= 6, what="six checkpoints")
    messages = [r.getMessage() for r in caplog.records if "journal" in r.getMessage()]
    assert messages == [
        "Folding the scheduler state journal failed (retrying): disk full",
        "Folding the scheduler state journal failed (retrying): locked",
        "Folding the scheduler state journal works again",
    ]


def test_the_timer_folds_a_long_step_when_idle_and_a_short_one_while_a_channel_is_busy():
    scheduler = LifecycleScheduler()
    limits: list[object] = []
    scheduler.checkpoint = lambda **kwargs: limits.append(kwargs.get("limit"))  # type: ignore[method-assign]
    server = SchedulerServer(scheduler)
    now = [100.0]
    server.channels = Channels(scheduler, ServerSettings())
    server.channels.clock = lambda: now[0]

    server._checkpoint_on_timer()  # no channel has answered yet
    server.channels.answered()
    now[0] += BUSY_WITHIN / 2
    server._checkpoint_on_timer()
    now[0] += BUSY_WITHIN
    server._checkpoint_on_timer()
    assert limits == [FOLD_STEP_KEYS, FOLD_BUSY_KEYS, FOLD_STEP_KEYS]
    assert FOLD_BUSY_KEYS < FOLD_STEP_KEYS


def test_the_timer_removes_tasks_nobody_asks_about():
    scheduler, clock = make_scheduler(worker_disconnect_delay=60, remove_delay=600)
    scheduler.add_task(worker="gone", task_id="Orphan", family="Orphan")
    with serving_in_thread(scheduler, ServerSettings(prune_interval=0.01)) as server:
        probe = probe_for(server)

        def orphan_known() -> bool:  # fetch_error does not prune by itself: only the timer can
            return (
                "taskFamily"
                in probe.call("fetch_error", {"task_id": "Orphan"}, verb="GET").json()["response"]
            )

        assert orphan_known()
        clock.advance(61)  # the worker disconnects; the task is due for removal 600 s later
        wait_for_prunes(scheduler, 2)
        assert orphan_known()
        clock.advance(601)
        wait_until(lambda: not orphan_known(), what="the periodic prune to remove the task")


def wait_for_prunes(scheduler, count: int) -> None:
    """Wait until the server has pruned ``count`` more times."""
    done: list[int] = []
    original = scheduler.prune

    def counting() -> None:
        original()
        done.append(1)

    scheduler.prune = counting
    try:
        wait_until(lambda: len(done) >= count, what=f"{count} prunes")
    finally:
        scheduler.prune = original


def test_a_unix_socket_server_answers_over_the_socket_and_removes_it_afterwards(tmp_path):
    path = str(tmp_path / "luigid.sock")
    scheduler, _clock = make_scheduler()
    with serving_in_thread(scheduler, unix_socket=path) as server:
        probe = probe_for(server)
        assert probe.health() == 204
        assert probe.call("ping", {"worker": "w"}).json() == {"response": {"rpc_messages": []}}
        assert server.where() == f"unix socket {path}"
    assert not os.path.exists(path)


def test_a_unix_socket_in_use_by_a_live_server_is_not_taken_over(tmp_path):
    path = str(tmp_path / "luigid.sock")
    scheduler, _clock = make_scheduler()
    with serving_in_thread(scheduler, unix_socket=path):
        second = SchedulerServer(scheduler, ServerSettings(), unix_socket=path)
        with pytest.raises(CannotListenError, match="another server is listening on"):
            second.bind()
        assert HttpProbe(unix_socket=path).health() == 204


def test_a_stale_unix_socket_file_is_replaced(tmp_path):
    path = str(tmp_path / "luigid.sock")
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(path)
    stale.close()  # the file stays, nobody listens
    scheduler, _clock = make_scheduler()
    with serving_in_thread(scheduler, unix_socket=path) as server:
        assert probe_for(server).health() == 204


def test_stop_before_serving_starts_makes_serve_return_at_once():
    scheduler, _clock = make_scheduler()
    server = SchedulerServer(scheduler, ServerSettings(), port=0)
    server.stop()
    asyncio.run(server.serve())
    assert server.sockets == [] and not server.ready.is_set()
