"""Fire-and-forget calls travel in ``/api/_batch`` requests, in order, and never get lost or duplicated."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable

import pytest
from helpers.fake_luigid import DROP, FakeLuigid, respond

from luigi.rpc import NoSchedulerError, RemoteScheduler, RPCError

WORKER = "w1"


@pytest.fixture
def server():
    with FakeLuigid(batch=True) as fake:
        yield fake


@pytest.fixture
def luigid():
    """A server without ``/api/_batch``, like Luigi's own ``luigid``."""
    with FakeLuigid(batch=False) as fake:
        yield fake


def client_for(url: str, **kwargs) -> RemoteScheduler:
    return RemoteScheduler(url, sleep=lambda seconds: None, **kwargs)


def batched_calls(server: FakeLuigid) -> list[list[tuple[str, dict]]]:
    """The (method, kwargs) lists of each ``/api/_batch`` request the server received."""
    return [
        [(call["method"], call["kwargs"]) for call in r.data["calls"]]
        for r in server.requests
        if r.api_name == "_batch"
    ]


def test_fire_and_forget_calls_wait_and_go_in_one_request_with_the_next_other_call(server):
    client = client_for(server.url)
    client.add_worker(WORKER, {"host": "h"})
    client.add_task(task_id="A()", worker=WORKER, family="A")
    client.set_task_status_message("A()", "queued")
    assert server.requests == []
    assert client.get_work(worker=WORKER)["task_id"] == "A()"
    assert server.api_names() == ["_batch"]
    assert [name for name, _ in batched_calls(server)[0]] == [
        "add_worker",
        "add_task",
        "set_task_status_message",
        "get_work",
    ]
    assert server.requests[0].data["stop_on_error"] is True
    client.close()


def test_a_batched_call_carries_the_same_arguments_as_a_single_call(server):
    batched = client_for(server.url)
    single = client_for(server.url, batch_size=1)
    batched.add_task(task_id="A()", worker=WORKER, deps=("B()",), priority=3)
    single.add_task(task_id="A()", worker=WORKER, deps=("B()",), priority=3)
    batched.flush()
    by_path = {r.api_name: r.data for r in server.requests}
    assert batched_calls(server)[0] == [("add_task", by_path["add_task"])]
    batched.close()
    single.close()


def test_calls_whose_answer_is_used_are_never_held(server):
    client = client_for(server.url)
    assert client.ping(worker=WORKER) == {"rpc_messages": []}
    client.add_task(task_id="A()", worker=WORKER)
    client.get_work(worker=WORKER)
    client.decrease_running_task_resources("A()", {"cpu": 1})
    assert server.api_names() == ["ping", "_batch", "decrease_running_task_resources"]
    assert [name for name, _ in batched_calls(server)[0]] == ["add_task", "get_work"]
    client.close()


def test_the_buffer_is_sent_when_it_holds_batch_size_calls(server):
    client = client_for(server.url, batch_size=3)
    for name in ("A()", "B()", "C()", "D()"):
        client.add_task(task_id=name, worker=WORKER)
    assert [[kwargs["task_id"] for _, kwargs in batch] for batch in batched_calls(server)] == [
        ["A()", "B()", "C()"]
    ]
    client.flush()
    assert [kwargs["task_id"] for _, kwargs in batched_calls(server)[1]] == ["D()"]
    client.close()


def test_flush_with_nothing_held_sends_nothing(server):
    client = client_for(server.url)
    client.flush()
    client.close()
    assert server.requests == []


def test_close_sends_the_held_calls(server):
    client = client_for(server.url)
    client.add_task(task_id="A()", worker=WORKER)
    client.close()
    assert [name for name, _ in batched_calls(server)[0]] == ["add_task"]
    assert "A()" in server.scheduler.task_list(status="PENDING")


def test_a_refused_batched_call_surfaces_at_the_flush_while_the_others_are_applied(server):
    server.script.append(
        respond(response=[{"response": None}, {"error": "status 'NOPE' is unknown", "status": 400}])
    )
    client = client_for(server.url)
    client.add_task(task_id="A()", worker=WORKER)
    client.add_task(task_id="B()", worker=WORKER, status="NOPE")
    with pytest.raises(
        RPCError, match=r"1 of 2 calls .* failed: add_task\(task_id='B\(\)'\): HTTP 400"
    ) as error:
        client.flush()
    assert error.value.status == 400
    client.close()


def test_a_call_sent_with_held_calls_does_not_run_after_one_of_them_was_refused(server):
    client = client_for(server.url)
    client.add_task(task_id="A()", worker=WORKER, family="A")
    client.add_task(task_id="B()", worker=WORKER, status="NOPE")  # the scheduler refuses this status
    with pytest.raises(RPCError, match=r"1 of 2 calls .* failed: add_task\(task_id='B\(\)'\)") as error:
        client.get_work(worker=WORKER)
    assert error.value.status == 400
    assert server.api_names() == ["_batch"]
    assert "A()" in server.scheduler.task_list(status="PENDING")  # get_work did not run: nothing granted
    client.close()


def test_a_call_sent_with_held_calls_raises_its_own_refusal(server):
    client = client_for(server.url)
    client.add_task(task_id="A()", worker=WORKER)
    with pytest.raises(RPCError, match=r"refused api/graph_view: HTTP 400: graph_view: max_nodes") as error:
        client.graph_view(task_id="A()", max_nodes=-1)
    assert error.value.status == 400
    assert "A()" in server.scheduler.task_list(status="PENDING")
    client.close()


def test_a_null_get_work_answer_in_a_batch_is_asked_again_alone(server):
    server.scheduler.add_task(task_id="A()", worker=WORKER, family="A")
    server.script.append(respond(response=[{"response": None}, {"response": None}]))
    client = client_for(server.url)
    client.set_task_status_message("A()", "queued")
    assert client.get_work(worker=WORKER)["task_id"] == "A()"
    assert server.api_names() == ["_batch", "get_work"]
    client.close()


def test_a_server_error_in_a_call_sent_with_held_calls_asks_that_call_again_alone(server):
    server.scheduler.add_task(task_id="A()", worker=WORKER, family="A")
    server.script.append(respond(response=[{"response": None}, {"error": "boom", "status": 500}]))
    client = client_for(server.url)
    client.set_task_status_message("A()", "queued")
    assert client.get_work(worker=WORKER)["task_id"] == "A()"
    assert server.api_names() == ["_batch", "get_work"]
    client.close()


def answered_one_batch(server: FakeLuigid, **kwargs) -> RemoteScheduler:
    """A client that has had one /api/_batch answered, so it knows the server is one of ours."""
    client = client_for(server.url, batch_size=2, **kwargs)
    client.add_task(task_id="First()", worker=WORKER)
    client.flush()
    return client


def test_a_full_batch_to_our_server_is_sent_without_waiting_for_its_answer(server):
    client = answered_one_batch(server)
    arrived, release, answered = threading.Event(), threading.Event(), threading.Event()

    def slow(request):
        arrived.set()
        release.wait(20)
        answered.set()

    server.script.append(slow)
    client.add_task(task_id="A()", worker=WORKER, family="A")
    client.add_task(task_id="B()", worker=WORKER, family="B")  # fills the buffer: sent, not waited for
    assert not answered.is_set()  # the call came back before the server answered
    assert arrived.wait(10)  # the server is working on it while the caller goes on
    client.add_task(task_id="C()", worker=WORKER, family="C")
    release.set()
    assert client.get_work(worker=WORKER)["task_id"] in {"First()", "A()", "B()", "C()"}
    assert [[kwargs.get("task_id") for _, kwargs in batch] for batch in batched_calls(server)] == [
        ["First()"],
        ["A()", "B()"],
        ["C()", None],  # the next request carried C() and get_work, after the answer was read
    ]
    client.close()


def test_a_batch_whose_answer_never_comes_is_sent_again_and_nothing_is_lost(server):
    client = answered_one_batch(server)
    server.script.append(lambda request: DROP)  # the server takes the batch, then hangs up unanswered
    client.add_task(task_id="A()", worker=WORKER)
    client.add_task(task_id="B()", worker=WORKER)
    client.flush()
    assert {"A()", "B()"} <= set(server.scheduler.task_list(status="PENDING"))
    assert [[kwargs["task_id"] for _, kwargs in batch] for batch in batched_calls(server)][1:] == [
        ["A()", "B()"],
        ["A()", "B()"],
    ]
    client.close()


def test_a_lost_answer_found_when_the_next_batch_is_due_sends_both_batches_together(server):
    client = answered_one_batch(server)
    server.script.extend([lambda request: DROP, lambda request: DROP])  # the batch and its one resend
    client.add_task(task_id="A()", worker=WORKER)
    client.add_task(task_id="B()", worker=WORKER)
    client.add_task(task_id="C()", worker=WORKER)
    client.add_task(task_id="D()", worker=WORKER)  # due: the lost answer is found, everything goes at once
    assert [[kwargs["task_id"] for _, kwargs in batch] for batch in batched_calls(server)] == [
        ["First()"],
        ["A()", "B()"],
        ["A()", "B()"],
        ["A()", "B()", "C()", "D()"],
    ]
    assert {"A()", "B()", "C()", "D()"} <= set(server.scheduler.task_list(status="PENDING"))
    client.close()


def test_a_refusal_in_a_batch_sent_without_waiting_raises_from_the_next_call(server):
    client = answered_one_batch(server)
    server.script.append(respond(response=[{"response": None}, {"error": "bad status", "status": 400}]))
    client.add_task(task_id="A()", worker=WORKER)
    client.add_task(task_id="B()", worker=WORKER)  # sent; its answer is read by the next call
    with pytest.raises(RPCError, match=r"1 of 2 calls .* failed: add_task\(task_id='B\(\)'\): HTTP 400"):
        client.get_work(worker=WORKER)
    assert server.api_names()[-1] == "_batch"  # get_work was not sent after the refusal
    client.close()


def test_held_calls_that_cannot_be_delivered_are_reported_not_dropped():
    with FakeLuigid(batch=True) as server:
        client = client_for(server.url, retry_attempts=2)
        client.ping(worker=WORKER)  # the scheduler answered during this run; then it goes away
        client.close()
    client.add_task(task_id="A()", worker=WORKER)
    client.set_task_progress_percentage("A()", 50)
    with pytest.raises(RPCError, match=r"Errors \(2 attempts\) .*2 held calls were not delivered") as error:
        client.flush()
    assert isinstance(error.value.sub_exception, ConnectionRefusedError)


def test_after_delivery_waits_for_the_answer_to_the_calls_held_so_far():
    with FakeLuigid(batch=True) as server:
        client = client_for(server.url)
        seen: list[str] = []
        client.add_task(task_id="A()", worker=WORKER)
        client.after_delivery(lambda: seen.append("A arrived"))
        assert seen == []  # held: nothing was sent yet
        client.flush()
        assert seen == ["A arrived"]
        client.after_delivery(lambda: seen.append("nothing held"))
        assert seen == ["A arrived", "nothing held"]
        client.close()


def test_a_scheduler_that_never_answered_fails_with_one_line_and_holds_nothing_for_the_exit_flush():
    with FakeLuigid(batch=True) as server:
        url = server.url
    ticks = iter(range(0, 10**6, 100))  # a clock racing ahead: a ride-out, if tried, ends at once
    # The ride-out a worker sets: it is for a scheduler that answered, not for one never there.
    client = client_for(url, retry_attempts=2, unreachable_timeout=600, clock=lambda: float(next(ticks)))
    client.add_task(task_id="A()", worker=WORKER)
    with pytest.raises(NoSchedulerError) as error:
        client.flush()
    assert str(error.value) == (
        f"Errors (2 attempts) when connecting to remote scheduler {url.rstrip('/')!r}: "
        "ConnectionRefusedError: [Errno 111] Connection refused; "
        "is luigid running there? --local-scheduler runs without one"
    )
    assert client._own_pipeline().idle()  # so the flush at exit does not wait for it a second time


def test_against_a_server_without_batches_held_calls_go_one_by_one_in_order(luigid):
    client = client_for(luigid.url)
    client.add_task(task_id="A()", worker=WORKER)
    client.add_task(task_id="B()", worker=WORKER)
    assert client.get_work(worker=WORKER)["task_id"] == "A()"
    assert luigid.api_names() == ["_batch", "add_task", "add_task", "get_work"]
    assert [r.data["task_id"] for r in luigid.requests[1:3]] == ["A()", "B()"]
    assert client.batching is False
    client.add_task(task_id="C()", worker=WORKER)
    assert luigid.api_names()[-1] == "add_task"
    client.close()


def test_a_server_without_batches_gets_luigis_get_work_arguments_and_is_never_asked_ahead(luigid):
    client = client_for(luigid.url)
    client.get_work(worker=WORKER, current_tasks=[])
    assert client.ask_ahead(worker=WORKER, current_tasks=[], assume_done=["A()"], max_tasks=8) is False
    get_works = [r.data for r in luigid.requests if r.api_name == "get_work"]
    assert [set(data) for data in get_works] == [{"worker", "host", "assistant", "current_tasks"}]
    client.close()


def test_without_batches_every_held_call_is_tried_and_each_failure_reported(luigid):
    luigid.script.extend([lambda request: None, respond(400, error="A is bad")])
    client = client_for(luigid.url)
    client.add_task(task_id="A()", worker=WORKER)
    client.add_task(task_id="B()", worker=WORKER)
    with pytest.raises(RPCError, match=r"1 of 2 held calls .* failed: add_task\(task_id='A\(\)'\).*A is bad"):
        client.flush()
    assert "B()" in luigid.scheduler.task_list(status="PENDING")
    client.close()


def test_without_batches_a_scheduler_that_stops_answering_leaves_the_rest_reported(luigid):
    luigid.script.extend([lambda request: None] + [lambda request: DROP] * 10)
    client = client_for(luigid.url, retry_attempts=2)
    client.add_task(task_id="A()", worker=WORKER)
    client.set_task_status_message("A()", "hello")
    with pytest.raises(RPCError, match=r"Errors \(2 attempts\) .*2 held calls were not delivered"):
        client.flush()
    client.close()


def test_batch_size_one_turns_holding_off(server):
    client = client_for(server.url, batch_size=1)
    client.add_task(task_id="A()", worker=WORKER)
    assert server.api_names() == ["add_task"]
    assert client.batching is False
    client.close()


def test_calls_from_several_threads_all_arrive(server):
    client = client_for(server.url, batch_size=7)

    def report(thread: int) -> None:
        for index in range(20):
            client.add_task(task_id=f"T({thread}, {index})", worker=WORKER)

    threads = [threading.Thread(target=report, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    client.flush()
    sent = [kwargs["task_id"] for batch in batched_calls(server) for _, kwargs in batch]
    assert sorted(sent) == sorted(f"T({t}, {i})" for t in range(4) for i in range(20))
    client.close()


# -- processes -------------------------------------------------------------------------------------------


def run_in_child(body: Callable[[], None], timeout: float = 20.0) -> int:
    """Fork, run ``body`` in the child, and return its exit code (1 if it raised)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            body()
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)  # polling the child's exit with a deadline
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise AssertionError(f"child {pid} did not finish within {timeout} s")


def test_a_forked_child_uses_its_own_connection_and_the_parent_keeps_its_own(server):
    client = client_for(server.url)
    client.ping(worker="parent")
    assert run_in_child(lambda: client.ping(worker="child")) == 0
    client.ping(worker="parent")
    ids = [r.connection_id for r in server.requests]
    assert ids[0] == ids[2] != ids[1]
    client.close()


def test_calls_held_by_the_parent_are_sent_by_the_parent_only(server):
    client = client_for(server.url)
    client.add_task(task_id="A()", worker="parent")
    assert run_in_child(lambda: client.ping(worker="child")) == 0
    client.get_work(worker="parent")
    assert server.api_names() == ["ping", "_batch"]
    assert [kwargs["worker"] for _, kwargs in batched_calls(server)[0]] == ["parent", "parent"]
    client.close()


def test_a_child_forked_while_another_thread_waits_on_the_scheduler_can_still_call(server):
    release = threading.Event()
    server.script.append(lambda request: release.wait(20) and None)
    client = client_for(server.url)
    waiting = threading.Thread(target=client.graph)
    waiting.start()
    try:
        deadline = time.monotonic() + 10
        while not server.requests and time.monotonic() < deadline:
            time.sleep(0.01)  # until the other thread's call is in flight
        assert run_in_child(lambda: client.ping(worker="child")) == 0
    finally:
        release.set()
        waiting.join()
    client.close()


def test_calls_still_held_when_the_program_exits_are_sent(server):
    program = (
        "from luigi.rpc import RemoteScheduler\n"
        f"client = RemoteScheduler({server.url!r})\n"
        "client.add_task(task_id='A()', worker='w')\n"
    )
    subprocess.run([sys.executable, "-c", program], check=True, timeout=60)
    assert [name for name, _ in batched_calls(server)[0]] == ["add_task"]
