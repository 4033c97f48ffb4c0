"""The active luigid's lease in PostgreSQL (``store/lease``): one holder at a time, the database's clock.

Two ``LeaseTable``s on one state database stand for two luigids. A lease is taken by the first to ask,
renewed only by its holder, taken by another only once it ran out or was let go; and a state write of a
luigid that does not hold it is refused inside its transaction (the fence).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from helpers.postgres import fresh_schema, require_postgres
from sqlalchemy import text

from luigi.scheduler import Scheduler, SchedulerConfig
from luigi.scheduler.store import SqlStore, StateStoreError
from luigi.scheduler.store.lease import LeaseLostError, LeaseTable

pytestmark = pytest.mark.postgres


@pytest.fixture
def store() -> Iterator[SqlStore]:
    with fresh_schema(require_postgres()) as url:
        opened = SqlStore(url)
        yield opened
        opened.close()


def lease_of(store: SqlStore, holder: str, seconds: float = 6.0) -> LeaseTable:
    return LeaseTable(store.engine, holder, f"http://{holder}:8082/", seconds)


def test_the_first_luigid_to_ask_holds_the_lease_and_the_other_learns_where_it_is(store):
    first, second = lease_of(store, "a"), lease_of(store, "b")
    taken = first.take()
    refused = second.take()
    assert taken.held and 5.0 < taken.seconds_left <= 6.0
    assert not refused.held
    assert (refused.holder, refused.address) == ("a", "http://a:8082/")
    assert first.take().held  # renewing its own
    first.close()
    second.close()


def test_a_lease_that_ran_out_on_the_databases_clock_goes_to_the_next_to_ask(store):
    first, second = lease_of(store, "a"), lease_of(store, "b")
    assert first.take().held
    with store.engine.begin() as conn:  # time passes on the database's clock only
        conn.execute(text("UPDATE luigid_lease SET expires = EXTRACT(EPOCH FROM now()) - 0.1"))
    assert second.take().held
    assert not first.take().held  # the old holder cannot renew what is no longer its own
    first.close()
    second.close()


def test_a_released_lease_is_taken_at_the_next_look(store):
    first, second = lease_of(store, "a"), lease_of(store, "b")
    assert first.take().held
    first.release()
    assert second.take().held
    first.close()
    second.close()


def test_a_luigid_without_the_lease_cannot_write_the_state(store):
    holder, other = lease_of(store, "a"), lease_of(store, "b")
    assert holder.take().held
    store.fence = other.fence
    sch = Scheduler(SchedulerConfig(), store=store)
    sch.load()
    sch.add_task(worker="w", task_id="A", status="PENDING")
    with pytest.raises(LeaseLostError, match="no longer the active one"):
        sch.flush()
    store.fence = holder.fence
    sch.flush()  # the holder's write goes through, the refused change included
    again = Scheduler(SchedulerConfig(), store=SqlStore(store.engine.url))
    again.load()
    listed = set(again.task_list("", ""))
    again.close()
    assert listed == {"A"}
    holder.close()
    other.close()


def test_a_lease_needs_postgresql(tmp_path):
    sqlite = SqlStore.for_file(tmp_path / "state.sqlite")
    with pytest.raises(StateStoreError, match="needs the state in PostgreSQL"):
        LeaseTable(sqlite.engine, "a", None, 6.0)
    sqlite.close()
