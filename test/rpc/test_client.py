"""The HTTP client of the central scheduler: Luigi's wire format, auth, retries and errors (COMPAT f.1)."""

from __future__ import annotations

import base64
import inspect
import random
import socket
import threading
from unittest import mock

import pytest
from helpers.fake_luigid import DROP, FakeLuigid, Reply, respond

import luigi.rpc
from luigi.configuration import get_config
from luigi.rpc import RemoteScheduler, RPCError, SchedulerHTTPError, retry_delay
from luigi.rpc_methods import REQUIRED, RPC_METHODS, RpcArgumentError
from luigi.scheduler import Scheduler
from luigi.server.served import SERVER_HOOKS

WORKER = "w1"


@pytest.fixture
def server():
    with FakeLuigid() as fake:
        yield fake


@pytest.fixture
def sleeps():
    return []


def client_for(url: str, sleeps: list[float] | None = None, **kwargs) -> RemoteScheduler:
    """An unbatched client (every call is its own request) whose retry waits are recorded, not slept."""
    kwargs.setdefault("batch_size", 1)
    return RemoteScheduler(url, sleep=(sleeps if sleeps is not None else []).append, **kwargs)


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/"


# -- the method set ---------------------------------------------------------------------------------------


def rpc_like_methods(cls: type) -> set[str]:
    return {name for name, member in inspect.getmembers(cls) if not name.startswith("_") and callable(member)}


def test_the_client_has_exactly_the_registered_methods_as_the_scheduler_does():
    client_only = {"flush", "close", "ask_ahead", "take_ahead", "after_delivery"}
    assert rpc_like_methods(RemoteScheduler) - client_only == set(RPC_METHODS)
    assert rpc_like_methods(Scheduler) - SERVER_HOOKS == set(RPC_METHODS)


@pytest.mark.parametrize("name", sorted(RPC_METHODS))
def test_each_client_method_has_the_registered_signature(name):
    parameters = list(inspect.signature(getattr(RemoteScheduler, name)).parameters.values())[1:]
    declared = RPC_METHODS[name].parameters
    named = [p for p in parameters if p.kind is not inspect.Parameter.VAR_KEYWORD]
    assert [p.name for p in named] == [p.name for p in declared]
    for shown, parameter in zip(named, declared, strict=True):
        if parameter.default is REQUIRED:
            assert shown.default in (inspect.Parameter.empty, REQUIRED)
        else:
            assert shown.default == parameter.default


# -- the wire format --------------------------------------------------------------------------------------


def test_a_call_is_a_form_post_of_data_json_to_api_name_with_defaults_filled_in(server):
    client = client_for(server.url)
    client.add_task(task_id="A()", worker=WORKER, family="A")
    request = server.requests[0]
    assert (request.method, request.path) == ("POST", "/api/add_task")
    assert request.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert set(request.form) == {"data"}
    assert request.data == {
        **{
            p.name: p.default
            for p in RPC_METHODS["add_task"].parameters
            if not p.required and not p.extension
        },
        "task_id": "A()",
        "worker": WORKER,
        "family": "A",
    }
    client.close()


def test_the_response_field_of_the_answer_is_what_the_method_returns(server):
    client = client_for(server.url)
    client.add_task(task_id="A()", worker=WORKER, family="A")
    reply = client.get_work(worker=WORKER, host="h")
    assert reply["task_id"] == "A()"
    assert client.task_list(status="RUNNING").keys() == {"A()"}
    client.close()


def test_positional_arguments_follow_the_declared_order(server):
    client = client_for(server.url)
    client.add_worker(WORKER, {"host": "h"})
    client.set_task_status_message("A()", "half way")
    assert server.requests[0].data == {"worker": WORKER, "info": {"host": "h"}}
    assert server.requests[1].data == {"task_id": "A()", "status_message": "half way"}
    client.close()


def test_a_url_with_a_path_prefix_keeps_it_in_front_of_api():
    with FakeLuigid(prefix="/luigi/") as server:
        client = client_for(server.url.rstrip("/"))  # with or without the trailing slash
        assert client.count_pending(worker=WORKER)["n_pending_tasks"] == 0
        assert server.paths() == ["/luigi/api/count_pending"]
        client.close()


def test_one_keep_alive_connection_carries_successive_calls(server):
    client = client_for(server.url)
    for _ in range(3):
        client.ping(worker=WORKER)
    assert len({r.connection_id for r in server.requests}) == 1
    client.close()


def test_a_connection_the_server_closed_while_idle_is_reopened_without_a_retry(server, sleeps):
    client = client_for(server.url, sleeps)
    server.script.append(respond(200, close=True, response={"rpc_messages": []}))
    client.ping(worker=WORKER)
    assert client.ping(worker=WORKER) == {"rpc_messages": []}
    assert sleeps == []
    assert len({r.connection_id for r in server.requests}) == 2
    client.close()


# -- arguments are checked where the call is written ------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda c: c.add_task(worker=WORKER), "missing required argument 'task_id'"),
        (lambda c: c.disable_worker(worker=WORKER, colour="red"), "unexpected argument 'colour'"),
        (lambda c: c.ping(WORKER, worker=WORKER), "multiple values for argument 'worker'"),
        (lambda c: c.graph(1), "takes 0 positional arguments but 1 were given"),
        (lambda c: c.add_task(task_id="A()", worker=WORKER, deps="B()"), "'deps' must be a list of strings"),
        (lambda c: c.add_worker(WORKER, {"x": {1, 2}}), "argument 'info' cannot be sent as JSON"),
    ],
)
def test_a_bad_call_raises_a_type_error_naming_the_argument_before_anything_is_sent(server, call, message):
    client = RemoteScheduler(server.url)
    with pytest.raises(RpcArgumentError, match=message) as raised:
        call(client)
    assert isinstance(raised.value, TypeError)
    client.close()
    assert server.requests == []


def test_a_method_that_ignores_unknown_arguments_takes_them_and_sends_none(server):
    client = client_for(server.url)
    assert client.ping(worker=WORKER, colour="red") == {"rpc_messages": []}
    assert server.requests[-1].data == {"worker": WORKER}
    client.close()


def test_a_tuple_where_a_list_is_expected_is_sent_as_a_json_list(server):
    client = client_for(server.url)
    client.add_task(task_id="A()", worker=WORKER, deps=("B()", "C()"))
    assert server.requests[0].data["deps"] == ["B()", "C()"]
    client.close()


# -- authentication ---------------------------------------------------------------------------------------


def test_credentials_in_the_url_are_sent_as_basic_auth_and_masked_in_errors(server):
    url = server.url.replace("http://", "http://alice:s%40cret@")
    server.script.append(respond(403, error="forbidden"))
    client = client_for(url)
    with pytest.raises(RPCError) as raised:
        client.graph()
    expected = "Basic " + base64.b64encode(b"alice:s@cret").decode()
    assert server.requests[0].headers["Authorization"] == expected
    assert "s%40cret" not in str(raised.value) and "alice:***@" in str(raised.value)
    client.close()


def test_the_auth_token_from_the_environment_is_sent_as_a_bearer_token(server, monkeypatch):
    monkeypatch.setenv("LUIGI_AUTH_TOKEN", "t0ken")
    client = client_for(server.url)
    client.graph()
    assert server.requests[0].headers["Authorization"] == "Bearer t0ken"
    client.close()


def test_the_auth_token_can_come_from_the_scheduler_section(server, monkeypatch):
    monkeypatch.delenv("LUIGI_AUTH_TOKEN", raising=False)
    get_config().set("scheduler", "auth_token", "from-config")
    client = client_for(server.url)
    client.graph()
    assert server.requests[0].headers["Authorization"] == "Bearer from-config"
    client.close()


def test_without_credentials_no_authorization_header_is_sent(server, monkeypatch):
    monkeypatch.delenv("LUIGI_AUTH_TOKEN", raising=False)
    client = client_for(server.url)
    client.graph()
    assert "Authorization" not in server.requests[0].headers
    client.close()


# -- Unix sockets -----------------------------------------------------------------------------------------


def test_a_scheduler_on_a_unix_socket_is_reached_through_an_http_unix_url(tmp_path):
    socket_path = str(tmp_path / "luigi.sock")
    with FakeLuigid(socket_path=socket_path) as server:
        assert server.url.startswith("http+unix://%2F")
        client = client_for(server.url)
        client.add_task(task_id="A()", worker=WORKER)
        assert client.get_work(worker=WORKER)["task_id"] == "A()"
        assert server.paths() == ["/api/add_task", "/api/get_work"]
        client.close()


# -- retries ------------------------------------------------------------------------------------------------


def test_server_errors_are_retried_with_growing_waits_until_an_answer_comes(server, sleeps):
    server.script.extend([respond(500, error="boom"), respond(503, error="busy")])
    client = client_for(server.url, sleeps)
    assert client.has_task_history() is False
    assert server.api_names() == ["has_task_history"] * 3
    assert 0.5 <= sleeps[0] <= 1.0 and 1.0 <= sleeps[1] <= 2.0
    client.close()


def test_after_the_last_attempt_the_error_names_the_url_and_the_cause(server, sleeps):
    server.script.extend([respond(503, error="busy")] * 3)
    client = client_for(server.url, sleeps)
    with pytest.raises(
        RPCError, match=r"Errors \(3 attempts\) when connecting to remote scheduler"
    ) as raised:
        client.graph()
    assert repr(server.url.rstrip("/")) in str(raised.value) and "HTTP 503: busy" in str(raised.value)
    assert isinstance(raised.value.sub_exception, SchedulerHTTPError)
    assert raised.value.sub_exception.status == 503
    assert len(sleeps) == 2
    client.close()


def test_an_unreachable_scheduler_raises_rpc_error_with_the_connection_error(sleeps):
    client = client_for(closed_port_url(), sleeps, retry_attempts=2)
    with pytest.raises(RPCError, match=r"Errors \(2 attempts\)") as raised:
        client.ping(worker=WORKER)
    assert isinstance(raised.value.sub_exception, ConnectionRefusedError)
    assert len(sleeps) == 1


def test_a_dropped_connection_is_retried(server, sleeps):
    server.script.append(lambda request: DROP)
    client = client_for(server.url, sleeps)
    assert client.is_paused() == {"paused": False}
    assert len(server.requests) == 2 and len(sleeps) == 1
    client.close()


def test_a_client_error_is_not_retried_and_carries_the_servers_message(server, sleeps):
    server.script.append(respond(400, error="add_task: argument 'priority' must be a number"))
    client = client_for(server.url, sleeps)
    with pytest.raises(RPCError, match="HTTP 400: add_task: argument 'priority' must be a number") as raised:
        client.add_task(task_id="A()", worker=WORKER)
    assert raised.value.status == 400
    assert len(server.requests) == 1 and sleeps == []
    client.close()


def test_an_unknown_method_on_the_server_is_a_404_without_retries(server, sleeps):
    client = client_for(server.url, sleeps)
    with pytest.raises(RPCError, match="HTTP 404: 404: Not Found"):
        client._send_one("api/no_such_method", "{}")
    assert len(server.requests) == 1 and sleeps == []
    client.close()


def test_an_answer_that_is_not_luigis_json_envelope_is_an_error(server):
    server.script.append(lambda request: Reply(200, body=b"<html>proxy login</html>"))
    client = client_for(server.url)
    with pytest.raises(RPCError, match="malformed answer to /api/graph"):
        client.graph()
    client.close()


def test_retries_are_logged_through_luigi_rpc_logger_unless_turned_off(server, sleeps):
    server.script.append(respond(500, error="boom"))
    with mock.patch("luigi.rpc.logger") as logger:
        client_for(server.url, sleeps).graph()
        get_config().set("core", "rpc_log_retries", "false")
        client_for(server.url, sleeps).graph()
        server.script.append(respond(500, error="boom"))
        client_for(server.url, sleeps).graph()
    assert logger.warning.call_count == 1
    assert "attempt" in logger.warning.call_args[0][0]


def test_get_work_asks_again_while_the_answer_is_null(server):
    server.script.extend([respond(response=None)] * 2)
    client = client_for(server.url)
    assert client.get_work(worker=WORKER)["task_id"] is None
    assert server.api_names() == ["get_work"] * 3
    client.close()


def test_get_work_gives_up_on_null_answers_after_its_attempts(server):
    server.script.extend([respond(response=None)] * 3)
    client = client_for(server.url)
    with pytest.raises(RPCError, match="Received null response from remote scheduler"):
        client.get_work(worker=WORKER)
    client.close()


def test_methods_that_may_return_null_return_it_at_once(server):
    server.script.append(respond(response=None))
    client = client_for(server.url)
    assert client.ping(worker=WORKER) is None
    assert len(server.requests) == 1
    client.close()


# -- configuration -----------------------------------------------------------------------------------------


def test_core_rpc_retry_attempts_sets_the_number_of_attempts(server, sleeps):
    get_config().set("core", "rpc_retry_attempts", "5")
    server.script.extend([respond(500, error="boom")] * 5)
    client = client_for(server.url, sleeps)
    with pytest.raises(RPCError, match=r"Errors \(5 attempts\)"):
        client.graph()
    assert len(server.requests) == 5
    client.close()


def test_core_rpc_retry_wait_caps_the_backoff(server, sleeps):
    get_config().set("core", "rpc_retry_wait", "1.5")
    server.script.extend([respond(500, error="boom")] * 4)
    client = client_for(server.url, sleeps, retry_attempts=5)
    client.graph()
    assert all(wait <= 1.5 for wait in sleeps) and len(sleeps) == 4
    client.close()


def test_a_zero_retry_wait_retries_without_waiting(server, sleeps):
    server.script.append(respond(500, error="boom"))
    client = client_for(server.url, sleeps, retry_wait=0)
    client.graph()
    assert sleeps == [0.0]
    client.close()


def test_core_rpc_connect_timeout_bounds_a_silent_scheduler(server):
    get_config().set("core", "rpc_connect_timeout", "0.2")
    release = threading.Event()
    server.script.append(lambda request: release.wait(10) and None)
    client = client_for(server.url, retry_attempts=1)
    try:
        with pytest.raises(RPCError) as raised:
            client.graph()
        assert isinstance(raised.value.sub_exception, TimeoutError)
    finally:
        release.set()
        client.close()


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("rpc_retry_attempts", "0", r"\[core\] rpc_retry_attempts must be at least 1, got 0"),
        ("rpc_connect_timeout", "0", r"\[core\] rpc_connect_timeout must be more than 0, got 0.0"),
        ("rpc_retry_wait", "-1", r"\[core\] rpc_retry_wait must be at least 0, got -1.0"),
    ],
)
def test_bad_rpc_options_are_refused_with_the_option_named(option, value, message):
    get_config().set("core", option, value)
    with pytest.raises(ValueError, match=message):
        RemoteScheduler("http://localhost:8082/")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://host/", "unsupported scheme 'ftp'"),
        ("", "is empty"),
        ("http:///path", "names no host"),
        ("http://host:99999/", "invalid port"),
    ],
)
def test_a_bad_scheduler_url_is_refused_with_what_was_expected(url, message):
    with pytest.raises(ValueError, match=message):
        RemoteScheduler(url)


def test_the_backoff_doubles_from_one_second_up_to_the_cap_with_jitter():
    rng = random.Random(7)
    ceilings = [1, 2, 4, 8, 16, 30, 30]
    for attempt, ceiling in enumerate(ceilings, start=1):
        assert ceiling / 2 <= retry_delay(attempt, 30, rng) <= ceiling
    assert retry_delay(3, 0, rng) == 0.0


def test_the_module_logger_is_luigis_interface_logger():
    assert luigi.rpc.logger.name == "luigi-interface"


def test_rpc_error_keeps_the_message_and_sub_exception():
    cause = ConnectionRefusedError("no")
    error = RPCError("Errors (3 attempts) when connecting to remote scheduler 'x'", cause)
    assert str(error) == error.message == "Errors (3 attempts) when connecting to remote scheduler 'x'"
    assert error.sub_exception is cause
