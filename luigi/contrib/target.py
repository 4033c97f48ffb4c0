"""`CascadingClient`: one file-system client made of several, each tried in turn when the one before fails.

Built for clients of the same storage that fail in different ways, such as a fast native client and a
slower command-line one: a method call goes to the first client, and to the next only if that one raised.
A method that returns a generator (``listdir``) counts as failed if fetching its first item raises; a
failure later in the listing is the caller's, as the items before it were already handed out.
A `FileSystemException` (the path exists already, a parent is missing, ...) is an answer about the data,
not a broken client, so it is raised at once; unless it is also a `ConnectionError` or `TimeoutError`
(a client's "cannot reach the server"): a server one client cannot reach, another may.
"""

from __future__ import annotations

import inspect
import itertools
import logging
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from typing import Any

from luigi.target import FileSystemException

__all__ = ["CascadingClient"]

logger = logging.getLogger("luigi-interface")


class CascadingClient:
    """Calls each method on ``clients`` in order until one does not raise; the last failure propagates.

    Only the methods in ``method_names`` (by default `ALL_METHOD_NAMES`) exist on the cascading client.
    """

    ALL_METHOD_NAMES: tuple[str, ...] = (
        "exists",
        "rename",
        "remove",
        "chmod",
        "chown",
        "count",
        "copy",
        "get",
        "put",
        "mkdir",
        "list",
        "listdir",
        "getmerge",
        "isdir",
        "rename_dont_move",
        "touchz",
    )

    def __init__(self, clients: Sequence[Any], method_names: Iterable[str] | None = None) -> None:
        if not clients:
            raise ValueError("CascadingClient needs at least one client to call")
        self.clients = list(clients)
        self.method_names = tuple(self.ALL_METHOD_NAMES if method_names is None else method_names)
        for name in self.method_names:
            setattr(self, name, self._cascading(name))

    def _cascading(self, method_name: str) -> Callable[..., Any]:
        """The bound method that forwards ``method_name`` calls through `_chained_call`."""

        def cascade(*args: Any, **kwargs: Any) -> Any:
            return self._chained_call(method_name, *args, **kwargs)

        cascade.__name__ = cascade.__qualname__ = method_name
        cascade.__doc__ = f"{method_name}() on the first of the clients that does not fail."
        return cascade

    def _chained_call(self, method_name: str, *args: Any, **kwargs: Any) -> Any:
        """Call ``method_name`` on each client until one succeeds; re-raise the last client's error."""
        failures: list[str] = []
        for position, client in enumerate(self.clients):
            try:
                result = getattr(client, method_name)(*args, **kwargs)
                return _started(result) if inspect.isgenerator(result) else result
            except Exception as exc:  # any failure but an answer about the data may be this client's alone
                if _is_answer_about_the_data(exc):
                    raise
                failures.append(f"{self._describe(position)}: {type(exc).__name__}: {exc}")
                if position + 1 == len(self.clients):
                    _add_note(exc, f"CascadingClient tried {method_name}() on every client:", failures)
                    raise
                next_client = self._describe(position + 1)
                logger.warning("%s() failed on %s; trying %s", method_name, failures[-1], next_client)
        raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover

    def _describe(self, position: int) -> str:
        """``LocalFileSystem (client 2 of 2)``: which route failed, without the client's settings."""
        return f"{type(self.clients[position]).__name__} (client {position + 1} of {len(self.clients)})"

    def __repr__(self) -> str:
        return f"CascadingClient([{', '.join(type(client).__name__ for client in self.clients)}])"


def _started(generator: Generator[Any, Any, Any]) -> Iterator[Any]:
    """The generator's items, the first fetched now: a client failing at its first request fails here.

    So a listdir() that cannot reach its server falls back inside the cascade, not in the caller's loop.
    """
    try:
        first = next(generator)
    except StopIteration:
        return iter(())
    return itertools.chain((first,), generator)


def _is_answer_about_the_data(exc: Exception) -> bool:
    """A FileSystemException (exists already, not a directory, ...), which another client would repeat.

    One that is also a ConnectionError or TimeoutError (a client's "cannot reach the server") is not:
    the next client may have another way there.
    """
    return isinstance(exc, FileSystemException) and not isinstance(exc, (ConnectionError, TimeoutError))


def _add_note(exc: BaseException, heading: str, failures: list[str]) -> None:
    """Attach what every client said to the re-raised exception (shown in its traceback, Python 3.11+)."""
    add_note = getattr(exc, "add_note", None)
    if add_note is not None:
        add_note("\n  ".join([heading, *failures]))
