"""Turning a client-side RPC call into its JSON payload, and the ``/api/_batch`` envelope.

Arguments are checked against ``luigi.rpc_methods`` when the call is made, so a bad call fails where it
was written even when the client only sends it later as part of a batch.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from luigi.rpc_methods import RpcArgumentError, RpcMethod

BATCH_URL_SUFFIX = "api/_batch"
_DEFAULT_ATTEMPTS = 3  # what Luigi's _request asks while the answer is null, unless a method says

# Calls whose answer no caller uses (the scheduler returns nothing for them), so they may be sent later,
# in order, in one ``/api/_batch`` request. Calls that steer scheduling soon after (get_work, ping,
# decrease_running_task_resources, scheduler-message responses) or whose answer is read are never held.
BUFFERABLE_METHODS = frozenset(
    {
        "add_task",
        "add_task_batcher",
        "add_worker",
        "set_task_status_message",
        "set_task_progress_percentage",
        "append_task_log",
    }
)
# Calls that never wait for the client's pipeline: while another thread's call holds it (riding out an
# outage, say), they go alone over a connection of their own, so the keep-alive ping still arrives.
NEVER_WAITS = frozenset({"ping"})


@dataclass(frozen=True)
class EncodedCall:
    """One call ready to send: the method name and its kwargs as a JSON object text."""

    method: str
    kwargs_json: str

    def describe(self) -> str:
        """A short human description for error messages, e.g. ``add_task(task_id='A(x=1)')``."""
        kwargs = json.loads(self.kwargs_json)
        key = next((k for k in ("task_id", "worker", "task_family") if k in kwargs), None)
        return f"{self.method}({key}={kwargs[key]!r})" if key else f"{self.method}()"


def encode_call(method: RpcMethod, args: Sequence[Any], kwargs: Mapping[str, Any]) -> EncodedCall:
    """Check and encode a call; RpcArgumentError (a TypeError) names the method and bad argument."""
    return EncodedCall(method.name, _dumps(method.name, call_arguments(method, args, kwargs)))


def call_arguments(method: RpcMethod, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments dict a call sends, defaults merged in as Luigi's client does; RpcArgumentError names
    a bad argument (a missing one in Luigi's words, ``<name> takes N arguments (M given)``, and ours)."""
    named = _name_arguments(method, args, kwargs)
    _check_required(method, named)
    try:
        return method.bind_to_send(named)
    except RpcArgumentError:
        # Values JSON would carry fine (a tuple for a list, say): judge them as the server will see them.
        return method.bind_to_send(_json_round_trip(method.name, named))


def request_options(method: RpcMethod) -> dict[str, Any]:
    """The keywords Luigi's generated method passes ``_request``: ``attempts`` (ping's 1) and
    ``allow_null`` (get_work's False) only where the method declares other than the defaults."""
    options: dict[str, Any] = {}
    if method.attempts != _DEFAULT_ATTEMPTS:
        options["attempts"] = method.attempts
    if not method.allow_null:
        options["allow_null"] = False
    return options


_REQUIRED: dict[str, tuple[str, ...]] = {}  # method name -> its required parameters, found once


def _check_required(method: RpcMethod, named: Mapping[str, Any]) -> None:
    required = _REQUIRED.get(method.name)
    if required is None:
        required = _REQUIRED[method.name] = tuple(p.name for p in method.parameters if p.required)
    missing = [name for name in required if name not in named]
    if not missing:
        return
    luigis = [p for p in method.parameters if not p.extension]
    given = len({p.name for p in luigis if not p.required} | set(named))
    which = f"argument {missing[0]!r}" if len(missing) == 1 else "arguments " + ", ".join(map(repr, missing))
    raise RpcArgumentError(
        f"{method.name} takes {len(luigis)} arguments ({given} given): missing required {which}"
    )


def batch_payload(calls: Sequence[EncodedCall], stop_on_error: bool = False) -> str:
    """The JSON of one ``/api/_batch`` request carrying ``calls`` in order.

    With ``stop_on_error`` the server runs no call after one it refused (those answer 424).
    """
    items = ",".join(f'{{"method":{json.dumps(c.method)},"kwargs":{c.kwargs_json}}}' for c in calls)
    stop = ',"stop_on_error":true' if stop_on_error else ""
    return f'{{"calls":[{items}]{stop}}}'


@dataclass(frozen=True)
class BatchItemError:
    """A call of a batch that the server refused or failed on."""

    call: EncodedCall
    status: int | None
    message: str

    def __str__(self) -> str:
        status = f"HTTP {self.status}: " if self.status is not None else ""
        return f"{self.call.describe()}: {status}{self.message}"


def batch_errors(calls: Sequence[EncodedCall], reply: Any) -> list[BatchItemError]:
    """The failed calls of a ``/api/_batch`` answer; ValueError when the answer is not shaped as one."""
    if not isinstance(reply, list) or len(reply) != len(calls):
        count = len(reply) if isinstance(reply, list) else type(reply).__name__
        raise ValueError(f"expected a list of {len(calls)} results, got {count}")
    errors = []
    for call, item in zip(calls, reply, strict=True):
        if not isinstance(item, dict) or not ("response" in item or "error" in item):
            raise ValueError(f"expected {{'response': ...}} or {{'error': ...}} per call, got {item!r}")
        if "error" in item:
            status = item.get("status")
            errors.append(
                BatchItemError(call, status if isinstance(status, int) else None, str(item["error"]))
            )
    return errors


def signature_of(method: RpcMethod) -> inspect.Signature:
    """The Python signature of the client method (for ``help()`` and ``inspect``)."""
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    seen_default = False
    for parameter in method.parameters:
        seen_default = seen_default or not parameter.required
        # Python forbids a required parameter after a defaulted one (add_task's ``worker``): show REQUIRED.
        if parameter.required and not seen_default:
            default = inspect.Parameter.empty
        else:
            default = parameter.default
        parameters.append(
            inspect.Parameter(parameter.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default)
        )
    if method.var_keyword is not None:
        parameters.append(inspect.Parameter(method.var_keyword, inspect.Parameter.VAR_KEYWORD))
    return inspect.Signature(parameters)


def _name_arguments(method: RpcMethod, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Positional arguments mapped to parameter names; unknown names are refused, as Python would."""
    names = method.parameter_names
    if len(args) > len(names):
        raise RpcArgumentError(
            f"{method.name}() takes {len(names)} positional arguments but {len(args)} were given"
        )
    named = dict(zip(names, args, strict=False))
    for key, value in kwargs.items():
        if key in named:
            raise RpcArgumentError(f"{method.name}() got multiple values for argument {key!r}")
        if method.var_keyword is None and not method.lenient and not method.takes(key):
            expected = ", ".join(names) or "no arguments"
            raise RpcArgumentError(
                f"{method.name}() got an unexpected argument {key!r} (it takes: {expected})"
            )
        named[key] = value
    return named


def _json_round_trip(method: str, named: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(_dumps(method, named))
    return result


def _dumps(method: str, kwargs: Mapping[str, Any]) -> str:
    try:
        return json.dumps(kwargs)
    except (TypeError, ValueError) as exc:
        name = next((k for k, v in kwargs.items() if not _is_json_encodable(v)), None)
        where = f"argument {name!r}" if name is not None else "its arguments"
        raise RpcArgumentError(f"{method}: {where} cannot be sent as JSON: {exc}") from None


def _is_json_encodable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True
