"""The task-history pages of ``luigid``: Luigi's ``/history`` and ``/tasklist`` routes, and the chart data.

Pages are rendered from ``luigi/templates`` with every value escaped; they carry no inline script (a
Content-Security-Policy forbids it): the chart is drawn by ``static/visualiser/js/views/history-chart.js``
from ``/history/api/runs/<name>``, as in the visualiser's History view. Queries run on a thread pool,
so a slow or absent database never holds up the scheduler's event loop; while it is away the pages
answer 503 and say why.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import functools
import logging
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import quote

from sqlalchemy.exc import SQLAlchemyError

from luigi.rpc_values import MAX_NAME_CHARS, free_problem, text_problem
from luigi.server.dispatch import decode_data
from luigi.server.errors import ClientError
from luigi.server.handlers import GuardedHandler
from luigi.server.served import ServedScheduler
from luigi.server.settings import ServerSettings
from luigi.task_history import HistoryStatus, NopHistory, TaskHistory

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "TEMPLATE_DIR",
    "BaseTaskHistoryHandler",
    "from_utc",
    "history_of",
    "history_routes",
]

logger = logging.getLogger("luigi.server")

TEMPLATE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "templates")
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
PAGE_LIMIT = 500  # records on one page: the pages stay fast however long the history is
RUNS_LIMIT = 500  # runs in one chart
API_ERROR_CHARS = 8000  # error text per run in the chart data (the run's page has all of it)

T = TypeVar("T")


def history_of(scheduler: ServedScheduler) -> TaskHistory:
    """The history a scheduler records into, for its pages (a ``NopHistory`` for one that answers no
    queries: Luigi lets a user's scheduler record into an object of any class)."""
    history: object = scheduler.task_history
    return history if isinstance(history, TaskHistory) else NopHistory()


def history_routes(
    scheduler: ServedScheduler, settings: ServerSettings
) -> list[tuple[str, type, dict[str, Any]]]:
    """The history routes over ``scheduler``'s history, for the application factory."""
    args = {"server_settings": settings, "history": history_of(scheduler)}
    return [
        (r"/history/?", RecentRunsPage, args),
        (r"/history/by_name/(.+)", ByNamePage, args),
        (r"/history/by_id/(.+)", ByIdPage, args),
        (r"/history/by_task_id/(.+)", ByTaskIdPage, args),
        (r"/history/by_params/(.+)", ByParamsPage, args),
        (r"/history/api/runs/(.+)", RunsApi, args),
        (r"/history/api/status", StatusApi, args),
        (r"/history/api/names", NamesApi, args),
        (r"/tasklist/?", TaskNamesPage, args),
        (r"/tasklist/(.+)", ChartPage, args),
    ]


class _HistoryHandler(GuardedHandler):
    """Shared by every history route: the history, queries off the event loop, security headers."""

    history: TaskHistory

    def initialize(self, server_settings: ServerSettings, history: TaskHistory) -> None:  # type: ignore[override]
        super().initialize(server_settings)
        self.history = history

    def set_default_headers(self) -> None:
        super().set_default_headers()
        self.set_header("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Referrer-Policy", "same-origin")

    async def query(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on the default thread pool; a database error answers 503."""
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(None, functools.partial(fn, *args))
        except SQLAlchemyError as exc:
            logger.warning("History query failed: %s", _first_line(exc))
            raise ClientError(503, f"The task history database is unavailable: {_first_line(exc)}") from None


class _Page(_HistoryHandler):
    """An HTML page from ``luigi/templates``; errors are pages too. Subclasses define ``show``."""

    show: Callable[..., Awaitable[None]]  # the page for the route's (unquoted) path arguments

    needs_token = True  # False for a page that shows no recorded data (it fetches it with the token)

    def get_template_path(self) -> str:
        return TEMPLATE_DIR

    def prepare(self) -> None:
        """With a token configured, answer a browser (which cannot send one on a link) with a page saying
        where the history can be seen: the visualiser's History view, which sends it."""
        if self.request.method == "OPTIONS" or not self.needs_token:
            self.add_cors_headers()
            return
        try:
            self.check_auth()
        except ClientError as error:
            for name, value in error.headers.items():
                self.set_header(name, value)
            message = (
                f"{error.message}. A browser cannot send the token to this page: open the History view "
                "of the visualiser, which asks for it once."
            )
            self.render_page("error.html", title="Task history", message=message, status=error.status)
            return
        self.add_cors_headers()

    async def get(self, *args: str) -> None:
        try:
            for arg in args:
                check_path_part(arg)
            await self.show(*args)  # tornado has already unquoted the path arguments
        except ClientError as error:
            self.render_page("error.html", title="Task history", message=error.message, status=error.status)

    def render_page(self, template: str, title: str, status: int = 200, **values: Any) -> None:
        """Render ``template`` with the values every page uses (links, the recording status, formatters)."""
        self.set_status(status)
        values.setdefault("name", None)
        self.render(
            template,
            title=title,
            root=_root_of(self.request.path),
            recording=self.history.status() if self._may_see_data() else HistoryStatus(recording=True),
            status_code=status,
            fmt_time=_format_time,
            fmt_duration=_format_duration,
            path_part=_path_part,
            **values,
        )

    def _may_see_data(self) -> bool:
        """Whether the request may see the recording status (the database's name, counts): with a token."""
        if self.needs_token:
            return self.get_status() != 401
        try:
            self.check_auth()
        except ClientError:
            return False
        return True

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        if status_code >= 500:
            self.render_page("error.html", title="Task history", message="Internal error", status=status_code)
        else:
            super().write_error(status_code, **kwargs)


# Luigi's name for the base of the history pages (``get_template_path()`` is the package's templates).
BaseTaskHistoryHandler = _Page


class RecentRunsPage(_Page):
    """``/history``: tasks active in the last 24 hours."""

    async def show(self) -> None:
        tasks = await self.query(self.history.find_latest_records, PAGE_LIMIT)
        self.render_page("recent.html", title="Recent runs (last 24 hours)", tasks=tasks, limit=PAGE_LIMIT)


class ByNamePage(_Page):
    """``/history/by_name/<name>``: the records of one task family."""

    async def show(self, name: str) -> None:
        tasks = await self.query(self.history.find_records_by_parameters, name, {}, PAGE_LIMIT)
        self.render_page("recent.html", title=f"Runs of {name}", tasks=tasks, limit=PAGE_LIMIT, name=name)


class ByParamsPage(_Page):
    """``/history/by_params/<name>?data=<json>``: the records of one family with given parameter values."""

    async def show(self, name: str) -> None:
        params = decode_data(self.get_query_argument("data", "{}"))
        found = free_problem(params)
        if found is not None:
            raise ClientError(400, f"'data' (the parameter values to look for) {found}")
        tasks = await self.query(self.history.find_records_by_parameters, name, params, PAGE_LIMIT)
        shown = ", ".join(f"{key}={value}" for key, value in sorted(params.items()))
        title = f"Runs of {name}({shown})"
        self.render_page("recent.html", title=title, tasks=tasks, limit=PAGE_LIMIT, name=name)


class ByIdPage(_Page):
    """``/history/by_id/<id>``: one record with its parameters, runs and events."""

    async def show(self, record_id: str) -> None:
        task = await self.query(self.history.find_task_by_id, record_id_of(record_id))
        self._show_record(task, f"No recorded task has the id {record_id}")

    def _show_record(self, task: Any, missing: str) -> None:
        if task is None:
            raise ClientError(404, missing)
        self.render_page("show.html", title=f"{task.name} (record {task.id})", task=task)


class ByTaskIdPage(ByIdPage):
    """``/history/by_task_id/<task_id>``: the latest record of a luigi task id."""

    async def show(self, task_id: str) -> None:
        task = await self.query(self.history.find_task_by_task_id, task_id)
        self._show_record(task, f"The task {task_id} has no recorded runs")


class TaskNamesPage(_Page):
    """``/tasklist``: every recorded task name, with links to its runs and its chart."""

    async def show(self) -> None:
        names = await self.query(self.history.find_task_names)
        self.render_page("menu.html", title="Recorded tasks", names=names)


class ChartPage(_Page):
    """``/tasklist/<name>``: the durations of a family's runs over time, failures marked, with errors.

    The page itself holds no recorded data, so it loads without the token; its script fetches the runs
    with the token the visualiser keeps for this browser tab.
    """

    needs_token = False

    async def show(self, name: str) -> None:
        root = _root_of(self.request.path)
        self.render_page(
            "history.html",
            title=f"History of {name}",
            name=name,
            runs_url=f"{root}history/api/runs/{_path_part(name)}",
        )


class RunsApi(_HistoryHandler):
    """``/history/api/runs/<name>``: the last runs of a family as JSON (the chart's data)."""

    async def get(self, name: str) -> None:
        try:
            check_path_part(name)
            runs = await self.query(self.history.find_runs_by_name, name, RUNS_LIMIT)
        except ClientError as error:
            self.refuse(error)
            return
        self.write_json({"name": name, "limit": RUNS_LIMIT, "runs": [run_json(run) for run in runs]})


class NamesApi(_HistoryHandler):
    """``/history/api/names``: every recorded family with its number of records (the view's menu)."""

    async def get(self) -> None:
        try:
            names = await self.query(self.history.find_task_names)
        except ClientError as error:
            self.refuse(error)
            return
        recording = self.history.status().recording
        self.write_json({"recording": recording, "names": [{"name": n, "count": c} for n, c in names]})


class StatusApi(_HistoryHandler):
    """``/history/api/status``: whether history is recorded, and what waits, was written or was lost."""

    def get(self) -> None:
        status = self.history.status()
        self.write_json({**dataclasses.asdict(status), "lost": status.lost})


def record_id_of(text: str) -> int:
    """A history record id from a path: ASCII digits within SQLite's integer range, else a 4xx."""
    if not (text.isascii() and text.isdigit()):
        raise ClientError(400, f"{text[:40]!r} is not a history record id (expected a whole number)")
    if len(text) > _MAX_ID_DIGITS or int(text) > _MAX_RECORD_ID:
        raise ClientError(404, f"No recorded task has the id {text[:40]}")
    return int(text)


_MAX_RECORD_ID = (1 << 63) - 1
_MAX_ID_DIGITS = len(str(_MAX_RECORD_ID))


def check_path_part(text: str) -> None:
    """A 400 unless a name taken from the path is text the history database can be asked about."""
    found = text_problem(text, MAX_NAME_CHARS)
    if found is None and "\x00" in text:
        found = "holds a NUL character"
    if found is not None:
        raise ClientError(400, f"The name in the path {found}")


def run_json(run: Any) -> dict[str, Any]:
    """One run as the chart reads it (times as epoch milliseconds and local ISO text)."""
    task = run.task
    error = run.error
    if error is not None and len(error) > API_ERROR_CHARS:
        error = "\u2026" + error[-API_ERROR_CHARS:]
    return {
        "id": run.id,
        "record_id": run.task_id,
        "task_id": task.task_id if task is not None else None,
        "params": {name: p.value for name, p in sorted(task.parameters.items())} if task is not None else {},
        "status": run.status,
        "retry": run.retry,
        "started": _iso(run.started),
        "finished": _iso(run.finished),
        "at_ms": _epoch_ms(run.when),
        "duration": run.duration,
        "host": run.host,
        "worker": run.worker,
        "exception_type": run.exception_type,
        "error": error,
    }


def _iso(value: datetime.datetime | None) -> str | None:
    return value.isoformat(sep=" ", timespec="seconds") if value is not None else None


def _epoch_ms(value: datetime.datetime | None) -> float | None:
    return value.timestamp() * 1000.0 if value is not None else None  # stored as naive local time


def _format_time(value: datetime.datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value is not None else ""


def _format_duration(seconds: float | None) -> str:
    """``0.42 s``, ``3 min 05 s``, ``2 h 03 min``: readable at a glance."""
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{seconds:.2f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def _path_part(value: Any) -> str:
    """``value`` escaped as one URL path segment (slashes included)."""
    return quote(str(value), safe="")


def _root_of(path: str) -> str:
    """The relative link from ``path`` to the server root, so pages also work behind a path prefix."""
    depth = path.count("/") - 1
    return "../" * depth if depth > 0 else "./"


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def from_utc(utc_str: str, fmt: str | None = None) -> int:
    """Epoch seconds of a time written ``%Y-%m-%d %H:%M:%S[.%f]`` (or ``fmt``), read by ``time.mktime``.

    Luigi's helper of the history handlers, with its reading of the text as local time; a text that
    matches no format raises ValueError "No UTC format matches <text>".
    """
    formats = (fmt,) if fmt is not None else ("%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S")
    for candidate in formats:
        try:
            parsed = datetime.datetime.strptime(utc_str, candidate)
        except ValueError:
            continue
        return int(time.mktime(parsed.timetuple()))
    raise ValueError(f"No UTC format matches {utc_str}")
