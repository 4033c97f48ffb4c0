"""Parallel scheduling's process count, as Luigi's (LUIGI_COMPAT j.5, e.1).

``Worker.add(task, multiprocess=True, processes=N)`` checks ``complete()`` in
``multiprocessing.Pool(processes=N or None)`` (None: one process per CPU), the pool looked up when it is
made, so a test that patches ``multiprocessing.Pool`` (or ``luigi.worker.multiprocessing.Pool``, the same
module) sees the call. ``luigi.build`` and the command line pass ``[core] parallel_scheduling`` and
``parallel_scheduling_processes``.
"""

from __future__ import annotations

import multiprocessing
from unittest import mock

import pytest

import luigi
import luigi.worker
from luigi.scheduler import Scheduler

RAN: set[str] = set()


@pytest.fixture(autouse=True)
def _nothing_ran_yet():
    RAN.clear()


class Leaf(luigi.Task):
    n = luigi.IntParameter()

    def complete(self):
        return True


class Root(luigi.Task):
    def requires(self):
        return [Leaf(n=1), Leaf(n=2)]

    def run(self):
        RAN.add(self.task_id)

    def complete(self):
        return self.task_id in RAN


@pytest.fixture
def pool_calls():
    """``multiprocessing.Pool`` wrapped: real pools are made, and each call is recorded."""
    with mock.patch("multiprocessing.Pool", wraps=multiprocessing.Pool) as pool:
        yield pool


@pytest.mark.parametrize(("processes", "expected"), [(3, 3), (0, None)])
def test_build_makes_the_pool_with_the_process_count_or_none_for_one_per_cpu(pool_calls, processes, expected):
    assert luigi.build(
        [Root()],
        local_scheduler=True,
        parallel_scheduling=True,
        parallel_scheduling_processes=processes,
    )
    pool_calls.assert_called_once_with(processes=expected)


def test_the_core_section_sets_parallel_scheduling_and_its_process_count(pool_calls):
    config = luigi.configuration.get_config()
    config.set("core", "parallel_scheduling", "true")
    config.set("core", "parallel_scheduling_processes", "2")
    assert luigi.build([Root()], local_scheduler=True)
    pool_calls.assert_called_once_with(processes=2)


def test_worker_add_with_multiprocess_uses_the_pool_and_without_it_none():
    with mock.patch("luigi.worker.multiprocessing.Pool", wraps=multiprocessing.Pool) as pool:
        with luigi.worker.Worker(scheduler=Scheduler()) as worker:
            assert worker.add(Root(), multiprocess=True, processes=2)
        pool.assert_called_once_with(processes=2)
        with luigi.worker.Worker(scheduler=Scheduler()) as worker:
            assert worker.add(Root())
        pool.assert_called_once()  # no second pool for a serial add
