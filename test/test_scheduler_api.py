"""``SchedulerAPI``, the seam between the worker and a scheduler, says what the registry says: each of its
RPC methods has the registered parameters and defaults, as the in-process ``Scheduler`` has them, and the
``RemoteScheduler`` has every one of them (mypy checks both against the protocol's types)."""

from __future__ import annotations

import inspect

import pytest

from luigi.rpc import RemoteScheduler
from luigi.rpc_methods import RPC_METHODS
from luigi.scheduler import Scheduler
from luigi.scheduler_api import SchedulerAPI

LIFECYCLE = {"flush", "close"}
SEAM = sorted(
    name
    for name, member in vars(SchedulerAPI).items()
    if inspect.isfunction(member) and not name.startswith("_") and name not in LIFECYCLE
)


def parameters(function: object) -> list[tuple[str, object]]:
    """(name, default) of each named parameter but ``self``; a required one's default is ``empty``.

    A ``**kwargs`` is left out: the methods Luigi declares with it take and ignore unknown keywords.
    """
    signature = inspect.signature(function)  # type: ignore[arg-type]
    return [
        (p.name, p.default)
        for p in signature.parameters.values()
        if p.name != "self" and p.kind is not inspect.Parameter.VAR_KEYWORD
    ]


def test_the_seam_is_the_rpc_methods_a_worker_calls_plus_flush_and_close():
    assert set(SEAM) <= set(RPC_METHODS)
    assert {"add_task", "add_worker", "get_work", "ping", "add_scheduler_message_response"} <= set(SEAM)


@pytest.mark.parametrize("name", SEAM)
def test_each_seam_method_has_the_registered_parameters_and_defaults(name):
    registered = [
        (p.name, inspect.Parameter.empty if p.required else p.default) for p in RPC_METHODS[name].parameters
    ]
    declared = parameters(getattr(SchedulerAPI, name))
    # The protocol may spell an infinite default as ``...`` (mypy checks the implementations' types).
    assert [n for n, _ in declared] == [n for n, _ in registered]
    for (n, mine), (_, theirs) in zip(declared, registered, strict=True):
        assert mine is Ellipsis or mine == theirs, n
    assert parameters(getattr(Scheduler, name)) == registered


@pytest.mark.parametrize("name", SEAM + sorted(LIFECYCLE))
def test_the_remote_scheduler_has_every_method_of_the_seam(name):
    assert callable(getattr(RemoteScheduler, name))
    assert callable(getattr(Scheduler, name))
