"""Event callbacks: ``Task.event_handler``, ``trigger_event`` and ``remove_event_handler`` (COMPAT b.5)."""

from __future__ import annotations

import logging

import pytest

from luigi.event import Event
from luigi.task import Task


@pytest.fixture
def handlers():
    """Remove every callback a test registers, so the shared registry does not leak between tests."""
    registered = []
    yield registered
    for cls, event, callback in registered:
        cls.remove_event_handler(event, callback)


def _register(handlers, cls, event):
    calls = []

    @cls.event_handler(event)
    def callback(*args):
        calls.append(args)

    handlers.append((cls, event, callback))
    return calls, callback


def test_event_names_are_luigis_strings():
    assert Event.START == "event.core.start"
    assert Event.SUCCESS == "event.core.success"
    assert Event.FAILURE == "event.core.failure"
    assert Event.DEPENDENCY_DISCOVERED == "event.core.dependency.discovered"
    assert Event.PROCESS_FAILURE == "event.core.process_failure"


def test_callbacks_run_for_the_class_and_its_subclasses_only(handlers):
    class Base(Task):
        pass

    class Derived(Base):
        pass

    class Unrelated(Task):
        pass

    calls, _ = _register(handlers, Base, Event.START)
    Derived().trigger_event(Event.START, "derived")
    Base().trigger_event(Event.START, "base")
    Unrelated().trigger_event(Event.START, "unrelated")
    Base().trigger_event(Event.SUCCESS, "other event")
    assert calls == [("derived",), ("base",)]


def test_handlers_on_task_see_every_task(handlers):
    class Any1(Task):
        pass

    calls, _ = _register(handlers, Task, Event.SUCCESS)
    task = Any1()
    task.trigger_event(Event.SUCCESS, task)
    assert calls == [(task,)]


def test_event_handler_returns_the_callback_and_shares_one_registry(handlers):
    class Shared(Task):
        pass

    _, callback = _register(handlers, Shared, Event.FAILURE)
    assert callback in Task._event_callbacks[Shared][Event.FAILURE]
    assert Shared._event_callbacks is Task._event_callbacks


def test_removed_handler_is_not_called():
    class Removable(Task):
        pass

    calls = []

    @Removable.event_handler(Event.START)
    def callback(*args):
        calls.append(args)

    Removable.remove_event_handler(Event.START, callback)
    Removable().trigger_event(Event.START)
    assert calls == []


def test_exceptions_in_callbacks_are_logged_not_raised(handlers, caplog):
    class Fragile(Task):
        pass

    @Fragile.event_handler(Event.START)
    def broken(*args):
        raise RuntimeError("callback failed")

    handlers.append((Fragile, Event.START, broken))
    calls, _ = _register(handlers, Fragile, Event.START)
    with caplog.at_level(logging.ERROR, logger="luigi-interface"):
        Fragile().trigger_event(Event.START, "x")
    assert calls == [("x",)]
    assert "callback failed" in caplog.text


def test_keyboard_interrupt_in_a_callback_propagates(handlers):
    class Interrupted(Task):
        pass

    @Interrupted.event_handler(Event.START)
    def interrupt(*args):
        raise KeyboardInterrupt

    handlers.append((Interrupted, Event.START, interrupt))
    with pytest.raises(KeyboardInterrupt):
        Interrupted().trigger_event(Event.START)
