"""Scalar parameters: strings, numbers, booleans, bounded numbers, choices and enums."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar, overload

from luigi.parameter.base import Parameter, ParameterException, ValueT, _no_value, warn

if TYPE_CHECKING:
    from typing_extensions import Self

EnumT = TypeVar("EnumT", bound=Enum, covariant=True)


class StrParameter(Parameter[str]):
    """A string; ``parse`` and ``serialize`` are ``str``. Warns when given a value that is not a string."""

    def parse(self, x: str) -> str:
        return str(x)

    def _warn_on_wrong_param_type(self, param_name: str, param_value: Any) -> None:
        if not isinstance(param_value, str):
            warn(f'Parameter "{param_name}" with value "{param_value}" is not of type string.')


class IntParameter(Parameter[int]):
    """An integer; its enumeration steps by one (so the summary can write ranges like ``1...5``)."""

    def parse(self, x: str) -> int:
        try:
            return int(x)
        except (TypeError, ValueError):
            raise ValueError(f"{x!r} is not a valid integer") from None

    def next_in_enumeration(self, value: Any) -> Any:
        return value + 1


class FloatParameter(Parameter[float]):
    """A floating point number."""

    def parse(self, x: str) -> float:
        try:
            return float(x)
        except (TypeError, ValueError):
            raise ValueError(f"{x!r} is not a valid float (expected a number such as 1.5)") from None


class BoolParameter(Parameter[bool]):
    """A boolean, False unless given; ``true``/``false`` in any case.

    With implicit parsing (the default) the command-line flag takes no value (``--flag``); with explicit
    parsing it takes an optional one (``--flag``, ``--flag true``, ``--flag false``). Set the class
    attribute ``BoolParameter.parsing`` to change the default for every BoolParameter.
    """

    IMPLICIT_PARSING = "implicit"
    EXPLICIT_PARSING = "explicit"
    parsing = IMPLICIT_PARSING

    def __init__(self, *args: Any, parsing: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        chosen = self.__class__.parsing if parsing is None else parsing
        if chosen not in (self.IMPLICIT_PARSING, self.EXPLICIT_PARSING):
            raise ParameterException(
                f"BoolParameter parsing must be {self.IMPLICIT_PARSING!r} or {self.EXPLICIT_PARSING!r}, "
                f"got {chosen!r}"
            )
        self.parsing = chosen
        if self._default is _no_value:
            self._default = False

    def parse(self, x: str) -> bool:
        text = str(x).lower()
        if text == "true":
            return True
        if text == "false":
            return False
        raise ValueError(f"{x!r} is not a valid boolean (expected true or false)")

    def normalize(self, x: Any) -> bool | None:
        """The boolean for ``x`` (a bool or its text), or None when ``x`` is neither."""
        try:
            return self.parse(x)
        except ValueError:
            return None

    def _parser_kwargs(self, param_name: str, task_name: str | None = None) -> dict[str, Any]:
        kwargs = super()._parser_kwargs(param_name, task_name)
        if self.parsing == self.IMPLICIT_PARSING:
            kwargs["action"] = "store_true"
        else:
            kwargs.update(nargs="?", const=True)
        return kwargs


def _join_description(description: str | None, suffix: str) -> str:
    return f"{description} {suffix}" if description else suffix


class NumericalParameter(Parameter[ValueT]):
    """A number of ``var_type`` that must lie in a range, by default ``min_value <= x < max_value``.

    Its values are typed by what ``var_type`` returns (``var_type=int`` gives ``int``).

    ``left_op``/``right_op`` are the comparisons (``operator.le``/``operator.lt`` by default); the range is
    appended to the description as "permitted values: ...".
    """

    def __init__(
        self,
        *args: Any,
        var_type: Callable[[Any], ValueT] | None = None,
        min_value: Any = None,
        max_value: Any = None,
        left_op: Callable[[Any, Any], bool] = operator.le,
        right_op: Callable[[Any, Any], bool] = operator.lt,
        **kwargs: Any,
    ) -> None:
        for name, given in (("var_type", var_type), ("min_value", min_value), ("max_value", max_value)):
            if given is None:
                raise ParameterException(f"NumericalParameter needs {name}=...")
        super().__init__(*args, **kwargs)
        assert var_type is not None
        self._var_type = var_type
        self._min_value = min_value
        self._max_value = max_value
        self._left_op = left_op
        self._right_op = right_op
        self._permitted_range = self._describe_range()
        self.description = _join_description(self.description, f"permitted values: {self._permitted_range}")

    def _describe_range(self) -> str:
        left = "[" if self._left_op is operator.le else "("
        right = "]" if self._right_op is operator.le else ")"
        type_name = getattr(self._var_type, "__name__", str(self._var_type))
        return f"{type_name} in {left}{self._min_value}, {self._max_value}{right}"

    def parse(self, x: str) -> Any:
        type_name = getattr(self._var_type, "__name__", str(self._var_type))
        try:
            value = self._var_type(x)
        except (TypeError, ValueError):
            raise ValueError(f"{x!r} is not a valid {type_name}") from None
        if self._left_op(self._min_value, value) and self._right_op(value, self._max_value):
            return value
        raise ValueError(f"{x!r} is outside the permitted values: {self._permitted_range}")


class ChoiceParameter(Parameter[ValueT]):
    """One value out of a fixed set of ``choices``; the set is appended to the description.

    Its values are typed as the choices are (``choices=["a", "b"]`` gives ``str``).
    """

    def __init__(
        self,
        *args: Any,
        choices: Iterable[ValueT] | None = None,
        var_type: Callable[[Any], Any] = str,
        **kwargs: Any,
    ) -> None:
        if choices is None:
            raise ParameterException(f"{type(self).__name__} needs choices=[...]")
        super().__init__(*args, **kwargs)
        self._var_type = var_type
        self._choices = tuple(dict.fromkeys(choices))  # declaration order, without repeats
        if isinstance(var_type, type) and not all(isinstance(choice, var_type) for choice in self._choices):
            raise AssertionError("Invalid type in choices")
        listed = ", ".join(str(choice) for choice in self._choices)
        self.description = _join_description(self.description, f"Choices: {{{listed}}}")

    def _choices_text(self) -> str:
        return "{" + ", ".join(repr(choice) for choice in self._choices) + "}"

    def _convert(self, x: Any) -> Any:
        try:
            return self._var_type(x)
        except (TypeError, ValueError):
            type_name = getattr(self._var_type, "__name__", str(self._var_type))
            raise ValueError(
                f"{x!r} is not a valid {type_name}; choices are {self._choices_text()}"
            ) from None

    def _check(self, value: Any) -> Any:
        if value in self._choices:
            return value
        raise ValueError(f"{value!r} is not one of the choices {self._choices_text()}")

    def parse(self, x: str) -> Any:
        return self.normalize(self._convert(x))

    def normalize(self, x: Any) -> Any:
        return self._check(x)


class ChoiceListParameter(ChoiceParameter[ValueT]):
    """A comma-separated list of choices, as a tuple; ``''`` is the empty tuple."""

    if TYPE_CHECKING:  # its values are tuples of choices, not single ones

        @overload  # type: ignore[override]
        def __get__(self, instance: None, owner: type | None = None) -> Self: ...

        @overload
        def __get__(self, instance: object, owner: type | None = None) -> tuple[ValueT, ...]: ...

        def __get__(self, instance: object, owner: type | None = None) -> Any: ...

    def parse(self, x: str) -> tuple[Any, ...]:
        items = x.split(",") if x else []
        return self.normalize(tuple(self._convert(item) for item in items))

    def normalize(self, x: Any) -> tuple[Any, ...]:
        if isinstance(x, str):
            return self.parse(x)
        return tuple(self._check(item) for item in x)

    def serialize(self, x: Any) -> str:
        return ",".join(str(item) for item in x)


class EnumParameter(Parameter[EnumT]):
    """A member of the ``enum`` class (a required keyword), written by its name."""

    def __init__(self, *args: Any, enum: type[EnumT] | None = None, **kwargs: Any) -> None:
        if enum is None:
            raise ParameterException(f"An enum class must be specified: {type(self).__name__}(enum=MyEnum)")
        super().__init__(*args, **kwargs)
        self._enum = enum

    def _member(self, name: str) -> Enum:
        try:
            return self._enum[name]
        except KeyError:
            expected = ", ".join(self._enum.__members__)
            enum_name = self._enum.__name__
            raise ValueError(
                f"{name!r} is not a member of {enum_name} (expected one of: {expected})"
            ) from None

    def parse(self, s: str) -> Any:
        return self._member(s)

    def serialize(self, e: Any) -> str:
        return e.name


class EnumListParameter(EnumParameter[EnumT]):
    """A comma-separated list of enum member names, as a tuple; ``''`` is the empty tuple."""

    if TYPE_CHECKING:  # its values are tuples of members, not single ones

        @overload  # type: ignore[override]
        def __get__(self, instance: None, owner: type | None = None) -> Self: ...

        @overload
        def __get__(self, instance: object, owner: type | None = None) -> tuple[EnumT, ...]: ...

        def __get__(self, instance: object, owner: type | None = None) -> Any: ...

    def parse(self, s: str) -> tuple[Any, ...]:
        return tuple(self._member(name) for name in s.split(",")) if s else ()

    def normalize(self, x: Any) -> Any:
        return tuple(x) if isinstance(x, list) else x

    def serialize(self, enum_values: Any) -> str:
        return ",".join(member.name for member in enum_values)
