"""A late schedule run's alert: one e-mail through ``[email]`` and one JSON POST to ``[notifications]
webhook_url``.

``LateAlert`` is what is said; ``send_late_alert`` says it, blocking (``luigid`` calls it on a thread, off
its loop). Each way is tried once: a failure is logged as one line and never raised, since the run's
record shows it late either way.
"""

from __future__ import annotations

import html
import json
import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit
from urllib.request import Request, urlopen
from zoneinfo import ZoneInfo

from luigi import notifications
from luigi.schedules.spec import ScheduleConfigError
from luigi.schedules.store import RunOutcome, RunRecord
from luigi.schedules.timing import local_time

__all__ = ["WEBHOOK_TIMEOUT_SECONDS", "LateAlert", "send_late_alert", "webhook_url_from_config"]

logger = logging.getLogger("luigi.schedules")

EVENT = "schedule_late"
NOTIFICATIONS_SECTION, WEBHOOK_KEY = "notifications", "webhook_url"
WEBHOOK_TIMEOUT_SECONDS = 5.0  # a slow receiver must not hold the alert's thread for long
_ANSWER_BYTES = 64 << 10  # read (and ignore) at most this much of the receiver's answer


@dataclass(frozen=True)
class LateAlert:
    """One late run, as its alert tells it."""

    schedule: str
    run: int
    started: float
    deadline: float  # the moment by which it should have ended well
    outcome: str  # where it stood when the alert was made: running, or how it ended
    exit_code: int | None
    meaning: str | None
    command: str
    zone: ZoneInfo

    @classmethod
    def of(cls, record: RunRecord, command: str, zone: ZoneInfo) -> LateAlert:
        """The alert for a run ``record`` judged late (so it has a deadline)."""
        assert record.due is not None
        return cls(
            record.schedule,
            record.id,
            record.start,
            record.due,
            record.outcome,
            record.exit_code,
            record.meaning,
            command,
            zone,
        )

    def payload(self) -> dict[str, Any]:
        """The webhook's JSON body (times in epoch seconds, as the ``schedule_list`` answer gives them)."""
        return {
            "event": EVENT,
            "schedule": self.schedule,
            "run": self.run,
            "started": self.started,
            "deadline": self.deadline,
            "outcome": self.outcome,
            "exit_code": self.exit_code,
        }

    def subject(self) -> str:
        return f"Luigi: schedule {self.schedule} is late (run #{self.run})"

    def body(self) -> str:
        """The e-mail's text: which run, when it started and should have ended well, how it stands."""
        return "\n".join(
            [
                f"Run #{self.run} of schedule {self.schedule} did not end well by its deadline.",
                f"Command: luigi {self.command}",
                f"Started: {self._when(self.started)}",
                f"Deadline: {self._when(self.deadline)}",
                f"Now: {self._standing()}",
                "",
                "Its log and end are on luigid's Schedules tab.",
            ]
        )

    def _standing(self) -> str:
        if self.outcome in (RunOutcome.STARTING.value, RunOutcome.RUNNING.value):
            return "still running"
        if self.exit_code is not None:
            return f"{self.outcome}, exit code {self.exit_code} ({self.meaning or 'unknown'})"
        return self.outcome

    def _when(self, moment: float) -> str:
        return local_time(moment, self.zone).strftime("%Y-%m-%d %H:%M:%S %Z")


def webhook_url_from_config(config: Any) -> str | None:
    """``[notifications] webhook_url``, or None; ScheduleConfigError when it is not an http(s) URL."""
    raw = config.get(NOTIFICATIONS_SECTION, WEBHOOK_KEY, None)
    url = raw.strip() if isinstance(raw, str) else raw
    if not url:
        return None
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        raise ScheduleConfigError(
            NOTIFICATIONS_SECTION,
            WEBHOOK_KEY,
            f"{url!r} is not an http(s) URL; write e.g. https://hooks.example.com/luigi",
        )
    return url


def send_late_alert(alert: LateAlert, webhook_url: str | None) -> None:
    """E-mail ``[email] receiver`` (as luigid's other e-mails: not from a terminal unless ``force_send``)
    and POST the payload to ``webhook_url`` when set; failures are logged, never raised."""
    body = alert.body()
    if notifications.email().format == "html":
        body = f"<html><body><pre>{html.escape(body)}</pre></body></html>"
    notifications.send_error_email(alert.subject(), body)
    if webhook_url is not None:
        post_webhook(webhook_url, alert)


def post_webhook(url: str, alert: LateAlert) -> None:
    """POST the alert's JSON to ``url`` once, within WEBHOOK_TIMEOUT_SECONDS; a failure is one log line
    naming the receiver's host (its path may hold a token)."""
    request = Request(
        url,
        data=json.dumps(alert.payload()).encode(),
        headers={"Content-Type": "application/json", "User-Agent": "luigid"},
        method="POST",
    )
    try:
        with urlopen(request, timeout=WEBHOOK_TIMEOUT_SECONDS) as answer:
            answer.read(_ANSWER_BYTES)
    except (OSError, ValueError) as exc:  # URLError, HTTPError and timeouts are OSErrors
        logger.error(
            "Schedule %s: the late alert for run #%d could not be posted to %s: %s",
            *(alert.schedule, alert.run, urlsplit(url).netloc, exc),
        )
    else:
        logger.info("Schedule %s: late alert for run #%d posted", alert.schedule, alert.run)
