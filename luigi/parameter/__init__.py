"""Task parameters: ``luigi.parameter`` keeps Luigi's import path; the types live in sibling modules.

Two names here are hooks that users' tests patch, read by the parameter code at call time: ``warnings``
(every parameter warning goes through ``luigi.parameter.warnings.warn``) and ``_JSONSCHEMA_ENABLED``
(whether Dict/ListParameter schemas are checked with the jsonschema package).
"""

import importlib.util
import warnings  # noqa: F401  (a hook: the parameter modules warn through luigi.parameter.warnings)

from luigi.parameter.base import (
    DuplicateParameterException,
    MissingParameterException,
    OptionalParameterTypeWarning,
    Parameter,
    ParameterException,
    ParameterVisibility,
    UnconsumedParameterWarning,
    UnknownParameterException,
    _no_value,
)
from luigi.parameter.dates import (
    DateHourParameter,
    DateIntervalParameter,
    DateMinuteParameter,
    DateParameter,
    DateSecondParameter,
    MonthParameter,
    TimeDeltaParameter,
    YearParameter,
)
from luigi.parameter.misc import PathParameter, TaskParameter
from luigi.parameter.optional import (
    OptionalBoolParameter,
    OptionalChoiceParameter,
    OptionalDateParameter,
    OptionalDictParameter,
    OptionalFloatParameter,
    OptionalIntParameter,
    OptionalListParameter,
    OptionalNumericalParameter,
    OptionalParameter,
    OptionalParameterMixin,
    OptionalPathParameter,
    OptionalStrParameter,
    OptionalTupleParameter,
)
from luigi.parameter.scalars import (
    BoolParameter,
    ChoiceListParameter,
    ChoiceParameter,
    EnumListParameter,
    EnumParameter,
    FloatParameter,
    IntParameter,
    NumericalParameter,
    StrParameter,
)
from luigi.parameter.structured import DictParameter, ListParameter, TupleParameter

_JSONSCHEMA_ENABLED = importlib.util.find_spec("jsonschema") is not None

__all__ = [
    "BoolParameter",
    "ChoiceListParameter",
    "ChoiceParameter",
    "DateHourParameter",
    "DateIntervalParameter",
    "DateMinuteParameter",
    "DateParameter",
    "DateSecondParameter",
    "DictParameter",
    "DuplicateParameterException",
    "EnumListParameter",
    "EnumParameter",
    "FloatParameter",
    "IntParameter",
    "ListParameter",
    "MissingParameterException",
    "MonthParameter",
    "NumericalParameter",
    "OptionalBoolParameter",
    "OptionalChoiceParameter",
    "OptionalDateParameter",
    "OptionalDictParameter",
    "OptionalFloatParameter",
    "OptionalIntParameter",
    "OptionalListParameter",
    "OptionalNumericalParameter",
    "OptionalParameter",
    "OptionalParameterMixin",
    "OptionalParameterTypeWarning",
    "OptionalPathParameter",
    "OptionalStrParameter",
    "OptionalTupleParameter",
    "Parameter",
    "ParameterException",
    "ParameterVisibility",
    "PathParameter",
    "StrParameter",
    "TaskParameter",
    "TimeDeltaParameter",
    "TupleParameter",
    "UnconsumedParameterWarning",
    "UnknownParameterException",
    "YearParameter",
    "_no_value",
]
