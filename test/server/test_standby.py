"""Standby luigids (issue 42, section 3): real ``luigid`` processes sharing one PostgreSQL state.

The first to start holds the lease and is active; another is a standby answering every API call 503 with
``{"standby": true, "active": <URL>}`` and serving the visualiser with a banner. A standby takes over when
the active one stops (at once when it stops cleanly), and an active one whose lease was taken stops
answering as active. Each test has its own schema, so its lease row is its own.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.luigid import LuigidProcess, running_luigid, wait_until
from helpers.postgres import fresh_schema, require_postgres
from helpers.tcp_proxy import TcpProxy
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from luigi.server import VISUALISER_PATH

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

TAKEOVER_PROMISE = 15.0


@pytest.fixture
def state_url() -> Iterator[str]:
    with fresh_schema(require_postgres()) as url:
        yield url


def config_for(state_url: str) -> str:
    return f"[scheduler]\nstate_url = {state_url.replace('%', '%%')}\n"


def role(luigid: LuigidProcess) -> str | None:
    """``active`` or ``standby`` by how it answers an API call (None: no answer, or another one)."""
    try:
        reply = luigid.probe().call("is_paused")
    except OSError:
        return None
    if reply.status == 200:
        return "active"
    return "standby" if reply.status == 503 and reply.json().get("standby") is True else None


@contextlib.contextmanager
def active_and_standby(tmp_path: Path, state_url: str) -> Iterator[tuple[LuigidProcess, LuigidProcess]]:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with running_luigid(tmp_path / "a", config=config_for(state_url)) as first:
        wait_until(lambda: role(first) == "active", 20, "the first luigid to be active")
        with running_luigid(tmp_path / "b", config=config_for(state_url)) as second:
            wait_until(lambda: second.probe().call("is_paused").json().get("active"), 20, "a standby's look")
            yield first, second


def test_a_second_luigid_on_the_same_state_answers_every_api_call_503_naming_the_active_one(
    tmp_path, state_url
):
    with active_and_standby(tmp_path, state_url) as (active, standby):
        added = active.probe().call("add_task", {"worker": "w", "task_id": "A", "status": "PENDING"})
        refused = standby.probe().call("add_task", {"worker": "w", "task_id": "B", "status": "PENDING"})
        batch = standby.probe().batch([{"method": "ping", "kwargs": {"worker": "w"}}])
        metrics = standby.probe().request("GET", "/metrics")
        listed = active.probe().call("task_list", {"status": "", "upstream_status": ""}).json()["response"]
    assert added.status == 200
    assert refused.status == 503 and batch.status == 503 and metrics.status == 503
    assert refused.json()["standby"] is True
    assert refused.json()["active"] == active.url
    assert "standby" in refused.json()["error"] and "comma-separated" in refused.json()["error"]
    assert set(listed) == {"A"}  # the standby changed nothing


def test_the_standbys_visualiser_carries_a_banner_linking_to_the_active_one(tmp_path, state_url):
    with active_and_standby(tmp_path, state_url) as (active, standby):
        page = standby.probe().request("GET", VISUALISER_PATH)
        active_page = active.probe().request("GET", VISUALISER_PATH)
    assert page.status == 200 and page.headers["Content-Type"].startswith("text/html")
    body = page.body.decode()
    assert 'id="standby-banner"' in body and "This luigid is a standby" in body
    assert f'href="{active.url.rstrip("/")}{VISUALISER_PATH}"' in body
    assert 'id="standby-banner"' not in active_page.body.decode()


def test_a_cleanly_stopped_active_luigid_hands_over_at_once_and_its_state_goes_with_it(tmp_path, state_url):
    with active_and_standby(tmp_path, state_url) as (active, standby):
        active.probe().call("add_task", {"worker": "w", "task_id": "A", "status": "PENDING"})
        stopped = time.monotonic()
        assert active.stop(signal.SIGTERM) == 0
        wait_until(lambda: role(standby) == "active", TAKEOVER_PROMISE, "the standby to take over")
        took = time.monotonic() - stopped
        listed = standby.probe().call("task_list", {"status": "", "upstream_status": ""}).json()["response"]
    assert set(listed) == {"A"}
    assert took < 3.0  # the lease was let go: the standby's next look (each second) takes it


def test_an_active_luigid_whose_lease_was_taken_stops_answering_as_active(tmp_path, state_url):
    (tmp_path / "a").mkdir()
    with running_luigid(tmp_path / "a", config=config_for(state_url)) as only:
        wait_until(lambda: role(only) == "active", 20, "the luigid to be active")
        engine = create_engine(state_url)
        try:
            with engine.begin() as conn:  # another luigid's lease, as if ours had run out and it took it
                conn.execute(
                    text(
                        "UPDATE luigid_lease SET holder = 'elsewhere', address = 'http://elsewhere:8082/', "
                        "expires = EXTRACT(EPOCH FROM now()) + 60"
                    )
                )
        finally:
            engine.dispose()
        wait_until(lambda: role(only) == "standby", 5, "the luigid to step down")
        refused = only.probe().call("add_task", {"worker": "w", "task_id": "A", "status": "PENDING"})
    assert refused.status == 503 and refused.json()["active"] == "http://elsewhere:8082/"
    assert "is a standby now" in only.logs()


def test_an_active_luigid_cut_off_from_the_database_steps_down_before_the_standby_takes_over(
    tmp_path, state_url
):
    parsed = make_url(state_url)
    with TcpProxy(parsed.port or 5432).running() as proxy:
        through_proxy = parsed.set(port=proxy.port).render_as_string(hide_password=False)
        (tmp_path / "a").mkdir()
        (tmp_path / "b").mkdir()
        with running_luigid(tmp_path / "a", config=config_for(through_proxy)) as cut:
            wait_until(lambda: role(cut) == "active", 20, "the first luigid to be active")
            with running_luigid(tmp_path / "b", config=config_for(state_url)) as standby:
                wait_until(lambda: role(standby) == "standby", 20, "the second luigid to be a standby")
                proxy.blackhole()  # the active one's database connections go silent
                blackholed = time.monotonic()
                both_active = []
                stepped_down = None

                def took_over() -> bool:
                    nonlocal stepped_down
                    roles = (role(cut), role(standby))
                    both_active.extend([roles] if roles == ("active", "active") else [])
                    if stepped_down is None and roles[0] != "active":
                        stepped_down = time.monotonic() - blackholed
                    return roles[1] == "active"

                wait_until(took_over, TAKEOVER_PROMISE, "the standby to take over")
                took = time.monotonic() - blackholed
                proxy.restore()
                wait_until(lambda: role(cut) == "standby", 20, "the cut-off luigid to answer as a standby")
                logs = cut.logs()
    assert both_active == []
    assert stepped_down is not None and stepped_down < took
    assert took < TAKEOVER_PROMISE
    assert "its lease could not be renewed in time" in logs
