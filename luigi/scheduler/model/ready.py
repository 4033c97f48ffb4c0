"""Ready queues: tasks whose dependencies are all DONE, in grant order, per worker and for assistants.

Each owner (a worker id, or ``ASSISTANTS`` for tasks any assistant may run) has one heap per resource
signature and a heap of those heaps' heads. Tasks with equal resource needs compete alike, so a
signature that does not fit is skipped as a whole, whatever its size. Entries are never updated in
place: a change pushes a fresh entry and stale ones are dropped when they reach a heap top (the
``is_valid`` callback says whether an entry still describes a ready task of that owner).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from luigi.scheduler.model.records import ResourceKey

# (-priority, creation time, task id): the smallest key is granted first.
RankKey = tuple[float, float, str]
Owner = str | None
ASSISTANTS: Owner = None  # the owner of every runnable ready task, for assistants
Validator = Callable[[Owner, RankKey, ResourceKey], bool]

_COMPACT_SLACK = 1024


class _OwnerQueue:
    __slots__ = ("groups", "heads", "markers", "entries")

    def __init__(self) -> None:
        self.groups: dict[ResourceKey, list[RankKey]] = {}
        self.heads: list[tuple[RankKey, ResourceKey]] = []
        self.markers: dict[str, tuple[RankKey, ResourceKey]] = {}  # task id -> its newest queued entry
        self.entries = 0


class ReadyQueues:
    """Per-owner ready tasks in rank order, with O(log n) offer and amortised O(log n) head lookup."""

    def __init__(self, is_valid: Validator) -> None:
        self._queues: dict[Owner, _OwnerQueue] = {}
        self._is_valid = is_valid
        self._by_resource: dict[str, set[tuple[Owner, ResourceKey]]] = {}
        self.inspected = 0  # entries looked at so far: lets tests assert the algorithmic bound

    def offer(self, owner: Owner, key: RankKey, rkey: ResourceKey, live_bound: int) -> None:
        """Queue a ready task for ``owner`` unless this exact entry is already queued."""
        queue = self._queues.get(owner)
        if queue is None:
            queue = self._queues[owner] = _OwnerQueue()
        entry = (key, rkey)
        if queue.markers.get(key[2]) == entry:
            return
        queue.markers[key[2]] = entry
        group = queue.groups.get(rkey)
        if group is None:
            group = queue.groups[rkey] = []
            for name, _ in rkey:
                self._by_resource.setdefault(name, set()).add((owner, rkey))
        heapq.heappush(group, key)
        queue.entries += 1
        if group[0] == key:
            heapq.heappush(queue.heads, entry)
        if queue.entries > 2 * live_bound + _COMPACT_SLACK:
            self._compact(owner, queue)

    @contextmanager
    def scan(self, owner: Owner) -> Iterator[Iterator[tuple[RankKey, ResourceKey]]]:
        """The owner's valid group heads, best first; the heads seen are put back when the scan ends.

        The caller must not change task state while scanning (it decides, leaves, then grants).
        """
        seen: list[tuple[RankKey, ResourceKey]] = []
        try:
            yield self._heads(owner, seen)
        finally:
            queue = self._queues.get(owner)
            if queue is not None:
                for item in seen:
                    heapq.heappush(queue.heads, item)

    def _heads(
        self, owner: Owner, seen: list[tuple[RankKey, ResourceKey]]
    ) -> Iterator[tuple[RankKey, ResourceKey]]:
        queue = self._queues.get(owner)
        if queue is None:
            return
        seen_groups: set[ResourceKey] = set()
        refiled: set[ResourceKey] = set()
        while queue.heads:
            head_key, rkey = heapq.heappop(queue.heads)
            if rkey in seen_groups:
                continue  # a duplicate head entry: the one already seen is restored at the end
            top = self.peek(owner, rkey)
            if top is None:
                continue
            if top != head_key:
                # The group's head moved down: re-file it under its real head, once per scan, so stale
                # entries die out instead of multiplying.
                if top > head_key and rkey not in refiled:
                    refiled.add(rkey)
                    heapq.heappush(queue.heads, (top, rkey))
                continue
            seen_groups.add(rkey)
            seen.append((head_key, rkey))
            yield head_key, rkey

    def peek(self, owner: Owner, rkey: ResourceKey) -> RankKey | None:
        """The best valid entry of one of the owner's groups, dropping stale entries on the way."""
        queue = self._queues.get(owner)
        group = queue.groups.get(rkey) if queue is not None else None
        if queue is None or group is None:
            return None
        while group:
            key = group[0]
            self.inspected += 1
            if self._is_valid(owner, key, rkey):
                return key
            heapq.heappop(group)
            queue.entries -= 1
            if queue.markers.get(key[2]) == (key, rkey):
                del queue.markers[key[2]]
        self._drop_group(owner, queue, rkey)
        return None

    def groups_needing(self, resource: str) -> list[tuple[Owner, ResourceKey]]:
        """Every (owner, signature) group whose tasks need ``resource``."""
        return list(self._by_resource.get(resource, ()))

    def add_owner(self, owner: Owner) -> None:
        """Start keeping a (so far empty) queue for ``owner``."""
        self._queues.setdefault(owner, _OwnerQueue())

    def has_owner(self, owner: Owner) -> bool:
        """Whether a queue is kept for ``owner``."""
        return owner in self._queues

    def drop_owner(self, owner: Owner) -> None:
        """Forget everything queued for an owner (a worker that left)."""
        queue = self._queues.pop(owner, None)
        if queue is not None:
            for rkey in list(queue.groups):
                self._unindex(owner, rkey)

    def _drop_group(self, owner: Owner, queue: _OwnerQueue, rkey: ResourceKey) -> None:
        del queue.groups[rkey]
        self._unindex(owner, rkey)

    def _unindex(self, owner: Owner, rkey: ResourceKey) -> None:
        for name, _ in rkey:
            holders = self._by_resource.get(name)
            if holders is not None:
                holders.discard((owner, rkey))
                if not holders:
                    del self._by_resource[name]

    def _compact(self, owner: Owner, queue: _OwnerQueue) -> None:
        """Rebuild an owner's heaps from their valid entries once stale ones dominate."""
        queue.markers.clear()
        queue.heads = []
        queue.entries = 0
        for rkey, group in list(queue.groups.items()):
            live = [key for key in group if self._is_valid(owner, key, rkey)]
            self.inspected += len(group)
            if not live:
                self._drop_group(owner, queue, rkey)
                continue
            heapq.heapify(live)
            queue.groups[rkey] = live
            queue.entries += len(live)
            queue.heads.append((live[0], rkey))
            for key in live:
                queue.markers[key[2]] = (key, rkey)
        heapq.heapify(queue.heads)
