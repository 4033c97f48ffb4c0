"""The declared RPC surface (LUIGI_COMPAT f.1, f.2) and the checking of arguments received over the wire."""

from __future__ import annotations

import inspect
import json

import pytest
from helpers.scheduler import WORKER, make_scheduler

from luigi.rpc_methods import (
    RPC_METHODS,
    RpcArgumentError,
    UnknownRpcMethodError,
    invoke,
    validate_call,
)
from luigi.scheduler import Scheduler
from luigi.server.served import SERVER_HOOKS

VISUALISER_METHODS = ("task_counts", "task_page", "task_detail", "graph_view")  # ours, beside Luigi's 39
TASK_LOG_METHODS = ("scheduler_features", "append_task_log", "task_log")  # ours too
# Ours too: the schedules luigid runs (luigi/schedules); an in-process scheduler answers that it has none.
SCHEDULE_METHODS = ("schedule_list", "schedule_log", "schedule_pause", "schedule_resume", "schedule_trigger")
# Ours too: the backfills luigid runs (luigi/schedules/backfill*); an in-process scheduler runs none.
BACKFILL_METHODS = ("backfill_start", "backfill_list", "backfill_cancel", "backfill_log")
OPERATOR_METHODS = ("cancel_task",)  # ours too: the visualiser's Cancel button
READ_ONLY = {
    "count_pending",
    "graph",
    "dep_graph",
    "inverse_dep_graph",
    "task_list",
    "worker_list",
    "resource_list",
    "task_search",
    "fetch_error",
    "get_task_status_message",
    "get_task_progress_percentage",
    "get_running_task_resources",
    "has_task_history",
    "is_pause_enabled",
    "is_paused",
    "update_metrics_task_started",
    "report_task_statistics",
    *VISUALISER_METHODS,
    "scheduler_features",
    "task_log",
    "schedule_list",
    "schedule_log",
    "backfill_list",
    "backfill_log",
}


# Called by luigid around requests, never over RPC.


def scheduler_methods() -> set[str]:
    return {
        name
        for name, member in inspect.getmembers(Scheduler)
        if not name.startswith("_") and inspect.isfunction(member) and name not in SERVER_HOOKS
    }


def test_the_scheduler_exposes_exactly_the_39_registered_methods_plus_ours():
    ours = len(VISUALISER_METHODS) + len(TASK_LOG_METHODS) + len(SCHEDULE_METHODS) + len(OPERATOR_METHODS)
    ours += len(BACKFILL_METHODS)
    assert len(RPC_METHODS) == 39 + ours
    assert scheduler_methods() == set(RPC_METHODS)


@pytest.mark.parametrize("name", sorted(RPC_METHODS))
def test_each_scheduler_method_has_the_registered_parameters(name):
    method = RPC_METHODS[name]
    signature = inspect.signature(getattr(Scheduler, name))
    parameters = [p for p in signature.parameters.values() if p.name != "self"]
    named = [p for p in parameters if p.kind is not inspect.Parameter.VAR_KEYWORD]
    assert [p.name for p in named] == list(method.parameter_names)
    for declared, actual in zip(method.parameters, named, strict=True):
        assert declared.required == (actual.default is inspect.Parameter.empty), declared.name
        if not declared.required:
            assert declared.default == actual.default, declared.name
    var_keyword = [p.name for p in parameters if p.kind is inspect.Parameter.VAR_KEYWORD]
    if method.var_keyword:
        assert var_keyword == [method.var_keyword]
    else:  # a lenient method takes and ignores unknown keywords in process too, as Luigi's **kwargs do
        assert var_keyword == (["kwargs"] if method.lenient else [])


def test_read_only_and_mutating_methods_are_declared():
    assert {name for name, method in RPC_METHODS.items() if not method.mutating} == READ_ONLY


def test_client_hints_follow_luigi():
    assert RPC_METHODS["ping"].attempts == 1
    assert RPC_METHODS["get_work"].allow_null is False
    others = [m for name, m in RPC_METHODS.items() if name not in ("ping", "get_work")]
    assert all(m.attempts == 3 and m.allow_null for m in others)


def test_validation_fills_in_defaults():
    assert validate_call("get_work", {"worker": "w"}) == {
        "worker": "w",
        "host": None,
        "assistant": False,
        "current_tasks": None,
        "assume_done": None,
        "max_tasks": 1,
    }


def test_a_client_sends_an_extension_argument_only_when_given():
    get_work = RPC_METHODS["get_work"]
    assert get_work.bind_to_send({"worker": "w"}) == {
        "worker": "w",
        "host": None,
        "assistant": False,
        "current_tasks": None,
    }
    assert get_work.bind_to_send({"worker": "w", "assume_done": ["A"]})["assume_done"] == ["A"]


def test_a_missing_required_argument_is_named():
    with pytest.raises(RpcArgumentError, match="add_task: missing required argument 'worker'"):
        validate_call("add_task", {"task_id": "A"})


def test_an_unexpected_argument_is_named_with_the_accepted_ones():
    with pytest.raises(
        RpcArgumentError, match=r"count_pending: unexpected argument 'wrker' \(it takes: worker\)"
    ):
        validate_call("count_pending", {"wrker": "w"})


def test_methods_that_evolve_with_clients_drop_unknown_arguments():
    assert validate_call("ping", {"worker": "w", "current_tasks": []}) == {"worker": "w", "held": None}


def test_the_tasks_a_ping_says_it_holds_are_checked_at_the_door():
    assert validate_call("ping", {"worker": "w", "held": ["A", "B"]}) == {"worker": "w", "held": ["A", "B"]}
    with pytest.raises(RpcArgumentError, match="ping: argument 'held' must be a list of strings or null"):
        validate_call("ping", {"worker": "w", "held": "A"})
    with pytest.raises(RpcArgumentError, match="ping: argument 'held'"):
        validate_call("ping", {"worker": "w", "held": ["x" * 5000]})


def test_an_argument_of_the_wrong_json_type_is_named():
    with pytest.raises(RpcArgumentError, match="add_task: argument 'deps' must be a list of strings or null"):
        validate_call("add_task", {"task_id": "A", "worker": "w", "deps": "B"})
    with pytest.raises(RpcArgumentError, match="set_worker_processes: argument 'n' must be an integer"):
        validate_call("set_worker_processes", {"worker": "w", "n": True})


def test_argument_errors_are_both_type_and_value_errors():
    with pytest.raises(TypeError):
        validate_call("resource_list", {"x": 1})
    with pytest.raises(ValueError):
        validate_call("resource_list", {"x": 1})


def test_var_keyword_methods_take_any_names_of_the_declared_type():
    assert validate_call("update_resources", {"db": 2, "gpu": 1}) == {"db": 2, "gpu": 1}
    with pytest.raises(RpcArgumentError, match="update_resources: argument 'db' must be a number"):
        validate_call("update_resources", {"db": "two"})


def test_an_unknown_method_is_reported_as_such():
    with pytest.raises(UnknownRpcMethodError, match="No scheduler RPC method named 'drop_tables'"):
        validate_call("drop_tables", {})


def test_arguments_must_be_a_json_object():
    with pytest.raises(RpcArgumentError, match="graph: arguments must be a JSON object"):
        validate_call("graph", ["x"])


SAMPLE_CALLS = [
    ("add_worker", {"worker": WORKER, "info": {"host": "h", "workers": 1}}),
    ("add_task_batcher", {"worker": WORKER, "task_family": "F", "batched_args": ["d"]}),
    ("add_task", {"worker": WORKER, "task_id": "A", "family": "F", "params": {"d": "1"}, "deps": ["B"]}),
    ("add_task", {"worker": WORKER, "task_id": "B", "family": "F", "params": {"d": "2"}}),
    ("set_worker_processes", {"worker": WORKER, "n": 2}),
    ("ping", {"worker": WORKER}),
    ("get_work", {"worker": WORKER, "host": "h", "current_tasks": []}),
    ("count_pending", {"worker": WORKER}),
    ("graph", {}),
    ("dep_graph", {"task_id": "A"}),
    ("inverse_dep_graph", {"task_id": "B", "include_done": False}),
    ("task_list", {"status": "PENDING", "search": "F"}),
    ("worker_list", {}),
    ("resource_list", {}),
    ("task_search", {"task_str": "A"}),
    ("task_counts", {}),
    ("task_page", {"search": "F", "sort_by": "family"}),
    ("task_detail", {"task_id": "A"}),
    ("graph_view", {"task_id": "A", "max_nodes": 0}),
    ("fetch_error", {"task_id": "A"}),
    ("set_task_status_message", {"task_id": "B", "status_message": "hi"}),
    ("get_task_status_message", {"task_id": "B"}),
    ("set_task_progress_percentage", {"task_id": "B", "progress_percentage": 10}),
    ("get_task_progress_percentage", {"task_id": "B"}),
    ("decrease_running_task_resources", {"task_id": "B", "decrease_resources": {"r": 1}}),
    ("get_running_task_resources", {"task_id": "B"}),
    ("send_scheduler_message", {"worker": WORKER, "task": "B", "content": "x"}),
    ("add_scheduler_message_response", {"task_id": "B", "message_id": "m", "response": "r"}),
    ("get_scheduler_message_response", {"task_id": "B", "message_id": "m"}),
    (
        "announce_scheduling_failure",
        {
            "task_name": "F()",
            "family": "F",
            "params": {},
            "expl": "e",
            "owners": [],
            "worker": WORKER,
        },
    ),
    ("has_task_history", {}),
    ("is_pause_enabled", {}),
    ("is_paused", {}),
    ("pause", {}),
    ("unpause", {}),
    ("update_resources", {"r": 2}),
    ("update_resource", {"resource": "r", "amount": 3}),
    ("cancel_task", {"task_id": "B"}),
    ("mark_as_done", {"task_id": "B"}),
    ("forgive_failures", {"task_id": "A"}),
    ("re_enable_task", {"task_id": "A"}),
    ("disable_worker", {"worker": "someone-else"}),
    ("prune", {}),
    ("schedule_list", {}),
    ("backfill_list", {}),
    ("update_metrics_task_started", {"task": "B"}),
    ("report_task_statistics", {"task_id": "B", "statistics": {"rows": 3}}),
    ("scheduler_features", {}),
    ("append_task_log", {"task_id": "B", "worker": WORKER, "run": "r1", "offset": 0, "chunk": "hi\n"}),
    ("task_log", {"task_id": "B"}),
]


def test_every_method_answers_strict_json_when_invoked_with_wire_arguments():
    sch, _ = make_scheduler()
    for name, kwargs in SAMPLE_CALLS:
        result = invoke(sch, name, kwargs)
        json.dumps(result, allow_nan=False)
    # The schedules' buttons and the backfills refuse a scheduler without them; test/schedules calls them
    # on a luigid.
    assert {name for name, _ in SAMPLE_CALLS} | set(SCHEDULE_METHODS) | set(BACKFILL_METHODS) == set(
        RPC_METHODS
    )
    assert invoke(sch, "task_list", {"status": "DONE"})["B"]["status"] == "DONE"
