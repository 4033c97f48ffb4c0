"""``luigi.server`` as Luigi users import and serve it (LUIGI_COMPAT j.4): names, ``_init_api``, CORS."""

from __future__ import annotations

import asyncio
import datetime
import os
import threading
import time

import pytest
import tornado.ioloop
from helpers.luigid import HttpProbe, probe_for, serving_in_thread
from helpers.scheduler import make_scheduler

import luigi.server
from luigi import configuration
from luigi.server import BaseTaskHistoryHandler, RPCHandler, ServerSettings, cors, from_utc


def test_luigis_names_are_there():
    for name in (
        "app",
        "_init_api",
        "run",
        "stop",
        "cors",
        "RPCHandler",
        "BaseTaskHistoryHandler",
        "from_utc",
    ):
        assert hasattr(luigi.server, name), name
    assert cors().enabled is False
    assert RPCHandler.__name__  # the /api/<method> handler class
    templates = os.path.join(os.path.dirname(luigi.server.__file__), os.pardir, "templates")
    handler = BaseTaskHistoryHandler.__new__(BaseTaskHistoryHandler)
    assert os.path.samefile(handler.get_template_path(), templates)


def test_from_utc_reads_both_formats_as_time_mktime_does():
    expected = int(time.mktime(datetime.datetime(2024, 5, 6, 7, 8, 9).timetuple()))
    assert from_utc("2024-05-06 07:08:09") == expected
    assert from_utc("2024-05-06 07:08:09.250000") == expected
    assert from_utc("06/05/2024", fmt="%d/%m/%Y") == int(
        time.mktime(datetime.datetime(2024, 5, 6).timetuple())
    )
    with pytest.raises(ValueError, match="No UTC format matches yesterday"):
        from_utc("yesterday")


def test_init_api_binds_and_serves_on_the_loop_the_caller_runs():
    scheduler, _ = make_scheduler()
    started = threading.Event()
    found: dict = {}

    def serve() -> None:
        asyncio.set_event_loop(asyncio.new_event_loop())
        found["names"] = luigi.server._init_api(scheduler, api_port=0, address="127.0.0.1")
        found["loop"] = tornado.ioloop.IOLoop.current()
        started.set()
        found["loop"].start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert started.wait(30)
    try:
        [(host, port)] = found["names"]
        assert host == "127.0.0.1" and port > 0
        reply = HttpProbe(port=port).call("add_task", {"task_id": "A", "worker": "W"})
        assert reply.status == 200
        assert "A" in scheduler.task_list()
    finally:
        found["loop"].add_callback(found["loop"].stop)
        thread.join(30)
    assert not thread.is_alive()


@pytest.fixture
def served_from_config():
    """A server whose settings come from the configuration (``[cors]`` read at each request)."""
    scheduler, _ = make_scheduler()
    with serving_in_thread(scheduler, ServerSettings.from_config()) as server:
        yield probe_for(server)


def set_cors(**options: str) -> None:
    config = configuration.get_config()
    for name, value in options.items():
        config.set("cors", name, value)


def preflight(probe: HttpProbe, origin: str):
    return probe.request("OPTIONS", "/api/task_list", headers={"Origin": origin})


def test_cors_set_after_the_app_is_built_applies_to_the_next_request(served_from_config):
    probe = served_from_config
    before = preflight(probe, "http://ui.example")
    set_cors(enabled="true", allowed_origins='["http://ui.example"]')
    after = preflight(probe, "http://ui.example")
    assert before.status == after.status == 204
    assert "Access-Control-Allow-Origin" not in before.headers
    assert after.headers["Access-Control-Allow-Origin"] == "http://ui.example"


def test_cors_preflight_carries_luigis_headers(served_from_config):
    set_cors(
        enabled="true",
        allowed_origins='["http://ui.example"]',
        max_age="60",
        allow_credentials="true",
        exposed_headers="X-Thing",
    )
    reply = preflight(served_from_config, "http://ui.example")
    assert reply.status == 204
    assert reply.headers["Access-Control-Allow-Origin"] == "http://ui.example"
    assert reply.headers["Access-Control-Max-Age"] == "60"
    assert reply.headers["Access-Control-Allow-Methods"] == "GET, OPTIONS"
    assert reply.headers["Access-Control-Allow-Headers"] == "Accept, Content-Type, Origin"
    assert reply.headers["Access-Control-Allow-Credentials"] == "true"
    assert reply.headers["Access-Control-Expose-Headers"] == "X-Thing"


def test_without_an_origin_header_there_are_no_cors_headers(served_from_config):
    set_cors(enabled="true", allow_any_origin="true")
    reply = served_from_config.request("OPTIONS", "/api/task_list")
    assert reply.status == 204
    assert not any(name.startswith("Access-Control") for name in reply.headers)


def test_the_null_origin_needs_allow_null_origin_even_with_any_origin(served_from_config):
    set_cors(enabled="true", allow_any_origin="true")
    assert "Access-Control-Allow-Origin" not in preflight(served_from_config, "null").headers
    assert preflight(served_from_config, "http://x.example").headers["Access-Control-Allow-Origin"] == "*"
    set_cors(allow_null_origin="true")
    assert preflight(served_from_config, "null").headers["Access-Control-Allow-Origin"] == "null"


def test_other_answers_carry_the_allowed_origin_but_not_the_preflight_headers(served_from_config):
    set_cors(enabled="true", allowed_origins='["http://ui.example"]')
    reply = served_from_config.request("GET", "/api/is_paused", headers={"Origin": "http://ui.example"})
    assert reply.status == 200
    assert reply.headers["Access-Control-Allow-Origin"] == "http://ui.example"
    assert "Origin" in reply.headers["Vary"]
    assert "Access-Control-Allow-Methods" not in reply.headers
    assert "Access-Control-Max-Age" not in reply.headers
