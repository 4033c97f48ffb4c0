"""A standby ``luigid``: several on one PostgreSQL state, one active, the others ready to take over.

Each ``luigid`` whose ``[scheduler] state_url`` is a PostgreSQL database looks at the lease of
``luigi.scheduler.store.lease`` every ``RENEW_EVERY`` seconds, on a thread of its own. The holder renews
it; while it does, it is the active one. The others are standbys: every API call (and ``/metrics``)
is answered 503 with ``{"error": ..., "standby": true, "active": <the active one's URL or null>}``, and
the visualiser's page carries a banner naming the active one. When the active one stops renewing
(killed, its host gone, cut off from the database), its lease runs out after ``LEASE_SECONDS`` and the
first standby to look takes it: it loads the state, then answers as the active one. An active one that
could not renew stops answering as active ``SAFETY`` seconds before its lease can run out (measured on
its own monotonic clock from when it asked), and every state write checks the lease in its transaction,
so there are never two actives. The scheduler itself knows nothing of this: it has no I/O and no clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import html
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import tornado.ioloop
from tornado import httputil

from luigi.scheduler.store.lease import LeaseTable, LeaseView
from luigi.server.handlers import VISUALISER_PATH, write_answer

if TYPE_CHECKING:
    from luigi.scheduler.store.sql import SqlStore
    from luigi.server.served import ServedScheduler
    from luigi.server.settings import ServerSettings

__all__ = ["LEASE_SECONDS", "RENEW_EVERY", "SAFETY", "Role", "StandbyGate", "StandbyKeeper", "keeper_for"]

logger = logging.getLogger("luigi.server")

# A standby takes over at most LEASE_SECONDS + RENEW_EVERY (+ the load) after the active one's last
# renewal: about 7 s, well inside the 15 s promised. Renewing five times per lease rides out a slow look.
LEASE_SECONDS = 6.0
RENEW_EVERY = 1.0
SAFETY = 1.5  # the active one steps down this long before its lease could run out
EXPIRY_CHECK = 0.1  # seconds between looks at the local deadline while a renewal is slow
UNAVAILABLE = 503
_STANDBY_PATHS = ("/api/", "/metrics")
_BANNER_ID = "standby-banner"


class Role(enum.Enum):
    """What a luigid on a shared state is now."""

    ACTIVE = "active"
    STANDBY = "standby"


class StandbyKeeper:
    """Holds, renews or waits for the lease on luigid's loop; loads the state when it takes over.

    ``on_active`` and ``on_standby`` are the server's: start what only the active one runs, and close the
    RPC channels of an active one that stepped down.
    """

    def __init__(
        self,
        scheduler: ServedScheduler,
        lease: LeaseTable,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.scheduler = scheduler
        self.lease = lease
        self.clock = clock
        self.role = Role.STANDBY
        self.valid_until = 0.0  # on ``clock``: the active one answers as such until then
        self.active_address: str | None = None  # the active one's URL, when known
        self.takeovers = 0
        self.on_active: Callable[[], None] = _nothing
        self.on_standby: Callable[[], None] = _nothing
        self._looking = False  # a look waits for the database (its thread may hang while cut off)
        self._timers: list[tornado.ioloop.PeriodicCallback] = []
        self._last_error: str | None = None

    @property
    def active(self) -> bool:
        """Whether this luigid answers as the active one now (never past its local deadline)."""
        return self.role is Role.ACTIVE and self.clock() < self.valid_until

    def start(self) -> None:
        """Look at the lease now and every ``RENEW_EVERY`` seconds, on the running loop."""
        self._timers = [
            tornado.ioloop.PeriodicCallback(self._look_soon, RENEW_EVERY * 1000.0),
            tornado.ioloop.PeriodicCallback(self._check_deadline, EXPIRY_CHECK * 1000.0),
        ]
        for timer in self._timers:
            timer.start()
        self._look_soon()

    def stop_looking(self) -> None:
        """Stop the timers (on the loop, before it closes)."""
        for timer in self._timers:
            timer.stop()
        self._timers = []

    def stop(self) -> None:
        """Stop looking; an active one lets its lease go so a standby takes over at its next look (call it
        after the last state write). While a look still waits for the database (cut off), nothing more is
        asked of it: the lease runs out by itself and the look's thread ends with the process."""
        self.stop_looking()
        if self._looking:
            self.role = Role.STANDBY
            return
        if self.role is Role.ACTIVE:
            self.lease.release()
        self.role = Role.STANDBY
        self.lease.close()

    def _look_soon(self) -> None:
        if self._looking:
            return  # the last look is still waiting for the database
        self._looking = True
        asyncio.ensure_future(self._look())

    async def _look(self) -> None:
        asked_at = self.clock()
        try:
            view = await _in_daemon_thread(self.lease.take)
        except Exception as exc:  # the database is out of reach: the local deadline decides meanwhile
            self._note_failure(exc)
            return
        finally:
            self._looking = False
        self._note_success()
        self._after(view, asked_at)

    def _after(self, view: LeaseView, asked_at: float) -> None:
        """Act on one look at the lease, made at ``asked_at`` (our clock)."""
        if not view.held:
            self.active_address = view.address if view.seconds_left > 0 else None
            if self.role is Role.ACTIVE:
                self._step_down(f"the lease is held by {view.holder or 'nobody'}")
            return
        self.valid_until = asked_at + view.seconds_left - SAFETY
        self.active_address = self.lease.address
        if self.role is Role.STANDBY:
            self._take_over()

    def _take_over(self) -> None:
        """We hold the lease: load the state the last active one left, then answer as the active one (if
        it cannot be loaded, the lease is let go for another standby, and the next look tries again)."""
        started = self.clock()
        try:
            self.scheduler.load()
        except Exception:  # whatever the store raised: this luigid must not serve a state it does not have
            logger.exception(
                "luigid %s took the lease but cannot load the state; letting it go", self.lease.holder
            )
            self.lease.release()
            return
        self.role = Role.ACTIVE
        self.takeovers += 1
        logger.info(
            "luigid %s is the active scheduler now (state loaded in %.2f s)",
            self.lease.holder,
            self.clock() - started,
        )
        self.on_active()

    def _check_deadline(self) -> None:
        if self.role is Role.ACTIVE and self.clock() >= self.valid_until:
            self._step_down("its lease could not be renewed in time")

    def _step_down(self, why: str) -> None:
        self.role = Role.STANDBY
        logger.error("luigid %s is a standby now: %s", self.lease.holder, why)
        self.on_standby()

    def _note_failure(self, exc: Exception) -> None:
        cause = f"{type(exc).__name__}: {exc}"
        if cause != self._last_error:
            logger.error("luigid cannot reach the lease in its state database (retrying): %s", cause)
        self._last_error = cause

    def _note_success(self) -> None:
        if self._last_error is not None:
            logger.info("luigid reaches the lease in its state database again")
        self._last_error = None


class StandbyAnswer(httputil.HTTPMessageDelegate):
    """A standby's answer to a request it does not serve: the body is ignored, then ``status`` sent."""

    def __init__(
        self,
        request: httputil.HTTPServerRequest,
        settings: ServerSettings,
        status: int,
        body: bytes,
        content_type: str,
    ) -> None:
        self._request = request
        self._settings = settings
        self._status = status
        self._body = body
        self._content_type = content_type

    def finish(self) -> None:
        extra = {"Content-Type": self._content_type, "Retry-After": str(int(RENEW_EVERY))}
        write_answer(self._request, self._settings, self._status, self._body, extra)


class StandbyGate:
    """Before any route: what a standby answers instead (None: the route serves the request)."""

    def __init__(self, keeper: StandbyKeeper, settings: ServerSettings, visualiser_page: Path) -> None:
        self.keeper = keeper
        self.settings = settings
        self.visualiser_page = visualiser_page

    def __call__(self, request: httputil.HTTPServerRequest) -> httputil.HTTPMessageDelegate | None:
        if self.keeper.active:
            return None
        path = request.path or ""
        if path.startswith(_STANDBY_PATHS):
            body = json.dumps(self.standby_payload()).encode()
            return StandbyAnswer(request, self.settings, UNAVAILABLE, body, "application/json; charset=UTF-8")
        if path == VISUALISER_PATH and request.method in ("GET", "HEAD"):
            body = self.page_with_banner()
            return StandbyAnswer(request, self.settings, 200, body, "text/html; charset=UTF-8")
        return None

    def standby_payload(self) -> dict[str, object]:
        """The JSON of a standby's 503: what it is, and where the active one is when known."""
        active = self.keeper.active_address
        where = f"the active one is {active}" if active else "no active one is known yet"
        return {
            "error": f"This luigid is a standby ({where}); give workers every luigid's URL, comma-separated, "
            "in --scheduler-url and they follow the active one",
            "standby": True,
            "active": active,
        }

    def page_with_banner(self) -> bytes:
        """The visualiser's page with a banner saying this is a standby and linking to the active one."""
        page = self.visualiser_page.read_text(encoding="utf-8")
        active = self.keeper.active_address
        if active:
            link = html.escape(active.rstrip("/") + VISUALISER_PATH, quote=True)
            where = f'the active one is <a href="{link}">{html.escape(active)}</a>'
        else:
            where = "no active one is known yet"
        banner = (
            f'<div id="{_BANNER_ID}" class="banner banner-warning" role="status">'
            f"This luigid is a standby: it serves no data until it takes over; {where}.</div>"
        )
        return page.replace("<body>", "<body>\n  " + banner, 1).encode("utf-8")


def keeper_for(scheduler: ServedScheduler, store: SqlStore, address: str | None) -> StandbyKeeper | None:
    """A keeper of the lease when the state is in PostgreSQL (else None: one luigid, no lease), its fence
    installed on the store so that only the lease holder writes."""
    engine = store.engine  # opened (and its tables upgraded) here, before the first look
    if engine.dialect.name != "postgresql":
        logger.warning(
            "The state in %s is shared by no standby luigid (standbys need PostgreSQL)", store.where
        )
        return None
    holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    lease = LeaseTable(engine, holder, address, LEASE_SECONDS)
    store.fence = lease.fence
    return StandbyKeeper(scheduler, lease)


def _nothing() -> None:
    """No callback set."""


def _in_daemon_thread(call: Callable[[], LeaseView]) -> asyncio.Future[LeaseView]:
    """``call()`` on a daemon thread of its own, its outcome in a future of the running loop.

    Not an executor: a look cut off from the database may hang for as long as TCP lets it, and must
    neither hold up luigid's exit nor the looks after it is given up."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[LeaseView] = loop.create_future()

    def settle(result: LeaseView | None, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            assert result is not None
            future.set_result(result)

    def run() -> None:
        try:
            outcome: tuple[LeaseView | None, BaseException | None] = (call(), None)
        except Exception as exc:  # handed to the loop, which logs it
            outcome = (None, exc)
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits any more
            loop.call_soon_threadsafe(settle, *outcome)

    threading.Thread(target=run, name="luigid-lease", daemon=True).start()
    return future
