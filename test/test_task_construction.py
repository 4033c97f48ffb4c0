"""Specification of building tasks: the values a task gets are those of its own constructor arguments.

``Register.__call__`` resolves the parameter values once for the instance cache and hands them to
``Task.__init__``; these tests pin down that the hand-off never changes what a task ends up with.
"""

from __future__ import annotations

import threading

import luigi
from luigi.task_register import Register


class Pair(luigi.Task):
    a = luigi.IntParameter()
    b = luigi.IntParameter(default=2)


def test_keyword_positional_and_default_values_all_reach_the_task():
    by_keyword = Pair(a=1, b=3)
    by_position = Pair(1, 3)
    with_default = Pair(a=1)

    assert (by_keyword.a, by_keyword.b) == (1, 3)
    assert by_position is by_keyword
    assert with_default.param_kwargs == {"a": 1, "b": 2}


def test_a_constructor_that_changes_its_arguments_gets_the_changed_values():
    class Doubled(luigi.Task):
        n = luigi.IntParameter()

        def __init__(self, *args, **kwargs):
            kwargs["n"] = kwargs["n"] * 2
            super().__init__(*args, **kwargs)

    task = Doubled(n=5)

    assert task.n == 10
    assert task.param_kwargs == {"n": 10}
    assert task.task_id.startswith("Doubled_10_")


def test_a_task_built_inside_another_tasks_constructor_keeps_each_its_own_values():
    class Inner(luigi.Task):
        x = luigi.IntParameter()

    class Outer(luigi.Task):
        x = luigi.IntParameter()

        def __init__(self, *args, **kwargs):
            self.helper = Inner(x=kwargs["x"] + 100)
            super().__init__(*args, **kwargs)

    outer = Outer(x=1)

    assert outer.x == 1
    assert outer.helper.x == 101
    assert Outer(x=1) is outer


def test_a_constructor_that_adds_a_parameter_to_its_class_resolves_it_as_well():
    class Growing(luigi.Task):
        x = luigi.IntParameter()

        def __init__(self, *args, **kwargs):
            if not hasattr(type(self), "extra"):
                type(self).extra = luigi.IntParameter(default=7)
            super().__init__(*args, **kwargs)

    task = Growing(x=1)

    assert task.param_kwargs == {"x": 1, "extra": 7}


def test_values_are_resolved_anew_when_the_instance_cache_is_off():
    Register.disable_instance_cache()
    try:
        first, second = Pair(a=4), Pair(a=4)
    finally:
        Register.clear_instance_cache()

    assert first is not second
    assert first.param_kwargs == second.param_kwargs == {"a": 4, "b": 2}


def test_tasks_built_in_several_threads_get_their_own_values():
    built: dict[int, Pair] = {}

    def build(i: int) -> None:
        for _ in range(200):
            built[i] = Pair(a=i, b=i + 1)

    threads = [threading.Thread(target=build, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert {i: (task.a, task.b) for i, task in built.items()} == {i: (i, i + 1) for i in range(4)}
