"""End to end: workers and the HTTP client against our real tornado server, served in-process."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from typing import Any

import pytest
import tornado.httpserver
import tornado.netutil

import luigi
import luigi.server
from luigi.interface import build
from luigi.rpc import RemoteScheduler, RPCError
from luigi.rpc.address import unix_socket_url
from luigi.scheduler import Scheduler
from luigi.server import ServerSettings
from luigi.worker import Worker


class ServedApp:
    """``luigi.server.app`` on a free port (or a Unix socket) in a thread; records each request."""

    def __init__(self, settings: ServerSettings | None = None, socket_path: str | None = None) -> None:
        self.scheduler = Scheduler()
        self.requests: list[tuple[str, str, int]] = []
        self.application = luigi.server.app(
            self.scheduler, settings or ServerSettings(), log_function=self._record
        )
        if socket_path is None:
            self.sockets = tornado.netutil.bind_sockets(0, address="127.0.0.1")
            self.url = f"http://127.0.0.1:{self.sockets[0].getsockname()[1]}/"
        else:
            self.sockets = [tornado.netutil.bind_unix_socket(socket_path)]
            self.url = unix_socket_url(socket_path)
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve()), daemon=True)

    def _record(self, handler: Any) -> None:
        self.requests.append((handler.request.method, handler.request.path, handler.get_status()))

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        server = tornado.httpserver.HTTPServer(self.application)
        server.add_sockets(self.sockets)
        self._ready.set()
        await self._stopping.wait()
        server.stop()
        await server.close_all_connections()

    def __enter__(self) -> ServedApp:
        self._thread.start()
        assert self._ready.wait(10), "the server did not start"
        return self

    def __exit__(self, *exc_info: Any) -> None:
        assert self._loop is not None and self._stopping is not None
        self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(10)

    def paths(self) -> list[str]:
        return [path for _, path, _ in self.requests]

    def wait_for_paths(self, expected: list[str], timeout: float = 10.0) -> list[str]:
        """The request paths once they equal ``expected`` (the log follows the answer), or at the deadline.

        The server handles requests one at a time and logs each before the next, so when a client call
        has returned, at most its own last request can still be unlogged.
        """
        deadline = time.monotonic() + timeout
        while self.paths() != expected and time.monotonic() < deadline:
            time.sleep(0.01)  # polling a condition with a deadline
        return self.paths()


@pytest.fixture
def served():
    with ServedApp() as app:
        yield app


class Source(luigi.Task):
    root = luigi.Parameter()
    n = luigi.IntParameter()

    def output(self):
        return luigi.LocalTarget(f"{self.root}/source-{self.n}.txt")

    def run(self):
        with self.output().open("w") as out:
            out.write(str(self.n))


class Doubled(luigi.Task):
    root = luigi.Parameter()
    n = luigi.IntParameter()

    def requires(self):
        return Source(root=self.root, n=self.n)

    def output(self):
        return luigi.LocalTarget(f"{self.root}/doubled-{self.n}.txt")

    def run(self):
        with self.input().open() as source, self.output().open("w") as out:
            out.write(str(2 * int(source.read())))


class Everything(luigi.WrapperTask):
    root = luigi.Parameter()
    size = luigi.IntParameter(default=6)

    def requires(self):
        return [Doubled(root=self.root, n=n) for n in range(self.size)]


class Broken(luigi.Task):
    def complete(self):
        return False

    def run(self):
        raise RuntimeError("the disk is full of eels")


def doubled_values(root) -> list[str]:
    return sorted((root / f"doubled-{n}.txt").read_text() for n in range(6))


def test_build_against_the_server_runs_a_pipeline_sending_updates_in_batches(served, tmp_path):
    assert build([Everything(root=str(tmp_path))], scheduler_url=served.url, no_lock=True) is True
    assert doubled_values(tmp_path) == sorted(str(2 * n) for n in range(6))
    assert len(served.scheduler.task_list(status="DONE")) == 13
    assert "/api/_batch" in served.paths() and "/api/add_task" not in served.paths()
    assert all(status == 200 for verb, _, status in served.requests if verb == "POST")
    # app() is the whole luigid: it takes our client's upgrade to an RPC channel (a detached socket
    # writes no access-log line), and the rest of the run is answered there.
    assert [path for verb, path, _ in served.requests if verb == "GET"] == []
    assert served.application.channels.last_answer > -math.inf


def test_build_with_several_worker_processes_against_the_server(served, tmp_path):
    result = build([Everything(root=str(tmp_path))], scheduler_url=served.url, no_lock=True, workers=3)
    assert result is True
    assert doubled_values(tmp_path) == sorted(str(2 * n) for n in range(6))


def test_a_worker_given_a_remote_scheduler_runs_tasks_like_with_a_local_one(served, tmp_path):
    client = RemoteScheduler(served.url)
    with Worker(scheduler=client) as worker:
        assert worker.add(Doubled(root=str(tmp_path), n=4)) is True
        assert worker.run() is True
    client.close()
    assert (tmp_path / "doubled-4.txt").read_text() == "8"


def test_a_failed_task_is_reported_and_its_error_can_be_fetched(served):
    assert build([Broken()], scheduler_url=served.url, no_lock=True) is False
    client = RemoteScheduler(served.url)
    (task_id,) = client.task_list(status="FAILED")
    assert "the disk is full of eels" in client.fetch_error(task_id)["error"]
    client.close()


def test_an_unknown_method_is_a_404_with_the_servers_message(served):
    client = RemoteScheduler(served.url, sleep=lambda seconds: None)
    with pytest.raises(RPCError, match="HTTP 404: No scheduler RPC method named 'nope'"):
        client._send_one("api/nope", "{}")
    assert served.wait_for_paths(["/api/nope"]) == ["/api/nope"]
    client.close()


def test_the_servers_auth_token_is_met_by_the_clients_bearer_token(monkeypatch):
    with ServedApp(ServerSettings(auth_token="s3cret")) as served:
        monkeypatch.delenv("LUIGI_AUTH_TOKEN", raising=False)
        anonymous = RemoteScheduler(served.url, sleep=lambda seconds: None)
        with pytest.raises(RPCError, match="HTTP 401") as refused:
            anonymous.ping(worker="w")
        assert refused.value.status == 401
        assert served.wait_for_paths(["/api/ping"]) == ["/api/ping"]
        anonymous.close()
        monkeypatch.setenv("LUIGI_AUTH_TOKEN", "s3cret")
        client = RemoteScheduler(served.url)
        client.add_task(task_id="A()", worker="w")
        assert client.get_work(worker="w")["task_id"] == "A()"
        client.close()


def test_the_server_on_a_unix_socket_serves_a_build(tmp_path):
    with ServedApp(socket_path=str(tmp_path / "luigid.sock")) as served:
        result = build([Everything(root=str(tmp_path))], scheduler_url=served.url, no_lock=True)
    assert result is True
    assert doubled_values(tmp_path) == sorted(str(2 * n) for n in range(6))
