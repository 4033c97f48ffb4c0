"""What a failed call to the remote scheduler raises, and how its errors are put into words."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from luigi.rpc.calls import BatchItemError, EncodedCall, batch_errors

if TYPE_CHECKING:
    from luigi.rpc.connection import HTTPAnswer


class RPCError(Exception):
    """A call to the remote scheduler failed; ``sub_exception`` is the underlying cause, if any."""

    def __init__(
        self, message: str, sub_exception: BaseException | None = None, *, status: int | None = None
    ):
        super().__init__(message)
        self.message = message
        self.sub_exception = sub_exception
        self.status = status  # the HTTP status the scheduler answered with, when it answered


class SchedulerHTTPError(Exception):
    """The scheduler answered a request with an HTTP error status."""

    def __init__(self, status: int, message: str, path: str) -> None:
        super().__init__(f"HTTP {status} from {path}: {message}")
        self.status = status
        self.message = message
        self.path = path


class TransientError(Exception):
    """A failure worth retrying (no answer, or a 5xx answer); ``cause`` says what happened."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class NoSchedulerError(RPCError):
    """The scheduler has not answered once during this run: most likely a wrong URL or no luigid there.

    Raised after the ordinary attempts (no ride-out). The message is one line naming the URL and the fix,
    after Luigi's own words for running out of attempts (which users' tests may match).
    """

    def __init__(self, url: str, attempts: int, failure: BaseException | None) -> None:
        super().__init__(  # no status even after 5xx answers: a proxy answered them, not a scheduler
            f"Errors ({attempts} attempts) when connecting to remote scheduler {url!r}: "
            f"{describe(failure)}; is luigid running there? --local-scheduler runs without one",
            failure,
        )


def describe(failure: BaseException | None) -> str:
    """A failure in a few words for an RPCError message (``no answer`` when there was none)."""
    if failure is None:
        return "no answer"
    if isinstance(failure, SchedulerHTTPError):
        return f"HTTP {failure.status}: {failure.message}"
    return f"{type(failure).__name__}: {failure}"


def snippet(body: bytes, limit: int = 300) -> str:
    """The start of an answer's body as text, for error messages."""
    text = body.decode("utf-8", errors="replace").strip()
    return text if len(text) <= limit else text[:limit] + "..."


def error_message(answer: HTTPAnswer) -> str:
    """The server's explanation of an error answer: its JSON ``error``/``message``, else the page title."""
    try:
        payload = json.loads(answer.body)
    except ValueError:
        payload = None
    if isinstance(payload, dict):
        for key in ("error", "message", "reason"):
            if isinstance(payload.get(key), str) and payload[key]:
                return str(payload[key])
    text = snippet(answer.body)
    start, end = text.find("<title>"), text.find("</title>")
    if 0 <= start < end:
        text = text[start + len("<title>") : end].strip()
    import http.client  # here: the worker catches these errors without loading the HTTP client

    return text or http.client.responses.get(answer.status, "error")


def summarise(messages: list[str], shown: int = 5) -> str:
    """The first ``shown`` messages joined, and how many more there were."""
    text = "; ".join(messages[:shown])
    return text if len(messages) <= shown else f"{text}; and {len(messages) - shown} more"


def undelivered(
    error: RPCError, calls: Sequence[EncodedCall], also: str = "", kept: bool = False
) -> RPCError:
    """``error`` extended with the held calls it kept from being delivered (and whether they are kept)."""
    if isinstance(error, NoSchedulerError):  # nothing was ever delivered: the one line says it all
        return error
    names = sorted({call.method for call in calls})
    note = "; they are kept and sent with the next call" if kept else ""
    return RPCError(
        f"{error.message} ({len(calls)} held calls were not delivered: {', '.join(names)}{note}){also}",
        error.sub_exception,
        status=error.status,
    )


def batch_failure(url: str, count: int, errors: Sequence[BatchItemError]) -> RPCError:
    """What a batch whose calls ``errors`` were refused raises."""
    return RPCError(
        f"{len(errors)} of {count} calls sent in a batch to remote scheduler "
        f"{url!r} failed: {summarise([str(e) for e in errors])}",
        status=errors[0].status,
    )


def checked_batch_errors(url: str, calls: Sequence[EncodedCall], reply: Any) -> list[BatchItemError]:
    """The refused calls of a batch answer (RPCError when the answer is not shaped as one)."""
    try:
        return batch_errors(calls, reply)
    except ValueError as exc:
        raise RPCError(f"Remote scheduler {url!r} sent a malformed /api/_batch answer: {exc}") from None
