"""JSON-shaped parameters: dicts, lists and tuples, frozen so that tasks holding them stay hashable."""

from __future__ import annotations

import ast
import importlib
import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from luigi.freezing import FrozenOrderedDict, recursively_freeze, recursively_unfreeze
from luigi.parameter.base import Parameter, namespace, warn

JsonT = TypeVar("JsonT", covariant=True)


class _DictParamEncoder(json.JSONEncoder):
    """JSON encoder that writes frozen dicts as plain objects (tuples already come out as arrays)."""

    def default(self, o: Any) -> Any:
        if isinstance(o, FrozenOrderedDict):
            return o.get_wrapped()
        return super().default(o)


_JSONSCHEMA_MISSING = (
    "The 'jsonschema' package is not installed so the parameter can not be validated even though a schema "
    "is given."
)


def _schema_validator(schema: Any) -> Callable[[Any], Any] | None:
    """A function checking a value against ``schema``, or None when there is nothing to check with.

    ``schema`` is any object with a ``validate(value)`` method (such as a jsonschema validator instance), or
    a JSON schema, checked with the jsonschema package while ``luigi.parameter._JSONSCHEMA_ENABLED`` (a
    hook users' tests patch) is true; otherwise the schema is ignored, with a warning.
    """
    if schema is None:
        return None
    enabled = namespace()._JSONSCHEMA_ENABLED
    if not enabled:
        warn(_JSONSCHEMA_MISSING)
    if hasattr(schema, "validate"):
        return schema.validate
    if not enabled:
        return None
    jsonschema = importlib.import_module("jsonschema")
    return lambda value: jsonschema.validate(instance=value, schema=schema)


def _load_json(text: str, expected: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=FrozenOrderedDict)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"{text!r} is not valid JSON ({exc}); expected {expected}") from None


class _JsonParameter(Parameter[JsonT]):
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


class DictParameter(_JsonParameter[Mapping[Any, Any]]):
    """A JSON object: ``parse`` gives a ``FrozenOrderedDict`` (JSON arrays inside stay lists until
    ``normalize`` freezes them); optionally checked against a JSON ``schema``."""

    _EXPECTED = 'a JSON object such as {"key": "value"}'

    def parse(self, source: str) -> Any:
        if not isinstance(source, str):
            return source
        value = _load_json(source, self._EXPECTED)
        if not isinstance(value, Mapping):
            raise ValueError(f"{source!r} is not a JSON object (expected {self._EXPECTED})")
        return value


class ListParameter(_JsonParameter[tuple[Any, ...]]):
    """A JSON array: ``parse`` gives a list (``null`` gives None), ``normalize`` freezes it into tuples.

    Like ``list()``, a JSON string parses into its characters (``'"ab"'`` gives ``['a', 'b']``).
    """

    _EXPECTED = "a JSON array such as [1, 2, 3]"

    def parse(self, x: str) -> Any:
        if not isinstance(x, str):
            return x
        value = _load_json(x, self._EXPECTED)
        if value is None:
            return None
        if not isinstance(value, (list, str, Mapping)):
            raise ValueError(f"{x!r} is not a JSON array (expected {self._EXPECTED})")
        return list(value)


class TupleParameter(ListParameter):
    """A tuple, written as a JSON array (``[[1, 2], [3, 4]]``) or a Python literal (``((1, 2), (3, 4))``).

    Text that is not a JSON array is read with ``ast.literal_eval``, whose errors (SyntaxError, ValueError)
    propagate; a literal that is a string, or anything else but a tuple or list, is a ValueError.
    """

    _EXPECTED = "a JSON array such as [[1, 2], [3, 4]] or a Python tuple such as ((1, 2), (3, 4))"

    def parse(self, x: str) -> Any:
        if not isinstance(x, str):
            return x
        try:
            value = json.loads(x, object_pairs_hook=FrozenOrderedDict)
        except (ValueError, RecursionError):
            value = None
        if value is None and x.strip() == "null":
            return None  # how None serializes, e.g. a default of None passed on to a dynamic dependency
        if not isinstance(value, list):
            value = ast.literal_eval(x)
            if isinstance(value, str):
                raise ValueError("Parsed result cannot be a string")
            if not isinstance(value, (list, tuple)):
                raise ValueError(f"{x!r} is not a valid tuple (expected {self._EXPECTED})")
        return recursively_freeze(value)
