"""Running ``luigid``: listen, prune on a timer, and shut down cleanly on SIGTERM/SIGINT.

``run()`` is the entry point ``luigid`` calls (and tests patch); ``SchedulerServer`` is the same
thing as an object, for callers that need the bound address or want to serve in a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import tornado.httpserver
import tornado.ioloop
import tornado.netutil

from luigi.server import dispatch, store_health
from luigi.server.app import STATIC_DIR, LuigidApplication, app
from luigi.server.channel import Channels
from luigi.server.guard import HostPolicy
from luigi.server.handlers import VISUALISER_PATH
from luigi.server.served import ServedScheduler
from luigi.server.settings import ServerSettings
from luigi.server.tracing import RpcSpans

if TYPE_CHECKING:
    from luigi.scheduler.store.sql import SqlStore
    from luigi.schedules import ScheduleService
    from luigi.schedules.backfill_service import BackfillService
    from luigi.server.standby import StandbyKeeper

__all__ = ["DEFAULT_ADDRESS", "DEFAULT_PORT", "CannotListenError", "SchedulerServer", "run", "stop"]

logger = logging.getLogger("luigi.server")

DEFAULT_PORT = 8082
# Only this machine by default: listening on every interface must be asked for (--address 0.0.0.0).
DEFAULT_ADDRESS = "127.0.0.1"
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT)
_CLOSE_TIMEOUT = 5.0
# Seconds between looks at the scheduler's next deadline (a dead worker is noticed this late at most).
DUE_CHECK_INTERVAL = 0.25
# Seconds between folds of the state journal into the database: each flush is already durable in the
# journal, so this bounds only the journal's length and the rows held in memory until they are folded.
CHECKPOINT_INTERVAL = 0.2
# Keys one timed fold writes at most: a step of a backlog (~20 ms here) when no RPC channel answered in
# the last BUSY_WITHIN seconds, else a few (~1 ms): a busy channel's worker would wait on a longer
# transaction, and the slices folded after its answers take the backlog instead.
FOLD_STEP_KEYS = 500
FOLD_BUSY_KEYS = 16
BUSY_WITHIN = 0.05

_current: SchedulerServer | None = None


class CannotListenError(RuntimeError):
    """The address, port or socket path could not be bound (in use, not permitted, bad address)."""


class SchedulerServer:
    """One scheduler served over HTTP on a TCP port or a Unix socket, until ``stop()``."""

    def __init__(
        self,
        scheduler: ServedScheduler,
        settings: ServerSettings | None = None,
        *,
        port: int = DEFAULT_PORT,
        address: str | None = DEFAULT_ADDRESS,
        unix_socket: str | None = None,
        schedules: ScheduleService | None = None,
        backfills: BackfillService | None = None,
        keeper: StandbyKeeper | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.keeper = keeper  # on a shared PostgreSQL state: whether we are the active luigid (None: always)
        self.schedules = schedules  # started once listening, stopped first on the way down
        self.backfills = backfills  # the same
        self.settings = settings if settings is not None else ServerSettings.from_config()
        self.port = port
        self.address = DEFAULT_ADDRESS if address is None else address
        self.unix_socket = unix_socket
        self.sockets: list[socket.socket] = []
        self.ready = threading.Event()  # set once the server accepts connections
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._stop_requested = False
        self.channels: Channels | None = None  # the RPC channels, while serving
        self._fold_failure: str | None = None  # the last checkpoint's error, to log each one once
        self._services_started = False  # the schedules and backfills

    def bind(self) -> None:
        """Open the listening sockets (before serving, so a busy port fails fast); CannotListenError."""
        if self.sockets:
            return
        try:
            if self.unix_socket is not None:
                _refuse_live_socket(self.unix_socket)
                self.sockets = [tornado.netutil.bind_unix_socket(self.unix_socket)]
            else:
                self.sockets = tornado.netutil.bind_sockets(self.port, address=self.address)
        except (OSError, ValueError) as exc:
            raise CannotListenError(f"cannot listen on {self.where()}: {exc}") from exc

    def where(self) -> str:
        """Where the server listens: ``host:port`` (the bound port once bound) or the socket path."""
        if self.unix_socket is not None:
            return f"unix socket {self.unix_socket}"
        return f"{_url_host(self.address or '*')}:{self.bound_port()}"

    def bound_port(self) -> int:
        """The TCP port actually bound (differs from ``port`` when that was 0)."""
        if self.sockets and self.unix_socket is None:
            return int(self.sockets[0].getsockname()[1])
        return self.port

    def base_url(self) -> str:
        """``http://host:port`` for TCP (loopback when listening on every interface)."""
        host = self.address if self.address not in ("", "0.0.0.0", "::") else "localhost"
        return f"http://{_url_host(host)}:{self.bound_port()}"

    def scheduler_url(self) -> str:
        """The ``--scheduler-url`` a client on this machine uses to reach this server."""
        if self.unix_socket is not None:
            from luigi.rpc.address import unix_socket_url

            return unix_socket_url(os.path.abspath(self.unix_socket))
        return self.base_url() + "/"

    async def serve(self) -> None:
        """Serve until ``stop()`` or a stop signal, then close connections and listening sockets."""
        self.bind()
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        if self._stop_requested:
            self._stopping.set()
        hosts = HostPolicy.for_server(self.settings.allowed_hosts, self.address, self.unix_socket is not None)
        application = app(self.scheduler, self.settings, hosts)
        channels = self.channels = application.channels
        channels.after_answers = self._checkpoint_if_due
        if self.keeper is not None:
            self._gate_for_standby(application)
        http = tornado.httpserver.HTTPServer(application, max_body_size=self.settings.connection_body_limit)
        http.add_sockets(self.sockets)
        pruning = tornado.ioloop.PeriodicCallback(self._prune, self.settings.prune_interval * 1000.0)
        pruning.start()
        due_tick = min(DUE_CHECK_INTERVAL, self.settings.prune_interval)
        due_checks = tornado.ioloop.PeriodicCallback(self._prune_if_due, due_tick * 1000.0)
        due_checks.start()
        folding = tornado.ioloop.PeriodicCallback(self._checkpoint_on_timer, CHECKPOINT_INTERVAL * 1000.0)
        folding.start()
        handled = self._install_signal_handlers()
        logger.info("luigid listening on %s; visualiser at %s", self.where(), self._visualiser_url())
        self.ready.set()
        if self.keeper is None:
            self._start_services()
        else:
            self.keeper.start()  # the services start once it is the active luigid
        try:
            await self._stopping.wait()
        finally:
            if self.keeper is not None:
                self.keeper.stop_looking()
            if self.schedules is not None:  # while still serving: the stopped runs report to us
                await self.schedules.stop()
            if self.backfills is not None:
                await self.backfills.stop()
            pruning.stop()
            due_checks.stop()
            folding.stop()
            for sig in handled:
                self._loop.remove_signal_handler(sig)
            http.stop()
            channels.close_all()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(http.close_all_connections(), _CLOSE_TIMEOUT)
            self.close_sockets()
            self.ready.clear()
            logger.info("luigid stopped listening on %s", self.where())

    def _start_services(self) -> None:
        """Start the schedules and backfills (once: a luigid that takes over twice starts them once)."""
        if self._services_started:
            return
        self._services_started = True
        if self.schedules is not None:
            self.schedules.start(self.scheduler_url())
        if self.backfills is not None:
            self.backfills.start(self.scheduler_url())

    def _gate_for_standby(self, application: LuigidApplication) -> None:
        """While not the active luigid: API calls answered 503, the visualiser with a banner, no timers."""
        from luigi.server.standby import StandbyGate

        keeper = self.keeper
        assert keeper is not None
        page = Path(STATIC_DIR) / "visualiser" / "index.html"
        application.gate = StandbyGate(keeper, self.settings, page)
        keeper.on_active = self._start_services
        keeper.on_standby = application.channels.close_all

    def _holds_state(self) -> bool:
        """Whether this luigid's state is the one to prune and save (not a standby's stale copy)."""
        return self.keeper is None or self.keeper.active

    def stop(self) -> None:
        """Ask ``serve()`` to finish; safe from any thread and from signal handlers."""
        self._stop_requested = True
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed between the check and the call
                loop.call_soon_threadsafe(stopping.set)

    def _prune(self) -> None:
        if self.channels is not None:
            self.channels.close_idle()
        if not self._holds_state():
            return
        try:
            self.scheduler.prune()
        except Exception:  # pruning runs again next interval; one failure must not stop the timer
            logger.exception("Periodic prune failed")
        store_health.flush(self.scheduler)  # also how saving resumes by itself after trouble

    def _prune_if_due(self) -> None:
        """Between the periodic prunes: apply a deadline as soon as it comes (a silent worker, a retry)."""
        if not self._holds_state():
            return
        try:
            pruned = self.scheduler.prune_if_due()
        except Exception:  # the next tick tries again; one failure must not stop the timer
            logger.exception("Pruning a due deadline failed")
            return
        if pruned or store_health.health_of(self.scheduler).failure is not None:
            store_health.flush(self.scheduler)

    def _checkpoint_if_due(self) -> None:
        """After answers on the RPC channels: fold a slice if enough changes wait (their workers are busy)."""
        self._checkpoint(due_only=True)

    def _checkpoint_on_timer(self) -> None:
        busy = self.channels is not None and self.channels.answered_within(BUSY_WITHIN)
        self._checkpoint(limit=FOLD_BUSY_KEYS if busy else FOLD_STEP_KEYS)

    def _checkpoint(self, due_only: bool = False, limit: int | None = None) -> None:
        """Fold the store's journal into its database between requests (a no-op when nothing is new).

        A failure loses nothing (the journal keeps the rows) and is retried next time; it is logged
        when it first happens or changes, not five times a second.
        """
        if not self._holds_state():
            return
        try:
            if due_only:
                self.scheduler.checkpoint(due_only=True)
            else:
                self.scheduler.checkpoint(limit=limit)
        except Exception as exc:
            if str(exc) != self._fold_failure:
                logger.error("Folding the scheduler state journal failed (retrying): %s", exc)
            self._fold_failure = str(exc)
        else:
            if self._fold_failure is not None:
                logger.info("Folding the scheduler state journal works again")
            self._fold_failure = None

    def _install_signal_handlers(self) -> list[signal.Signals]:
        """SIGTERM, SIGINT and SIGQUIT stop the server (only possible in the main thread)."""
        if threading.current_thread() is not threading.main_thread() or self._loop is None:
            return []
        for sig in _STOP_SIGNALS:
            self._loop.add_signal_handler(sig, self._on_signal, sig)
        return list(_STOP_SIGNALS)

    def _on_signal(self, sig: signal.Signals) -> None:
        logger.info("luigid received %s: shutting down", signal.Signals(sig).name)
        self.stop()

    def _visualiser_url(self) -> str:
        if self.unix_socket is not None:
            return f"{VISUALISER_PATH} (over the socket)"
        return self.base_url() + VISUALISER_PATH

    def close_sockets(self) -> None:
        """Close the listening sockets (and remove the Unix socket file); ``serve()`` does this on exit."""
        for sock in self.sockets:
            sock.close()
        self.sockets = []
        if self.unix_socket is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.unix_socket)


def run(
    api_port: int = DEFAULT_PORT,
    address: str | None = None,
    unix_socket: str | None = None,
    scheduler: ServedScheduler | None = None,
    load: bool = True,
    settings: ServerSettings | None = None,
) -> None:
    """Serve a scheduler until SIGTERM/SIGINT or ``stop()``: ``luigid``'s main loop.

    Binds first (CannotListenError if that fails), then calls ``scheduler.load()`` when ``load``; at exit
    calls its ``dump()`` and ``close()``.
    """
    global _current
    schedules = backfills = keeper = store = None
    if scheduler is None:
        schedules = configured_schedules()  # a bad [schedule:<name>] section stops us before anything
        backfills = configured_backfills()
        store = configured_store()
        scheduler = durable_scheduler(schedules, backfills, store)
    server = SchedulerServer(
        scheduler,
        settings,
        port=api_port,
        address=address,
        unix_socket=unix_socket,
        schedules=schedules,
        backfills=backfills,
    )
    server.bind()
    _current = server
    dispatch.rpc_spans = RpcSpans.configured()
    try:
        if store is not None:
            keeper = server.keeper = standby_keeper(scheduler, store, server)
        if load and keeper is None:  # a keeper loads the state when it takes the lease
            _run_hook(scheduler.load, reraise=True)  # a store that cannot be used is fatal: say so now
        if schedules is not None:
            schedules.open()
        if backfills is not None:
            backfills.open()
        asyncio.run(server.serve())
    finally:
        _current = None
        dispatch.rpc_spans = None
        server.close_sockets()
        _run_hook(scheduler.dump)
        if keeper is not None:
            keeper.stop()  # after the last write: a standby may take over at once
        _run_hook(scheduler.close)
        if schedules is not None:
            schedules.close()
        if backfills is not None:
            backfills.close()


def durable_scheduler(
    schedules: ScheduleService | None = None,
    backfills: BackfillService | None = None,
    store: SqlStore | None = None,
) -> ServedScheduler:
    """The scheduler ``luigid`` serves: server mode, state kept in ``store`` (by default the one
    ``[scheduler]`` names)."""
    from luigi.scheduler import Scheduler
    from luigi.scheduler.settings import SchedulerConfig
    from luigi.scheduler.store.task_logs import open_task_logs_from_config

    config = SchedulerConfig.from_config()
    return Scheduler(
        config,
        store=store if store is not None else configured_store(),
        task_logs=open_task_logs_from_config(config),
        schedules=schedules,
        backfills=backfills,
    )


def configured_store() -> SqlStore:
    """The state store ``[scheduler]`` names (opened at its first use)."""
    from luigi.scheduler.settings import SchedulerConfig
    from luigi.scheduler.store import open_store_from_config

    return open_store_from_config(config=SchedulerConfig.from_config())


def standby_keeper(
    scheduler: ServedScheduler, store: SqlStore, server: SchedulerServer
) -> StandbyKeeper | None:
    """The lease keeper when the state is in PostgreSQL (several luigids may share it), else None.

    It names this luigid by ``[scheduler] public_url``, else the URL it listens at."""
    from luigi.scheduler.settings import SchedulerConfig
    from luigi.server.standby import keeper_for

    if store.path is not None:  # a SQLite file belongs to one luigid
        return None
    address = SchedulerConfig.from_config().public_url or server.scheduler_url()
    return keeper_for(scheduler, store, address)


def configured_backfills() -> BackfillService:
    """The backfills luigid runs, kept beside its schedules (the file is created by the first one).

    Their workers wait idle long enough for a day a killed child held to be failed and retried."""
    from luigi.scheduler.settings import SchedulerConfig
    from luigi.schedules.backfill_service import BackfillService
    from luigi.schedules.service import schedules_directory

    config = SchedulerConfig.from_config()
    idle = int(config.worker_disconnect_delay + config.retry_delay) + 300
    return BackfillService(schedules_directory(config.state_path), idle_seconds=idle)


def configured_schedules() -> ScheduleService | None:
    """The ``[schedule:<name>]`` sections as a service, or None; ScheduleConfigError for a bad one."""
    from luigi.schedules import ScheduleService

    return ScheduleService.from_config()


def stop() -> None:
    """Stop the server ``run()`` is serving (from another thread or a signal handler)."""
    server = _current
    if server is not None:
        server.stop()


def _run_hook(hook: Callable[[], None], reraise: bool = False) -> None:
    """Call one of the scheduler's lifecycle methods (load, dump, close); failures are logged, or raised
    when ``reraise``."""
    try:
        hook()
    except Exception:  # the durable store reports its own errors; a failed dump must not hide the others
        if reraise:
            raise
        logger.exception("Scheduler %s() failed", hook.__name__)


def _refuse_live_socket(path: str) -> None:
    """OSError when a server already answers on the Unix socket ``path`` (binding would steal it)."""
    if not os.path.exists(path):
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except OSError:
        return  # a stale socket file: binding replaces it
    finally:
        probe.close()
    raise OSError(f"another server is listening on {path}")


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
