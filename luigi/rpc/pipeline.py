"""What one process has in flight to the scheduler: calls held for the next request, and requests sent.

Calls whose answer nobody reads (``add_task``, status messages, ...) are *held*, then ride in order with
the next request as one ``/api/_batch``. A request may be *sent* before its answer is read (a full hold
sent while the worker walks on, or a ``get_work`` asked ahead while a task runs): the answers wait in
``sent``, oldest first, and are read before the connection carries anything else.

Held calls are numbered in the order they were held (``held_through`` is the number of the last one), and
``delivered_through`` says up to which number the scheduler has answered them: a caller that must not
claim a call arrived before it did (the worker's "Informed scheduler" line) waits for that with
``after_delivery``.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from luigi.rpc.calls import EncodedCall
from luigi.rpc.connection import KeepAliveConnection

__all__ = ["Pipeline", "PipelineSlot", "SentRequest", "note_fork", "this_process"]

# This process's id, renewed in a forked child (see ``luigi.rpc.client``): os.getpid() is a system call,
# and a client checks on every call that its pipeline belongs to this process.
_this_process: list[int] = [os.getpid()]


def this_process() -> int:
    """The id of the running process, as last noted (at import, or after a fork)."""
    return _this_process[0]


def note_fork() -> None:
    """In a forked child: note the new process id."""
    _this_process[0] = os.getpid()


@dataclass(frozen=True)
class SentRequest:
    """A ``/api/_batch`` sent whose answer is not read yet.

    With ``ahead`` its last call is a ``get_work`` whose response ``take_ahead`` hands back.
    """

    calls: list[EncodedCall]
    through: int  # the number of the last held call among them (see Pipeline.held_through)
    ahead: bool = False


class Pipeline:
    """One process's connection, held calls and sent requests, behind the client's one lock.

    Nothing here crosses a fork: a child builds its own pipeline and never touches its parent's socket.
    """

    def __init__(self, connection: KeepAliveConnection) -> None:
        self.connection = connection
        self.pid = this_process()
        self.lock = threading.Lock()
        self.held: list[EncodedCall] = []
        self.held_bytes = 0
        self.sent: deque[SentRequest] = deque()
        self.ahead_response: object = None  # the answer to a get_work asked ahead, once read
        self.held_through = 0  # how many calls were ever held: the number of the last one
        self.delivered_through = 0  # every held call up to this number has been answered
        self._waiting: deque[tuple[int, Callable[[], None]]] = deque()  # (number, after_delivery callback)

    def hold(self, call: EncodedCall) -> None:
        """Keep ``call`` for the next request."""
        self.held.append(call)
        self.held_bytes += len(call.kwargs_json)
        self.held_through += 1

    def after_delivery(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once every call held so far is answered: now, if none is still waiting.

        Calls taken and held again keep their numbers, so the held ones always end at ``held_through``.
        A call dropped after an error is never answered: its callbacks wait for good.
        """
        if self.held_through <= self.delivered_through:
            callback()
        else:
            self._waiting.append((self.held_through, callback))

    def delivered(self, through: int) -> None:
        """The scheduler answered the held calls up to number ``through``: run the callbacks due."""
        if through <= self.delivered_through:
            return
        self.delivered_through = through
        while self._waiting and self._waiting[0][0] <= through:
            self._waiting.popleft()[1]()

    def hold_again(self, calls: Iterable[EncodedCall]) -> None:
        """Put calls that were not delivered back in front of the held ones, in their order."""
        calls = list(calls)
        self.held[:0] = calls
        self.held_bytes += sum(len(call.kwargs_json) for call in calls)

    def take_held(self) -> list[EncodedCall]:
        """The held calls, which are no longer held."""
        calls, self.held, self.held_bytes = self.held, [], 0
        return calls

    def is_full(self, batch_size: int, max_bytes: int) -> bool:
        """Whether the held calls should go now, without waiting for the next request."""
        return len(self.held) >= batch_size or self.held_bytes >= max_bytes

    def asked_ahead(self) -> bool:
        """Whether a ``get_work`` asked ahead is sent and not read yet."""
        return any(request.ahead for request in self.sent)

    def idle(self) -> bool:
        """Whether nothing is held or waiting for its answer."""
        return not self.held and not self.sent


class PipelineSlot:
    """The pipeline of the running process: a forked child opens its own, never using its parent's."""

    def __init__(self, open_pipeline: Callable[[], Pipeline]) -> None:
        self._open = open_pipeline
        self.current = open_pipeline()

    def get(self) -> Pipeline:
        """This process's pipeline (a new one in a child forked since the last call)."""
        if self.current.pid != this_process():
            self.renew()
        return self.current

    def renew(self) -> None:
        """Drop the inherited socket (the parent keeps its own open) and held calls; start afresh."""
        inherited, self.current = self.current, self._open()
        try:
            inherited.connection.close()
        except OSError:
            pass  # only our copy of the descriptor is closed; the parent's socket is unaffected
