"""The task model: ``Task`` and its kinds, task ids, namespaces and helpers over task structures.

A task is a unit of work identified by its family (class name, possibly namespaced) and its significant
public parameter values; the worker asks it for ``requires()``, ``output()``, ``complete()`` and ``run()``.
"""

from __future__ import annotations

import configparser
import copy
import hashlib
import json
import logging
import re
import traceback
import warnings
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from json.encoder import encode_basestring_ascii
from typing import TYPE_CHECKING, Any, TypeAlias, Union

from luigi import configuration
from luigi.parameter import (
    DuplicateParameterException,
    MissingParameterException,
    Parameter,
    ParameterException,
    ParameterVisibility,
    UnconsumedParameterWarning,
    UnknownParameterException,
)
from luigi.task_register import (
    SAME_AS_PYTHON_MODULE,
    Register,
    TaskClassAmbigiousException,
    TaskClassException,
    TaskClassNotFoundException,
    load_task,
    take_resolved_param_values,
)

if TYPE_CHECKING:
    from luigi.target import Target

__all__ = [
    "BulkCompleteNotImplementedError",
    "Config",
    "DynamicRequirements",
    "ExternalTask",
    "MixinNaiveBulkComplete",
    "Register",
    "Task",
    "TaskClassAmbigiousException",
    "TaskClassException",
    "TaskClassNotFoundException",
    "WrapperTask",
    "auto_namespace",
    "externalize",
    "flatten",
    "flatten_output",
    "getpaths",
    "load_task",
    "namespace",
    "task_id_str",
]

# What requires() and output() may return: one task (target), or lists, tuples, generators and dicts of
# them, nested. The containers are the read-only ABCs so that an override returning list[MyTask] fits.
TaskStructure: TypeAlias = Union["Task", Iterable["TaskStructure"], Mapping[Any, "TaskStructure"], None]
TargetStructure: TypeAlias = Union[
    "Target", Iterable["TargetStructure"], Mapping[Any, "TargetStructure"], None
]

logger = logging.getLogger("luigi-interface")

TASK_ID_INCLUDE_PARAMS = 3
TASK_ID_TRUNCATE_PARAMS = 16
TASK_ID_TRUNCATE_HASH = 10
TASK_ID_INVALID_CHAR_REGEX = re.compile(r"[^A-Za-z0-9_]")
_NOT_USER_SPECIFIED = "__not_user_specified"

# Attributes the worker injects into a running task; they hold callables or queues that cannot be pickled.
REPORTER_ATTRIBUTES = (
    "set_tracking_url",
    "set_status_message",
    "set_progress_percentage",
    "decrease_running_resources",
    "scheduler_messages",
)

# Config keys already reported as unconsumed, per class, so each warns once rather than on every build.
_warned_unconsumed: weakref.WeakKeyDictionary[type, set[str]] = weakref.WeakKeyDictionary()


def namespace(namespace: str | None = None, scope: str = "") -> None:
    """Put tasks defined from now on in modules under ``scope`` into ``namespace`` (None or '' resets it).

    The most specific matching scope wins; an explicit ``task_namespace`` class attribute beats both.
    """
    Register._default_namespace_dict[scope] = namespace or ""


def auto_namespace(scope: str = "") -> None:
    """Make tasks defined from now on in modules under ``scope`` use their Python module as namespace."""
    Register._default_namespace_dict[scope] = SAME_AS_PYTHON_MODULE


# json.dumps(params, separators=(",", ":"), sort_keys=True), without building an encoder per task.
_TASK_ID_PARAMS_ENCODER = json.JSONEncoder(separators=(",", ":"), sort_keys=True)
_json_string = encode_basestring_ascii  # a str as that encoder writes it (ensure_ascii)


def task_id_str(task_family: str, params: dict[str, str]) -> str:
    """Luigi's id for ``task_family`` with these serialized parameters: ``Family_<summary>_<hash>``."""
    param_str = _params_json(params)
    param_hash = hashlib.md5(param_str.encode("utf-8"), usedforsecurity=False).hexdigest()
    first_values = (
        params[name][:TASK_ID_TRUNCATE_PARAMS] for name in sorted(params)[:TASK_ID_INCLUDE_PARAMS]
    )
    summary = TASK_ID_INVALID_CHAR_REGEX.sub("_", "_".join(first_values))
    return f"{task_family}_{summary}_{param_hash[:TASK_ID_TRUNCATE_HASH]}"


def _params_json(params: dict[str, Any]) -> str:
    """``json.dumps(params, separators=(",", ":"), sort_keys=True)``; for string values (what parameters
    serialize to) written directly, which costs a third of the encoder's call."""
    for name, value in params.items():
        if type(value) is not str or type(name) is not str:
            return _TASK_ID_PARAMS_ENCODER.encode(params)
    pairs = [f"{_json_string(name)}:{_json_string(params[name])}" for name in sorted(params)]
    return "{" + ",".join(pairs) + "}"


class BulkCompleteNotImplementedError(NotImplementedError):
    """Raised by ``Task.bulk_complete`` when a task class offers no bulk completion check."""


class Task(metaclass=Register):
    """A unit of work: declare parameters as class attributes, override requires/output/run.

    Instances are cached: the same class with the same parameter values gives the same object.
    """

    _event_callbacks: dict[type, dict[str, set[Callable[..., Any]]]] = {}

    priority: int = 0
    disabled: bool = False
    resources: dict[str, int] = {}
    worker_timeout: float | None = None
    max_batch_size: float = float("inf")
    owner_email: str | Sequence[str] | None = None
    accepts_messages: bool = False
    use_cmdline_section: bool = True
    task_namespace: str | None = _NOT_USER_SPECIFIED
    _visible_in_registry: bool = True
    _namespace_at_class_time: Any  # set by Register for every class

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        param_values = take_resolved_param_values(type(self), args, kwargs)
        if param_values is None:
            param_values = self.get_param_values(self.get_params(), args, kwargs)
        for name, value in param_values:
            setattr(self, name, value)
        self.param_kwargs: dict[str, Any] = dict(param_values)
        self.param_args: tuple[Any, ...] = tuple(value for _, value in param_values)
        self._warn_on_wrong_param_types()
        self.task_id: str = task_id_str(
            self.get_task_family(), self.to_str_params(only_significant=True, only_public=True)
        )
        # The worker replaces these with callables while run() executes.
        self.set_tracking_url: Callable[[str], None] | None = None
        self.set_status_message: Callable[[str], None] | None = None
        self.set_progress_percentage: Callable[[float], None] | None = None

    # -- scheduling attributes -------------------------------------------------------------------------

    @property
    def batchable(self) -> bool:
        """True when some parameter has a ``batch_method``, so the scheduler may run instances together."""
        return bool(self.batch_param_names())

    @classmethod
    def batch_param_names(cls) -> list[str]:
        """Names of the parameters that have a ``batch_method``."""
        return [name for name, param in cls.get_params() if param._is_batchable()]

    @property
    def retry_count(self) -> int | None:
        """Per-task override of ``[scheduler] retry_count`` (None: use the scheduler's)."""
        return None

    @property
    def retry_backoff(self) -> str | None:
        """Per-task ``fixed``, ``linear`` or ``exponential`` (None: ``[scheduler] retry_backoff``)."""
        return None

    @property
    def retry_delay(self) -> float | None:
        """Per-task base of the retry delay in seconds (None: ``[scheduler] retry_delay``)."""
        return None

    @property
    def retry_max_delay(self) -> float | None:
        """Per-task cap on the backed-off retry delay (None: ``[scheduler] retry_max_delay``)."""
        return None

    @property
    def retry_jitter(self) -> float | None:
        """Per-task fraction by which retry delays are spread (None: ``[scheduler] retry_jitter``)."""
        return None

    @property
    def disable_hard_timeout(self) -> int | None:
        """Per-task override of ``[scheduler] disable_hard_timeout`` (None: use the scheduler's)."""
        return None

    @property
    def disable_window(self) -> int | None:
        """Per-task override of ``[scheduler] disable_window``; honours the old ``disable_window_seconds``."""
        if type(self).disable_window_seconds is not Task.__dict__["disable_window_seconds"]:
            return self.disable_window_seconds
        return None

    @property
    def disable_window_seconds(self) -> int | None:
        """Deprecated alias of ``disable_window``."""
        warnings.warn(
            "disable_window_seconds is deprecated, use disable_window", DeprecationWarning, stacklevel=2
        )
        return self.disable_window

    def process_resources(self) -> dict[str, int]:
        """The resources this task holds while running (override to differ from ``resources``)."""
        return self.resources

    def _owner_list(self) -> list[str]:
        """``owner_email`` as a list of addresses (a string may hold several, comma-separated)."""
        owner_email = self.owner_email
        if owner_email is None:
            return []
        if isinstance(owner_email, str):
            return [address.strip() for address in owner_email.split(",") if address.strip()]
        return list(owner_email)

    # -- names -----------------------------------------------------------------------------------------

    @classmethod
    def get_task_namespace(cls) -> str:
        """The explicit ``task_namespace``, else the one set by ``namespace()`` when the class was defined."""
        if cls.task_namespace != _NOT_USER_SPECIFIED:
            return cls.task_namespace or ""
        if cls._namespace_at_class_time is SAME_AS_PYTHON_MODULE:
            return cls.__module__
        return cls._namespace_at_class_time

    @classmethod
    def get_task_family(cls) -> str:
        """``namespace.ClassName``, or just ``ClassName`` without a namespace."""
        task_namespace = cls.get_task_namespace()
        return f"{task_namespace}.{cls.__name__}" if task_namespace else cls.__name__

    @property
    def task_family(self) -> str:
        return self.get_task_family()

    @property
    def task_module(self) -> str:
        """The Python module defining this task (what ``--module`` would import)."""
        return self.__class__.__module__

    # -- parameters ------------------------------------------------------------------------------------

    @classmethod
    def get_params(cls) -> list[tuple[str, Parameter[Any]]]:
        """Every (name, Parameter) of the class, including inherited ones, in declaration order."""
        cached = Register._params_cache.get(cls)
        if cached is None:
            cached = Register._params_cache[cls] = cls._collect_params()
        return list(cached)

    @classmethod
    def _params_by_name(cls) -> dict[str, Parameter[Any]]:
        """``dict(cls.get_params())``, memoized alike: read by every task's id, report and repr."""
        cached = Register._param_dicts.get(cls)
        if cached is None:
            cached = Register._param_dicts[cls] = dict(cls.get_params())
        return cached

    @classmethod
    def _collect_params(cls) -> list[tuple[str, Parameter[Any]]]:
        found: dict[str, Parameter[Any]] = {}
        for klass in reversed(cls.__mro__):
            for name, value in list(vars(klass).items()):
                if isinstance(value, Parameter):
                    found[name] = _bind_parameter(klass, name, value)
                else:
                    found.pop(name, None)  # a subclass replaced the parameter with something else
        return sorted(found.items(), key=lambda item: item[1]._counter)

    @classmethod
    def get_param_names(cls, include_significant: bool = False) -> list[str]:
        """Names of the parameters; with ``include_significant=False`` only the significant ones."""
        return [name for name, param in cls.get_params() if include_significant or param.significant]

    @classmethod
    def get_param_values(
        cls, params: list[tuple[str, Parameter[Any]]], args: Sequence[Any], kwargs: dict[str, Any]
    ) -> list[tuple[str, Any]]:
        """Resolve every parameter: positional args, then kwargs, then CLI/config/default; all normalized.

        Raises:
            UnknownParameterException: too many positional args or an undeclared keyword.
            DuplicateParameterException: a parameter given both positionally and by keyword.
            MissingParameterException: no value from anywhere for a parameter without default.
        """
        family = cls.get_task_family()
        described = _CallDescription(family, args, kwargs)
        params_by_name = dict(params)
        result = cls._values_from_arguments(params, params_by_name, args, kwargs, described)
        if len(result) < len(params_by_name):  # else every parameter was given (the usual case)
            for name, param in params:
                if name not in result:
                    result[name] = cls._value_from_outside(param, family, name, described)
        cls._warn_unconsumed_config(family, params_by_name)
        return [(name, _list_to_tuple(result[name])) for name, _ in params]

    @classmethod
    def _values_from_arguments(
        cls,
        params: list[tuple[str, Parameter[Any]]],
        params_by_name: dict[str, Parameter[Any]],
        args: Sequence[Any],
        kwargs: dict[str, Any],
        described: _CallDescription,
    ) -> dict[str, Any]:
        result: dict[str, Any] = {}
        if args:
            positional = [(name, param) for name, param in params if param.positional]
            if len(args) > len(positional):
                raise UnknownParameterException(
                    f"{described}: takes at most {len(positional)} positional parameters ({len(args)} given)"
                )
            result = {
                name: param.normalize(arg) for (name, param), arg in zip(positional, args, strict=False)
            }
        for name, value in kwargs.items():
            if name in result:
                raise DuplicateParameterException(
                    f"{described}: parameter {name} was already set as a positional parameter"
                )
            param = params_by_name.get(name)
            if param is None:
                raise UnknownParameterException(f"{described}: unknown parameter {name}")
            result[name] = param.normalize(value)
        return result

    @staticmethod
    def _value_from_outside(
        param: Parameter[Any], family: str, name: str, described: _CallDescription
    ) -> Any:
        """The value from the command line, config or default (the parameter knows the order)."""
        try:
            return param.task_value(family, name)
        except MissingParameterException:
            raise MissingParameterException(
                f"{described}: requires the '{name}' parameter to be set"
            ) from None
        except (ValueError, TypeError, SyntaxError, ParameterException) as exc:
            # Luigi's exact text; the cause (chained) names the config entry and what is wrong with it.
            raise ValueError(f"{described}: Error when parsing the default value of '{name}'") from exc

    @classmethod
    def _warn_unconsumed_config(cls, family: str, params_by_name: dict[str, Parameter[Any]]) -> None:
        """One UnconsumedParameterWarning per ``[Family]`` key that matches no parameter."""
        conf: Any = configuration.get_config()
        if not conf.has_section(family):
            return
        ignored = set(getattr(cls, "ignore_unconsumed", ()))
        warned = _warned_unconsumed.setdefault(cls, set())
        for key, value in _own_section_items(conf, family):
            name = key.replace("-", "_")
            if name in params_by_name or name in ignored or key in ignored or name in warned:
                continue
            warned.add(name)
            warnings.warn(
                f"The configuration contains the parameter '{name}' with value '{value}' that is not "
                f"consumed by the task '{family}'.",
                UnconsumedParameterWarning,
                stacklevel=4,
            )

    def _warn_on_wrong_param_types(self) -> None:
        params = self._params_by_name()
        for name, value in self.param_kwargs.items():
            params[name]._warn_on_wrong_param_type(name, value)

    def to_str_params(self, only_significant: bool = False, only_public: bool = False) -> dict[str, str]:
        """Serialized parameter values by name; PRIVATE parameters are never included."""
        params = self._params_by_name()
        result = {}
        for name, value in self.param_kwargs.items():
            param = params[name]
            if param.visibility == ParameterVisibility.PRIVATE:
                continue
            if only_significant and not param.significant:
                continue
            if only_public and param.visibility != ParameterVisibility.PUBLIC:
                continue
            result[name] = param.serialize(value)
        return result

    @classmethod
    def from_str_params(cls, params_str: dict[str, Any]) -> Task:
        """Build a task from serialized values; a list value is a batch, parsed with ``_parse_list``."""
        kwargs = {}
        for name, param in cls.get_params():
            if name in params_str:
                raw = params_str[name]
                kwargs[name] = param._parse_list(raw) if isinstance(raw, list) else param.parse(raw)
        return cls(**kwargs)

    def _get_param_visibilities(self) -> dict[str, int]:
        """Visibility (as an int) of every non-private parameter, as the scheduler expects it."""
        params = self._params_by_name()
        return {
            name: params[name].visibility.serialize()
            for name in self.param_kwargs
            if params[name].visibility != ParameterVisibility.PRIVATE
        }

    def clone(self, cls: type[Task] | None = None, **kwargs: Any) -> Task:
        """A task of class ``cls`` (default: the same class) sharing this task's values for common parameters.

        ``kwargs`` override the copied values.
        """
        target_cls = cls if cls is not None else type(self)
        new_kwargs = {}
        for name, _ in target_cls.get_params():
            if name in kwargs:
                new_kwargs[name] = kwargs[name]
            elif name in self.param_kwargs:
                new_kwargs[name] = self.param_kwargs[name]
            elif hasattr(self, name):  # a property of this task can feed a parameter of the other
                new_kwargs[name] = getattr(self, name)
        return target_cls(**new_kwargs)

    # -- identity --------------------------------------------------------------------------------------

    def __hash__(self) -> int:
        # str caches its own hash, so this is as cheap as storing it, and stays right after unpickling
        # in a process with another hash seed.
        return hash(self.task_id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Task) and self.__class__ == other.__class__ and self.task_id == other.task_id

    def __repr__(self) -> str:
        """``Family(p1=v1, p2=v2)`` with the serialized significant parameters (any visibility, as Luigi)."""
        params = self._params_by_name()
        parts = [
            f"{name}={params[name].serialize(value)}"
            for name, value in getattr(self, "param_kwargs", {}).items()
            if params[name].significant
        ]
        return f"{self.get_task_family()}({', '.join(parts)})"

    def initialized(self) -> bool:
        """True once ``__init__`` has run (a subclass may read attributes before calling super)."""
        return hasattr(self, "task_id")

    @contextmanager
    def no_unpicklable_properties(self) -> Iterator[None]:
        """Temporarily replace the worker-injected callables and queues so the task can be pickled."""
        saved = {name: getattr(self, name) for name in REPORTER_ATTRIBUTES if hasattr(self, name)}
        for name in saved:
            setattr(self, name, "placeholder_during_pickling")
        try:
            yield
        finally:
            for name, value in saved.items():
                setattr(self, name, value)

    # -- what users override ---------------------------------------------------------------------------

    def requires(self) -> TaskStructure:
        """The tasks this one depends on: a task, or a list, tuple, dict or generator of tasks."""
        return []

    def _requires(self) -> list[Task]:
        """Hook for template classes that add requirements; the worker uses ``deps()``."""
        return flatten(self.requires())

    def deps(self) -> list[Task]:
        """The flattened list of tasks this one depends on."""
        return flatten(self._requires())

    def output(self) -> TargetStructure:
        """The targets this task produces: a target or a structure of targets."""
        return []

    def input(self) -> Any:
        """The outputs of ``requires()``, in the same structure.

        Typed Any on purpose: its shape follows each subclass's ``requires()``, which no annotation here can
        follow, and users index it freely (``self.input()["raw"].open()``).
        """
        return getpaths(self.requires())

    def complete(self) -> bool:
        """True when every output exists; a task without outputs is never complete (and warns)."""
        outputs = flatten(self.output())
        if not outputs:
            warnings.warn(f"Task {self!r} without outputs has no custom complete() method", stacklevel=2)
            return False
        return all(output.exists() for output in outputs)

    @classmethod
    def bulk_complete(cls, parameter_tuples: Iterable[Any]) -> Iterable[Any]:
        """The subset of ``parameter_tuples`` whose tasks are complete, checked at once (optional)."""
        raise BulkCompleteNotImplementedError()

    def run(self) -> Any:
        """Do the work. A generator may yield tasks (dynamic dependencies) and receives their outputs."""

    def on_failure(self, exception: BaseException) -> str | None:
        """The explanation sent to the scheduler when ``run()`` raised: the traceback by default."""
        if exception.__traceback__ is not None:
            formatted = "".join(
                traceback.format_exception(type(exception), exception, exception.__traceback__)
            )
        else:
            formatted = traceback.format_exc()
        return f"Runtime error:\n{formatted}"

    def on_success(self) -> str | None:
        """The message sent to the scheduler when ``run()`` succeeded (None by default)."""
        return None

    # -- events ----------------------------------------------------------------------------------------

    @classmethod
    def event_handler(cls, event: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator registering a callback for ``event`` on this class and its subclasses."""

        def register(callback: Callable[..., Any]) -> Callable[..., Any]:
            cls._event_callbacks.setdefault(cls, {}).setdefault(event, set()).add(callback)
            return callback

        return register

    @classmethod
    def remove_event_handler(cls, event: str, callback: Callable[..., Any]) -> None:
        """Unregister a callback added with ``event_handler`` on this class."""
        cls._event_callbacks[cls][event].remove(callback)

    def trigger_event(self, event: str, *args: Any, **kwargs: Any) -> None:
        """Call every callback registered for ``event`` on this task's class or a base; errors are logged."""
        for registered_cls, callbacks in list(self._event_callbacks.items()):
            if not isinstance(self, registered_cls):
                continue
            for callback in list(callbacks.get(event, ())):
                try:
                    callback(*args, **kwargs)
                except KeyboardInterrupt:
                    raise
                except BaseException:  # a broken callback must not stop the worker; log it with context
                    logger.exception("Error in event callback for %r", event)


class MixinNaiveBulkComplete:
    """Mixin giving ``bulk_complete`` by checking ``complete()`` of each candidate in turn."""

    @classmethod
    def bulk_complete(cls, parameter_tuples: Iterable[Any]) -> list[Any]:
        return [
            parameters for parameters in parameter_tuples if task_from_parameters(cls, parameters).complete()
        ]


def task_from_parameters(task_cls: Any, parameters: Any) -> Any:
    """The task ``bulk_complete`` is asked about: a tuple or list of positional values, a dict of named
    ones, or the single parameter's value."""
    if isinstance(parameters, (list, tuple)):
        return task_cls(*parameters)
    if isinstance(parameters, dict):
        return task_cls(**parameters)
    return task_cls(parameters)


class Config(Task):
    """A bag of settings read from the ``[ClassName]`` config section and ``--ClassName-param`` flags."""


class ExternalTask(Task):
    """A task produced outside Luigi: never run, only checked for completeness."""

    run = None  # type: ignore[assignment]


class WrapperTask(Task):
    """A task that only groups requirements: complete when all of them are."""

    def complete(self) -> bool:
        return all(requirement.complete() for requirement in flatten(self.requires()))


class DynamicRequirements:
    """Requirements yielded from ``run()`` with an optional cheaper completeness check.

    ``custom_complete(complete_fn)`` may decide completeness for the whole group without checking each task.
    """

    def __init__(
        self, requirements: Any, custom_complete: Callable[[Callable[[Task], bool]], bool] | None = None
    ) -> None:
        self.requirements = requirements
        self.custom_complete = custom_complete
        self.flat_requirements: list[Task] = flatten(requirements)
        self.paths = getpaths(requirements)

    def complete(self, complete_fn: Callable[[Task], bool] | None = None) -> bool:
        """True when the requirements are complete, asking ``complete_fn`` (default ``task.complete()``)."""
        check = complete_fn if complete_fn is not None else _task_is_complete
        if self.custom_complete is not None:
            return self.custom_complete(check)
        return all(check(task) for task in self.flat_requirements)


def _task_is_complete(task: Task) -> bool:
    return task.complete()


def _task_wraps(task_class: type) -> Callable[[type], type]:
    """Decorator giving a wrapper class ``task_class``'s name, module, docstring and namespace.

    The wrapper then has the same family (and pickles by the same name) as the class it wraps.
    """

    def copy_identity(wrapper: type) -> type:
        for attribute in ("__module__", "__name__", "__qualname__", "__doc__", "_namespace_at_class_time"):
            setattr(wrapper, attribute, getattr(task_class, attribute))
        return wrapper

    return copy_identity


def externalize(taskclass_or_taskobject: Any) -> Any:
    """A copy of the task class or task object with ``run = None``, so the worker treats it as external.

    The original is untouched; a class copy keeps the family but stays out of the registry.
    """
    if isinstance(taskclass_or_taskobject, type):
        original = taskclass_or_taskobject

        @_task_wraps(original)
        class _CopyOfClass(original):  # type: ignore[valid-type,misc]
            _visible_in_registry = False

        _CopyOfClass.run = None
        return _CopyOfClass
    copied = copy.copy(taskclass_or_taskobject)
    copied.run = None
    return copied


def flatten(struct: Any) -> list[Any]:
    """The leaves of a nested structure as a list: None gives [], a str stays whole, dicts give values."""
    if struct is None:
        return []
    if type(struct) in _LEAF_TYPES:
        return [struct]
    if isinstance(struct, dict):
        return [leaf for value in struct.values() for leaf in flatten(value)]
    if isinstance(struct, (str, bytes)):
        return [struct]
    try:
        items = iter(struct)
    except TypeError:
        _remember_leaf_type(type(struct))
        return [struct]
    return [leaf for item in items for leaf in flatten(item)]


# Types whose instances ``iter()`` refuses for want of ``__iter__`` and ``__getitem__`` (tasks and targets):
# their leaves are known without the raised and caught TypeError, a few microseconds a leaf.
_LEAF_TYPES: dict[type, None] = {}


def _remember_leaf_type(kind: type) -> None:
    if getattr(kind, "__iter__", None) is None and getattr(kind, "__getitem__", None) is None:
        _LEAF_TYPES[kind] = None


def flatten_output(task: Task) -> list[Any]:
    """The outputs of ``task``, looking through requirements of tasks that have no outputs of their own."""
    with_outputs: dict[Task, None] = {}  # an ordered set
    to_visit: deque[Task] = deque([task])
    while to_visit:
        current = to_visit.popleft()
        if flatten(current.output()):
            with_outputs.setdefault(current, None)
        else:
            to_visit.extend(flatten(current.requires()))
    return flatten([found.output() for found in with_outputs])


def getpaths(struct: Any) -> Any:
    """Map each task in a structure to its ``output()``, keeping the structure (dicts, lists, tuples)."""
    if isinstance(struct, Task):
        return struct.output()
    if isinstance(struct, dict):
        return struct.__class__((key, getpaths(value)) for key, value in struct.items())
    if isinstance(struct, tuple) and hasattr(struct, "_fields"):  # namedtuple
        return struct.__class__(*(getpaths(item) for item in struct))
    if isinstance(struct, (list, tuple)):
        return struct.__class__(getpaths(item) for item in struct)
    try:
        items = iter(struct)
    except TypeError:
        raise TypeError(f"Cannot map {struct!r} to Task/dict/list") from None
    return [getpaths(item) for item in items]


class _CallDescription:
    """``Family[args=..., kwargs=...]`` for error messages, formatted only if an error is raised."""

    def __init__(self, family: str, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
        self.family, self.args, self.kwargs = family, args, kwargs

    def __str__(self) -> str:
        return f"{self.family}[args={tuple(self.args)}, kwargs={self.kwargs}]"


def _bind_parameter(klass: type, name: str, param: Parameter[Any]) -> Parameter[Any]:
    """``param`` ready to store its value under ``name``.

    A Parameter keeps values under the one attribute name it was bound to. One attached with setattr after
    class creation is not bound yet; one reused under another name (``y = OtherTask.x``) gets a bound copy.
    """
    if param._attribute_name is None:
        param.__set_name__(klass, name)
    elif param._attribute_name != name:
        param = copy.copy(param)
        param.__set_name__(klass, name)
        setattr(klass, name, param)
    return param


def _list_to_tuple(value: Any) -> Any:
    """Lists and sets become tuples so parameter values stay hashable."""
    if isinstance(value, (list, set)):
        return tuple(value)
    return value


def _own_section_items(conf: Any, section: str) -> list[tuple[str, Any]]:
    """The options written in ``section`` itself (raw), without keys inherited from a cfg ``[DEFAULT]``."""
    if isinstance(conf, configparser.ConfigParser):
        defaults = conf.defaults()
        return [(key, value) for key, value in conf.items(section, raw=True) if key not in defaults]
    return list(conf.items(section))
