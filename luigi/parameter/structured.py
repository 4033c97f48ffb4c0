"""JSON-shaped parameters: dicts, lists and tuples, frozen so that tasks holding them stay hashable."""

from __future__ import annotations

import ast
import importlib
import json
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from luigi.freezing import FrozenOrderedDict, recursively_freeze, recursively_unfreeze
from luigi.parameter.base import Parameter


class _DictParamEncoder(json.JSONEncoder):
    """JSON encoder that writes frozen dicts as plain objects (tuples already come out as arrays)."""

    def default(self, o: Any) -> Any:
        if isinstance(o, FrozenOrderedDict):
            return o.get_wrapped()
        return super().default(o)


def _schema_validator(schema: Any) -> Callable[[Any], Any] | None:
    """A function checking a value against ``schema``, or None when there is nothing to check with.

    ``schema`` is a JSON schema (checked with the jsonschema package, if installed) or any object with a
    ``validate(value)`` method, such as a jsonschema validator instance.
    """
    if schema is None:
        return None
    if hasattr(schema, "validate"):
        return schema.validate
    try:
        jsonschema = importlib.import_module("jsonschema")
    except ImportError:
        warnings.warn(
            "The 'jsonschema' package is not installed so the parameter can not be validated "
            "even though a schema is given.",
            stacklevel=3,
        )
        return None
    return lambda value: jsonschema.validate(instance=value, schema=schema)


def _load_json(text: str, expected: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=FrozenOrderedDict)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"{text!r} is not valid JSON ({exc}); expected {expected}") from None


class _JsonParameter(Parameter):
    """Shared schema checking, freezing and JSON serialization for dict and list parameters."""

    def __init__(self, *args: Any, schema: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.schema = schema
        self._validate = _schema_validator(schema)

    def normalize(self, value: Any) -> Any:
        """Check the value against the schema (if any), then freeze it recursively."""
        if self._validate is not None:
            self._validate(recursively_unfreeze(value))
        return recursively_freeze(value)

    def serialize(self, x: Any) -> str:
        return json.dumps(x, cls=_DictParamEncoder)


class DictParameter(_JsonParameter):
    """A JSON object, held as a ``FrozenOrderedDict``; optionally checked against a JSON ``schema``."""

    _EXPECTED = 'a JSON object such as {"key": "value"}'

    def parse(self, source: str) -> Any:
        if not isinstance(source, str):
            return source
        value = _load_json(source, self._EXPECTED)
        if not isinstance(value, Mapping):
            raise ValueError(f"{source!r} is not a JSON object (expected {self._EXPECTED})")
        return recursively_freeze(value)


class ListParameter(_JsonParameter):
    """A JSON array, held as a tuple (nested arrays and objects frozen too); optionally schema-checked."""

    _EXPECTED = "a JSON array such as [1, 2, 3]"

    def parse(self, x: str) -> Any:
        if not isinstance(x, str):
            return x
        value = _load_json(x, self._EXPECTED)
        if not isinstance(value, list):
            raise ValueError(f"{x!r} is not a JSON array (expected {self._EXPECTED})")
        return recursively_freeze(value)


class TupleParameter(ListParameter):
    """A tuple, written as a JSON array (``[[1, 2], [3, 4]]``) or a Python literal (``((1, 2), (3, 4))``)."""

    _EXPECTED = "a JSON array such as [[1, 2], [3, 4]] or a Python tuple such as ((1, 2), (3, 4))"

    def parse(self, x: str) -> Any:
        if not isinstance(x, str):
            return x
        try:
            value = json.loads(x, object_pairs_hook=FrozenOrderedDict)
        except (ValueError, RecursionError):
            value = None
        if not isinstance(value, list):
            value = self._literal_eval(x)
        return recursively_freeze(value)

    def _literal_eval(self, x: str) -> list[Any] | tuple[Any, ...]:
        try:
            value = ast.literal_eval(x)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            value = None
        if isinstance(value, (list, tuple)):
            return value
        raise ValueError(f"{x!r} is not a valid tuple (expected {self._EXPECTED})")
