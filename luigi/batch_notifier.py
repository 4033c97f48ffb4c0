"""Batched failure e-mails: the scheduler's summary of failures, disables and scheduling failures.

With ``[scheduler] batch_emails = true`` the scheduler feeds one ``BatchNotifier`` and, every
``[batch_email] email_interval`` minutes, each recipient gets one e-mail listing what went wrong with
the tasks they own (``[email] receiver`` hears about every task). ``send_email`` is looked up in this
module at each send, so a test may replace ``luigi.batch_notifier.send_email``.
"""

from __future__ import annotations

import collections
import html
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from luigi import parameter
from luigi.notifications import email, send_email
from luigi.task import Config

__all__ = ["BatchNotifier", "ExplQueue", "batch_email", "send_email"]

_BATCH_MODES = ("family", "all", "unbatched_params")
_INDENT = " " * 6


class batch_email(Config):
    """``[batch_email]``: how often the scheduler's batched e-mails go out and what they hold."""

    email_interval = parameter.IntParameter(default=60, description="Number of minutes between e-mail sends")
    batch_mode = parameter.ChoiceParameter(
        default="unbatched_params",
        choices=_BATCH_MODES,
        description="Method used for batching failures in e-mail: per task (all), per family, or per "
        "family and the parameters the worker does not batch over (unbatched_params)",
    )
    error_lines = parameter.IntParameter(
        default=20, description="Number of lines to show from each error message; 0 shows all"
    )
    error_messages = parameter.IntParameter(
        default=1, description="Number of error messages to show for each group"
    )
    group_by_error_messages = parameter.BoolParameter(
        default=True, description="Group items with the same error messages together"
    )


class ExplQueue(collections.OrderedDict[str, None]):
    """The last ``num_items`` distinct explanations, oldest first (a repeat moves to the end)."""

    def __init__(self, num_items: int) -> None:
        super().__init__()
        self.num_items = num_items

    def enqueue(self, item: str) -> None:
        """Remember ``item`` as the newest, forgetting the oldest beyond ``num_items``."""
        self.pop(item, None)
        self[item] = None
        while len(self) > max(self.num_items, 0):
            self.popitem(last=False)


@dataclass
class _Counts:
    """What happened to one key, for one recipient."""

    failures: int = 0
    disables: int = 0
    scheduling_failures: int = 0

    def sort_key(self, key: str) -> tuple[int, int, str]:
        """Most failures (and scheduling failures) first, then most disables, then the smallest key."""
        return (-(self.failures + self.scheduling_failures), -self.disables, key)


class BatchNotifier:
    """Collects events per recipient and key, and mails each recipient a summary when one is due."""

    def __init__(self, **kwargs: Any) -> None:
        self._config = batch_email(**kwargs)
        settings = email()
        self._email_format = settings.format
        self._sender = settings.sender
        self._default_owners = frozenset(_addresses(settings.receiver))
        self._counts: dict[str, dict[str, _Counts]] = {}
        self._expls: dict[str, dict[str, ExplQueue]] = {}
        self._next_send = 0.0
        self._update_next_send()

    def _update_next_send(self) -> None:
        self._next_send = time.time() + 60 * self._config.email_interval

    # -- collecting ----------------------------------------------------------------------------------

    def add_failure(
        self, task_name: str, family: str, unbatched_args: Mapping[str, Any], expl: Any, owners: Any
    ) -> None:
        """The task failed with ``expl``."""
        key = self._key(task_name, family, unbatched_args)
        for owner in self._recipients(owners):
            self._count(owner, key).failures += 1
            self._remember(owner, key, expl)

    def add_disable(
        self, task_name: str, family: str, unbatched_args: Mapping[str, Any], owners: Any
    ) -> None:
        """The scheduler disabled the task for failing too often."""
        key = self._key(task_name, family, unbatched_args)
        for owner in self._recipients(owners):
            self._count(owner, key).disables += 1

    def add_scheduling_fail(
        self, task_name: str, family: str, unbatched_args: Mapping[str, Any], expl: Any, owners: Any
    ) -> None:
        """A worker could not schedule the task (its ``complete()`` or ``requires()`` raised)."""
        key = self._key(task_name, family, unbatched_args)
        for owner in self._recipients(owners):
            self._count(owner, key).scheduling_failures += 1
            self._remember(owner, key, expl)

    def _key(self, task_name: str, family: str, unbatched_args: Mapping[str, Any]) -> str:
        mode = self._config.batch_mode
        if mode == "all":
            return task_name
        if mode == "family":
            return family
        shown = ", ".join(f"{name}={value}" for name, value in (unbatched_args or {}).items())
        return f"{family}({shown})"

    def _recipients(self, owners: Any) -> frozenset[str]:
        return self._default_owners | frozenset(_addresses(owners))

    def _count(self, owner: str, key: str) -> _Counts:
        return self._counts.setdefault(owner, {}).setdefault(key, _Counts())

    def _remember(self, owner: str, key: str, expl: Any) -> None:
        queues = self._expls.setdefault(owner, {})
        queue = queues.get(key)
        if queue is None:
            queue = queues[key] = ExplQueue(self._config.error_messages)
        queue.enqueue(_expl_text(expl))

    # -- sending -------------------------------------------------------------------------------------

    def update(self) -> None:
        """Send the summaries if they are due (the scheduler calls this as it prunes)."""
        if time.time() >= self._next_send:
            self.send_email()

    def send_email(self) -> None:
        """Mail every recipient its summary now, then start a new interval (even if sending failed)."""
        try:
            for owner in sorted(self._counts):
                subject, body = self._summary(owner)
                send_email(subject, body, self._sender, (owner,))
        finally:
            self._counts = {}
            self._expls = {}
            self._update_next_send()

    def _summary(self, owner: str) -> tuple[str, str]:
        counts = self._counts[owner]
        total = _total(counts.values())
        yours = "" if owner in self._default_owners else "Your tasks have "
        subject = f"Luigi: {yours}{_worded(total)} in the last {self._config.email_interval} minutes"
        groups = self._groups(counts, self._expls.get(owner, {}))
        body = _html_body(groups) if self._email_format == "html" else _plain_body(groups)
        return subject, body

    def _groups(self, counts: dict[str, _Counts], expls: dict[str, ExplQueue]) -> list[_Group]:
        """Keys sharing their explanations (or each key alone), each with the kept lines, best first.

        A group ranks by the counts of all its keys, then by its smallest key; keys within it by their own.
        """
        by_expls: dict[tuple[str, ...], list[str]] = {}
        for key in sorted(counts, key=lambda k: counts[k].sort_key(k)):
            kept = tuple(expls.get(key, ()))
            group_id = kept if self._config.group_by_error_messages else (key, *kept)
            by_expls.setdefault(group_id, []).append(key)
        ranked = sorted(
            by_expls.values(), key=lambda keys: _total(counts[k] for k in keys).sort_key(min(keys))
        )
        return [
            _Group(
                [f"{key} ({_worded(counts[key])})" for key in keys],
                [self._cut(expl) for expl in expls.get(keys[0], ())],
            )
            for keys in ranked
        ]

    def _cut(self, expl: str) -> list[str]:
        lines = expl.rstrip().split("\n")
        limit = self._config.error_lines
        return lines[-limit:] if limit > 0 else lines


@dataclass
class _Group:
    """One item of the summary: its key lines and the explanations they share, each as kept lines."""

    key_lines: list[str]
    expls: list[list[str]]


def _plain_body(groups: list[_Group]) -> str:
    parts = []
    for group in groups:
        text = "- " + "\n  ".join(group.key_lines)
        for lines in group.expls:
            text += "\n\n" + "\n".join(_INDENT + line for line in lines)
        parts.append(text)
    return "\n\n".join(parts)


def _html_body(groups: list[_Group]) -> str:
    # Keys and tracebacks are task data: escaped, so a parameter value cannot add markup to the e-mail.
    parts = ["<ul>"]
    for group in groups:
        parts.append("<li>" + "\n<br>".join(html.escape(line) for line in group.key_lines))
        for lines in group.expls:
            parts.append("<pre>" + html.escape("\n".join(lines)) + "</pre>")
    parts.append("</ul>")
    return "\n".join(parts)


def _total(counts: Iterable[_Counts]) -> _Counts:
    """The counts of several keys added up."""
    total = _Counts()
    for each in counts:
        total.failures += each.failures
        total.disables += each.disables
        total.scheduling_failures += each.scheduling_failures
    return total


def _worded(counts: _Counts) -> str:
    """``2 failures, 1 disable``: the non-zero counts, each with its noun."""
    parts = [
        _plural(counts.failures, "failure"),
        _plural(counts.disables, "disable"),
        _plural(counts.scheduling_failures, "scheduling failure"),
    ]
    return ", ".join(part for part in parts if part)


def _plural(count: int, noun: str) -> str:
    if not count:
        return ""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _expl_text(expl: Any) -> str:
    if expl is None:
        return ""
    return expl if isinstance(expl, str) else str(expl)


def _addresses(owners: str | Iterable[Any] | None) -> list[str]:
    """Owners as addresses: a comma-separated string or a list of them (empty entries dropped)."""
    if not owners:
        return []
    entries = [owners] if isinstance(owners, str) else [str(owner) for owner in owners if owner]
    return [address.strip() for entry in entries for address in entry.split(",") if address.strip()]
