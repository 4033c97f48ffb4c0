"""The RPC surface of the central scheduler, declared once (LUIGI_COMPAT f.2, plus the visualiser's views).

The in-process ``Scheduler``, the tornado server and the HTTP client all follow this registry: each
method's parameters (names, defaults, expected JSON types), whether it changes scheduler state, and
hints for the client (``attempts``, ``allow_null``). ``validate_call`` checks a kwargs dict received
from the network and names the method and argument when something is wrong.

"Read-only" methods do not change state on the caller's behalf; the listing and graph queries may
still run due housekeeping (``prune``) first, as Luigi's do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType
from typing import Any

from luigi.rpc_values import MAX_NAME_CHARS, Check, checker, kind_check, or_null, text_problem

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
    """One keyword argument: its kind (see ``luigi.rpc_values.KINDS``; ``?`` allows null) and default.

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
    # Unknown arguments (from older or newer clients) are dropped, not refused: the methods Luigi declares
    # with ``**kwargs`` (LUIGI_COMPAT j.2), whose Scheduler methods take and ignore them too.
    lenient: bool = False

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
    def _checks(self) -> dict[str, tuple[Check, bool]]:
        """Each parameter's check and whether it admits null (see ``luigi.rpc_values.kind_check``)."""
        return {p.name: kind_check(p.kind) for p in self.parameters}

    @cached_property
    def _var_keyword_check(self) -> Check:
        return checker(self.var_keyword_kind)

    def check(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments this method takes from ``kwargs`` (unknown ones dropped when ``lenient``), with
        their types checked; RpcArgumentError names the first problem. Defaults are not filled in."""
        if not isinstance(kwargs, Mapping):
            raise RpcArgumentError(f"{self.name}: arguments must be a JSON object, got {kwargs!r}")
        checks = self._checks
        dropped: list[str] = []
        for name, value in kwargs.items():
            check = checks.get(name)
            if check is None:
                if self.var_keyword is not None:
                    _check_name(self.name, name)
                    _refuse(self.name, name, self._var_keyword_check(value))
                elif self.lenient:
                    dropped.append(name)
                else:
                    takes = ", ".join(self.parameter_names) or "no arguments"
                    raise RpcArgumentError(f"{self.name}: unexpected argument {name!r} (it takes: {takes})")
            elif value is not None or not check[1]:
                found = check[0](value)
                if found is not None:
                    found = or_null(found) if check[1] else found
                    raise RpcArgumentError(f"{self.name}: argument {name!r} {found}")
        for name in self._required:
            if name not in kwargs:
                raise RpcArgumentError(f"{self.name}: missing required argument {name!r}")
        checked = dict(kwargs)
        for name in dropped:
            del checked[name]
        return checked


def _param(name: str, kind: str = "any", default: Any = REQUIRED, extension: bool = False) -> RpcParameter:
    return RpcParameter(name, kind, default, extension)


_TASK_ID = _param("task_id", "name")
_WORKER = _param("worker", "name")
_SCHEDULE = _param("name", "name")  # a [schedule:<name>] section's name
_INF = float("inf")

_METHODS: tuple[RpcMethod, ...] = (
    RpcMethod(
        "add_task",
        (
            _TASK_ID,
            _param("status", "str", "PENDING"),
            _param("runnable", "bool?", True),
            _param("deps", "list[name]?", None),
            _param("new_deps", "list[name]?", None),
            _param("expl", "any", None),
            _param("resources", "dict[number]?", None),
            _param("priority", "number", 0),
            _param("family", "name", ""),
            _param("module", "name?", None),
            _param("params", "dict?", None),
            _param("param_visibilities", "dict?", None),
            _param("accepts_messages", "bool?", False),
            _param("assistant", "bool", False),
            _param("tracking_url", "str?", None),
            _WORKER,
            _param("batchable", "bool?", None),
            _param("batch_id", "name?", None),
            _param("retry_policy_dict", "dict?", None),
            _param("owners", "names?", None),
            _param("task_log", "log_tail?", None, extension=True),  # a run's last log chunk, with its end
        ),
        mutating=True,
        lenient=True,
    ),
    RpcMethod(
        "add_task_batcher",
        (
            _WORKER,
            _param("task_family", "name"),
            _param("batched_args", "list[name]"),
            _param("max_batch_size", "limit", _INF),
        ),
        mutating=True,
    ),
    RpcMethod("add_worker", (_WORKER, _param("info", "any")), mutating=True, lenient=True),
    RpcMethod("disable_worker", (_WORKER,), mutating=True),
    RpcMethod("set_worker_processes", (_WORKER, _param("n", "int")), mutating=True),
    RpcMethod(
        "ping",
        (_WORKER, _param("held", "list[name]?", None, extension=True)),  # ours: rules.leases
        mutating=True,
        attempts=1,
        lenient=True,
    ),
    RpcMethod(
        "get_work",
        (
            _WORKER,
            _param("host", "str?", None),
            _param("assistant", "bool", False),
            _param("current_tasks", "list[name]?", None),
            # Our worker's running tasks it expects to finish DONE: a task waiting only for them may be
            # granted ahead of them (see ``luigi.scheduler.rules.ahead.choose_ahead_of``).
            _param("assume_done", "list[name]?", None, extension=True),
            _param("max_tasks", "int", 1, extension=True),  # our worker's: several single tasks at once
        ),
        mutating=True,
        allow_null=False,
        lenient=True,
    ),
    RpcMethod("count_pending", (_WORKER,), mutating=False),
    RpcMethod("graph", (), mutating=False, lenient=True),
    RpcMethod("dep_graph", (_TASK_ID, _param("include_done", "bool", True)), mutating=False, lenient=True),
    RpcMethod(
        "inverse_dep_graph", (_TASK_ID, _param("include_done", "bool", True)), mutating=False, lenient=True
    ),
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
    RpcMethod("worker_list", (_param("include_running", "bool", True),), mutating=False, lenient=True),
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
            _param("family", "name", ""),
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
    RpcMethod("cancel_task", (_TASK_ID,), mutating=True),  # ours: kill a RUNNING task's run, no retry
    RpcMethod("set_task_status_message", (_TASK_ID, _param("status_message", "any")), mutating=True),
    RpcMethod("get_task_status_message", (_TASK_ID,), mutating=False),
    RpcMethod(
        "set_task_progress_percentage", (_TASK_ID, _param("progress_percentage", "any")), mutating=True
    ),
    RpcMethod("get_task_progress_percentage", (_TASK_ID,), mutating=False),
    RpcMethod("scheduler_features", (), mutating=False),
    RpcMethod(
        "append_task_log",
        (
            _TASK_ID,
            _WORKER,
            _param("run", "name"),
            _param("offset", "int"),
            _param("chunk", "str"),
            _param("ended", "bool", False),
        ),
        mutating=True,
    ),
    RpcMethod(
        "task_log",
        (_TASK_ID, _param("attempt", "int?", None), _param("offset", "int", 0)),
        mutating=False,
    ),
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
        "send_scheduler_message", (_WORKER, _param("task", "name"), _param("content", "any")), mutating=True
    ),
    RpcMethod(
        "add_scheduler_message_response",
        (
            _TASK_ID,
            _param("message_id", "name"),
            _param("response", "any"),
        ),
        mutating=True,
    ),
    RpcMethod("get_scheduler_message_response", (_TASK_ID, _param("message_id", "name")), mutating=True),
    RpcMethod(
        "announce_scheduling_failure",
        (
            _param("task_name", "str"),
            _param("family", "name"),
            _param("params", "dict"),
            _param("expl", "any"),
            _param("owners", "names?"),
            _WORKER,
        ),
        mutating=True,
        lenient=True,
    ),
    RpcMethod("has_task_history", (), mutating=False),
    RpcMethod("is_pause_enabled", (), mutating=False),
    RpcMethod("is_paused", (), mutating=False),
    RpcMethod("pause", (), mutating=True),
    RpcMethod("unpause", (), mutating=True),
    # The schedules luigid runs (ours; see luigi/schedules): listing and logs are read-only, the buttons
    # change state (POST only, under the auth token like every method).
    RpcMethod("schedule_list", (), mutating=False),
    RpcMethod("schedule_log", (_SCHEDULE, _param("run", "int")), mutating=False),
    RpcMethod("schedule_pause", (_SCHEDULE,), mutating=True),
    RpcMethod("schedule_resume", (_SCHEDULE,), mutating=True),
    RpcMethod("schedule_trigger", (_SCHEDULE,), mutating=True),
    # Backfills luigid runs (ours; luigi/schedules/backfill*.py): starting and cancelling are POST only.
    RpcMethod(
        "backfill_start",
        (
            _param("module", "name"),
            _param("family", "name"),
            _param("start", "str"),
            _param("stop", "str"),
            _param("kind", "str", "daily"),
            _param("params", "dict?", None),
            _param("concurrency", "int", 1),
        ),
        mutating=True,
    ),
    RpcMethod("backfill_list", (), mutating=False),
    RpcMethod("backfill_cancel", (_param("id", "int"),), mutating=True),
    RpcMethod("backfill_log", (_param("id", "int"),), mutating=False),
    RpcMethod("update_resources", (), mutating=True, var_keyword="resources", var_keyword_kind="number"),
    RpcMethod("update_resource", (_param("resource", "name"), _param("amount", "any")), mutating=True),
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


# -- value checks (luigi.rpc_values) -----------------------------------------------------------------------


def _check_name(method: str, name: str) -> None:
    """RpcArgumentError unless a ``**kwargs`` argument's name is fit to store (it names a resource)."""
    found = text_problem(name, MAX_NAME_CHARS)
    if found is not None:
        raise RpcArgumentError(f"{method}: the argument name {name!r:.80} {found}")


def _refuse(method: str, argument: str, found: str | None) -> None:
    if found is not None:
        raise RpcArgumentError(f"{method}: argument {argument!r} {found}")
