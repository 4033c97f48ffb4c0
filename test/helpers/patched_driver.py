"""What a database target does through a driver's ``connect`` patched the way Luigi users' tests patch it."""

from __future__ import annotations

from typing import Any
from unittest import mock


def exists_through_patched_connect(target: Any, connect_path: str) -> tuple[mock.MagicMock, list[bool]]:
    """Patch ``connect_path`` (e.g. ``psycopg2.connect``) and ask ``target.exists()`` twice: once with the
    mock cursor finding the marker row, once not. Returns the patched ``connect`` and both answers."""
    with mock.patch(connect_path) as connect:
        cursor = connect.return_value.cursor.return_value
        answers = []
        for row in ((1,), None):
            cursor.fetchone.return_value = row
            answers.append(target.exists())
    return connect, answers


def last_query(connect: mock.MagicMock) -> tuple[str, Any]:
    """The SQL and parameters of the last statement run on the patched connection's cursor."""
    query, params = connect.return_value.cursor.return_value.execute.call_args.args
    return query, params
