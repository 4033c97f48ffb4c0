"""The Task model: attributes, identity, serialization, structure helpers and task kinds (COMPAT b.2, b.3)."""

from __future__ import annotations

import pickle
import warnings
from collections import namedtuple

import pytest

import luigi.parameter as p
from luigi.mock import MockTarget
from luigi.parameter import ParameterVisibility
from luigi.task import (
    BulkCompleteNotImplementedError,
    Config,
    DynamicRequirements,
    ExternalTask,
    MixinNaiveBulkComplete,
    Task,
    WrapperTask,
    externalize,
    flatten,
    flatten_output,
    getpaths,
)
from luigi.task_register import Register


class _Exists:
    """A minimal target whose existence the test controls."""

    def __init__(self, exists: bool, name: str = "t") -> None:
        self._exists = exists
        self.name = name

    def exists(self) -> bool:
        return self._exists


def test_default_scheduling_attributes_match_luigi():
    class Plain(Task):
        pass

    task = Plain()
    assert (task.priority, task.disabled, task.resources, task.worker_timeout) == (0, False, {}, None)
    assert task.max_batch_size == float("inf")
    assert (task.retry_count, task.disable_hard_timeout, task.disable_window) == (None, None, None)
    assert (task.owner_email, task.accepts_messages, task.use_cmdline_section) == (None, False, True)
    assert (task.set_tracking_url, task.set_status_message, task.set_progress_percentage) == (
        None,
        None,
        None,
    )
    assert task.process_resources() == {}
    assert task.task_module == __name__
    assert task.batchable is False
    assert task.run() is None


def test_process_resources_returns_the_resources_property():
    class Heavy(Task):
        @property
        def resources(self):
            return {"db": 2}

    assert Heavy().process_resources() == {"db": 2}


def test_deprecated_disable_window_seconds_still_feeds_disable_window():
    class Old(Task):
        disable_window_seconds = 60

    assert Old().disable_window == 60


@pytest.mark.parametrize(
    ("owner_email", "expected"),
    [(None, []), ("a@x.org", ["a@x.org"]), ("a@x.org, b@y.org", ["a@x.org", "b@y.org"]), (["c@z"], ["c@z"])],
)
def test_owner_list_normalizes_owner_email(owner_email, expected):
    task_cls = type("Owned", (Task,), {"owner_email": owner_email})
    assert task_cls()._owner_list() == expected


def test_param_kwargs_holds_values_with_lists_and_sets_as_tuples():
    class Lists(Task):
        items = p.Parameter()
        other = p.Parameter(default="d")

    with pytest.warns(UserWarning, match="not of type string"):
        task = Lists(items=["a", "b"])
    assert task.param_kwargs == {"items": ("a", "b"), "other": "d"}
    assert task.items == ("a", "b")


def test_get_params_are_in_declaration_order_including_inherited():
    class Base(Task):
        zeta = p.Parameter()
        alpha = p.Parameter()

    class Child(Base):
        middle = p.Parameter()

    assert [name for name, _ in Child.get_params()] == ["zeta", "alpha", "middle"]
    assert all(isinstance(param, p.Parameter) for _, param in Child.get_params())


def test_subclass_can_replace_a_parameter_with_a_plain_attribute():
    class Base(Task):
        x = p.Parameter()

    class Fixed(Base):
        x = "constant"

    assert Fixed.get_params() == []
    assert Fixed().x == "constant"


def test_get_param_names_filters_insignificant_unless_asked():
    class Named(Task):
        a = p.Parameter()
        b = p.Parameter(significant=False)

    assert Named.get_param_names() == ["a"]
    assert Named.get_param_names(include_significant=True) == ["a", "b"]


def test_repr_shows_serialized_significant_parameters_in_declaration_order():
    class Shown(Task):
        n = p.IntParameter()
        quiet = p.Parameter(significant=False, default="q")
        hidden = p.Parameter(visibility=ParameterVisibility.HIDDEN, default="h")
        label = p.Parameter(default="x")

    assert repr(Shown(n=3)) == "Shown(n=3, hidden=h, label=x)"
    assert str(Shown(n=3)) == "Shown(n=3, hidden=h, label=x)"


def test_equality_is_same_class_and_same_task_id_and_hash_follows_task_id():
    class A(Task):
        x = p.Parameter()

    class B(Task):
        x = p.Parameter()

    Register.disable_instance_cache()
    first, second = A(x="1"), A(x="1")
    assert first is not second
    assert first == second and hash(first) == hash(second) == hash(first.task_id)
    assert first != A(x="2")
    assert first != B(x="1")
    assert first != "A"


def test_to_str_params_filters_by_significance_and_visibility_but_never_shows_private():
    class Vis(Task):
        pub = p.IntParameter(default=1)
        insig = p.Parameter(significant=False, default="i")
        hid = p.Parameter(visibility=ParameterVisibility.HIDDEN, default="h")
        priv = p.Parameter(visibility=ParameterVisibility.PRIVATE, default="s")

    task = Vis()
    assert task.to_str_params() == {"pub": "1", "insig": "i", "hid": "h"}
    assert task.to_str_params(only_significant=True) == {"pub": "1", "hid": "h"}
    assert task.to_str_params(only_public=True) == {"pub": "1", "insig": "i"}
    assert task._get_param_visibilities() == {"pub": 0, "insig": 0, "hid": 1}


def test_from_str_params_parses_strings_and_reduces_lists_with_batch_method():
    class Batched(Task):
        n = p.IntParameter(batch_method=max)
        label = p.Parameter(default="x")

    assert Batched.from_str_params({"n": "4", "label": "y"}) == Batched(n=4, label="y")
    assert Batched.from_str_params({"n": ["1", "7", "3"]}).n == 7
    assert Batched.from_str_params(Batched(n=5).to_str_params()) == Batched(n=5)


def test_batchable_and_batch_param_names_come_from_batch_methods():
    class Batched(Task):
        n = p.IntParameter(batch_method=max)
        other = p.Parameter(default="x")

    assert Batched.batch_param_names() == ["n"]
    assert Batched(n=1).batchable is True


def test_clone_copies_shared_parameters_and_applies_overrides():
    class Source(Task):
        a = p.Parameter()
        b = p.Parameter()

    class Target(Task):
        a = p.Parameter()
        c = p.Parameter(default="c")

    source = Source(a="1", b="2")
    assert source.clone(b="3") == Source(a="1", b="3")
    assert source.clone(Target) == Target(a="1")
    assert source.clone(Target, c="z") == Target(a="1", c="z")


def test_initialized_is_false_until_base_init_ran():
    seen = []

    class Early(Task):
        def __init__(self, *args, **kwargs):
            seen.append(self.initialized())
            super().__init__(*args, **kwargs)

    assert Early().initialized() is True
    assert seen == [False]


def test_no_unpicklable_properties_makes_a_running_task_picklable_and_restores():
    task = PicklableTask(n=1)
    task.set_status_message = lambda message: None
    with pytest.raises((AttributeError, pickle.PicklingError)):
        pickle.dumps(task)
    with task.no_unpicklable_properties():
        clone = pickle.loads(pickle.dumps(task))
    assert callable(task.set_status_message)
    assert clone.task_id == task.task_id and clone.n == 1


def test_requires_output_input_and_deps_defaults_and_structures():
    class Leaf(Task):
        name = p.Parameter()

        def output(self):
            return MockTarget(f"leaf/{self.name}")

    class Root(Task):
        def requires(self):
            return {"one": Leaf(name="1"), "many": [Leaf(name="2"), Leaf(name="3")]}

    class Empty(Task):
        pass

    assert (Empty().requires(), Empty().output(), Empty().deps(), Empty().input()) == ([], [], [], [])
    root = Root()
    assert root.deps() == [Leaf(name="1"), Leaf(name="2"), Leaf(name="3")]
    assert root._requires() == root.deps()
    paths = root.input()
    assert paths["one"].path == "leaf/1"
    assert [target.path for target in paths["many"]] == ["leaf/2", "leaf/3"]


def test_complete_requires_every_output_to_exist_and_warns_without_outputs():
    task_cls = type("Outputs", (Task,), {"output": lambda self: [_Exists(True), _Exists(self.flag)]})
    task_cls.flag = True
    assert task_cls().complete() is True
    task_cls.flag = False
    Register.clear_instance_cache()
    assert task_cls().complete() is False

    class NoOutput(Task):
        pass

    with pytest.warns(UserWarning, match="without outputs"):
        assert NoOutput().complete() is False


def test_bulk_complete_is_not_implemented_by_default_and_naive_mixin_loops_complete():
    class Plain(Task):
        n = p.IntParameter()

    with pytest.raises(BulkCompleteNotImplementedError):
        Plain.bulk_complete([1, 2])
    assert issubclass(BulkCompleteNotImplementedError, NotImplementedError)

    class Naive(MixinNaiveBulkComplete, Task):
        n = p.IntParameter()

        def complete(self):
            return self.n % 2 == 0

    assert Naive.bulk_complete([1, 2, 3, 4]) == [2, 4]
    assert Naive.bulk_complete([(2,), {"n": 4}, (5,)]) == [(2,), {"n": 4}]


def test_on_failure_returns_runtime_error_and_traceback_and_on_success_none():
    class Failing(Task):
        pass

    task = Failing()
    try:
        raise ValueError("boom")
    except ValueError as exc:
        explanation = task.on_failure(exc)
    assert explanation.startswith("Runtime error:\nTraceback (most recent call last):\n")
    assert explanation.rstrip().endswith("ValueError: boom")
    assert task.on_success() is None


def test_wrapper_task_is_complete_when_all_requirements_are():
    class Done(Task):
        ok = p.BoolParameter()

        def complete(self):
            return self.ok

    class Wrapper(WrapperTask):
        ok = p.BoolParameter()

        def requires(self):
            return [Done(ok=True), Done(ok=self.ok)]

    assert Wrapper(ok=True).complete() is True
    assert Wrapper(ok=False).complete() is False


def test_external_task_has_no_run_and_config_is_a_task():
    class Outside(ExternalTask):
        pass

    class settings(Config):
        level = p.IntParameter(default=2)

    assert Outside.run is None and Outside().run is None
    assert isinstance(settings(), Task) and settings().level == 2


def test_externalize_class_keeps_original_runnable_and_copy_out_of_registry():
    class Job(Task):
        x = p.Parameter(default="1")

        def run(self):
            return "ran"

    external = externalize(Job)
    assert external.run is None and external().run is None
    assert Job().run() == "ran"
    assert external.get_task_family() == "Job" and external.__name__ == "Job"
    assert Register.get_task_cls("Job") is Job


def test_externalize_object_returns_a_copy_without_run():
    class Job(Task):
        def run(self):
            return "ran"

    job = Job()
    external = externalize(job)
    assert external.run is None
    assert job.run() == "ran"
    assert external.task_id == job.task_id


def test_flatten_structures():
    assert flatten(None) == []
    assert flatten("abc") == ["abc"]
    assert flatten(42) == [42]
    assert flatten({"a": 1, "b": [2, (3, {"c": 4})]}) == [1, 2, 3, 4]
    assert flatten(x for x in [1, [2]]) == [1, 2]


def test_getpaths_keeps_the_structure_and_maps_tasks_to_outputs():
    class Out(Task):
        n = p.IntParameter()

        def output(self):
            return f"out-{self.n}"

    Pair = namedtuple("Pair", ["left", "right"])
    assert getpaths({"a": Out(n=1), "b": (Out(n=2), [Out(n=3)])}) == {"a": "out-1", "b": ("out-2", ["out-3"])}
    assert getpaths(Pair(Out(n=1), Out(n=2))) == Pair("out-1", "out-2")
    assert getpaths(x for x in [Out(n=4)]) == ["out-4"]
    with pytest.raises(TypeError, match="Cannot map 5"):
        getpaths(5)


def test_flatten_output_looks_through_tasks_without_outputs():
    class Leaf(Task):
        n = p.IntParameter()

        def output(self):
            return _Exists(True, f"leaf-{self.n}")

    class Grouping(WrapperTask):
        def requires(self):
            return [Leaf(n=1), Leaf(n=2), Leaf(n=1)]

    class Top(WrapperTask):
        def requires(self):
            return [Grouping(), Leaf(n=3)]

    assert [target.name for target in flatten_output(Top())] == ["leaf-3", "leaf-1", "leaf-2"]
    assert [target.name for target in flatten_output(Leaf(n=9))] == ["leaf-9"]


def test_dynamic_requirements_check_each_task_or_use_custom_complete():
    class Maybe(Task):
        ok = p.BoolParameter()

        def complete(self):
            return self.ok

        def output(self):
            return f"out-{self.ok}"

    requirements = DynamicRequirements([Maybe(ok=True), Maybe(ok=False)])
    assert requirements.flat_requirements == [Maybe(ok=True), Maybe(ok=False)]
    assert requirements.paths == ["out-True", "out-False"]
    assert requirements.complete() is False
    assert requirements.complete(lambda task: True) is True
    assert DynamicRequirements([Maybe(ok=True)]).complete() is True

    calls = []

    def custom(complete_fn):
        calls.append(complete_fn(Maybe(ok=True)))
        return True

    assert DynamicRequirements([Maybe(ok=False)], custom_complete=custom).complete() is True
    assert calls == [True]


def test_tasks_pickle_and_unpickle_to_equal_tasks():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        restored = pickle.loads(pickle.dumps(PicklableTask(n=3)))
    assert restored == PicklableTask(n=3)
    assert restored.n == 3 and restored.param_kwargs == {"n": 3}


class PicklableTask(Task):
    n = p.IntParameter()


def test_parameters_added_after_class_creation_are_seen_and_hold_values():
    class Late(Task):
        a = p.Parameter(default="a")

    assert [name for name, _ in Late.get_params()] == ["a"]
    Late.b = p.Parameter(default="b")
    task = Late()
    assert [name for name, _ in Late.get_params()] == ["a", "b"]
    assert (task.a, task.b) == ("a", "b")


def test_a_parameter_reused_under_another_name_keeps_values_apart():
    class Source(Task):
        x = p.Parameter()

    class Reuser(Task):
        x = Source.x
        y = Source.x

    task = Reuser(x="1", y="2")
    assert (task.x, task.y) == ("1", "2")
    assert Source(x="3").x == "3"


def test_luigi_task_exports_the_documented_names():
    import luigi.task

    for name in (
        "Task",
        "Config",
        "WrapperTask",
        "ExternalTask",
        "DynamicRequirements",
        "MixinNaiveBulkComplete",
        "BulkCompleteNotImplementedError",
        "namespace",
        "auto_namespace",
        "task_id_str",
        "externalize",
        "flatten",
        "flatten_output",
        "getpaths",
        "Register",
        "load_task",
    ):
        assert hasattr(luigi.task, name), name
    assert Task.task_family == "Task"
