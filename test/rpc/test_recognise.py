"""``is_our_client``: the worker tells our RPC client (and users' subclasses of it) from other schedulers."""

from __future__ import annotations

import luigi.rpc
from luigi.rpc.recognise import is_our_client
from luigi.scheduler import Scheduler


class TracingClient(luigi.rpc.RemoteScheduler):
    """A user's subclass, as a test suite might write one."""


def test_our_client_and_a_users_subclass_of_it_are_recognised():
    assert is_our_client(luigi.rpc.RemoteScheduler("http://127.0.0.1:1/"))
    assert is_our_client(TracingClient("http://127.0.0.1:1/"))


def test_the_in_process_scheduler_and_other_objects_are_not_our_client():
    assert not is_our_client(Scheduler())
    assert not is_our_client(object())
