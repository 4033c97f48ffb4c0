"""luigid's RPC channel: a connection our client upgraded answers API calls exactly as ``/api`` does."""

from __future__ import annotations

import json
import socket
import sqlite3
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.fake_luigid import FakeLuigid
from helpers.luigid import probe_for, serving_in_thread, wait_until
from helpers.scheduler import make_scheduler, populated_scheduler, snapshot

import luigi.server.serve
from luigi import configuration
from luigi.rpc import RemoteScheduler
from luigi.scheduler import Scheduler, SchedulerConfig
from luigi.scheduler.store import SqlStore
from luigi.scheduler.store.journal import ANSWER_SLICE_KEYS
from luigi.server import ServerSettings
from luigi.server.channel import RpcChannel

CAP = 64 * 1024
TOKEN = "correct-horse"


class Channel:
    """A raw socket to a server, speaking HTTP/1.1 byte for byte."""

    def __init__(self, port: int, receive_buffer: int | None = None) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if receive_buffer is not None:  # a small window, so that unread answers back up into the server
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        self.sock.settimeout(10)
        self.sock.connect(("127.0.0.1", port))
        self.reader = self.sock.makefile("rb")

    def upgrade(self, token: str | None = None, host: str = "127.0.0.1") -> tuple[int, dict[str, str], bytes]:
        auth = f"Authorization: Bearer {token}\r\n" if token else ""
        head = f"GET /api/_batch HTTP/1.1\r\nHost: {host}\r\nConnection: Upgrade\r\nUpgrade: luigi-rpc\r\n"
        self.sock.sendall(f"{head}{auth}\r\n".encode())
        return self.answer()

    def post(self, name: str, data: Any, extra: str = "") -> None:
        body = data if isinstance(data, bytes) else json.dumps(data).encode()
        head = f"POST /api/{name} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
        self.sock.sendall(head.encode() + body)

    def answer(self) -> tuple[int, dict[str, str], bytes]:
        status = int(self.reader.readline().split()[1])
        headers = {}
        while (line := self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            headers[name.lower()] = value.strip()
        body = self.reader.read(int(headers.get("content-length", 0)))
        return status, headers, body

    def call(self, name: str, data: Any, extra: str = "") -> tuple[int, Any]:
        self.post(name, data, extra)
        status, _, body = self.answer()
        return status, json.loads(body)

    def closed_by_server(self) -> bool:
        return self.reader.read(1) == b""

    def close(self) -> None:
        self.reader.close()
        self.sock.close()


@pytest.fixture
def served() -> Iterator[tuple[Any, Any]]:
    scheduler = populated_scheduler()
    with serving_in_thread(scheduler, ServerSettings(max_body_size=CAP)) as server:
        yield scheduler, server


@pytest.fixture
def channel(served) -> Iterator[Channel]:
    _, server = served
    opened = Channel(server.bound_port())
    status, headers, _ = opened.upgrade()
    assert (status, headers["upgrade"]) == (101, "luigi-rpc")
    yield opened
    opened.close()


def test_an_upgraded_connection_answers_calls_and_batches_as_the_api_does(served, channel):
    scheduler, server = served
    probe = probe_for(server)
    for name, data in [
        ("task_list", {"status": "PENDING"}),
        ("_batch", {"calls": [{"method": "count_pending", "kwargs": {"worker": "w"}}]}),
        ("no_such_method", {}),
        ("add_task", {"task_id": 3}),
    ]:
        plain = probe.call(name, data)
        assert channel.call(name, data) == (plain.status, plain.json())
    assert channel.call("ping", {"worker": "w"}) == (200, {"response": {"rpc_messages": []}})


def test_calls_on_the_channel_change_state_and_are_flushed(served, channel):
    scheduler, _ = served
    flushes = []
    scheduler.flush = lambda: flushes.append(True)  # type: ignore[method-assign]
    status, answer = channel.call("add_task", {"task_id": "Z", "worker": "w", "family": "Z"})
    assert status == 200 and answer == {"response": None}
    assert "Z" in scheduler.task_list(status="PENDING")
    assert flushes == [True]


def test_requests_sent_together_are_answered_in_order(channel):
    channel.post("count_pending", {"worker": "w"})
    channel.post("no_such_method", {})
    channel.post("is_paused", {})
    statuses = [channel.answer()[0] for _ in range(3)]
    assert statuses == [200, 404, 200]


def test_a_call_the_scheduler_refuses_keeps_the_channel_open(served, channel):
    scheduler, _ = served
    before = snapshot(scheduler)
    for data in (b"{not json", b"[1, 2]", b"\xff\xfe", json.dumps({"calls": 3}).encode()):
        status, answer = channel.call("_batch", data)
        assert status == 400 and isinstance(answer["error"], str)
    assert snapshot(scheduler) == before
    assert channel.call("is_paused", {})[0] == 200


@pytest.mark.parametrize(
    "raw, status, named",
    [
        (b"GET /api/task_list HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 405, "POST only"),
        (b"POST /static/x HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 404, "/api/<method> only"),
        (b"POST /api/ping HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 411, "Content-Length"),
        (b"POST /api/ping HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "Transfer-Encoding"),
        (b"POST /api/ping HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400, "Content-Length"),
        (b"POST /api/ping HTTP/1.0\r\nContent-Length: 2\r\n\r\n{}", 400, "request line"),
        (b"POST /api/ping HTTP/1.1\r\nno colon here\r\n\r\n", 400, "header line"),
        (b"POST /api/ping HTTP/1.1\r\nX: " + b"a" * 70000 + b"\r\n\r\n", 431, "longer than"),
    ],
)
def test_a_request_the_channel_cannot_frame_is_answered_then_the_channel_closes(
    served, channel, raw, status, named
):
    scheduler, _ = served
    before = snapshot(scheduler)
    channel.sock.sendall(raw)
    answered, headers, body = channel.answer()
    assert answered == status and named in json.loads(body)["error"]
    assert headers["connection"] == "close" and channel.closed_by_server()
    assert snapshot(scheduler) == before


def test_a_body_over_the_cap_is_read_past_then_refused_with_413(served, channel):
    scheduler, _ = served
    before = snapshot(scheduler)
    status, answer = channel.call("add_task", b"x" * (CAP + 1))
    assert status == 413 and "max_body_size" in answer["error"]
    assert channel.closed_by_server() and snapshot(scheduler) == before


def test_a_bug_answers_500_and_the_channel_goes_on(served, channel, caplog):
    scheduler, _ = served

    def explode(**kwargs):
        raise RuntimeError("boom")

    scheduler.is_paused = explode  # type: ignore[method-assign]
    status, answer = channel.call("is_paused", {})
    assert status == 500 and "boom" in answer["error"]
    assert channel.call("count_pending", {"worker": "w"})[0] == 200


def test_without_the_upgrade_header_get_batch_is_still_refused_with_405(served):
    _, server = served
    reply = probe_for(server).request("GET", "/api/_batch", headers={"Upgrade": "websocket"})
    assert reply.status == 405


def test_an_upgrade_addressed_to_another_host_is_refused_before_any_route(served):
    _, server = served
    refused = Channel(server.bound_port())
    status, _, body = refused.upgrade(host="evil.example")
    assert status == 403 and "allowed_hosts" in json.loads(body)["error"]
    assert server.channels.count == 0
    refused.close()


def test_with_a_token_the_upgrade_needs_it():
    with serving_in_thread(make_scheduler()[0], ServerSettings(auth_token=TOKEN)) as server:
        refused = Channel(server.bound_port())
        status, headers, body = refused.upgrade()
        assert status == 401 and "bearer token" in json.loads(body)["error"]
        assert refused.call("ping", {"worker": "w"})[0] == 401  # still plain HTTP, each request checked
        refused.close()
        accepted = Channel(server.bound_port())
        assert accepted.upgrade(TOKEN)[0] == 101
        assert accepted.call("ping", {"worker": "w"})[0] == 200
        accepted.close()


def test_stopping_the_server_closes_its_channels():
    with serving_in_thread(make_scheduler()[0]) as server:
        opened = Channel(server.bound_port())
        assert opened.upgrade()[0] == 101
        wait_until(lambda: server.channels.count == 1, what="the channel to open")
    assert opened.closed_by_server()
    opened.close()


def test_our_client_moves_to_the_channel_once_the_server_answered_a_batch():
    scheduler = make_scheduler()[0]
    with serving_in_thread(scheduler) as server:
        client = RemoteScheduler(f"http://127.0.0.1:{server.bound_port()}/")
        client.add_worker(worker="w", info={})
        client.add_task(worker="w", task_id="A", family="A")  # held
        assert client.get_work(worker="w", host="h")["task_id"] == "A"  # one _batch: our server
        assert server.channels.count == 0
        client.add_task(worker="w", task_id="A", family="A", status="DONE")
        assert client.count_pending(worker="w")["n_pending_tasks"] == 0
        assert server.channels.count == 1
        assert scheduler.task_list(status="DONE").keys() == {"A"}
        client.close()
        wait_until(lambda: server.channels.count == 0, what="the channel to close")


def test_our_client_asks_a_server_without_channels_once_and_goes_on_plainly():
    with FakeLuigid(batch=True) as fake:
        client = RemoteScheduler(fake.url, retry_attempts=1)
        client.add_worker(worker="w", info={})
        client.add_task(worker="w", task_id="A", family="A")
        client.get_work(worker="w", host="h")
        for _ in range(3):
            client.ping(worker="w")
        client.close()  # a new socket is not asked again either
        client.ping(worker="w")
        assert len(fake.upgrades) == 1
        assert fake.api_names() == ["_batch", "ping", "ping", "ping", "ping"]


def test_the_channel_can_be_turned_off_in_the_configuration(tmp_path, monkeypatch):
    config = tmp_path / "luigi.cfg"
    config.write_text("[core]\nrpc_channel = false\n")
    monkeypatch.setenv("LUIGI_CONFIG_PATH", str(config))
    configuration.reset_for_tests()
    with FakeLuigid(batch=True) as fake:
        client = RemoteScheduler(fake.url, retry_attempts=1)
        client.add_task(worker="w", task_id="A", family="A")
        client.get_work(worker="w", host="h")
        client.ping(worker="w")
        assert fake.upgrades == []


def test_a_channel_idle_past_the_timeout_is_closed_and_busy_ones_are_kept(served):
    _, server = served
    now = [1000.0]
    server.channels.clock = lambda: now[0]
    idle, busy = Channel(server.bound_port()), Channel(server.bound_port())
    assert idle.upgrade()[0] == 101 and busy.upgrade()[0] == 101
    now[0] += 100
    assert busy.call("is_paused", {})[0] == 200
    now[0] += 50
    server._loop.call_soon_threadsafe(server.channels.close_idle, 60.0)
    assert idle.closed_by_server()
    assert busy.call("is_paused", {})[0] == 200
    idle.close()
    busy.close()


def test_after_answers_enough_journaled_changes_are_folded_without_waiting_for_the_timer(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(luigi.server.serve, "CHECKPOINT_INTERVAL", 3600.0)
    store = SqlStore.for_file(tmp_path / "state.sqlite")
    scheduler = Scheduler(SchedulerConfig(), store=store)
    scheduler.load()
    with serving_in_thread(scheduler) as server:
        opened = Channel(server.bound_port())
        assert opened.upgrade()[0] == 101
        for n in range(ANSWER_SLICE_KEYS - 1):  # with the worker's row: just enough keys
            assert opened.call("add_task", {"worker": "w", "task_id": f"T{n}"})[0] == 200
        wait_until(lambda: store.journal_path.stat().st_size == 0, what="the journal to be folded")
        opened.close()
    rows = sqlite3.connect(tmp_path / "state.sqlite").execute("SELECT count(*) FROM tasks").fetchone()
    assert rows == (ANSWER_SLICE_KEYS - 1,)


def test_a_client_that_sends_faster_than_it_reads_gets_every_answer_in_order(monkeypatch):
    pauses = []
    pause = RpcChannel.pause_writing
    monkeypatch.setattr(RpcChannel, "pause_writing", lambda self: (pauses.append(1), pause(self)))
    scheduler = make_scheduler()[0]
    for n in range(300):  # so that each task_list answer is large and they outgrow the socket buffers
        scheduler.add_task(worker="w", task_id=f"T{n}", family="T", params={"n": str(n)})
    with serving_in_thread(scheduler) as server:
        slow = Channel(server.bound_port(), receive_buffer=4096)
        assert slow.upgrade()[0] == 101
        count = 200
        request = b"POST /api/task_list HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}"
        sender = threading.Thread(target=slow.sock.sendall, args=(request * count,), daemon=True)
        sender.start()
        wait_until(lambda: pauses, what="the channel to stop reading while its answers wait")
        answers = [slow.answer() for _ in range(count)]
        sender.join(timeout=30)
        assert [status for status, _, _ in answers] == [200] * count
        assert len(json.loads(answers[-1][2])["response"]) == 300
        assert slow.call("is_paused", {})[0] == 200
        slow.close()
