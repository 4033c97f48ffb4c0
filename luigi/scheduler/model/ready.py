"""Ready queues: tasks whose dependencies are all DONE, in grant order, per worker and for assistants.

Each owner (a worker id, or ``ASSISTANTS`` for tasks any assistant may run) has one heap per resource
signature and a heap of those heaps' heads. Tasks with equal resource needs compete alike, so a
signature that does not fit is skipped as a whole, whatever its size. Entries are never updated in
place: a change pushes a fresh entry and stale ones are dropped when they reach a heap top (the
``is_valid`` callback says whether an entry still describes a ready task of that owner).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable

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
        heapq.heappush(group, key)
        queue.entries += 1
        if group[0] == key:
            heapq.heappush(queue.heads, entry)
        if queue.entries > 2 * live_bound + _COMPACT_SLACK:
            self._compact(owner, queue)

    def head(self, owner: Owner) -> tuple[RankKey, ResourceKey] | None:
        """The owner's best valid entry and its group, left queued (None when it has none)."""
        queue = self._queues.get(owner)
        if queue is None:
            return None
        refiled: set[ResourceKey] = set()
        while queue.heads:
            head_key, rkey = queue.heads[0]
            top = self.peek(owner, rkey)
            if top == head_key:
                return head_key, rkey
            heapq.heappop(queue.heads)
            if top is not None and top > head_key and rkey not in refiled:
                # The group's head moved down: re-file it under its real head, once per call, so stale
                # entries die out instead of multiplying.
                refiled.add(rkey)
                heapq.heappush(queue.heads, (top, rkey))
        return None

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
        del queue.groups[rkey]
        return None

    def walk(self, owners: Iterable[Owner]) -> ReadyWalk:
        """The valid entries of several owners' queues merged in rank order (see ``ReadyWalk``)."""
        groups: list[tuple[Owner, ResourceKey, list[RankKey]]] = []
        for owner in owners:
            queue = self._queues.get(owner)
            if queue is not None:
                groups.extend((owner, rkey, heap) for rkey, heap in queue.groups.items() if heap)
        return ReadyWalk(self, groups)

    def add_owner(self, owner: Owner) -> None:
        """Start keeping a (so far empty) queue for ``owner``."""
        self._queues.setdefault(owner, _OwnerQueue())

    def has_owner(self, owner: Owner) -> bool:
        """Whether a queue is kept for ``owner``."""
        return owner in self._queues

    def drop_owner(self, owner: Owner) -> None:
        """Forget everything queued for an owner (a worker that left)."""
        self._queues.pop(owner, None)

    def fill(self, owner: Owner, entries: Iterable[tuple[RankKey, ResourceKey]]) -> None:
        """Queue ready tasks (each once) for an owner that has nothing queued, all at once: a restart's
        queues are heapified, not pushed into an entry at a time."""
        groups: dict[ResourceKey, list[RankKey]] = {}
        for key, rkey in entries:
            group = groups.get(rkey)
            if group is None:
                group = groups[rkey] = []
            group.append(key)
        queue = self._queues.get(owner)
        if queue is not None and queue.entries:
            raise ValueError(f"the ready queue of {owner!r} is not empty: offer its tasks one by one")
        self._queues[owner] = self._heaped(groups)

    def _compact(self, owner: Owner, queue: _OwnerQueue) -> None:
        """Rebuild an owner's heaps from their valid entries once stale ones dominate."""
        live: dict[ResourceKey, list[RankKey]] = {}
        for rkey, group in queue.groups.items():
            live[rkey] = [key for key in group if self._is_valid(owner, key, rkey)]
            self.inspected += len(group)
        self._queues[owner] = self._heaped(live)

    @staticmethod
    def _heaped(groups: dict[ResourceKey, list[RankKey]]) -> _OwnerQueue:
        """An owner's queue of ``groups``' entries (it takes the lists and heapifies them; empty ones go)."""
        queue = _OwnerQueue()
        markers = queue.markers
        for rkey, keys in groups.items():
            if not keys:
                continue
            heapq.heapify(keys)
            queue.groups[rkey] = keys
            queue.entries += len(keys)
            queue.heads.append((keys[0], rkey))
            for key in keys:
                markers[key[2]] = (key, rkey)
        heapq.heapify(queue.heads)
        return queue


# (rank, group number, index in that group's heap): one place a walk has reached
_WalkEntry = tuple[RankKey, int, int]


class ReadyWalk:
    """Ready entries of several owners, best first, read without changing any heap: a group's heap
    array is walked as the tree it is (an entry's children rank after it), so a walk that stops after
    k entries costs O(k log k) whatever the queues hold.

    The walker may drop a group or an owner on the way; their remaining entries are then passed over
    without reading further into them. Tasks queued for several owners come once per owner. Stale
    entries a walk finds on top of a group are dropped from it (as ``peek`` does); nothing else may
    change the queues while a walk is in use.
    """

    def __init__(self, queues: ReadyQueues, groups: list[tuple[Owner, ResourceKey, list[RankKey]]]) -> None:
        self._queues = queues
        self._groups = groups
        self._live = [True] * len(groups)  # by group number: False once dropped
        self._dropped_owners: set[Owner] = set()
        self._frontier: list[_WalkEntry] = [
            (heap[0], number, 0) for number, (_, _, heap) in enumerate(groups)
        ]
        heapq.heapify(self._frontier)
        self._popped: _WalkEntry | None = None  # its children join the frontier at the next step
        self._next: RankKey | None = None  # the frontier's top, found valid, until it is popped or dropped

    def next_key(self) -> RankKey | None:
        """The rank of the next valid entry, None when there is none."""
        if self._next is not None:
            return self._next
        self._next = self._find_next()
        return self._next

    def _find_next(self) -> RankKey | None:
        if self._popped is not None:
            self._reach_below(self._popped)  # not earlier: the walker may have dropped its group since
            self._popped = None
        frontier, live, is_valid = self._frontier, self._live, self._queues._is_valid
        while frontier:
            key, number, index = entry = frontier[0]
            if not live[number]:
                heapq.heappop(frontier)  # its subtree is dropped with it
                continue
            owner, rkey, _ = self._groups[number]
            if index == 0:  # a group's top, nothing below it read yet: stale tops may leave the heap now
                top = self._queues.peek(owner, rkey)
                if top == key:
                    return key
                heapq.heappop(frontier)
                if top is not None:
                    heapq.heappush(frontier, (top, number, 0))
                    if frontier[0][1] == number:
                        return top
                continue
            self._queues.inspected += 1
            if is_valid(owner, key, rkey):
                return key
            heapq.heappop(frontier)
            self._reach_below(entry)  # deeper stale entries stay (the heap must not change under the walk)
        return None

    def pop(self) -> tuple[RankKey, Owner, ResourceKey, int]:
        """The next valid entry, and its group's number for ``drop_group`` (call ``next_key`` first: it
        must not be None)."""
        self._popped = entry = heapq.heappop(self._frontier)
        self._next = None
        owner, rkey, _ = self._groups[entry[1]]
        return entry[0], owner, rkey, entry[1]

    def drop_group(self, number: int) -> None:
        """Pass over the rest of a group (numbered as ``pop`` said)."""
        self._live[number] = False
        self._next = None

    def drop_owner(self, owner: Owner) -> None:
        """Pass over the rest of an owner's queue."""
        if owner in self._dropped_owners:
            return
        self._dropped_owners.add(owner)
        for number, (group_owner, _, _) in enumerate(self._groups):
            if group_owner == owner:
                self._live[number] = False
                self._next = None

    def _reach_below(self, entry: _WalkEntry) -> None:
        """Add an entry's children in its group's heap to the frontier, unless its group was dropped."""
        _, number, index = entry
        if not self._live[number]:
            return
        heap = self._groups[number][2]
        for child in (2 * index + 1, 2 * index + 2):
            if child < len(heap):
                heapq.heappush(self._frontier, (heap[child], number, child))
