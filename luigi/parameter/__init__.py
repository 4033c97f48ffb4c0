"""Task parameters: ``luigi.parameter`` keeps Luigi's import path; the types live in sibling modules."""

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

__all__ = [
    "DuplicateParameterException",
    "MissingParameterException",
    "OptionalParameterTypeWarning",
    "Parameter",
    "ParameterException",
    "ParameterVisibility",
    "UnconsumedParameterWarning",
    "UnknownParameterException",
    "_no_value",
]
