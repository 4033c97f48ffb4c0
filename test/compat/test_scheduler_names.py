"""``luigi.scheduler`` as Luigi users import and call it (LUIGI_COMPAT j.2, f.2, h)."""

from __future__ import annotations

import json

import pytest
from helpers.luigid import probe_for, serving_in_thread
from helpers.scheduler import make_scheduler

import luigi
import luigi.scheduler
from luigi import configuration
from luigi.cmdline_parser import CmdlineParser
from luigi.metrics import MetricsCollectors
from luigi.parameter import EnumParameter
from luigi.scheduler import (
    BATCH_RUNNING,
    DISABLED,
    DONE,
    FAILED,
    PENDING,
    RPC_METHODS,
    RUNNING,
    SUSPENDED,
    UNKNOWN,
    UPSTREAM_DISABLED,
    UPSTREAM_FAILED,
    UPSTREAM_MISSING_INPUT,
    UPSTREAM_RUNNING,
    WORKER_STATE_ACTIVE,
    WORKER_STATE_DISABLED,
    RetryPolicy,
    Scheduler,
    scheduler,
)
from luigi.server import ServerSettings
from luigi.task_history import NopHistory

# Luigi 3.8's 39 RPC methods (f.2).
LUIGI_RPC_METHODS = {
    "add_task", "add_task_batcher", "add_worker", "disable_worker", "set_worker_processes", "ping",
    "get_work", "count_pending", "graph", "dep_graph", "inverse_dep_graph", "task_list", "worker_list",
    "resource_list", "task_search", "fetch_error", "re_enable_task", "forgive_failures", "mark_as_done",
    "set_task_status_message", "get_task_status_message", "set_task_progress_percentage",
    "get_task_progress_percentage", "decrease_running_task_resources", "get_running_task_resources",
    "send_scheduler_message", "add_scheduler_message_response", "get_scheduler_message_response",
    "announce_scheduling_failure", "has_task_history", "is_pause_enabled", "is_paused", "pause", "unpause",
    "update_resources", "update_resource", "prune", "update_metrics_task_started", "report_task_statistics",
}  # fmt: skip
# The methods Luigi declares with **kwargs (j.2): unknown keywords are ignored.
TOLERANT = (
    "add_task", "announce_scheduling_failure", "add_worker", "get_work", "ping", "graph", "dep_graph",
    "inverse_dep_graph", "task_list", "worker_list", "task_search", "fetch_error",
)  # fmt: skip
# Arguments each needs (the rest have defaults).
REQUIRED = {
    "add_task": {"task_id": "A", "worker": "W"},
    "announce_scheduling_failure": {
        "task_name": "A()", "family": "A", "params": {}, "expl": "e", "owners": [], "worker": "W"
    },
    "add_worker": {"worker": "W", "info": {}},
    "get_work": {"worker": "W"},
    "ping": {"worker": "W"},
    "graph": {},
    "dep_graph": {"task_id": "A"},
    "inverse_dep_graph": {"task_id": "A"},
    "task_list": {},
    "worker_list": {},
    "task_search": {"task_str": "A"},
    "fetch_error": {"task_id": "A"},
}  # fmt: skip


def test_status_and_worker_state_constants_are_their_names():
    statuses = [PENDING, RUNNING, DONE, FAILED, DISABLED, SUSPENDED, UNKNOWN, BATCH_RUNNING]
    assert statuses == ["PENDING", "RUNNING", "DONE", "FAILED", "DISABLED", "SUSPENDED", "UNKNOWN"] + [
        "BATCH_RUNNING"
    ]
    upstream = [UPSTREAM_RUNNING, UPSTREAM_MISSING_INPUT, UPSTREAM_FAILED, UPSTREAM_DISABLED]
    assert upstream == ["UPSTREAM_RUNNING", "UPSTREAM_MISSING_INPUT", "UPSTREAM_FAILED", "UPSTREAM_DISABLED"]
    assert (WORKER_STATE_ACTIVE, WORKER_STATE_DISABLED) == ("active", "disabled")


def test_rpc_methods_names_luigis_39_methods():
    assert LUIGI_RPC_METHODS <= set(RPC_METHODS)
    assert len(LUIGI_RPC_METHODS) == 39


def test_retry_policy_is_a_namedtuple_of_luigis_fields():
    policy = RetryPolicy(retry_count=3, disable_hard_timeout=100, disable_window=60)
    assert RetryPolicy._fields == ("retry_count", "disable_hard_timeout", "disable_window")
    assert tuple(policy) == (3, 100, 60)


def test_keyword_arguments_override_the_scheduler_section(tmp_path):
    cfg = tmp_path / "luigi.cfg"
    cfg.write_text("[scheduler]\nretry_delay = 30\nremove_delay = 40\n")
    configuration.add_config_path(str(cfg))
    sch = Scheduler(retry_delay=0, batch_emails=True)
    assert (sch.config.retry_delay, sch.config.remove_delay, sch.config.batch_emails) == (0, 40, True)


def test_luigis_positional_arguments_config_resources_and_task_history_impl():
    history = NopHistory()
    sch = Scheduler(scheduler(retry_delay=7), {"db": 3}, history)
    assert sch.config.retry_delay == 7
    assert sch.task_history is history
    assert [(r["name"], r["num_total"]) for r in sch.resource_list()] == [("db", 3)]


def test_metrics_collector_is_an_enum_parameter_over_metrics_collectors(tmp_path):
    param = dict(scheduler.get_params())["metrics_collector"]
    assert isinstance(param, EnumParameter)
    assert scheduler().metrics_collector is MetricsCollectors.default
    assert Scheduler(metrics_collector=MetricsCollectors.prometheus).config.metrics_collector is (
        MetricsCollectors.prometheus
    )
    cfg = tmp_path / "luigi.cfg"
    cfg.write_text("[scheduler]\nmetrics_collector = none\n")
    configuration.add_config_path(str(cfg))
    assert Scheduler().config.metrics_collector is MetricsCollectors.default  # "none" is its alias
    with CmdlineParser.global_instance(["Idle", "--scheduler-metrics-collector", "datadog"]):
        assert Scheduler().config.metrics_collector is MetricsCollectors.datadog


def test_a_misspelt_metrics_collector_names_the_option_and_the_choices(tmp_path):
    cfg = tmp_path / "luigi.cfg"
    cfg.write_text("[scheduler]\nmetrics_collector = prometeus\n")
    configuration.add_config_path(str(cfg))
    with pytest.raises(ValueError, match=r"\[scheduler\] metrics_collector = 'prometeus'.*prometheus"):
        Scheduler()


class Idle(luigi.Task):
    def complete(self) -> bool:
        return True


def scheduler_with_a_task():
    sch, _ = make_scheduler()
    sch.add_task(task_id="A", worker="W", family="A")
    return sch


@pytest.mark.parametrize("name", TOLERANT)
def test_luigis_kwargs_methods_ignore_unknown_keywords_in_process(name):
    plain = getattr(scheduler_with_a_task(), name)(**REQUIRED[name])
    extra = getattr(scheduler_with_a_task(), name)(**REQUIRED[name], note="from a newer client")
    assert extra == plain


def test_other_methods_still_refuse_unknown_keywords_in_process():
    sch, _ = make_scheduler()
    with pytest.raises(TypeError):
        sch.mark_as_done(task_id="A", note="x")


@pytest.fixture
def served():
    with serving_in_thread(scheduler_with_a_task(), ServerSettings()) as server:
        yield probe_for(server)


@pytest.mark.parametrize("name", TOLERANT)
def test_luigis_kwargs_methods_drop_unknown_keywords_over_the_api(served, name):
    reply = served.call(name, {**REQUIRED[name], "note": "from a newer client"})
    assert reply.status == 200, reply.body
    in_process = getattr(scheduler_with_a_task(), name)(**REQUIRED[name])
    assert reply.json()["response"] == json.loads(json.dumps(in_process))


def test_an_extra_keyword_does_not_let_a_bad_known_argument_through(served):
    reply = served.call("add_task", {"task_id": ["not", "a", "name"], "worker": "W", "note": "x"})
    assert reply.status == 400
    assert "task_id" in reply.json()["error"]


def test_an_unknown_keyword_of_a_strict_method_is_still_refused_over_the_api(served):
    reply = served.call("mark_as_done", {"task_id": "A", "note": "x"})
    assert reply.status == 400
    assert "unexpected argument 'note'" in reply.json()["error"]


def test_task_list_over_the_limit_answers_before_pruning():
    sch, clock = make_scheduler(max_shown_tasks=1, retry_delay=10)
    for task_id in ("A", "B"):
        sch.add_task(task_id=task_id, worker="W", family="F", status=FAILED)
    clock.advance(20)  # a prune now would retry both (FAILED -> PENDING)
    assert sch.task_list(status=FAILED) == {"num_tasks": 2}
    assert sch.task_list(status=FAILED, upstream_status=UPSTREAM_FAILED) == {"num_tasks": -1}
    assert sch.task_detail("A")["task"]["status"] == FAILED  # prune did not run
    assert sch.task_list(status=FAILED, limit=False) == {}  # this one prunes first
    assert sch.task_detail("A")["task"]["status"] == PENDING


def test_luigi_scheduler_is_importable_without_the_engine_loaded_until_used():
    assert luigi.scheduler.Scheduler is Scheduler
    assert luigi.scheduler.notifications is luigi.notifications
