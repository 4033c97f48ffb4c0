"""The hooks of ``luigi.rpc`` that users' own test suites patch, patched as they patch them (COMPAT j.3).

Each test replaces a hook the way such a suite does (``mock.patch`` on the module or class attribute, or
on one client) and watches the effect through the public path: a worker run, an RPC method, a real
``luigid`` answering.
"""

from __future__ import annotations

import json
import os
import select
import socket
from unittest import mock

import pytest
import requests
from helpers.luigid import running_luigid, serving_in_thread

import luigi
import luigi.rpc
from luigi.rpc import RemoteScheduler, RequestsFetcher, RPCError, URLLibFetcher
from luigi.scheduler import Scheduler
from luigi.server import ServerSettings

WORKER = "hooks-worker"


@pytest.fixture(scope="module")
def luigid(tmp_path_factory):
    with running_luigid(tmp_path_factory.mktemp("luigid")) as process:
        yield process


def new_client(url: str, **kwargs) -> RemoteScheduler:
    """A client whose retry waits are not slept (``sleep`` is the client's injectable wait)."""
    return RemoteScheduler(url, sleep=lambda seconds: None, **kwargs)


def done_ids(url: str) -> set[str]:
    client = new_client(url)
    try:
        return set(client.task_list(status="DONE"))
    finally:
        client.close()


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/"


class HookStep(luigi.Task):
    """One link of a chain: step ``n`` needs step ``n - 1`` and writes a file."""

    folder = luigi.Parameter()
    n = luigi.IntParameter()

    def requires(self):
        return HookStep(folder=self.folder, n=self.n - 1) if self.n > 0 else []

    def output(self):
        return luigi.LocalTarget(os.path.join(self.folder, f"step-{self.n}.txt"))

    def run(self):
        with self.output().open("w") as out:
            out.write(str(self.n))


# -- layer 3 wrapped: a worker run sees every call ---------------------------------------------------------


def test_a_worker_run_with_fetch_wrapped_sends_every_call_through_it_one_post_each(luigid, tmp_path):
    original = RemoteScheduler._fetch
    with mock.patch.object(RemoteScheduler, "_fetch", autospec=True, side_effect=original) as fetch:
        ok = luigi.run(
            ["HookStep", "--folder", str(tmp_path), "--n", "2", "--scheduler-url", luigid.url, "--no-lock"]
        )
    assert ok is True
    calls = [(suffix, body) for _, suffix, body in (call.args for call in fetch.call_args_list)]
    assert all(set(body) == {"data"} and isinstance(json.loads(body["data"]), dict) for _, body in calls)
    names = [suffix.rpartition("/api/")[2] for suffix, _ in calls]
    assert "_batch" not in names and {"add_worker", "add_task", "get_work"} <= set(names)
    reported = {
        (data["task_id"], data["status"])
        for name, data in ((n, json.loads(b["data"])) for n, (_, b) in zip(names, calls, strict=True))
        if name == "add_task"
    }
    steps = {HookStep(folder=str(tmp_path), n=n).task_id for n in range(3)}
    assert {task_id for task_id, status in reported if status == "DONE"} == steps
    assert steps <= done_ids(luigid.url)  # the wrapped calls really reached luigid


def test_a_subclass_overriding_request_gets_luigis_url_arguments_and_options(luigid):
    seen: list[tuple[str, dict, dict]] = []

    class Recording(RemoteScheduler):
        def _request(self, url, data, **options):
            seen.append((url, data, options))
            return super()._request(url, data, **options)

    client = Recording(luigid.url, sleep=lambda seconds: None)
    client.add_task(task_id="Sub(x=1)", worker=WORKER, family="Sub")
    reply = client.get_work(worker=WORKER)
    client.ping(worker=WORKER)
    client.close()
    (add, get_work, ping) = seen
    assert add[0] == "/api/add_task" and add[2] == {}
    assert add[1]["task_id"] == "Sub(x=1)" and add[1]["status"] == "PENDING" and add[1]["priority"] == 0
    assert get_work == (
        "/api/get_work",
        {"worker": WORKER, "host": None, "assistant": False, "current_tasks": None},
        {"allow_null": False},
    )
    assert ping == ("/api/ping", {"worker": WORKER}, {"attempts": 1})
    assert reply["task_id"] == "Sub(x=1)"


def test_request_replaced_on_one_client_takes_its_calls_and_held_ones_first(luigid):
    client = new_client(luigid.url)
    client.add_task(task_id="Held(x=1)", worker=WORKER)  # held by our own path for the next request
    with mock.patch.object(client, "_request", wraps=client._request) as request:
        client.task_list(status="PENDING")
    assert [call.args[0] for call in request.call_args_list] == ["/api/add_task", "/api/task_list"]
    assert request.call_args_list[0].args[1]["task_id"] == "Held(x=1)"
    assert "Held(x=1)" in client.task_list(status="PENDING")
    client.close()


def test_a_missing_argument_is_a_type_error_in_luigis_words():
    client = new_client(closed_port_url())
    with pytest.raises(TypeError, match=r"^add_task takes 20 arguments \(19 given\)"):
        client.add_task(task_id="A()")
    with pytest.raises(TypeError, match=r"^ping takes 1 arguments \(0 given\)"):
        client.ping()


# -- layer 2: _fetch returns the text ------------------------------------------------------------------------


def test_get_work_fetches_again_while_the_text_says_null():
    client = new_client("http://zorg.example/")
    answers = ['{"response": null}', '{"response": {"task_id": "T"}}']
    with mock.patch.object(client, "_fetch", side_effect=answers) as fetch:
        assert client.get_work(worker=WORKER) == {"task_id": "T"}
    assert fetch.call_count == 2
    suffix, body = fetch.call_args.args
    assert suffix == "/api/get_work" and json.loads(body["data"])["worker"] == WORKER


def test_get_work_gives_up_after_three_null_texts_naming_the_base_url():
    client = new_client("http://zorg.example/")
    with mock.patch.object(client, "_fetch", side_effect=['{"response": null}'] * 4) as fetch:
        with pytest.raises(RPCError) as raised:
            client.get_work(worker=WORKER)
    assert str(raised.value) == "Received null response from remote scheduler 'http://zorg.example'"
    assert fetch.call_count == 3


def test_other_methods_return_a_null_text_at_once():
    client = new_client("http://zorg.example/")
    with mock.patch.object(client, "_fetch", return_value='{"response": null}') as fetch:
        assert client.ping(worker=WORKER) is None
    assert fetch.call_count == 1


def test_a_text_that_is_not_luigis_envelope_is_a_clear_rpc_error():
    client = new_client("http://zorg.example/")
    with mock.patch.object(client, "_fetch", return_value="<html>proxy login</html>"):
        with pytest.raises(RPCError, match="malformed answer to /api/graph.*proxy login"):
            client.graph()


# -- layer 3: the fetcher, retries and their log -------------------------------------------------------------


@pytest.mark.parametrize("base", ["http://zorg.example", "http://zorg.example/"])
@pytest.mark.parametrize("suffix", ["api/123", "/api/123"])
def test_fetch_joins_the_base_url_and_suffix_and_passes_the_connect_timeout(base, suffix):
    client = RemoteScheduler(base, 42)
    with mock.patch.object(client, "_fetcher") as fetcher:
        fetcher.fetch.return_value = "text"
        assert client._fetch(suffix, {"data": "{}"}) == "text"
    fetcher.fetch.assert_called_once_with("http://zorg.example/api/123", {"data": "{}"}, 42)


def test_fetch_keeps_the_path_of_the_base_url():
    client = RemoteScheduler("http://zorg.example/luigi/", 5)
    with mock.patch.object(client, "_fetcher") as fetcher:
        fetcher.fetch.return_value = '{"response": 1}'
        client.graph()
    assert fetcher.fetch.call_args.args[0] == "http://zorg.example/luigi/api/graph"


def get_work_through(fetch_results, *, log_retries=True, attempts=3):
    """``get_work`` of a client whose fetcher is a mock answering ``fetch_results`` in turn."""
    client = RemoteScheduler("http://zorg.example", 42)
    client._rpc_retry_wait = 0
    client._rpc_log_retries = log_retries
    client._rpc_retry_attempts = attempts
    with mock.patch.object(client, "_fetcher") as fetcher:
        fetcher.raises = (socket.timeout, socket.gaierror)
        fetcher.fetch.side_effect = fetch_results
        return client.get_work(worker=WORKER)


def test_failed_fetches_are_retried_and_logged_in_luigis_words():
    with mock.patch("luigi.rpc.logger") as logger:
        assert get_work_through([socket.timeout, socket.timeout, '{"response": {}}']) == {}
    failed = mock.call.warning(
        "Failed connecting to remote scheduler %r", "http://zorg.example", exc_info=True
    )
    assert logger.mock_calls == [
        failed,
        mock.call.info("Retrying attempt 2 of 3 (max)"),
        mock.call.info("Wait for 0 seconds"),
        failed,
        mock.call.info("Retrying attempt 3 of 3 (max)"),
        mock.call.info("Wait for 0 seconds"),
    ]


def test_out_of_attempts_on_a_fetcher_error_is_an_rpc_error_with_the_last_one():
    last = TimeoutError("the third")
    with mock.patch("luigi.rpc.logger") as logger:
        with pytest.raises(RPCError) as raised:
            get_work_through([socket.timeout, socket.timeout, last])
    assert (
        raised.value.message
        == "Errors (3 attempts) when connecting to remote scheduler 'http://zorg.example'"
    )
    assert raised.value.sub_exception is last
    assert mock.call.info("Retrying attempt 4 of 3 (max)") in logger.mock_calls


def test_retry_attempts_and_logging_are_read_from_the_client_at_call_time():
    with mock.patch("luigi.rpc.logger") as logger:
        with pytest.raises(RPCError, match=r"Errors \(1 attempts\)"):
            get_work_through([socket.timeout], log_retries=False, attempts=1)
    assert logger.mock_calls == []


def test_an_error_the_fetcher_does_not_declare_is_raised_as_it_is_after_the_attempts():
    with pytest.raises(KeyError, match="surprise"):
        get_work_through([KeyError("surprise")] * 3, log_retries=False)


def test_the_retry_wait_is_slept_between_attempts_only():
    client = RemoteScheduler("http://zorg.example", 1)
    client._rpc_retry_wait = 7
    with mock.patch("time.sleep") as sleep, mock.patch.object(client, "_fetcher") as fetcher:
        fetcher.raises = socket.timeout
        fetcher.fetch.side_effect = [socket.timeout] * 3
        with pytest.raises(RPCError):
            client.ping(worker=WORKER)  # ping asks once, but each fetch has its own attempts
    assert sleep.call_args_list == [mock.call(7), mock.call(7)]


# -- the fetcher classes -------------------------------------------------------------------------------------


def test_without_requests_the_client_fetches_with_urllib_through_a_real_luigid(luigid):
    with mock.patch("luigi.rpc.HAS_REQUESTS", False):
        client = new_client(luigid.url)
    assert type(client._fetcher) is URLLibFetcher
    with mock.patch.object(URLLibFetcher, "fetch", autospec=True, side_effect=URLLibFetcher.fetch) as fetch:
        client.add_task(task_id="ByUrllib(x=1)", worker=WORKER, status="DONE")
        assert "ByUrllib(x=1)" in client.task_list(status="DONE")
    urls = [call.args[1] for call in fetch.call_args_list]
    assert urls == [f"{luigid.url}api/add_task", f"{luigid.url}api/task_list"]
    client.close()


def test_with_requests_the_client_has_a_requests_fetcher_whose_session_carries_its_calls(luigid):
    with mock.patch("luigi.rpc.HAS_REQUESTS", True):
        client = new_client(luigid.url)
    assert type(client._fetcher) is RequestsFetcher
    seen: list[str] = []
    session = requests.Session()
    session.hooks["response"].append(lambda response, **kwargs: seen.append(response.request.url))
    client._fetcher.session = session
    client.add_task(task_id="ByRequests(x=1)", worker=WORKER, status="DONE")
    assert "ByRequests(x=1)" in client.task_list(status="DONE")
    assert seen == [f"{luigid.url}api/add_task", f"{luigid.url}api/task_list"]
    client.close()


def test_a_patched_fetcher_class_is_what_a_new_client_fetches_with(luigid):
    fetched: list[str] = []

    class Recording(URLLibFetcher):
        def fetch(self, full_url, body, timeout):
            fetched.append(full_url)
            return super().fetch(full_url, body, timeout)

    with mock.patch("luigi.rpc.HAS_REQUESTS", True), mock.patch("luigi.rpc.RequestsFetcher", Recording):
        client = new_client(luigid.url)
    assert client.ping(worker=WORKER) == {"rpc_messages": []}
    assert fetched == [f"{luigid.url}api/ping"]


def test_the_urllib_request_moves_url_credentials_into_basic_auth_and_form_encodes_the_body():
    fetcher = URLLibFetcher()
    request = fetcher._create_request("http://ann:s%40cret@zorg.example:8082/api/x", {"data": '{"a": 1}'})
    assert request.get_full_url() == "http://zorg.example:8082/api/x"
    assert request.get_header("Authorization") == "Basic YW5uOnNAY3JldA=="  # ann:s@cret
    assert request.data == b"data=%7B%22a%22%3A+1%7D"
    bare = fetcher._create_request("http://zorg.example/api/x", {})
    assert bare.data is None and not bare.has_header("Authorization")
    assert fetcher.raises == (luigi.rpc.fetchers.URLError, socket.timeout)


def test_the_requests_fetcher_raises_for_an_error_status_from_luigid(luigid):
    fetcher = RequestsFetcher()
    assert fetcher.raises is requests.exceptions.RequestException
    with pytest.raises(requests.HTTPError, match="404"):
        fetcher.fetch(f"{luigid.url}api/no_such_method", {"data": "{}"}, 5)
    text = fetcher.fetch(f"{luigid.url}api/task_list", {"data": '{"status": "NO_SUCH_STATUS"}'}, 5)
    assert json.loads(text) == {"response": {}}
    fetcher.close()


def test_a_forked_child_gets_a_new_requests_session(luigid):
    fetcher = RequestsFetcher()
    parent_session = fetcher.session
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: fetch, then report whether it used a session of its own
        try:
            text = fetcher.fetch(f"{luigid.url}api/ping", {"data": json.dumps({"worker": "child"})}, 5)
            fresh = fetcher.session is not parent_session and fetcher.process_id == os.getpid()
            os.write(write_end, f"{fresh} {json.loads(text)['response']}".encode())
        finally:
            os._exit(0)
    os.close(write_end)
    ready, _, _ = select.select([read_end], [], [], 30)
    report = os.read(read_end, 1000).decode() if ready else "no report"
    os.close(read_end)
    os.waitpid(pid, 0)
    assert report == "True {'rpc_messages': []}"
    assert fetcher.session is parent_session and fetcher.process_id == os.getpid()


# -- the default path ----------------------------------------------------------------------------------------


def test_an_untouched_client_batches_and_builds_no_fetcher(luigid):
    client = new_client(luigid.url)
    client.add_task(task_id="Fast(x=1)", worker=WORKER, status="DONE")
    assert "Fast(x=1)" in client.task_list(status="DONE")
    assert "_fetcher" not in vars(client)
    assert client.ask_ahead(worker=WORKER) is True  # only our own path asks ahead
    client.take_ahead()
    client.close()


def test_once_a_layer_is_replaced_nothing_is_asked_ahead(luigid):
    client = new_client(luigid.url)
    client.ping(worker=WORKER)
    with mock.patch.object(client, "_fetch", wraps=client._fetch):
        assert client.ask_ahead(worker=WORKER) is False


def test_retry_attempts_set_on_a_client_bound_its_own_path_too():
    client = new_client(closed_port_url())
    client._rpc_retry_attempts = 1
    with pytest.raises(RPCError, match=r"^Errors \(1 attempts\) when connecting to remote scheduler 'http"):
        client.graph()
    assert "_fetcher" not in vars(client)


def test_the_connect_timeout_set_on_a_client_bounds_a_silent_scheduler_on_its_own_path():
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # accepts connections, never answers
        client = new_client(f"http://127.0.0.1:{silent.getsockname()[1]}/", batch_size=1)
        client._rpc_retry_attempts = 1
        client._connect_timeout = 0.2
        with pytest.raises(RPCError, match="TimeoutError|timed out"):
            client.graph()


def test_rpc_logger_patched_sees_the_retries_of_the_clients_own_path():
    client = new_client(closed_port_url())
    with mock.patch("luigi.rpc.logger") as logger, pytest.raises(RPCError):
        client.graph()
    assert logger.warning.call_count == 2  # after the first and the second of three attempts
    assert "Failed connecting to remote scheduler" in logger.warning.call_args.args[0]


def test_a_client_made_with_luigis_arguments_has_luigis_attributes():
    client = RemoteScheduler(url="http://localhost:8082/", connect_timeout=None)
    assert client._url == "http://localhost:8082"
    assert client._connect_timeout == 10.0
    assert (client._rpc_retry_attempts, client._rpc_retry_wait, client._rpc_log_retries) == (3, 30, True)
    assert isinstance(client._rpc_retry_wait, int)  # logged as "Wait for 30 seconds"


def test_rpc_error_takes_a_message_and_a_sub_exception():
    cause = OSError("refused")
    error = RPCError("it failed", cause)
    assert (error.message, error.sub_exception, str(error)) == ("it failed", cause, "it failed")
    assert RPCError("alone").sub_exception is None


@pytest.mark.parametrize("has_requests", [True, False])
def test_the_fetchers_send_the_clients_token_to_a_luigid_that_requires_one(has_requests):
    with serving_in_thread(Scheduler(), ServerSettings(auth_token="s3cret")) as server:
        url = f"http://127.0.0.1:{server.bound_port()}/"
        with mock.patch("luigi.rpc.HAS_REQUESTS", has_requests):
            client = new_client(url, auth_token="s3cret")
            anonymous = new_client(url, auth_token=None)
        anonymous._rpc_retry_attempts = 1
        with mock.patch.object(RemoteScheduler, "_fetch", autospec=True, side_effect=RemoteScheduler._fetch):
            client.add_task(task_id="Tokened(x=1)", worker=WORKER)
            assert "Tokened(x=1)" in client.task_list(status="PENDING")
            with pytest.raises(RPCError, match="Errors \\(1 attempts\\)") as refused:
                anonymous.ping(worker=WORKER)
        assert "401" in str(refused.value.sub_exception)
        client.close()
        anonymous.close()
