"""``GET /api/openapi.json``: the JSON API described as an OpenAPI 3.1 document, made from the RPC registry.

Every method of ``luigi.rpc_methods`` becomes the path ``/api/<method>`` as luigid serves it: read-only
methods answer GET (``?data=<json>``) and POST, state-changing ones POST only (a form field ``data``
holding JSON, or the JSON object as the body). Arguments are described from their kinds and the limits
of ``luigi.rpc_values``; each answer, inside luigid's ``{"response": ...}``, from the return annotation of
the ``Scheduler`` method that implements it. Nothing here lists methods by hand, so a method added to the
registry is described as soon as it is served.
"""

from __future__ import annotations

import inspect
import json
import math
import re
import types
import typing
from collections.abc import Mapping
from functools import cache
from typing import Any

from luigi.__version__ import VERSION
from luigi.rpc_methods import RPC_METHODS, RpcMethod, RpcParameter
from luigi.rpc_values import INT_LIMIT, MAX_DEPTH, MAX_NAME_CHARS, MAX_TEXT_CHARS
from luigi.server.dispatch import BATCH_METHOD
from luigi.server.handlers import GuardedHandler

__all__ = ["DOCUMENT_PATH", "OpenApiHandler", "build_document", "kind_schema", "served_document"]

DOCUMENT_PATH = "/api/openapi.json"
OPENAPI_VERSION = "3.1.0"
JSON = "application/json"
FORM = "application/x-www-form-urlencoded"

Schema = dict[str, Any]

_NAME_SCHEMA: Schema = {
    "type": "string",
    "maxLength": MAX_NAME_CHARS,
    "pattern": r"^[^\u0000]*$",
    "description": (
        f"A name (task id, family, worker id, resource): at most {MAX_NAME_CHARS} characters, no NUL."
    ),
}
_NAME: Schema = {"$ref": "#/components/schemas/Name"}
_INT: Schema = {"type": "integer", "format": "int64", "minimum": -INT_LIMIT, "maximum": INT_LIMIT - 1}
# A number that happens to be an integer must fit 64 bits too (a database column holds it).
_IN_INT_RANGE: Schema = {"if": {"type": "integer"}, "then": {"minimum": -INT_LIMIT, "maximum": INT_LIMIT - 1}}
_NUMBER: Schema = {"type": "number", **_IN_INT_RANGE}
# Any JSON value, held to the limits of text, keys and integers at every depth.
_FREE_SCHEMA: Schema = {
    "maxLength": MAX_TEXT_CHARS,
    **_IN_INT_RANGE,
    "items": {"$ref": "#/components/schemas/Free"},
    "propertyNames": {"maxLength": MAX_NAME_CHARS},
    "additionalProperties": {"$ref": "#/components/schemas/Free"},
    "description": (
        f"Any JSON value: nested at most {MAX_DEPTH} levels deep, text at most {MAX_TEXT_CHARS} "
        f"characters, object keys at most {MAX_NAME_CHARS}, integers within 64 bits."
    ),
}
_FREE: Schema = {"$ref": "#/components/schemas/Free"}

# The JSON Schema of each kind of ``luigi.rpc_values``. What JSON Schema cannot say (valid UTF-8 text,
# the nesting depth of free-form values) is said in the description; the server checks it all.
_KIND_SCHEMAS: dict[str, Schema] = {
    "any": _FREE,
    "str": {"type": "string", "maxLength": MAX_TEXT_CHARS},
    "name": _NAME,
    "bool": {"type": "boolean"},
    "int": _INT,
    "number": {**_NUMBER, "description": "A finite number (integers within 64 bits)."},
    "limit": {
        **_NUMBER,
        "description": (
            "A number, or the bare token Infinity (as Python's json module writes float('inf')) for no "
            "limit; NaN and -Infinity are refused."
        ),
    },
    "dict": {
        "type": "object",
        "propertyNames": {"maxLength": MAX_NAME_CHARS},
        "additionalProperties": _FREE,
        "description": f"A JSON object, nested at most {MAX_DEPTH} levels deep.",
    },
    "list[name]": {"type": "array", "items": _NAME},
    "dict[number]": {
        "type": "object",
        "propertyNames": {"maxLength": MAX_NAME_CHARS},
        "additionalProperties": _NUMBER,
        "description": "Names mapped to finite numbers.",
    },
    "names": {
        "anyOf": [_NAME, {"type": "array", "items": _NAME}],
        "description": "One name, or a list of them.",
    },
    "log_tail": {
        "type": "object",
        "properties": {"run": _NAME, "offset": {**_INT, "minimum": 0}, "chunk": {"type": "string"}},
        "required": ["run", "offset", "chunk"],
        "additionalProperties": False,
        "description": "A run's last log chunk: its run id, where it starts in the log, and its text.",
    },
}

_ERROR: Schema = {
    "type": "object",
    "properties": {"error": {"type": "string", "description": "What is wrong, and how to put it right."}},
    "required": ["error"],
    "additionalProperties": False,
}

# The error answers an operation may give, by when they apply.
_ERRORS: dict[str, tuple[str, str]] = {
    "400": ("BadRequest", "The arguments (or the 'data' JSON) do not fit the method; the error names which."),
    "401": ("Unauthorized", "The bearer token is missing or wrong ([scheduler] auth_token)."),
    "403": ("Forbidden", "The Host is not one luigid answers to, or a state change came from another site."),
    "413": ("TooLarge", "The request body is larger than [scheduler] max_body_size."),
    "500": ("SchedulerError", "The scheduler failed on the call (logged with its traceback)."),
    "503": ("NotSaved", "The state store cannot save changes now (doc/guarantees.md); retry later."),
}


def kind_schema(kind: str) -> Schema:
    """The JSON Schema of an argument of ``kind`` (a ``luigi.rpc_values`` kind; a trailing ``?``: or null)."""
    base = kind.removesuffix("?")
    if base not in _KIND_SCHEMAS:
        raise ValueError(f"No JSON Schema for the RPC kind {kind!r}: add one to luigi/server/openapi.py")
    schema = dict(_KIND_SCHEMAS[base])
    if not kind.endswith("?") or base == "any":
        return schema
    if isinstance(schema.get("type"), str):
        return {**schema, "type": [schema["type"], "null"]}
    if "anyOf" in schema:
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    return {"anyOf": [schema, {"type": "null"}]}


def _parameter_schema(parameter: RpcParameter) -> Schema:
    schema = kind_schema(parameter.kind)
    notes = [schema["description"]] if "description" in schema else []
    if not parameter.required:
        if isinstance(parameter.default, float) and math.isinf(parameter.default):
            notes.append("Default: Infinity (no limit).")
        else:
            schema["default"] = parameter.default
    if parameter.extension:
        notes.append("Ours, beyond Luigi's RPC: our client sends it only when it is given.")
    if notes:
        schema["description"] = " ".join(notes)
    return schema


def arguments_schema(method: RpcMethod) -> Schema:
    """The JSON object of a call's keyword arguments (what ``data`` holds)."""
    schema: Schema = {
        "type": "object",
        "properties": {p.name: _parameter_schema(p) for p in method.parameters},
    }
    required = [p.name for p in method.parameters if p.required]
    if required:
        schema["required"] = required
    if method.var_keyword is not None:
        schema["propertyNames"] = _NAME
        schema["additionalProperties"] = kind_schema(method.var_keyword_kind)
        schema["description"] = f"Any further arguments are {method.var_keyword} (names to values)."
    elif method.lenient:
        schema["description"] = (
            "Arguments it does not know are ignored (newer or older clients keep working)."
        )
    else:
        schema["additionalProperties"] = False
    return schema


def answer_schema(hint: Any, where: str) -> Schema:
    """The JSON Schema of a value of the Python type ``hint`` (a return annotation) once sent as JSON."""
    if hint is Any:
        return {}
    simple = {type(None): "null", bool: "boolean", int: "integer", float: "number", str: "string"}
    if hint in simple:
        return {"type": simple[hint]}
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [answer_schema(arg, where) for arg in args]}
    if origin is dict:
        value = answer_schema(args[1], where) if args else {}
        return {"type": "object", **({"additionalProperties": value} if value else {})}
    if origin is list:
        return {"type": "array", **({"items": answer_schema(args[0], where)} if args else {})}
    raise TypeError(f"{where} returns {hint!r}, which luigi/server/openapi.py cannot describe as JSON")


def _envelope(answer: Schema) -> Schema:
    return {
        "type": "object",
        "properties": {"response": answer},
        "required": ["response"],
        "additionalProperties": False,
    }


def _markdown(docstring: str) -> str:
    """A docstring's reStructuredText literals (````x````) as Markdown's (`` `x` ``)."""
    return re.sub(r"``(.+?)``", r"`\1`", docstring)


def _ok(description: str, answer: Schema) -> dict[str, Any]:
    return {"description": description, "content": {JSON: {"schema": _envelope(answer)}}}


def _responses(ok: dict[str, Any], errors: list[str], auth: bool) -> dict[str, Any]:
    """The 200 answer and the error answers ``errors`` (plus 401 when a token is required)."""
    statuses = sorted([*errors, *(["401"] if auth else [])])
    refs = {status: {"$ref": f"#/components/responses/{_ERRORS[status][0]}"} for status in statuses}
    return {"200": ok, **refs}


def _request_body(arguments: Schema, required: bool) -> dict[str, Any]:
    """A POST body: the form field ``data`` holding the JSON object (Luigi's), or the object itself."""
    form: Schema = {"type": "object", "properties": {"data": arguments}}
    if required:
        form["required"] = ["data"]
    return {
        "required": required,
        "content": {
            FORM: {"schema": form, "encoding": {"data": {"contentType": JSON}}},
            JSON: {"schema": arguments},
        },
    }


def _arguments_name(method: RpcMethod) -> str:
    return f"{method.name}_arguments"


def _operations(method: RpcMethod, implementation: type, auth: bool) -> dict[str, Any]:
    """The path item of ``/api/<method>``: GET and POST for a read-only method, POST alone otherwise."""
    implemented = getattr(implementation, method.name)
    where = f"{implementation.__name__}.{method.name}"
    ok = _ok(
        "The method's answer.", answer_schema(typing.get_type_hints(implemented).get("return", Any), where)
    )
    doc = _markdown(inspect.getdoc(implemented) or method.name)
    if method.mutating:
        doc += "\n\nIt changes scheduler state, so it is served to POST only (GET answers 405)."
    described = {"summary": " ".join(doc.split("\n\n")[0].split()), "description": doc}
    arguments = {"$ref": f"#/components/schemas/{_arguments_name(method)}"}
    needs_arguments = any(p.required for p in method.parameters)
    post: dict[str, Any] = {
        "operationId": method.name if method.mutating else f"{method.name}_post",
        "tags": ["changes" if method.mutating else "reads"],
        **described,
        "requestBody": _request_body(arguments, needs_arguments),
        "responses": _responses(
            ok, ["400", "403", "413", "500", *(["503"] if method.mutating else [])], auth
        ),
    }
    if method.mutating:
        return {"post": post}
    data = {
        "name": "data",
        "in": "query",
        "required": needs_arguments,
        "description": "The keyword arguments as a JSON object (absent: none).",
        "content": {JSON: {"schema": arguments}},
    }
    get = {
        "operationId": method.name,
        "tags": ["reads"],
        **described,
        "parameters": [data],
        "responses": _responses(ok, ["400", "403", "500"], auth),
    }
    return {"get": get, "post": post}


def _batch_operations(methods: Mapping[str, RpcMethod], auth: bool) -> dict[str, Any]:
    """``POST /api/_batch``: several calls in one request, answered in order."""
    call = {
        "type": "object",
        "properties": {"method": {"enum": sorted(methods)}, "kwargs": {"type": "object"}},
        "required": ["method"],
        "additionalProperties": False,
    }
    data = {
        "type": "object",
        "properties": {
            "calls": {"type": "array", "items": call},
            "stop_on_error": {"type": "boolean", "default": False},
        },
        "required": ["calls"],
        "additionalProperties": False,
    }
    refused = {
        "type": "object",
        "properties": {"error": {"type": "string"}, "status": {"type": "integer"}},
        "required": ["error", "status"],
        "additionalProperties": False,
    }
    answers = {"type": "array", "items": {"oneOf": [_envelope({}), refused]}}
    post = {
        "operationId": BATCH_METHOD,
        "tags": ["batch"],
        "summary": "Several calls in one request, run in order and saved once.",
        "description": (
            'Each entry of the answer is that call\'s `{"response": ...}`, or `{"error", "status"}` '
            "for a refused call; with `stop_on_error`, calls after a refused one answer status 424."
        ),
        "requestBody": _request_body(data, True),
        "responses": _responses(
            _ok("Each call's answer, in order.", answers), ["400", "403", "413", "503"], auth
        ),
    }
    return {"post": post}


def _document_operation(auth: bool) -> dict[str, Any]:
    document = {"description": "This document.", "content": {JSON: {"schema": {"type": "object"}}}}
    return {
        "get": {
            "operationId": "openapi",
            "tags": ["meta"],
            "summary": "The OpenAPI document of this API.",
            "responses": _responses(document, ["403"], auth),
        }
    }


def _components(methods: Mapping[str, RpcMethod], auth: bool) -> dict[str, Any]:
    responses = {
        name: {"description": text, "content": {JSON: {"schema": {"$ref": "#/components/schemas/Error"}}}}
        for status, (name, text) in _ERRORS.items()
        if status != "401" or auth
    }
    schemas = {"Error": _ERROR, "Name": _NAME_SCHEMA, "Free": _FREE_SCHEMA}
    schemas.update((_arguments_name(method), arguments_schema(method)) for method in methods.values())
    components: dict[str, Any] = {"schemas": schemas, "responses": responses}
    if auth:
        components["securitySchemes"] = {"bearerAuth": {"type": "http", "scheme": "bearer"}}
    return components


_DESCRIPTION = (
    "The JSON API of luigid, Luigi's central scheduler. Each RPC method is `/api/<method>`; its keyword "
    "arguments are a JSON object in the `data` field (the query of a GET, or a form body), or the body "
    'itself when sent as `application/json`. Every answer is `{"response": ...}`, every error '
    '`{"error": "..."}`. Methods that change state answer POST only. See doc/api.md.'
)


def build_document(methods: Mapping[str, RpcMethod], implementation: type, auth: bool) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``methods`` as luigid serves them, answers typed by ``implementation``
    (the class whose methods run the calls); ``auth``: whether a bearer token is required."""
    paths: dict[str, Any] = {
        f"/api/{name}": _operations(method, implementation, auth) for name, method in methods.items()
    }
    paths[f"/api/{BATCH_METHOD}"] = _batch_operations(methods, auth)
    paths[DOCUMENT_PATH] = _document_operation(auth)
    document: dict[str, Any] = {
        "openapi": OPENAPI_VERSION,
        "info": {"title": "luigid", "version": VERSION, "description": _DESCRIPTION},
        "paths": paths,
        "components": _components(methods, auth),
    }
    if auth:
        document["security"] = [{"bearerAuth": []}]
    return document


@cache
def served_document(auth: bool) -> str:
    """The JSON text luigid serves: the registry's document, made once per process (the registry is fixed)."""
    from luigi.scheduler import Scheduler  # the engine loads on first use; luigid has it loaded by now

    return json.dumps(build_document(RPC_METHODS, Scheduler, auth))


class OpenApiHandler(GuardedHandler):
    """``GET /api/openapi.json``, behind the same bearer token as the rest of the API."""

    def get(self) -> None:
        self.write_json(served_document(self.server_settings.auth_token is not None))
