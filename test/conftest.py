"""Shared fixtures: every test starts with a clean task registry, configuration and command line."""

from __future__ import annotations

import os

import pytest

# The helpers package is imported by test modules and, for its fixture modules, as a plugin: rewriting its
# asserts from the first import lets both happen without pytest's "already imported" warning.
pytest.register_assert_rewrite("helpers")

os.environ.pop("LUIGI_CONFIG_PATH", None)
os.environ.pop("LUIGI_CONFIG_PARSER", None)


@pytest.fixture(autouse=True)
def _isolated_luigi_state(request: pytest.FixtureRequest):
    """Save and restore the class registry, drop cached instances, config and the active CLI parser.

    Task classes defined at module level in *other* test files are hidden for the test, so two files
    that both declare, say, a ``Root`` task never make each other's family ambiguous.
    """
    from luigi.task_register import Register

    saved_registry = Register._get_reg()
    Register.clear_instance_cache()
    _hide_other_test_modules_tasks(Register, request.module.__name__)
    saved_callbacks = _snapshot_event_callbacks()
    _reset_config()
    _reset_cmdline()
    yield
    _restore_event_callbacks(saved_callbacks)
    _reset_logging()
    Register._set_reg(saved_registry)
    Register.clear_instance_cache()
    _reset_config()
    _reset_cmdline()


def _reset_config() -> None:
    try:
        from luigi import configuration
    except ImportError:
        return
    configuration.reset_for_tests()


def _reset_cmdline() -> None:
    try:
        from luigi.cmdline_parser import CmdlineParser
    except ImportError:
        return
    CmdlineParser._instance = None


def _snapshot_event_callbacks() -> dict | None:
    try:
        from luigi.task import Task
    except ImportError:
        return None
    return {
        cls: {event: set(cbs) for event, cbs in by_event.items()}
        for cls, by_event in Task._event_callbacks.items()
    }


def _restore_event_callbacks(saved: dict | None) -> None:
    if saved is None:
        return
    from luigi.task import Task

    Task._event_callbacks.clear()
    Task._event_callbacks.update(saved)


def _reset_logging() -> None:
    """Undo what a run's logging set-up did, so the next test starts with luigi's loggers untouched."""
    import logging

    try:
        from luigi.setup_logging import DaemonLogging, InterfaceLogging
    except ImportError:
        return
    InterfaceLogging._configured = False
    DaemonLogging._configured = False
    interface_logger = logging.getLogger("luigi-interface")
    for handler in list(interface_logger.handlers):
        interface_logger.removeHandler(handler)
    interface_logger.setLevel(logging.NOTSET)
    for name in ("luigi-interface", "luigi", "luigi.scheduler", "luigi.server"):
        named = logging.getLogger(name)
        named.disabled = False  # fileConfig/dictConfig in a test disable loggers that existed before
        named.propagate = True


def _hide_other_test_modules_tasks(register: type, current_module: str) -> None:
    def foreign(task_cls: type) -> bool:
        module = task_cls.__module__
        return module.rsplit(".", 1)[-1].startswith("test_") and module != current_module

    register._reg = [task_cls for task_cls in register._reg if not foreign(task_cls)]
    register._params_cache.clear()


@pytest.fixture
def events():
    """Collects (event, args) from callbacks registered on Task; ``listen(*names)`` subscribes."""
    from luigi.task import Task

    seen: list[tuple[str, tuple]] = []
    registered = []

    def listen(*names):
        for name in names:

            def callback(*args, _name=name):
                seen.append((_name, args))

            Task.event_handler(name)(callback)
            registered.append((name, callback))

    yield seen, listen
    for name, callback in registered:
        Task.remove_event_handler(name, callback)
