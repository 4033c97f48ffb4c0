"""The registry of task classes: the ``Register`` metaclass, the instance cache and namespaces.

Every class whose metaclass is ``Register`` (every ``Task``) is recorded here so that the command line and
the scheduler can find it by its family name, and instances are cached so that building the same task twice
gives the same object.
"""

from __future__ import annotations

import abc
import importlib
import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypeVar

logger = logging.getLogger("luigi-interface")
_TaskT = TypeVar("_TaskT")


class _SameAsPythonModule:
    """Marker stored by ``auto_namespace``: the namespace is the class's own ``__module__``."""

    def __repr__(self) -> str:
        return "<namespace same as python module>"


SAME_AS_PYTHON_MODULE: Any = _SameAsPythonModule()

_MAX_SUGGESTION_DISTANCE = 5
_MAX_SUGGESTIONS = 5


class _ResolvedCall(threading.local):
    """The parameter values ``Register.__call__`` resolved for the instance it is building in this thread.

    ``Task.__init__`` takes them instead of resolving the same arguments a second time.
    """

    entry: tuple[Any, Any, tuple[Any, ...], dict[str, Any], list[tuple[str, Any]]] | None = None


_resolved_call = _ResolvedCall()


def take_resolved_param_values(
    cls: type, args: Sequence[Any], kwargs: dict[str, Any]
) -> list[tuple[str, Any]] | None:
    """The values ``Register.__call__`` resolved for ``cls(*args, **kwargs)``, or None (resolve them anew).

    They count only for the very same argument objects and an unchanged parameter list, and only once.
    """
    entry = _resolved_call.entry
    if entry is None:
        return None
    _resolved_call.entry = None
    resolved_cls, params, resolved_args, resolved_kwargs, values = entry
    if resolved_cls is not cls or Register._params_cache.get(cls) is not params:
        return None
    if len(args) != len(resolved_args) or kwargs.keys() != resolved_kwargs.keys():
        return None
    for given, resolved in zip(args, resolved_args, strict=True):
        if given is not resolved:
            return None
    for name, resolved in resolved_kwargs.items():
        if kwargs[name] is not resolved:
            return None
    return values


class TaskClassException(Exception):
    """Base of the errors raised when a task class cannot be found by name."""


class TaskClassNotFoundException(TaskClassException):
    """No registered task has the requested family name (``task_name``, when known)."""

    def __init__(self, message: str, task_name: str | None = None) -> None:
        super().__init__(message)
        self.task_name = task_name


class TaskClassAmbigiousException(TaskClassException):
    """Two unrelated registered classes share the requested family name (the spelling is Luigi's)."""


class _RegistrySnapshot(dict):
    """What ``Register._get_reg()`` returns: family -> class, remembering the full state for ``_set_reg``.

    It is a plain family -> class dict for callers that inspect it; ``_set_reg`` uses the extra attributes to
    restore the exact class list (shadowed and invisible classes included) and the namespace settings.
    """

    classes: list[type]
    namespaces: dict[str, Any]


class Register(abc.ABCMeta):
    """Metaclass of ``Task``: registers every class and caches instances by their parameter values."""

    AMBIGUOUS_CLASS: Any = object()  # value in _get_reg() for a family claimed by unrelated classes
    _default_namespace_dict: dict[str, Any] = {}  # module-prefix scope -> namespace (see namespace())
    _reg: list[type] = []
    _instance_cache: dict[Any, Any] | None = {}  # None when disabled
    # Memo of Task.get_params() per class; any change to a task class's attributes drops it all, since
    # subclasses see their bases' parameters (decorators like @inherits add parameters after creation).
    _params_cache: dict[type, list[tuple[str, Any]]] = {}
    _param_dicts: dict[type, dict[str, Any]] = {}  # the same, by name (Task._params_by_name)

    def __new__(mcs, classname: str, bases: tuple[type, ...], classdict: dict[str, Any], **kwargs: Any):
        cls: Any = super().__new__(mcs, classname, bases, classdict, **kwargs)
        cls._namespace_at_class_time = mcs._get_namespace(cls.__module__)
        Register._reg.append(cls)
        return cls

    def __call__(cls: type[_TaskT], *args: Any, **kwargs: Any) -> _TaskT:
        """Build a task, or return the cached instance with the same class and parameter values.

        Typed as an instance of the class called, so that type checkers that read a metaclass's
        ``__call__`` (pyright) see ``Report()`` as a ``Report``.
        """
        task_cls: Any = cls  # the class as the metaclass sees it (the annotation above is for callers)
        cache = Register._instance_cache
        if cache is None:
            return super(Register, task_cls).__call__(*args, **kwargs)
        param_values = task_cls.get_param_values(task_cls.get_params(), args, kwargs)
        key = (cls, tuple(param_values))
        try:
            instance = cache.get(key)
        except TypeError:  # an unhashable parameter value: such tasks are simply not cached
            logger.debug("Not caching an instance of %s: its parameter values are not hashable", cls)
            return super(Register, task_cls).__call__(*args, **kwargs)
        if instance is None:
            outer = _resolved_call.entry  # a task built inside another task's __init__ restores it after
            _resolved_call.entry = (cls, Register._params_cache.get(cls), args, kwargs, param_values)
            try:
                instance = super(Register, task_cls).__call__(*args, **kwargs)
            finally:
                _resolved_call.entry = outer
            cache[key] = instance
        return instance

    def __setattr__(cls, name: str, value: Any) -> None:
        Register.forget_params()
        super().__setattr__(name, value)

    def __delattr__(cls, name: str) -> None:
        Register.forget_params()
        super().__delattr__(name)

    @staticmethod
    def forget_params() -> None:
        """Drop the memos of every class's parameters (a class changed: its subclasses see it too)."""
        Register._params_cache.clear()
        Register._param_dicts.clear()

    @property
    def task_family(cls) -> str:
        """The family name on the class itself, e.g. ``MyTask.task_family``."""
        task_cls: Any = cls
        return task_cls.get_task_family()

    # -- instance cache --------------------------------------------------------------------------------

    @classmethod
    def clear_instance_cache(mcs) -> None:
        """Forget every cached instance (and turn the cache back on if it was disabled)."""
        Register._instance_cache = {}

    @classmethod
    def disable_instance_cache(mcs) -> None:
        """Build a fresh instance on every call until ``clear_instance_cache()``."""
        Register._instance_cache = None

    # -- namespaces ------------------------------------------------------------------------------------

    @classmethod
    def _get_namespace(mcs, module_name: str) -> Any:
        """The namespace set for the most specific scope that is a module prefix of ``module_name``."""
        parts = module_name.split(".")
        for end in range(len(parts), -1, -1):
            scope = ".".join(parts[:end])
            if scope in Register._default_namespace_dict:
                return Register._default_namespace_dict[scope]
        return ""

    # -- lookup by name --------------------------------------------------------------------------------

    @classmethod
    def _get_reg(mcs) -> _RegistrySnapshot:
        """Every visible registered class by family; unrelated classes sharing one map to AMBIGUOUS_CLASS.

        Computed on demand because a family can change after registration (decorators rename classes).
        """
        _register_engine_classes()
        reg = _RegistrySnapshot()
        task_cls: Any
        for task_cls in Register._reg:
            if not getattr(task_cls, "_visible_in_registry", True):
                continue
            family = task_cls.get_task_family()
            reg[family] = _pick_class(reg.get(family), task_cls)
        reg.classes = list(Register._reg)
        reg.namespaces = dict(Register._default_namespace_dict)
        return reg

    @classmethod
    def _set_reg(mcs, reg: Mapping[str, Any]) -> None:
        """Restore a registry saved by ``_get_reg()`` (tests use the pair to undo class definitions)."""
        Register.forget_params()
        if isinstance(reg, _RegistrySnapshot):
            Register._reg = list(reg.classes)
            Register._default_namespace_dict = dict(reg.namespaces)
        else:
            Register._reg = [cls for cls in reg.values() if cls is not Register.AMBIGUOUS_CLASS]

    @classmethod
    def task_names(mcs) -> list[str]:
        """Sorted family names of every registered task."""
        return sorted(Register._get_reg())

    @classmethod
    def tasks_str(mcs) -> str:
        """The registered family names as one comma-separated string."""
        return ",".join(Register.task_names())

    @classmethod
    def get_task_cls(mcs, name: str) -> type:
        """The task class registered under family ``name``.

        Raises:
            TaskClassNotFoundException: no such family (the message suggests close names).
            TaskClassAmbigiousException: two unrelated classes claim that family.
        """
        task_cls = Register._get_reg().get(name)
        if task_cls is None:
            raise TaskClassNotFoundException(Register._missing_task_msg(name), name)
        if task_cls is Register.AMBIGUOUS_CLASS:
            raise TaskClassAmbigiousException(
                f"Task {name!r} is ambiguous: several unrelated classes share it"
            )
        return task_cls

    @classmethod
    def get_all_params(mcs) -> Iterator[tuple[str, bool, str, Any]]:
        """Yield ``(family, is_without_section, param_name, param)`` for every parameter of every task."""
        for family, task_cls in Register._get_reg().items():
            if task_cls is Register.AMBIGUOUS_CLASS:
                continue
            for param_name, param_obj in task_cls.get_params():
                yield family, not task_cls.use_cmdline_section, param_name, param_obj

    @classmethod
    def _missing_task_msg(mcs, task_name: str) -> str:
        from luigi.task import Config  # task imports this module

        # Config classes are sections of the configuration ([email], [retcode]...), not tasks to run.
        tasks = [name for name, cls in Register._get_reg().items() if not _is_config(cls, Config)]
        candidates = _close_names(task_name, sorted(tasks))
        if candidates:
            return f"No task {task_name}. Did you mean: {', '.join(candidates)}?"
        return f"No task {task_name}. Candidates are: {Register.tasks_str()}"


_engine_registered = False


def _register_engine_classes() -> None:
    """Load the engine's Config classes and the Range* tasks before the registry is read by name.

    Luigi registers them when ``luigi`` is imported; ours come with ``luigi.interface``, loaded on first
    use, so ``Register.get_task_cls("RangeDaily")`` after a bare ``import luigi`` still finds them.
    """
    global _engine_registered
    if _engine_registered:
        return
    _engine_registered = True  # first, as luigi.interface's own imports may read the registry
    import luigi.interface  # noqa: F401  # registers on import


def _pick_class(existing: Any, new: type) -> Any:
    """Which class a family maps to when ``new`` is registered after ``existing``.

    A subclass wins over its parent (decorators wrap classes this way); unrelated classes are ambiguous.
    """
    if existing is None:
        return new
    if existing is Register.AMBIGUOUS_CLASS:
        return existing
    if issubclass(new, existing):
        return new
    if issubclass(existing, new):
        return existing
    return Register.AMBIGUOUS_CLASS


def _is_config(cls: Any, config: type) -> bool:
    return isinstance(cls, type) and issubclass(cls, config)


def _close_names(name: str, names: list[str]) -> list[str]:
    """The registered names within a small edit distance of ``name``, closest first."""
    scored = sorted((_edit_distance(name.lower(), other.lower()), other) for other in names)
    return [other for dist, other in scored if dist <= _MAX_SUGGESTION_DISTANCE and dist < len(other)][
        :_MAX_SUGGESTIONS
    ]


def _edit_distance(a: str, b: str) -> int:
    """Levenshtein distance: insertions, deletions and substitutions needed to turn ``a`` into ``b``."""
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, start=1):
        current = [i]
        for j, char_b in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b)))
        previous = current
    return previous[-1]


def load_task(module: str | None, task_name: str, params_str: Mapping[str, Any]) -> Any:
    """Build a task from its family name and serialized parameters, importing ``module`` first if given."""
    if module:
        importlib.import_module(module)
    task_cls: Any = Register.get_task_cls(task_name)
    return task_cls.from_str_params(params_str)
