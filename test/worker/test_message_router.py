"""The worker holds a scheduler message for a task that has not started yet, and drops late ones."""

from __future__ import annotations

import logging

from luigi.worker.messages import MAX_HELD_MESSAGES, MessageRouter


def message(task_id: str, n: int) -> dict:
    return {"task_id": task_id, "message_id": f"m{n}", "content": n}


def test_a_message_for_an_open_task_is_delivered_at_once():
    delivered = []
    router = MessageRouter(delivered.append)
    router.open("A")
    router.dispatch(message("A", 1))
    assert delivered == [message("A", 1)]


def test_messages_for_a_task_not_started_yet_are_delivered_in_order_when_it_opens():
    delivered = []
    router = MessageRouter(delivered.append)
    router.dispatch(message("A", 1))
    router.dispatch(message("B", 2))
    router.dispatch(message("A", 3))
    assert delivered == []
    router.open("A")
    assert delivered == [message("A", 1), message("A", 3)]


def test_a_message_for_a_task_that_finished_here_is_dropped_with_a_warning(caplog):
    delivered = []
    router = MessageRouter(delivered.append)
    router.open("A")
    router.close("A")
    with caplog.at_level(logging.WARNING):
        router.dispatch(message("A", 1))
    router.open("A")  # the task runs again (a retry): it gets only what arrives from now on
    assert delivered == []
    assert "m1" in caplog.text and "already finished" in caplog.text


def test_held_messages_are_capped(caplog):
    router = MessageRouter(lambda _: None)
    for n in range(MAX_HELD_MESSAGES):
        router.dispatch(message(f"T{n}", n))
    with caplog.at_level(logging.WARNING):
        router.dispatch(message("late", -1))
    assert "Dropping scheduler message m-1" in caplog.text
