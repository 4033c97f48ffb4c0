"""Nothing a client sends harms luigid: a bad request gets a 4xx JSON error and the state stays as it was."""

from __future__ import annotations

import json
import logging
import socket
from typing import Any
from urllib.parse import quote

import pytest
from helpers.luigid import HttpProbe, probe_for, serving_in_thread
from helpers.scheduler import populated_scheduler, snapshot

from luigi.server import ServerSettings

FORM = {"Content-Type": "application/x-www-form-urlencoded"}
JSON = {"Content-Type": "application/json"}
CAP = 64 * 1024
TOKEN = "correct-horse"


def form(data: Any) -> bytes:
    """A form body whose ``data`` field is ``data`` (a str is sent as is, anything else as JSON)."""
    text = data if isinstance(data, str) else json.dumps(data)
    return ("data=" + quote(text)).encode()


def post(path: str, data: Any = None, headers: dict[str, str] | None = None, raw: bytes | None = None):
    body = raw if raw is not None else form(data)
    return ("POST", path, body, {**FORM, **(headers or {})})


def post_json(path: str, data: Any, headers: dict[str, str] | None = None):
    """A POST whose body is ``data`` as JSON (what our own client sends to ``/api/_batch``)."""
    return ("POST", path, json.dumps(data).encode(), {**JSON, **(headers or {})})


def get(path: str, data: Any = None, headers: dict[str, str] | None = None):
    query = "" if data is None else "?data=" + quote(data if isinstance(data, str) else json.dumps(data))
    return ("GET", path + query, None, headers or {})


T = {"worker": "w", "task_id": "T"}

# (request, expected status); each is sent to a scheduler holding a small graph, which must not change.
BAD_REQUESTS = {
    # not JSON, or not an object
    "json-syntax": (post("/api/add_task", "{bad"), 400),
    "json-empty-string": (post("/api/add_task", ""), 400),
    "json-list": (post("/api/add_task", []), 400),
    "json-string": (post("/api/add_task", "just text"), 400),
    "json-null": (post("/api/add_task", None), 400),
    "json-number": (post("/api/ping", 42), 400),
    "json-deeply-nested": (post("/api/ping", "[" * 5000 + "]" * 5000), 400),
    "json-huge-integer": (post("/api/ping", '{"worker": 1' + "0" * 5000 + "}"), 400),
    "json-trailing-garbage": (post("/api/ping", '{"worker": "w"} extra'), 400),
    "data-not-utf8": (post("/api/ping", raw=b"data=%FF%FE%FD"), 400),
    "form-with-content-encoding": (post("/api/ping", {"worker": "w"}, {"Content-Encoding": "gzip"}), 400),
    "json-body-syntax": (post("/api/_batch", raw=b'{"calls": [', headers=JSON), 400),
    "json-body-list": (post("/api/_batch", raw=b"[]", headers=JSON), 400),
    "json-body-not-utf8": (post("/api/ping", raw=b'{"worker": "\xff"}', headers=JSON), 400),
    "multipart-without-boundary": (
        post("/api/ping", raw=b"x", headers={"Content-Type": "multipart/form-data"}),
        400,
    ),
    # wrong names or types
    "missing-required": (post("/api/add_task", {"worker": "w"}), 400),
    "task-id-not-string": (post("/api/add_task", {"worker": "w", "task_id": 5}), 400),
    "worker-null": (post("/api/add_task", {"worker": None, "task_id": "T"}), 400),
    "deps-not-list": (post("/api/add_task", {**T, "deps": "A"}), 400),
    "deps-not-strings": (post("/api/add_task", {**T, "deps": [1, 2]}), 400),
    "unknown-status": (post("/api/add_task", {**T, "status": "EXPLODED"}), 400),
    "resources-not-numbers": (post("/api/add_task", {**T, "resources": {"cpu": "lots"}}), 400),
    "priority-not-number": (post("/api/add_task", {**T, "priority": "high"}), 400),
    "retry-policy-unknown-key": (post("/api/add_task", {**T, "retry_policy_dict": {"bogus": 1}}), 400),
    "processes-as-string": (post("/api/set_worker_processes", {"worker": "w", "n": "3"}), 400),
    "processes-as-bool": (post("/api/set_worker_processes", {"worker": "w", "n": True}), 400),
    "unknown-argument": (post("/api/disable_worker", {"worker": "w", "forever": True}), 400),
    "resource-amount-not-number": (post("/api/update_resources", {"cpu": "x"}), 400),
    "decrease-not-numbers": (
        post("/api/decrease_running_task_resources", {"task_id": "A", "decrease_resources": {"cpu": []}}),
        400,
    ),
    "batcher-args-not-list": (
        post("/api/add_task_batcher", {"worker": "w", "task_family": "F", "batched_args": "d"}),
        400,
    ),
    "status-filter-not-string": (get("/api/task_list", {"status": 5}), 400),
    "graph-without-task-id": (get("/api/dep_graph", {}), 400),
    "flag-not-bool": (get("/api/worker_list", {"include_running": "yes"}), 400),
    # unknown methods and routes
    "unknown-method": (post("/api/no_such_method", {}), 404),
    "dunder-attribute": (post("/api/__init__", {}), 404),
    "private-attribute": (post("/api/_state", {}), 404),
    "not-an-rpc-method": (post("/api/config", {}), 404),
    "nested-path": (post("/api/add_task/more", T), 404),
    "empty-method": (post("/api/", {}), 404),
    "unknown-page": (get("/admin"), 404),
    # methods and verbs
    "get-on-mutating-method": (get("/api/add_task", T), 405),
    "get-on-pause": (get("/api/pause"), 405),
    "get-on-batch": (get("/api/_batch", {"calls": []}), 405),
    "delete-on-api": (("DELETE", "/api/ping", None, {}), 405),
    "post-on-root": (post("/", {}), 405),
    # bodies over the cap
    "body-over-cap": (post("/api/ping", raw=b"data=" + b"x" * CAP), 413),
    "chunked-body-over-cap": (("POST", "/api/ping", iter([b"data=", b"y" * CAP]), FORM), 413),
    # malformed batches (nothing in them runs)
    "batch-no-calls": (post("/api/_batch", {}), 400),
    "batch-extra-key": (post("/api/_batch", {"calls": [], "also": 1}), 400),
    "batch-calls-not-list": (post("/api/_batch", {"calls": "ping"}), 400),
    "batch-stop-on-error-not-bool": (post("/api/_batch", {"calls": [], "stop_on_error": "yes"}), 400),
    "batch-call-not-object": (post("/api/_batch", {"calls": [5]}), 400),
    "batch-method-not-string": (post("/api/_batch", {"calls": [{"method": 5}]}), 400),
    "batch-kwargs-not-object": (post("/api/_batch", {"calls": [{"method": "ping", "kwargs": ["w"]}]}), 400),
    "batch-call-extra-key": (
        post("/api/_batch", {"calls": [{"method": "ping", "kwargs": {"worker": "new"}, "args": []}]}),
        400,
    ),
    "batch-bad-json": (post("/api/_batch", '{"calls": [}'), 400),
    # the same through the JSON body our own client sends (served by luigi.server.api.BatchHandler)
    "json-batch-extra-key": (post_json("/api/_batch", {"calls": [], "also": 1}), 400),
    "json-batch-call-not-object": (post_json("/api/_batch", {"calls": ["add_task"]}), 400),
    "json-batch-over-cap": (post_json("/api/_batch", {"calls": [], "pad": "x" * (CAP + 1)}), 413),
}

AUTH_REQUESTS = {
    "no-token": (post("/api/ping", {"worker": "w"}), 401),
    "wrong-token": (post("/api/ping", {"worker": "w"}, {"Authorization": "Bearer nope"}), 401),
    "token-prefix": (post("/api/ping", {"worker": "w"}, {"Authorization": f"Bearer {TOKEN[:-1]}"}), 401),
    "empty-bearer": (post("/api/ping", {"worker": "w"}, {"Authorization": "Bearer "}), 401),
    "basic-scheme": (post("/api/ping", {"worker": "w"}, {"Authorization": f"Basic {TOKEN}"}), 401),
    "batch-without-token": (
        post("/api/_batch", {"calls": [{"method": "ping", "kwargs": {"worker": "n"}}]}),
        401,
    ),
    "json-batch-without-token": (
        post_json("/api/_batch", {"calls": [{"method": "add_task", "kwargs": T}]}),
        401,
    ),
    "json-batch-wrong-token": (
        post_json(
            "/api/_batch", {"calls": [{"method": "add_task", "kwargs": T}]}, {"Authorization": "Bearer x"}
        ),
        401,
    ),
    "read-without-token": (get("/api/task_list"), 401),
    "graph-without-token": (get("/api/graph"), 401),
    "unknown-page-without-token": (get("/no/such/page"), 401),
}


def send(probe: HttpProbe, request) -> Any:
    verb, path, body, headers = request
    kwargs = {"encode_chunked": True} if body is not None and not isinstance(body, bytes) else {}
    return probe.request(verb, path, body=body, headers=headers, **kwargs)


def assert_json_error(reply, status: int) -> str:
    assert reply.status == status, reply.body
    assert reply.headers["Content-Type"].startswith("application/json")
    error = reply.json()["error"]
    assert isinstance(error, str) and error
    return error


@pytest.fixture(scope="module")
def plain_server():
    scheduler = populated_scheduler()
    with serving_in_thread(scheduler, ServerSettings(max_body_size=CAP)) as server:
        yield scheduler, probe_for(server)


@pytest.fixture(scope="module")
def token_server():
    scheduler = populated_scheduler()
    with serving_in_thread(scheduler, ServerSettings(auth_token=TOKEN)) as server:
        yield scheduler, probe_for(server)


def test_there_are_at_least_thirty_kinds_of_bad_request():
    assert len(BAD_REQUESTS) + len(AUTH_REQUESTS) >= 30


@pytest.mark.parametrize("case", sorted(BAD_REQUESTS))
def test_a_bad_request_gets_a_json_error_and_changes_nothing(plain_server, case):
    scheduler, probe = plain_server
    request, status = BAD_REQUESTS[case]
    before = snapshot(scheduler)
    assert_json_error(send(probe, request), status)
    assert snapshot(scheduler) == before
    assert probe.call("count_pending", {"worker": "w"}).status == 200  # and the server still serves


@pytest.mark.parametrize("case", sorted(AUTH_REQUESTS))
def test_without_the_right_token_a_request_is_refused_and_changes_nothing(token_server, case):
    scheduler, probe = token_server
    request, status = AUTH_REQUESTS[case]
    before = snapshot(scheduler)
    reply = send(probe, request)
    assert "Bearer" in assert_json_error(reply, status)
    assert reply.headers["WWW-Authenticate"].startswith("Bearer")
    assert snapshot(scheduler) == before


def test_errors_name_the_problem(plain_server):
    _, probe = plain_server
    messages = {
        case: assert_json_error(send(probe, BAD_REQUESTS[case][0]), BAD_REQUESTS[case][1])
        for case in ("json-list", "task-id-not-string", "unknown-argument", "unknown-method", "body-over-cap")
    }
    assert messages["json-list"].startswith("'data' must be a JSON object of keyword arguments, got list")
    assert messages["task-id-not-string"] == "add_task: argument 'task_id' must be a string, got 5 (int)"
    assert messages["unknown-argument"] == "disable_worker: unexpected argument 'forever' (it takes: worker)"
    assert messages["unknown-method"] == "No scheduler RPC method named 'no_such_method'"
    assert messages["body-over-cap"] == (
        f"Request body is larger than the limit of {CAP} bytes ([scheduler] max_body_size)"
    )


def test_get_on_a_mutating_method_says_to_use_post(plain_server):
    _, probe = plain_server
    reply = probe.call("forgive_failures", {"task_id": "C"}, verb="GET")
    assert (
        assert_json_error(reply, 405)
        == "forgive_failures changes scheduler state: send it with POST, not GET"
    )
    assert reply.headers["Allow"] == "POST, OPTIONS"


def test_each_refused_request_is_logged_in_one_line(plain_server, caplog):
    _, probe = plain_server
    with caplog.at_level(logging.DEBUG):
        send(probe, BAD_REQUESTS["unknown-status"][0])
    problems = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(problems) == 1
    assert "unknown status 'EXPLODED'" in problems[0].getMessage()


def test_a_body_past_the_connection_limit_is_cut_off_and_the_server_keeps_serving(plain_server):
    scheduler, probe = plain_server
    before = snapshot(scheduler)
    with socket.create_connection(("127.0.0.1", probe.port), timeout=10) as raw:
        raw.sendall(b"POST /api/ping HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000000000\r\n\r\n")
        answer = raw.recv(4096)
    assert answer == b"" or answer.startswith(b"HTTP/1.1 4")
    assert snapshot(scheduler) == before
    assert probe.call("count_pending", {"worker": "w"}).status == 200


# -- failures inside the scheduler -------------------------------------------------------------------------


class Broken(RuntimeError):
    pass


def test_an_exception_inside_the_scheduler_answers_500_is_logged_once_and_the_server_goes_on(caplog):
    scheduler = populated_scheduler()

    def explode(**kwargs):
        raise Broken("disk on fire")

    scheduler.count_pending = explode
    with serving_in_thread(scheduler) as server:
        probe = probe_for(server)
        with caplog.at_level(logging.DEBUG):
            reply = probe.call("count_pending", {"worker": "w"})
        follow_up = probe.call("task_search", {"task_str": "A"})
    assert assert_json_error(reply, 500) == "count_pending failed inside the scheduler: Broken: disk on fire"
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(errors) == 1
    assert errors[0].exc_info is not None and errors[0].exc_info[0] is Broken
    assert follow_up.status == 200


def test_a_failure_inside_a_batch_is_reported_for_that_call_only():
    scheduler = populated_scheduler()
    scheduler.is_paused = lambda: {"paused": {1, 2}}  # a set cannot be sent as JSON
    with serving_in_thread(scheduler) as server:
        reply = probe_for(server).batch([{"method": "is_paused"}, {"method": "is_pause_enabled"}])
    first, second = reply.json()["response"]
    assert first["status"] == 500 and "cannot be sent as JSON" in first["error"]
    assert second == {"response": {"enabled": True}}


def test_a_failed_save_is_not_acknowledged():
    scheduler = populated_scheduler()

    def flush():
        raise OSError("read-only file system")

    scheduler.flush = flush
    with serving_in_thread(scheduler) as server:
        probe = probe_for(server)
        single = probe.call("ping", {"worker": "w"})
        batch = probe.batch([{"method": "ping", "kwargs": {"worker": "w"}}])
    for reply in (single, batch):
        assert assert_json_error(reply, 503).startswith(
            "luigid cannot save its state (OSError: read-only file system); the change was not accepted."
        )


def test_the_visualiser_page_loads_without_the_token_so_it_can_ask_for_it(token_server):
    _, probe = token_server
    assert send(probe, get("/static/visualiser/index.html")).status == 200
    assert send(probe, get("/")).status == 302
    assert send(probe, get("/api/task_list")).status == 401
