"""The JSON API over HTTP (LUIGI_COMPAT f.1, g): every RPC method answers as the scheduler itself does."""

from __future__ import annotations

import inspect
import json
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urljoin

import pytest
from helpers.luigid import HttpProbe, probe_for, serving_in_thread
from helpers.scheduler import make_scheduler

from luigi.rpc_methods import RPC_METHODS
from luigi.scheduler import Scheduler
from luigi.server import STATIC_DIR, VISUALISER_PATH, CorsPolicy, ServerSettings
from luigi.server.served import SERVER_HOOKS

W = "worker-1"
W2 = "worker-2"
MESSAGE_ID = "00000000-0000-4000-8000-000000000001"

# One session touching every registered method, in an order where each call has something to do.
SCENARIO: list[tuple[str, dict[str, Any]]] = [
    ("add_worker", {"worker": W, "info": {"host": "h1", "username": "me", "pid": 42, "workers": 1}}),
    ("update_resources", {"cpu": 4, "gpu": 1}),
    ("update_resource", {"resource": "disk", "amount": 3}),
    (
        "add_task_batcher",
        {"worker": W, "task_family": "Daily", "batched_args": ["day"], "max_batch_size": 10},
    ),
    (
        "add_task",
        {
            "worker": W,
            "task_id": "Root()",
            "family": "Root",
            "module": "pipeline",
            "params": {},
            "deps": ["Leaf(n=1)", "Leaf(n=2)"],
            "priority": 5,
        },
    ),
    (
        "add_task",
        {
            "worker": W,
            "task_id": "Leaf(n=1)",
            "family": "Leaf",
            "module": "pipeline",
            "params": {"n": "1"},
            "resources": {"cpu": 2},
        },
    ),
    (
        "add_task",
        {
            "worker": W,
            "task_id": "Leaf(n=2)",
            "family": "Leaf",
            "params": {"n": "2"},
            "status": "FAILED",
            "expl": "boom",
        },
    ),
    ("ping", {"worker": W}),
    ("count_pending", {"worker": W}),
    ("get_work", {"worker": W, "host": "h1", "current_tasks": []}),
    ("set_task_status_message", {"task_id": "Leaf(n=1)", "status_message": "halfway"}),
    ("get_task_status_message", {"task_id": "Leaf(n=1)"}),
    ("set_task_progress_percentage", {"task_id": "Leaf(n=1)", "progress_percentage": 50}),
    ("get_task_progress_percentage", {"task_id": "Leaf(n=1)"}),
    ("get_running_task_resources", {"task_id": "Leaf(n=1)"}),
    ("decrease_running_task_resources", {"task_id": "Leaf(n=1)", "decrease_resources": {"cpu": 1}}),
    ("get_running_task_resources", {"task_id": "Leaf(n=1)"}),
    ("send_scheduler_message", {"worker": W, "task": "Leaf(n=1)", "content": "stop soon?"}),
    ("ping", {"worker": W}),
    ("add_scheduler_message_response", {"task_id": "Leaf(n=1)", "message_id": MESSAGE_ID, "response": "ok"}),
    ("get_scheduler_message_response", {"task_id": "Leaf(n=1)", "message_id": MESSAGE_ID}),
    ("fetch_error", {"task_id": "Leaf(n=2)"}),
    ("task_list", {"status": "RUNNING"}),
    ("task_list", {"status": "FAILED", "upstream_status": ""}),
    ("task_list", {"status": "PENDING", "upstream_status": "UPSTREAM_FAILED"}),
    ("task_list", {"status": "", "search": "Leaf"}),
    ("task_search", {"task_str": "Leaf"}),
    ("task_counts", {}),
    ("task_page", {"status": "PENDING", "sort_by": "priority", "sort_desc": True}),
    ("task_detail", {"task_id": "Root()"}),
    ("graph_view", {"task_id": "Root()", "max_nodes": 1}),
    ("graph", {}),
    ("dep_graph", {"task_id": "Root()"}),
    ("dep_graph", {"task_id": "Root()", "include_done": False}),
    ("inverse_dep_graph", {"task_id": "Leaf(n=1)"}),
    ("worker_list", {}),
    ("resource_list", {}),
    ("forgive_failures", {"task_id": "Leaf(n=2)"}),
    ("cancel_task", {"task_id": "Leaf(n=1)"}),
    ("mark_as_done", {"task_id": "Leaf(n=1)"}),
    ("re_enable_task", {"task_id": "Leaf(n=2)"}),
    ("set_worker_processes", {"worker": W, "n": 3}),
    ("ping", {"worker": W}),
    ("has_task_history", {}),
    ("is_pause_enabled", {}),
    ("pause", {}),
    ("is_paused", {}),
    ("get_work", {"worker": W}),
    ("unpause", {}),
    ("get_work", {"worker": W, "assistant": False, "current_tasks": []}),
    (
        "announce_scheduling_failure",
        {"task_name": "Root()", "family": "Root", "params": {}, "expl": "no", "owners": [], "worker": W},
    ),
    ("schedule_list", {}),
    ("backfill_list", {}),
    ("update_metrics_task_started", {"task": {"id": "Root()"}}),
    ("report_task_statistics", {"task_id": "Leaf(n=1)", "statistics": {"rows": 10}}),
    ("scheduler_features", {}),
    ("append_task_log", {"task_id": "Leaf(n=1)", "worker": W, "run": "r1", "offset": 0, "chunk": "hi\n"}),
    ("task_log", {"task_id": "Leaf(n=1)", "offset": 0}),
    ("prune", {}),
    ("add_worker", {"worker": W2, "info": [["host", "h2"]]}),
    ("disable_worker", {"worker": W2}),
    ("get_work", {"worker": W2}),
    ("worker_list", {"include_running": False}),
    ("task_list", {}),
]


@pytest.fixture
def fixed_message_ids(monkeypatch):
    """Scheduler messages get one known id, so the served and the direct scheduler agree."""
    monkeypatch.setattr(uuid, "uuid4", lambda: uuid.UUID(MESSAGE_ID))


@pytest.fixture
def served():
    """A scheduler on a manual clock served in-process, and an HttpProbe for it."""
    scheduler, _clock = make_scheduler()
    with serving_in_thread(scheduler) as server:
        yield scheduler, probe_for(server)


def as_json(value: Any) -> Any:
    return json.loads(json.dumps(value))


# A scheduler without schedules refuses these (400, naming the fix); test/schedules runs them on a luigid
# that has some.
SCHEDULE_BUTTONS: list[tuple[str, dict[str, Any]]] = [
    ("schedule_log", {"name": "nightly", "run": 1}),
    ("schedule_pause", {"name": "nightly"}),
    ("schedule_resume", {"name": "nightly"}),
    ("schedule_trigger", {"name": "nightly"}),
]


# And these: an in-process scheduler runs no backfills (test/schedules runs them on a real luigid).
BACKFILL_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("backfill_start", {"module": "m", "family": "Day", "start": "2024-01-01", "stop": "2024-01-06"}),
    ("backfill_cancel", {"id": 1}),
    ("backfill_log", {"id": 1}),
]


def test_the_scenario_uses_every_registered_method():
    assert {name for name, _ in SCENARIO + SCHEDULE_BUTTONS + BACKFILL_CALLS} == set(RPC_METHODS)


@pytest.mark.parametrize(
    ("calls", "fix"),
    [(SCHEDULE_BUTTONS, "[schedule:<name>]"), (BACKFILL_CALLS, "this scheduler runs")],
    ids=["schedules", "backfills"],
)
def test_a_scheduler_without_schedules_or_backfills_refuses_their_calls_naming_why(served, calls, fix):
    _, probe = served
    direct, _clock = make_scheduler()
    for name, kwargs in calls:
        with pytest.raises(ValueError) as refused:
            getattr(direct, name)(**kwargs)
        verb = "POST" if RPC_METHODS[name].mutating else "GET"
        reply = probe.call(name, kwargs, verb=verb)
        assert (reply.status, reply.json()) == (400, {"error": str(refused.value)}), name
        assert fix in str(refused.value)


def test_every_method_answers_over_http_as_the_scheduler_does_directly(served, fixed_message_ids):
    _, probe = served
    direct, _clock = make_scheduler()
    for name, kwargs in SCENARIO:
        verb = "POST" if RPC_METHODS[name].mutating else "GET"
        reply = probe.call(name, kwargs, verb=verb)
        expected = as_json(getattr(direct, name)(**kwargs))
        assert reply.status == 200, (name, reply.body)
        assert reply.headers["Content-Type"].startswith("application/json")
        assert reply.json() == {"response": expected}, name


def test_read_only_methods_answer_post_as_well_as_get(served):
    _, probe = served
    for name, method in RPC_METHODS.items():
        if not method.mutating and not method.parameters:
            assert probe.call(name, verb="GET").json() == probe.call(name, verb="POST").json(), name


def test_a_batch_runs_its_calls_in_order_with_the_same_answers(served, fixed_message_ids):
    _, probe = served
    direct, _clock = make_scheduler()
    reply = probe.batch([{"method": name, "kwargs": kwargs} for name, kwargs in SCENARIO])
    assert reply.status == 200
    expected = [{"response": as_json(getattr(direct, name)(**kwargs))} for name, kwargs in SCENARIO]
    assert reply.json() == {"response": expected}


def test_a_batch_reports_each_failed_call_and_runs_the_rest(served):
    scheduler, probe = served
    calls = [
        {"method": "add_task", "kwargs": {"worker": W, "task_id": "A"}},
        {"method": "no_such_method"},
        {"method": "add_task", "kwargs": {"worker": W}},
        {"method": "add_task", "kwargs": {"worker": W, "task_id": "B", "status": "WEIRD"}},
        {"method": "task_search", "kwargs": {"task_str": ""}},
    ]
    answers = probe.batch(calls).json()["response"]
    assert answers[0] == {"response": None}
    assert answers[1] == {"error": "No scheduler RPC method named 'no_such_method'", "status": 404}
    assert answers[2] == {"error": "add_task: missing required argument 'task_id'", "status": 400}
    assert answers[3]["status"] == 400 and "unknown status 'WEIRD'" in answers[3]["error"]
    assert answers[4] == {"response": as_json(scheduler.task_search(task_str=""))}
    assert set(scheduler.task_list()) == {"A"}


def test_a_batch_that_stops_on_error_runs_nothing_after_a_refused_call(served):
    scheduler, probe = served
    calls = [
        {"method": "add_task", "kwargs": {"worker": W, "task_id": "A"}},
        {"method": "add_task", "kwargs": {"worker": W, "task_id": "B", "status": "WEIRD"}},
        {"method": "add_task", "kwargs": {"worker": W, "task_id": "C"}},
        {"method": "get_work", "kwargs": {"worker": W}},
    ]
    answers = probe.call("_batch", {"calls": calls, "stop_on_error": True}).json()["response"]
    assert answers[0] == {"response": None}
    assert answers[1]["status"] == 400
    not_run = {"error": "not run: call 1 (add_task) was refused", "status": 424}
    assert answers[2:] == [not_run, not_run]
    assert set(scheduler.task_list()) == {"A"}
    assert scheduler.task_list(status="RUNNING") == {}


def test_an_empty_batch_answers_an_empty_list(served):
    _, probe = served
    assert probe.batch([]).json() == {"response": []}


def test_a_json_batch_answers_exactly_as_a_form_batch_with_the_same_headers(fixed_message_ids):
    calls = [{"method": name, "kwargs": kwargs} for name, kwargs in SCENARIO]
    body = json.dumps({"calls": calls}).encode()
    replies = []
    for as_json_body in (False, True):
        scheduler, _clock = make_scheduler()
        with serving_in_thread(scheduler) as server:
            probe = probe_for(server)
            if as_json_body:
                reply = probe.request(
                    "POST", "/api/_batch", body=body, headers={"Content-Type": "application/json"}
                )
            else:
                reply = probe.batch(calls)
            replies.append((reply, scheduler.task_list(), scheduler.worker_list()))
    (form, form_tasks, form_workers), (fast, fast_tasks, fast_workers) = replies
    assert fast.status == form.status == 200
    assert fast.json() == form.json()
    assert (fast_tasks, fast_workers) == (form_tasks, form_workers)
    for header in ("Content-Type", "Server", "Content-Security-Policy"):
        assert fast.headers[header] == form.headers[header], header


def test_kwargs_may_be_the_whole_body_when_it_is_sent_as_json(served):
    scheduler, probe = served
    body = json.dumps({"calls": [{"method": "add_task", "kwargs": {"worker": W, "task_id": "Ü"}}]})
    reply = probe.request(
        "POST", "/api/_batch", body=body.encode(), headers={"Content-Type": "application/json; charset=utf-8"}
    )
    assert reply.json() == {"response": [{"response": None}]}
    assert set(scheduler.task_list()) == {"Ü"}


def test_kwargs_may_come_in_the_query_string_of_a_post(served):
    _, probe = served
    reply = probe.request("POST", '/api/ping?data={"worker":"w"}', body=b"")
    assert reply.json() == {"response": {"rpc_messages": []}}


def test_a_missing_data_field_means_no_arguments(served):
    _, probe = served
    assert probe.request("GET", "/api/is_paused").json() == {"response": {"paused": False}}


def test_multipart_form_bodies_are_read_too(served):
    _, probe = served
    body = b'--XyZ\r\nContent-Disposition: form-data; name="data"\r\n\r\n{"worker": "w"}\r\n--XyZ--\r\n'
    reply = probe.request(
        "POST", "/api/ping", body=body, headers={"Content-Type": "multipart/form-data; boundary=XyZ"}
    )
    assert reply.json() == {"response": {"rpc_messages": []}}


def test_a_body_exactly_at_the_cap_is_accepted():
    scheduler, _clock = make_scheduler()
    data = "data=" + json.dumps({"worker": "w"})
    with serving_in_thread(scheduler, ServerSettings(max_body_size=len(data))) as server:
        reply = probe_for(server).request(
            "POST", "/api/ping", body=data, headers={"Content-Type": "application/x-www-form-urlencoded"}
        )
    assert reply.status == 200


def test_an_add_task_past_16_mib_is_taken_by_default_as_luigis_server_takes_it():
    # Luigi's luigid keeps tornado's 100 MB cap: a wrapper naming many (here long) task ids in a Luigi
    # client's form body must not be refused.
    deps = [f"Leaf_{n}_" + "x" * 1_000 for n in range(17_000)]
    body = urlencode({"data": json.dumps({"worker": W, "task_id": "Wide()", "deps": deps})})
    assert len(body) > 16 * 1024 * 1024
    scheduler, _clock = make_scheduler()
    with serving_in_thread(scheduler) as server:
        probe = HttpProbe(port=server.bound_port(), timeout=60)  # 17 MiB on a busy machine
        reply = probe.request(
            "POST", "/api/add_task", body=body, headers={"Content-Type": "application/x-www-form-urlencoded"}
        )
    assert reply.status == 200
    assert scheduler.task_list("PENDING", "", limit=False).keys() == {"Wide()"}
    assert len(scheduler.task_list("UNKNOWN", "", limit=False)) == len(deps)


# -- the routed method set ---------------------------------------------------------------------------------


def lifecycle_free_public_methods() -> set[str]:
    """Scheduler's public methods, without the durable-state hooks the server calls itself."""
    return {
        name
        for name, member in inspect.getmembers(Scheduler, inspect.isfunction)
        if not name.startswith("_") and name not in SERVER_HOOKS
    }


def test_the_routed_methods_are_exactly_the_registry_and_the_scheduler_methods(served):
    _, probe = served
    routed = {name for name in RPC_METHODS if probe.call(name, {}, verb="POST").status != 404}
    assert routed == set(RPC_METHODS) == lifecycle_free_public_methods()
    not_rpc = [
        "config",
        "_state",
        "_start_task",
        "__init__",
        "__class__",
        *sorted(SERVER_HOOKS),
        "_batch2",
    ]
    assert {name: probe.call(name, {}).status for name in not_rpc} == dict.fromkeys(not_rpc, 404)


# -- other routes ------------------------------------------------------------------------------------------


def test_head_root_is_a_204_health_check(served):
    _, probe = served
    reply = probe.request("HEAD", "/")
    assert (reply.status, reply.body) == (204, b"")


def test_root_redirects_to_the_visualiser(served):
    _, probe = served
    reply = probe.request("GET", "/")
    assert reply.status == 302
    assert urljoin("http://luigid/", reply.headers["Location"]) == "http://luigid" + VISUALISER_PATH


def test_the_visualiser_page_is_served_from_the_static_directory(served):
    _, probe = served
    reply = probe.request("GET", VISUALISER_PATH)
    assert reply.status == 200
    assert reply.headers["Content-Type"].startswith("text/html")
    assert reply.body == (Path(STATIC_DIR) / "visualiser" / "index.html").read_bytes()


def test_unknown_pages_answer_a_json_404(served):
    _, probe = served
    for path in ("/nothing-here", "/static/missing.js"):
        reply = probe.request("GET", path)
        assert reply.status == 404
        assert path in reply.json()["error"]


def test_options_answers_204_without_cors_headers_by_default(served):
    _, probe = served
    reply = probe.request("OPTIONS", "/api/task_list", headers={"Origin": "http://elsewhere.example"})
    assert reply.status == 204
    assert not any(name.startswith("Access-Control") for name in reply.headers)


def test_json_answers_are_compressed_for_clients_that_ask(served):
    scheduler, probe = served
    for n in range(50):
        scheduler.add_task(worker=W, task_id=f"Task{n}", family="Task")
    reply = probe.request("GET", "/api/task_list", headers={"Accept-Encoding": "gzip"})
    assert reply.headers.get("Content-Encoding") == "gzip"


# -- CORS --------------------------------------------------------------------------------------------------


def cors_server(**options: Any):
    scheduler, _clock = make_scheduler()
    return serving_in_thread(scheduler, ServerSettings(cors=CorsPolicy(enabled=True, **options)))


def test_cors_preflight_from_an_allowed_origin_gets_the_configured_headers():
    with cors_server(allowed_origins=("http://ui.example",), max_age=60, exposed_headers="X-Thing") as server:
        reply = probe_for(server).request(
            "OPTIONS", "/api/task_list", headers={"Origin": "http://ui.example"}
        )
    assert reply.status == 204
    assert reply.headers["Access-Control-Allow-Origin"] == "http://ui.example"
    assert reply.headers["Access-Control-Allow-Methods"] == "GET, OPTIONS"
    assert reply.headers["Access-Control-Allow-Headers"] == "Accept, Content-Type, Origin"
    assert reply.headers["Access-Control-Max-Age"] == "60"
    assert reply.headers["Access-Control-Expose-Headers"] == "X-Thing"


def test_cors_answers_name_an_allowed_origin_and_ignore_others():
    with cors_server(allowed_origins=("http://ui.example",), allow_credentials=True) as server:
        probe = probe_for(server)
        allowed = probe.request("GET", "/api/is_paused", headers={"Origin": "http://ui.example"})
        other = probe.request("GET", "/api/is_paused", headers={"Origin": "http://evil.example"})
    assert allowed.headers["Access-Control-Allow-Origin"] == "http://ui.example"
    assert allowed.headers["Access-Control-Allow-Credentials"] == "true"
    assert "Access-Control-Allow-Origin" not in other.headers
    assert other.status == 200


def test_cors_headers_are_on_json_batch_answers_too():
    body = json.dumps({"calls": [{"method": "is_paused", "kwargs": {}}]}).encode()
    headers = {"Content-Type": "application/json"}
    with cors_server(allowed_origins=("http://ui.example",), allow_credentials=True) as server:
        probe = probe_for(server)
        allowed = probe.request(
            "POST", "/api/_batch", body=body, headers={**headers, "Origin": "http://ui.example"}
        )
        other = probe.request(
            "POST", "/api/_batch", body=body, headers={**headers, "Origin": "http://evil.example"}
        )
    assert allowed.headers["Access-Control-Allow-Origin"] == "http://ui.example"
    assert allowed.headers["Access-Control-Allow-Credentials"] == "true"
    assert "Access-Control-Allow-Origin" not in other.headers
    assert allowed.json() == {"response": [{"response": {"paused": False}}]}
    assert other.status == 403  # a POST from a site [cors] does not allow is refused, not run


def test_cors_any_origin_and_null_origin_options():
    with cors_server(allow_any_origin=True) as server:
        any_origin = probe_for(server).request(
            "GET", "/api/is_paused", headers={"Origin": "http://x.example"}
        )
    with cors_server(allow_null_origin=True) as server:
        null_origin = probe_for(server).request("GET", "/api/is_paused", headers={"Origin": "null"})
    assert any_origin.headers["Access-Control-Allow-Origin"] == "*"
    assert null_origin.headers["Access-Control-Allow-Origin"] == "null"


def test_cors_section_is_read_from_configuration(tmp_path, monkeypatch):
    config = tmp_path / "luigi.cfg"
    config.write_text('[cors]\nenabled = true\nallowed_origins = ["http://ui.example"]\nmax_age = 5\n')
    monkeypatch.setenv("LUIGI_CONFIG_PATH", str(config))
    from luigi import configuration

    configuration.reset_for_tests()
    policy = ServerSettings.from_config().cors_policy()
    assert (policy.enabled, policy.allowed_origins, policy.max_age) == (True, ("http://ui.example",), 5)


# -- auth --------------------------------------------------------------------------------------------------


@pytest.fixture
def served_with_token():
    scheduler, _clock = make_scheduler()
    with serving_in_thread(scheduler, ServerSettings(auth_token="s3cret")) as server:
        yield probe_for(server)


def test_with_a_token_the_right_bearer_header_is_let_through(served_with_token):
    probe = served_with_token
    authorized = HttpProbe(port=probe.port, token="s3cret")
    assert authorized.call("ping", {"worker": "w"}).status == 200
    assert authorized.batch([{"method": "is_paused"}]).status == 200
    assert authorized.request("GET", VISUALISER_PATH).status == 200


def test_with_a_token_head_root_and_preflight_need_none(served_with_token):
    assert served_with_token.request("HEAD", "/").status == 204
    assert served_with_token.request("OPTIONS", "/api/ping").status == 204


def test_auth_token_comes_from_the_environment_before_the_config(tmp_path, monkeypatch):
    config = tmp_path / "luigi.cfg"
    config.write_text("[scheduler]\nauth_token = from-config\nmax_body_size = 1000\nprune_interval = 2.5\n")
    monkeypatch.setenv("LUIGI_CONFIG_PATH", str(config))
    from luigi import configuration

    configuration.reset_for_tests()
    settings = ServerSettings.from_config()
    assert (settings.auth_token, settings.max_body_size, settings.prune_interval) == (
        "from-config",
        1000,
        2.5,
    )
    monkeypatch.setenv("LUIGI_AUTH_TOKEN", "from-env")
    assert ServerSettings.from_config().auth_token == "from-env"


def test_auth_is_off_by_default():
    settings = ServerSettings.from_config()
    assert settings.auth_token is None
    assert settings.cors_policy().enabled is False
    assert settings.max_body_size == 100 * 1024 * 1024


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_body_size": 0}, "max_body_size must be a positive number of bytes, got 0"),
        ({"prune_interval": -1}, "prune_interval must be a positive number of seconds, got -1"),
        ({"auth_token": "  "}, "auth_token must not be blank"),
    ],
)
def test_bad_server_settings_are_refused_with_the_option_named(options, message):
    with pytest.raises(ValueError, match=message):
        ServerSettings(**options)
