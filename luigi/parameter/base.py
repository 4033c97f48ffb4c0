"""The Parameter base class, its exceptions and visibility levels.

A parameter turns strings (from the command line or a config file) into values, turns values back into the
strings that make up task ids, and normalises values so that equal inputs give equal tasks.

``Parameter`` is generic in the type of its values, for type checkers: ``n = luigi.IntParameter()`` on a task
makes ``self.n`` an ``int`` and ``TheTask.n`` the parameter. A plain ``Parameter()`` holds a ``str``.
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Callable, Iterable, Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any, Generic, overload

from luigi import configuration

if TYPE_CHECKING:
    from typing_extensions import Self, TypeVar

    # Covariant: a parameter only hands its values out, so Parameter[int] is a Parameter[int | None].
    ValueT = TypeVar("ValueT", covariant=True, default=str)
else:
    from typing import TypeVar

    # Type checkers read the branch above; TypeVar takes a default only from Python 3.13 on.
    ValueT = TypeVar("ValueT", covariant=True)


def namespace() -> ModuleType:
    """The ``luigi.parameter`` package, read at call time: users' tests patch its ``warnings`` and friends."""
    return sys.modules["luigi.parameter"]


def warn(*args: Any, **kwargs: Any) -> None:
    """``warnings.warn`` through ``luigi.parameter.warnings``, so ``mock.patch`` of it sees every warning."""
    if "stacklevel" in kwargs:
        kwargs["stacklevel"] += 1  # this function is one more frame between the caller and the warning
    namespace().warnings.warn(*args, **kwargs)


class ParameterException(Exception):
    """Base of every error about parameters."""


class MissingParameterException(ParameterException):
    """A task was built without a value for a parameter that has no default."""


class UnknownParameterException(ParameterException):
    """A task was given a parameter name (or a positional argument) it does not declare."""


class DuplicateParameterException(ParameterException):
    """A parameter was given both positionally and by keyword."""


class UnconsumedParameterWarning(Warning):
    """A ``[Family]`` config key matches no parameter of that task."""


class OptionalParameterTypeWarning(UserWarning):
    """An Optional* parameter received a value of an unexpected type."""


class ParameterVisibility(enum.IntEnum):
    """Who may see a parameter: PUBLIC everywhere, HIDDEN not in ids or the UI, PRIVATE never sent."""

    PUBLIC = 0
    HIDDEN = 1
    PRIVATE = 2

    @classmethod
    def has_value(cls, value: int) -> bool:
        return any(value == item.value for item in cls)

    def serialize(self) -> int:
        return int(self.value)


class _NoValueType:
    """Sentinel for 'no value given', distinct from None (which is a legitimate value)."""

    _instance: _NoValueType | None = None

    def __new__(cls) -> _NoValueType:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<no value>"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "_no_value"


_no_value: Any = _NoValueType()


def _is_no_value(value: object) -> bool:
    return value is _no_value


class Parameter(Generic[ValueT]):
    """A declared input of a task, read from kwargs, the command line, config, or its default.

    Parameters are descriptors: on the class they return themselves, on an instance the resolved value
    (typed ``ValueT``: a subclass names its value type, as ``IntParameter(Parameter[int])``).
    """

    _counter = 0  # declaration order across all parameters, so get_params() keeps source order

    def __init__(
        self,
        default: Any = _no_value,
        is_global: bool = False,
        significant: bool = True,
        description: str | None = None,
        config_path: dict[str, str] | None = None,
        positional: bool = True,
        always_in_help: bool = False,
        batch_method: Callable[[Iterable[Any]], Any] | None = None,
        visibility: ParameterVisibility | int = ParameterVisibility.PUBLIC,
    ) -> None:
        self._default = default
        self._batch_method = batch_method
        if is_global:
            warn("is_global support is removed. Assuming positional=False", DeprecationWarning, stacklevel=2)
            positional = False
        self.significant = significant
        self.positional = positional
        self.visibility = (
            ParameterVisibility(visibility)
            if ParameterVisibility.has_value(visibility)
            else ParameterVisibility.PUBLIC
        )
        self.description = description
        self.always_in_help = always_in_help
        if config_path is not None and ("section" not in config_path or "name" not in config_path):
            raise ParameterException(
                f"config_path must be a dict with 'section' and 'name' keys, got {config_path!r}"
            )
        self._config_path = config_path
        self._attribute_name: str | None = None
        self._counter = Parameter._counter
        Parameter._counter += 1

    # -- descriptor protocol ---------------------------------------------------------------------------

    def __set_name__(self, owner: type, name: str) -> None:
        self._attribute_name = name

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> Self: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> ValueT: ...

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        if instance is None or self._attribute_name is None:
            return self
        try:
            return instance.__dict__[self._attribute_name]
        except KeyError:
            raise AttributeError(self._attribute_name) from None

    def __set__(self, instance: object, value: Any) -> None:
        if self._attribute_name is None:
            raise AttributeError("parameter is not bound to a class attribute")
        instance.__dict__[self._attribute_name] = value

    # -- value lookup ----------------------------------------------------------------------------------

    def _value_iterator(
        self, task_name: str | None, param_name: str | None
    ) -> Iterator[tuple[Any, str | None]]:
        """Yield (value, deprecation warning) pairs in Luigi's order: CLI, config, config_path, default."""
        cp_parser = _active_cmdline_parser()
        if cp_parser is not None and task_name is not None and param_name is not None:
            dest = self._parser_global_dest(param_name, task_name)
            found = getattr(cp_parser.known_args, dest, None)
            yield (self._parse_or_no_value(found), None)
        yield (self._get_value_from_config(task_name, param_name), None)
        if self._config_path:
            yield (
                self._get_value_from_config(self._config_path["section"], self._config_path["name"]),
                "The use of the configuration [{}] {} is deprecated. Please use [{}] {}".format(
                    self._config_path["section"], self._config_path["name"], task_name, param_name
                ),
            )
        yield (self._default, None)

    def _get_value(self, task_name: str | None = None, param_name: str | None = None) -> Any:
        for value, warning in self._value_iterator(task_name, param_name):
            if not _is_no_value(value):
                if warning:
                    warn(warning, DeprecationWarning, stacklevel=3)
                return value
        return _no_value

    def has_task_value(self, task_name: str, param_name: str) -> bool:
        """True when the CLI, config or default provides a value for this parameter of that task."""
        return not _is_no_value(self._get_value(task_name, param_name))

    def task_value(self, task_name: str, param_name: str) -> Any:
        """The normalised value from CLI, config or default; raises MissingParameterException if none."""
        value = self._get_value(task_name, param_name)
        if _is_no_value(value):
            raise MissingParameterException(
                f"No default specified for parameter '{param_name}' of {task_name}"
            )
        return self.normalize(value)

    def _get_value_from_config(self, section: str | None, name: str | None) -> Any:
        if section is None or name is None:
            return _no_value
        conf = configuration.get_config()
        try:
            value = conf.get(section, name)
        except (configuration.NoSectionError, configuration.NoOptionError, KeyError):
            return _no_value
        return self._parse_config_value(value, section, name)

    def _parse_config_value(self, value: Any, section: str, name: str) -> Any:
        """Parse a config value; a parse error names the config entry so the user can fix the file."""
        if not isinstance(value, str):  # TOML gives typed values; parse only what arrives as text
            return self.normalize(value)
        try:
            return self.parse(value)
        except (ValueError, TypeError, SyntaxError, ParameterException) as exc:
            raise ValueError(f"Invalid value for [{section}] {name} = {value!r} in config: {exc}") from exc

    def _parse_or_no_value(self, value: Any) -> Any:
        if not value:
            return _no_value
        return self.parse(value)

    @staticmethod
    def _parser_global_dest(param_name: str, task_name: str) -> str:
        return task_name + "_" + param_name

    # -- conversion hooks ------------------------------------------------------------------------------

    def parse(self, x: str) -> Any:
        """Turn a command-line or config string into a value (identity for the base class)."""
        return x

    def _parse_list(self, xs: Iterable[str]) -> Any:
        """Parse each string and reduce them with batch_method (how a batch of tasks becomes one)."""
        if not self._is_batchable():
            raise NotImplementedError("No batch method found")
        if not xs:
            raise ValueError("Empty parameter list passed to _parse_list")
        assert self._batch_method is not None
        return self._batch_method(map(self.parse, xs))

    def serialize(self, x: Any) -> str:
        """Turn a value back into the string that parse() accepts and task ids are built from."""
        return str(x)

    def normalize(self, x: Any) -> Any:
        """Bring a value to its canonical form (identity for the base class); applied to every value."""
        return x

    def next_in_enumeration(self, value: Any) -> Any:
        """The next value in a natural sequence (used to collapse ranges in the summary), or None."""
        return None

    def _is_batchable(self) -> bool:
        return self._batch_method is not None

    def _warn_on_wrong_param_type(self, param_name: str, param_value: Any) -> None:
        if self.__class__ is not Parameter:
            return
        if not isinstance(param_value, str):
            warn(f'Parameter "{param_name}" with value "{param_value}" is not of type string.')

    def _parser_kwargs(self, param_name: str, task_name: str | None = None) -> dict[str, Any]:
        """Keyword arguments for argparse's add_argument for this parameter's flag."""
        return {"action": "store", "help": self._help_text()}

    def _help_text(self) -> str | None:
        return self.description


def _active_cmdline_parser() -> Any:
    """The CmdlineParser while a command line is being run, else None (imported lazily: no cycle)."""
    from luigi.cmdline_parser import CmdlineParser

    return CmdlineParser.get_instance()
