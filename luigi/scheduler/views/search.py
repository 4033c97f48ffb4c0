"""The search box's index: every task's lower-case display name in one text, searched at C speed.

``task_list(search=...)`` and the visualiser's ``task_page`` match each search term against the task's
display name (``Family(k=v, ...)``). Scanning a million records in Python took over a second; here the
rarest term is found with ``str.find`` over one text of all names, and only the names it hits are checked
for the other terms. The text follows the state: tasks added since it was made are appended to it, and a
name that changed or went (``SchedulerState.names_rewritten``) makes it anew at the next search.
"""

from __future__ import annotations

import bisect
import itertools
from array import array
from collections.abc import Iterator

from luigi.scheduler.model.records import TaskRecord
from luigi.scheduler.model.state import SchedulerState

_SEPARATOR = "\n"  # never in a search term (terms are split on whitespace)


class NameIndex:
    """The tasks' display names, lower-case, one per line, with each line's start and task id."""

    def __init__(self, state: SchedulerState) -> None:
        self._state = state
        self._version = -1
        self._rewritten = -1
        self._text = ""
        self._starts = array("q", [0])  # line i spans _starts[i] .. _starts[i + 1] - 1 (its separator)
        self._ids: list[str] = []

    def matching(self, terms: list[str]) -> Iterator[TaskRecord]:
        """The tasks whose display name holds every (lower-case) term, in the state's order."""
        self._follow_state()
        if not terms:
            yield from (self._state.tasks[task_id] for task_id in self._ids if task_id in self._state.tasks)
            return
        text, starts, tasks = self._text, self._starts, self._state.tasks
        rarest = min(terms, key=text.count)
        others = [term for term in terms if term != rarest]
        position = text.find(rarest)
        while position >= 0:
            line = bisect.bisect_right(starts, position) - 1
            end = starts[line + 1]
            if not others or all(term in text[starts[line] : end] for term in others):
                task = tasks.get(self._ids[line])
                if task is not None:
                    yield task
            position = text.find(rarest, end)

    def _follow_state(self) -> None:
        state = self._state
        if state.names_version == self._version:
            return
        if state.names_rewritten != self._rewritten or len(state.tasks) < len(self._ids):
            self._text, self._starts, self._ids = "", array("q", [0]), []
        added = len(state.tasks) - len(self._ids)
        # Tasks are only appended to the state's dict (a name that changed or went rebuilt it all above).
        new = list(itertools.islice(reversed(state.tasks.values()), added))[::-1] if added else []
        names = [task.display_name().lower() for task in new]
        offset = self._starts[-1]
        for name in names:
            offset += len(name) + 1
            self._starts.append(offset)
        self._ids.extend(task.id for task in new)
        self._text += "".join(name + _SEPARATOR for name in names)
        self._version, self._rewritten = state.names_version, state.names_rewritten
