"""Optional variants: the same types, plus None (the default), written as the empty string."""

from __future__ import annotations

import datetime
import inspect
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from luigi.freezing import FrozenOrderedDict
from luigi.parameter.base import OptionalParameterTypeWarning, Parameter, ValueT, warn
from luigi.parameter.dates import DateParameter
from luigi.parameter.misc import PathParameter
from luigi.parameter.scalars import (
    BoolParameter,
    ChoiceParameter,
    FloatParameter,
    IntParameter,
    NumericalParameter,
    StrParameter,
)
from luigi.parameter.structured import DictParameter, ListParameter, TupleParameter


class OptionalParameterMixin(Parameter[ValueT]):
    """Makes a parameter accept None: ``''`` parses to None, None serializes to ``''``, None is the default.

    Put it first among the bases, typed with the optional value
    (``class OptionalX(OptionalParameterMixin[X | None], XParameter)``), and set ``expected_type``: other
    value types trigger an ``OptionalParameterTypeWarning``.
    """

    expected_type: type | tuple[type, ...] = type(None)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if not _default_given(super().__init__, args, kwargs):
            kwargs["default"] = None
        super().__init__(*args, **kwargs)

    def serialize(self, x: Any) -> str:
        if x is None:
            return ""
        return super().serialize(x)

    def parse(self, x: Any) -> Any:
        if not isinstance(x, str):
            return x
        if not x:
            return None
        return super().parse(x)

    def normalize(self, x: Any) -> Any:
        if x is None:
            return None
        return super().normalize(x)

    def next_in_enumeration(self, value: Any) -> Any:
        """None: optional values do not form ranges (the summary lists them one by one)."""
        return None

    def _warn_on_wrong_param_type(self, param_name: str, param_value: Any) -> None:
        if param_value is None or isinstance(param_value, self.expected_type):
            return
        owner = type(self).__name__
        if isinstance(self.expected_type, tuple):
            names = ", ".join(f'"{kind.__name__}"' for kind in self.expected_type)
            expected = f"of any type in [{names}]"
        else:
            expected = f'of type "{self.expected_type.__name__}"'
        warn(
            f'{owner} "{param_name}" with value "{param_value}" is not {expected} or None.',
            OptionalParameterTypeWarning,
        )


def _default_given(init: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a constructor call passes ``default``, by keyword or positionally.

    Most parameter types take ``default`` as their first positional argument, either directly (Parameter)
    or by forwarding ``*args`` to Parameter; the date types take ``interval`` first instead.
    """
    if "default" in kwargs:
        return True
    params = inspect.signature(init).parameters
    if "default" in params:
        try:
            return "default" in inspect.signature(init).bind_partial(*args, **kwargs).arguments
        except TypeError:
            return True  # a bad call: add nothing and let the real constructor report it
    first = next(iter(params.values()), None)
    return bool(args) and first is not None and first.kind is inspect.Parameter.VAR_POSITIONAL


class OptionalParameter(OptionalParameterMixin[str | None], Parameter[str | None]):
    """A string that may be None."""

    expected_type = str


class OptionalStrParameter(OptionalParameterMixin[str | None], StrParameter):
    """A string that may be None."""

    expected_type = str


class OptionalIntParameter(OptionalParameterMixin[int | None], IntParameter):
    """An integer that may be None."""

    expected_type = int


class OptionalFloatParameter(OptionalParameterMixin[float | None], FloatParameter):
    """A float that may be None."""

    expected_type = float


class OptionalBoolParameter(OptionalParameterMixin[bool | None], BoolParameter):
    """A boolean that may be None (its default)."""

    expected_type = bool


class OptionalPathParameter(OptionalParameterMixin[Path | None], PathParameter):
    """A path that may be None."""

    expected_type = (str, Path)


class OptionalDateParameter(OptionalParameterMixin[datetime.date | None], DateParameter):
    """A date that may be None."""

    expected_type = datetime.date


class OptionalDictParameter(OptionalParameterMixin[Mapping[Any, Any] | None], DictParameter):
    """A dict that may be None."""

    expected_type = FrozenOrderedDict


class OptionalListParameter(OptionalParameterMixin[tuple[Any, ...] | None], ListParameter):
    """A list (held as a tuple) that may be None."""

    expected_type = tuple


class OptionalTupleParameter(OptionalParameterMixin[tuple[Any, ...] | None], TupleParameter):
    """A tuple that may be None."""

    expected_type = tuple


class OptionalChoiceParameter(OptionalParameterMixin[ValueT | None], ChoiceParameter[ValueT]):
    """One of the choices, or None."""

    def __init__(self, *args: Any, choices: Iterable[ValueT] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, choices=choices, **kwargs)
        self.expected_type = self._var_type  # type: ignore[assignment]


class OptionalNumericalParameter(OptionalParameterMixin[ValueT | None], NumericalParameter[ValueT]):
    """A number in the permitted range, or None."""

    def __init__(self, *args: Any, var_type: Callable[[Any], ValueT] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, var_type=var_type, **kwargs)
        self.expected_type = self._var_type  # type: ignore[assignment]
