"""The RPC surface of the central scheduler, declared once (LUIGI_COMPAT f.2, plus the visualiser's views).

The in-process ``Scheduler``, the tornado server and the HTTP client all follow this registry: each
method's parameters (names, defaults, expected JSON types), whether it changes scheduler state, and
hints for the client (``attempts``, ``allow_null``). ``validate_call`` checks a kwargs dict received
from the network and names the method and argument when something is wrong.

"Read-only" methods do not change state on the caller's behalf; the listing and graph queries may
still run due housekeeping (``prune``) first, as Luigi's do.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType
from typing import Any

# The ``Upgrade`` token with which our own client asks our own server to switch a connection to its lean
# RPC channel (``luigi.server.channel``); the requests stay HTTP/1.1 ``POST /api/<method>`` with JSON bodies.
CHANNEL_UPGRADE = "luigi-rpc"


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


class RpcArgumentError(TypeError, ValueError):
    """A call's arguments do not match the declared signature (the server answers 400)."""


class UnknownRpcMethodError(LookupError):
    """No RPC method has this name (the server answers 404)."""


@dataclass(frozen=True)
class RpcParameter:
    """One keyword argument: its JSON type (see ``_TYPE_CHECKS``; ``?`` allows null) and default.

    An ``extension`` is ours alone: our client leaves it out of a call unless it was given, so that the
    calls it sends a Luigi server carry only Luigi's arguments.
    """

    name: str
    kind: str = "any"
    default: Any = REQUIRED
    extension: bool = False

    @property
    def required(self) -> bool:
        """Whether callers must pass this argument."""
        return self.default is REQUIRED


@dataclass(frozen=True)
class RpcMethod:
    """One RPC method: its parameters, whether it mutates state, and HTTP client hints."""

    name: str
    parameters: tuple[RpcParameter, ...]
    mutating: bool
    attempts: int = 3  # re-requests while the answer is null, when ``allow_null`` is False
    allow_null: bool = True
    var_keyword: str | None = None  # a ``**name`` catch-all: extra arguments of ``var_keyword_kind``
    var_keyword_kind: str = "any"
    lenient: bool = False  # unknown arguments (from older or newer clients) are dropped, not refused

    @cached_property
    def parameter_names(self) -> tuple[str, ...]:
        """The named parameters, in declaration order."""
        return tuple(p.name for p in self.parameters)

    @cached_property
    def _known(self) -> dict[str, RpcParameter]:
        return {p.name: p for p in self.parameters}

    def takes(self, name: str) -> bool:
        """Whether ``name`` is one of the named parameters."""
        return name in self._known

    @cached_property
    def _defaults(self) -> dict[str, Any]:
        return {p.name: p.default for p in self.parameters if not p.required}

    @cached_property
    def _required(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parameters if p.required)

    @cached_property
    def _sent_defaults(self) -> dict[str, Any]:
        return {p.name: p.default for p in self.parameters if not p.required and not p.extension}

    def bind(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The full argument dict (defaults filled in), or RpcArgumentError naming the problem."""
        return {**self._defaults, **self.check(kwargs)}

    def bind_to_send(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments a client sends: as ``bind``, but extensions only when given."""
        return {**self._sent_defaults, **self.check(kwargs)}

    @cached_property
    def _kinds(self) -> dict[str, tuple[Container[type], str]]:
        """Each parameter's kind, and the exact types that pass it without a closer look."""
        return {p.name: (_SURE_TYPES.get(p.kind, frozenset()), p.kind) for p in self.parameters}

    def check(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments this method takes from ``kwargs`` (unknown ones dropped when ``lenient``), with
        their types checked; RpcArgumentError names the first problem. Defaults are not filled in."""
        if not isinstance(kwargs, Mapping):
            raise RpcArgumentError(f"{self.name}: arguments must be a JSON object, got {kwargs!r}")
        kinds = self._kinds
        dropped: list[str] = []
        for name, value in kwargs.items():
            known = kinds.get(name)
            if known is None:
                if self.var_keyword is not None:
                    _check_type(self.name, name, self.var_keyword_kind, value)
                elif self.lenient:
                    dropped.append(name)
                else:
                    takes = ", ".join(self.parameter_names) or "no arguments"
                    raise RpcArgumentError(f"{self.name}: unexpected argument {name!r} (it takes: {takes})")
            elif type(value) not in known[0]:  # the common case (a JSON value of the kind): one lookup
                _check_type(self.name, name, known[1], value)
        for name in self._required:
            if name not in kwargs:
                raise RpcArgumentError(f"{self.name}: missing required argument {name!r}")
        checked = dict(kwargs)
        for name in dropped:
            del checked[name]
        return checked


def _param(name: str, kind: str = "any", default: Any = REQUIRED, extension: bool = False) -> RpcParameter:
    return RpcParameter(name, kind, default, extension)


_TASK_ID = _param("task_id", "str")
_WORKER = _param("worker", "str")
_INF = float("inf")

_METHODS: tuple[RpcMethod, ...] = (
    RpcMethod(
        "add_task",
        (
            _TASK_ID,
            _param("status", "str", "PENDING"),
            _param("runnable", "bool?", True),
            _param("deps", "list[str]?", None),
            _param("new_deps", "list[str]?", None),
            _param("expl", "any", None),
            _param("resources", "dict[number]?", None),
            _param("priority", "number", 0),
            _param("family", "str", ""),
            _param("module", "str?", None),
            _param("params", "dict?", None),
            _param("param_visibilities", "dict?", None),
            _param("accepts_messages", "bool?", False),
            _param("assistant", "bool", False),
            _param("tracking_url", "str?", None),
            _WORKER,
            _param("batchable", "bool?", None),
            _param("batch_id", "str?", None),
            _param("retry_policy_dict", "dict?", None),
            _param("owners", "any", None),
        ),
        mutating=True,
        lenient=True,
    ),
    RpcMethod(
        "add_task_batcher",
        (
            _WORKER,
            _param("task_family", "str"),
            _param("batched_args", "list[str]"),
            _param("max_batch_size", "number", _INF),
        ),
        mutating=True,
    ),
    RpcMethod("add_worker", (_WORKER, _param("info", "any")), mutating=True, lenient=True),
    RpcMethod("disable_worker", (_WORKER,), mutating=True),
    RpcMethod("set_worker_processes", (_WORKER, _param("n", "int")), mutating=True),
    RpcMethod("ping", (_WORKER,), mutating=True, attempts=1, lenient=True),
    RpcMethod(
        "get_work",
        (
            _WORKER,
            _param("host", "str?", None),
            _param("assistant", "bool", False),
            _param("current_tasks", "list[str]?", None),
            # Our worker's running tasks it expects to finish DONE: a task waiting only for them may be
            # granted ahead of them (see ``luigi.scheduler.grant.choose_ahead_of``).
            _param("assume_done", "list[str]?", None, extension=True),
            _param("max_tasks", "int", 1, extension=True),  # our worker's: several single tasks at once
        ),
        mutating=True,
        allow_null=False,
        lenient=True,
    ),
    RpcMethod("count_pending", (_WORKER,), mutating=False),
    RpcMethod("graph", (), mutating=False),
    RpcMethod("dep_graph", (_TASK_ID, _param("include_done", "bool", True)), mutating=False),
    RpcMethod("inverse_dep_graph", (_TASK_ID, _param("include_done", "bool", True)), mutating=False),
    RpcMethod(
        "task_list",
        (
            _param("status", "str", ""),
            _param("upstream_status", "str", ""),
            _param("limit", "bool", True),
            _param("search", "str?", None),
            _param("max_shown_tasks", "int?", None),
        ),
        mutating=False,
        lenient=True,
    ),
    RpcMethod("worker_list", (_param("include_running", "bool", True),), mutating=False),
    RpcMethod("resource_list", (), mutating=False),
    RpcMethod("task_search", (_param("task_str", "str"),), mutating=False, lenient=True),
    RpcMethod("fetch_error", (_TASK_ID,), mutating=False, lenient=True),
    # The visualiser's views (ours, not Luigi's; Luigi clients never call them): answers sized by what
    # they return, so open pages do not slow the workers down. See luigi/scheduler/census.py.
    RpcMethod("task_counts", (), mutating=False),
    RpcMethod(
        "task_page",
        (
            _param("status", "str", ""),
            _param("upstream_status", "str", ""),
            _param("family", "str", ""),
            _param("search", "str?", ""),
            _param("sort_by", "str", ""),
            _param("sort_desc", "bool", False),
            _param("offset", "int", 0),
            _param("page_size", "int", 50),
            _param("max_shown_tasks", "int?", None),
        ),
        mutating=False,
    ),
    RpcMethod("task_detail", (_TASK_ID, _param("max_neighbours", "int", 100)), mutating=False),
    RpcMethod(
        "graph_view",
        (
            _TASK_ID,
            _param("inverse", "bool", False),
            _param("include_done", "bool", True),
            _param("max_nodes", "int", 2000),
        ),
        mutating=False,
    ),
    RpcMethod("re_enable_task", (_TASK_ID,), mutating=True),
    RpcMethod("forgive_failures", (_TASK_ID,), mutating=True),
    RpcMethod("mark_as_done", (_TASK_ID,), mutating=True),
    RpcMethod("set_task_status_message", (_TASK_ID, _param("status_message", "any")), mutating=True),
    RpcMethod("get_task_status_message", (_TASK_ID,), mutating=False),
    RpcMethod(
        "set_task_progress_percentage", (_TASK_ID, _param("progress_percentage", "any")), mutating=True
    ),
    RpcMethod("get_task_progress_percentage", (_TASK_ID,), mutating=False),
    RpcMethod(
        "decrease_running_task_resources",
        (
            _TASK_ID,
            _param("decrease_resources", "dict[number]"),
        ),
        mutating=True,
    ),
    RpcMethod("get_running_task_resources", (_TASK_ID,), mutating=False),
    RpcMethod(
        "send_scheduler_message", (_WORKER, _param("task", "str"), _param("content", "any")), mutating=True
    ),
    RpcMethod(
        "add_scheduler_message_response",
        (
            _TASK_ID,
            _param("message_id", "str"),
            _param("response", "any"),
        ),
        mutating=True,
    ),
    RpcMethod("get_scheduler_message_response", (_TASK_ID, _param("message_id", "str")), mutating=True),
    RpcMethod(
        "announce_scheduling_failure",
        (
            _param("task_name", "str"),
            _param("family", "str"),
            _param("params", "dict"),
            _param("expl", "any"),
            _param("owners", "any"),
            _WORKER,
        ),
        mutating=True,
    ),
    RpcMethod("has_task_history", (), mutating=False),
    RpcMethod("is_pause_enabled", (), mutating=False),
    RpcMethod("is_paused", (), mutating=False),
    RpcMethod("pause", (), mutating=True),
    RpcMethod("unpause", (), mutating=True),
    RpcMethod("update_resources", (), mutating=True, var_keyword="resources", var_keyword_kind="number"),
    RpcMethod("update_resource", (_param("resource", "str"), _param("amount", "any")), mutating=True),
    RpcMethod("prune", (), mutating=True),
    RpcMethod("update_metrics_task_started", (_param("task", "any"),), mutating=False),
    RpcMethod("report_task_statistics", (_TASK_ID, _param("statistics", "any")), mutating=False),
)

RPC_METHODS: Mapping[str, RpcMethod] = MappingProxyType({method.name: method for method in _METHODS})


def get_method(name: str) -> RpcMethod:
    """The declared method, or UnknownRpcMethodError."""
    try:
        return RPC_METHODS[name]
    except (KeyError, TypeError):
        raise UnknownRpcMethodError(f"No scheduler RPC method named {name!r}") from None


def validate_call(name: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Check ``kwargs`` against method ``name``'s signature; returns them with defaults filled in."""
    return get_method(name).bind(kwargs)


def invoke(target: Any, name: str, kwargs: Mapping[str, Any]) -> Any:
    """Validate ``kwargs`` and call ``target.<name>`` with them (what the server does per request)."""
    return getattr(target, name)(**validate_call(name, kwargs))


# -- JSON type checks --------------------------------------------------------------------------------------


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_TYPE_CHECKS: dict[str, tuple[Any, str]] = {
    "any": (lambda v: True, "anything"),
    "str": (lambda v: isinstance(v, str), "a string"),
    "bool": (lambda v: isinstance(v, bool), "a boolean"),
    "int": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "number": (_is_number, "a number"),
    "dict": (lambda v: isinstance(v, dict), "an object"),
    "list[str]": (lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v), "a list of strings"),
    "dict[number]": (
        lambda v: isinstance(v, dict) and all(isinstance(k, str) and _is_number(x) for k, x in v.items()),
        "an object mapping names to numbers",
    ),
}


def _check_type(method: str, argument: str, kind: str, value: Any) -> None:
    check, nullable, description = _CHECKS_BY_KIND[kind]
    if (nullable and value is None) or check(value):
        return
    also = " or null" if nullable else ""
    raise RpcArgumentError(
        f"{method}: argument {argument!r} must be {description}{also}, got {value!r} ({type(value).__name__})"
    )


# The exact types that certainly pass each kind (others, such as a dict subclass or a list whose items
# must be checked, go through the kind's check).
class _EveryType:
    def __contains__(self, item: object) -> bool:
        return True


_SURE_TYPES: dict[str, Container[type]] = {
    "any": _EveryType(),
    "any?": _EveryType(),
} | {
    kind + suffix: frozenset(types) | (frozenset({type(None)}) if suffix else frozenset())
    for kind, types in {
        "str": (str,),
        "bool": (bool,),
        "int": (int,),
        "number": (int, float),
        "dict": (dict,),
    }.items()
    for suffix in ("", "?")
}

# Each kind, with and without a trailing "?" (null allowed): (check, nullable, description).
_CHECKS_BY_KIND: dict[str, tuple[Callable[[Any], bool], bool, str]] = {
    kind + suffix: (check, suffix == "?", description)
    for kind, (check, description) in _TYPE_CHECKS.items()
    for suffix in ("", "?")
}
