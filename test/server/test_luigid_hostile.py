"""A hostile client cannot harm a real ``luigid``: every bad value is refused at the door with a 4xx naming
the method and argument, and the state from before survives a clean restart and a ``kill -9``.

Each case was seen to do damage before: a lone surrogate in a stored name made the state file
unwritable and, at the next start, moved aside as corrupt (every task gone); ``owners`` of the wrong
type answered 500 yet created the task; some page paths answered 500; any web page could drive the
scheduler (cross-site requests, DNS rebinding).
"""

from __future__ import annotations

import json
import signal
import textwrap
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from helpers.luigid import HttpProbe, Reply, running_luigid

from luigi.rpc import RemoteScheduler

FORM = {"Content-Type": "application/x-www-form-urlencoded"}
SURROGATE = "\ud800"
T = {"worker": "w", "task_id": "T", "family": "T"}


def form(data: Any, allow_nan: bool = False) -> str:
    """A ``data=<json>`` form body as Luigi's own client sends it (``\\ud800`` stays an escape)."""
    return urlencode({"data": data if isinstance(data, str) else json.dumps(data, allow_nan=allow_nan)})


def post(method: str, data: Any, headers: dict[str, str] | None = None) -> tuple[str, str, str, dict]:
    return ("POST", f"/api/{method}", form(data), {**FORM, **(headers or {})})


def post_json(path: str, data: Any) -> tuple[str, str, str, dict]:
    return ("POST", path, json.dumps(data), {"Content-Type": "application/json"})


def get(path: str, headers: dict[str, str] | None = None) -> tuple[str, str, None, dict]:
    return ("GET", path, None, headers or {})


def raw_add_task(argument: str, value: str) -> tuple[str, str, str, dict]:
    """An ``add_task`` whose ``argument`` is the raw JSON ``value`` (NaN and 1e400 are no Python literals)."""
    data = f'{{"task_id": "O", "worker": "w", "{argument}": {value}}}'
    return ("POST", "/api/add_task", "data=" + quote(data), FORM)


def owners(value: str) -> tuple[str, str, str, dict]:
    return raw_add_task("owners", value)


def nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


HOSTILE: dict[str, tuple[tuple[str, str, Any, dict], int]] = {
    # 1. lone surrogates in every field that is stored
    "surrogate-task-id": (post("add_task", {**T, "task_id": f"Evil_{SURROGATE}"}), 400),
    "surrogate-family": (post("add_task", {**T, "family": f"Evil{SURROGATE}"}), 400),
    "surrogate-worker-in-ping": (post("ping", {"worker": f"w{SURROGATE}"}), 400),
    "surrogate-module": (post("add_task", {**T, "module": f"m{SURROGATE}"}), 400),
    "surrogate-dependency": (post("add_task", {**T, "deps": [f"D{SURROGATE}"]}), 400),
    "surrogate-new-dependency": (post("add_task", {**T, "new_deps": [f"D{SURROGATE}"]}), 400),
    "surrogate-resource-name": (post("update_resource", {"resource": f"r{SURROGATE}", "amount": 1}), 400),
    "surrogate-resources-keyword": (post("update_resources", {f"cpu{SURROGATE}": 1}), 400),
    "surrogate-batcher-family": (
        post("add_task_batcher", {"worker": "w", "task_family": f"F{SURROGATE}", "batched_args": ["a"]}),
        400,
    ),
    "surrogate-batch-id": (post("add_task", {**T, "batch_id": f"b{SURROGATE}"}), 400),
    "surrogate-param-value": (post("add_task", {**T, "params": {"p": SURROGATE}}), 400),
    "surrogate-param-name": (post("add_task", {**T, "params": {SURROGATE: "v"}}), 400),
    "surrogate-explanation": (post("add_task", {**T, "status": "FAILED", "expl": ["x", SURROGATE]}), 400),
    "surrogate-worker-info": (post("add_worker", {"worker": "w", "info": {"host": SURROGATE}}), 400),
    "surrogate-status-message": (
        post("set_task_status_message", {"task_id": "A", "status_message": SURROGATE}),
        400,
    ),
    "surrogate-in-a-batch": (
        post("_batch", {"calls": [{"method": "ping", "kwargs": {"worker": SURROGATE}}]}),
        200,
    ),
    "surrogate-in-a-json-batch": (
        post_json("/api/_batch", {"calls": [{"method": "add_task", "kwargs": {**T, "task_id": SURROGATE}}]}),
        200,
    ),
    "nul-in-task-id": (post("add_task", {**T, "task_id": "A\x00B"}), 400),
    # 2. owners that are not a list (these answered 500 and still created the task)
    "owners-true": (owners("true"), 400),
    "owners-negative": (owners("-1"), 400),
    "owners-float": (owners("1.5"), 400),
    "owners-nan": (owners("NaN"), 400),
    "owners-huge": (owners("1e40"), 400),
    # numbers JSON should not carry, or no database can hold
    "priority-infinity": (raw_add_task("priority", "1e400"), 400),
    "priority-past-64-bits": (post("add_task", {**T, "priority": 2**70}), 400),
    "processes-past-64-bits": (post("set_worker_processes", {"worker": "w", "n": 2**64}), 400),
    "explanation-nested-too-deep": (post("add_task", {**T, "status": "FAILED", "expl": nested(40)}), 400),
    "task-id-too-long": (post("add_task", {**T, "task_id": "x" * 5000}), 400),
    # 3. pages and static files
    "history-id-past-sqlite": (get("/history/by_id/99999999999999999999999"), 404),
    "history-id-past-int-digits": (get("/history/by_id/" + "9" * 5000), 400),
    "history-id-superscript-two": (get("/history/by_id/%C2%B2"), 400),
    "history-params-surrogate": (get("/history/by_params/F?data=" + quote('{"a": "\\ud800"}')), 400),
    "history-name-nul": (get("/history/by_name/F%00x"), 400),
    "static-nul": (get("/static/visualiser/index.html%00.png"), 404),
    # 4. other sites
    "cross-site-origin": (post("mark_as_done", {"task_id": "A"}, {"Origin": "http://evil.example"}), 403),
    "cross-site-referer": (
        post("mark_as_done", {"task_id": "A"}, {"Referer": "http://evil.example/page.html"}),
        403,
    ),
    "null-origin": (post("disable_worker", {"worker": "seed"}, {"Origin": "null"}), 403),
    "rebound-host-read": (get("/api/task_list", {"Host": "evil.example:8082"}), 403),
    "rebound-host-write": (post("add_task", {**T, "task_id": "Rebound"}, {"Host": "evil.example"}), 403),
}

CONFIG = """
[scheduler]
record_task_history = true
[task_history]
db_connection = sqlite:///{db}
"""


def send(probe: HttpProbe, request: tuple[str, str, Any, dict]) -> Reply:
    verb, path, body, headers = request
    headers = {"Host": f"127.0.0.1:{probe.port}", **headers}
    return probe.request(verb, path, body=body, headers=headers)


def seed(probe: HttpProbe) -> None:
    """The state a hostile client must not harm: tasks of each status, a worker, a resource."""
    calls = [
        ("add_worker", {"worker": "seed", "info": {"host": "h"}}),
        ("add_task", {"worker": "seed", "task_id": "A", "family": "A", "deps": ["B"], "owners": ["o@x"]}),
        ("add_task", {"worker": "seed", "task_id": "B", "family": "B", "status": "DONE"}),
        ("add_task", {"worker": "seed", "task_id": "C", "family": "C", "status": "FAILED", "expl": "boom"}),
        ("update_resource", {"resource": "cpu", "amount": 3}),
    ]
    for method, kwargs in calls:
        assert probe.call(method, kwargs).status == 200


def state(probe: HttpProbe) -> dict[str, Any]:
    """What a client sees of the seeded state (tasks by status, workers, resources)."""
    tasks = probe.call("task_list", {"status": "", "upstream_status": ""}, verb="GET").json()["response"]
    workers = probe.call("worker_list", {}, verb="GET").json()["response"]
    resources = probe.call("resource_list", {}, verb="GET").json()["response"]
    return {
        "tasks": {task_id: task["status"] for task_id, task in tasks.items()},
        "workers": sorted(worker["name"] for worker in workers),
        "resources": {r["name"]: r["num_total"] for r in resources},
    }


SEEDED = {"tasks": {"A": "PENDING", "B": "DONE", "C": "FAILED"}, "workers": ["seed"], "resources": {"cpu": 3}}


@pytest.fixture(scope="module")
def luigid(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("hostile")
    with running_luigid(workdir, config=CONFIG.format(db=workdir / "history.db")) as process:
        seed(process.probe())
        yield process


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_request_is_refused_and_changes_nothing(luigid, case):
    request, status = HOSTILE[case]
    probe = luigid.probe()
    reply = send(probe, request)
    assert reply.status == status, reply.body
    if reply.headers["Content-Type"].startswith("text/html"):  # a history page answers with a page
        assert b'class="history-error"' in reply.body
    elif status == 200:  # a batch answers per call: the call itself is refused
        [part] = reply.json()["response"]
        assert part["status"] == 400 and "not valid Unicode" in part["error"]
    else:
        error = reply.json()["error"]
        assert isinstance(error, str) and error
    assert state(probe) == SEEDED
    assert "Traceback" not in luigid.logs()


def test_an_error_names_the_method_the_argument_and_the_problem(luigid):
    probe = luigid.probe()
    surrogate = send(probe, HOSTILE["surrogate-task-id"][0]).json()["error"]
    assert surrogate.startswith("add_task: argument 'task_id' is not valid Unicode text")
    assert "lone surrogate '\\ud800' at position 5" in surrogate
    assert send(probe, HOSTILE["owners-true"][0]).json()["error"] == (
        "add_task: argument 'owners' must be a string or a list of strings or null, got True (bool)"
    )
    assert "NaN" in send(probe, HOSTILE["owners-nan"][0]).json()["error"]
    assert "allowed_hosts" in send(probe, HOSTILE["rebound-host-read"][0]).json()["error"]


@pytest.mark.slow
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["clean", "kill-9"])
def test_after_every_hostile_request_the_state_survives_a_restart(tmp_path: Path, stop):
    config = CONFIG.format(db=tmp_path / "history.db")
    with running_luigid(tmp_path, config=config) as first:
        probe = first.probe()
        seed(probe)
        for request, status in HOSTILE.values():
            assert send(probe, request).status == status
        first.stop(stop)
    with running_luigid(tmp_path, config=config) as second:
        assert state(second.probe()) == SEEDED
        assert "could not be read" not in second.logs()
    assert not list(tmp_path.glob("*.corrupt-*"))


def test_a_luigi_style_client_and_the_visualiser_itself_still_work(luigid):
    probe = luigid.probe()
    # Luigi's client: a form field ``data``, no Origin, Host as given in the scheduler URL.
    styled = {"worker": "luigi", "task_id": "Styled", "family": "S"}
    assert send(probe, post("add_task", styled)).status == 200
    # The visualiser: the same origin as the page.
    same_origin = {"Origin": f"http://127.0.0.1:{probe.port}"}
    assert send(probe, post("forgive_failures", {"task_id": "Styled"}, same_origin)).status == 200
    assert send(probe, get("/api/task_list", {"Host": f"localhost:{probe.port}"})).status == 200
    assert state(probe)["tasks"]["Styled"] == "PENDING"


def test_our_own_client_refuses_such_a_value_before_sending_it(luigid):
    scheduler = RemoteScheduler(luigid.url)
    with pytest.raises(TypeError, match="not valid Unicode text"):
        scheduler.add_task(worker="w", task_id="Mine", family=f"Mine{SURROGATE}")


def hosts_luigid_config(hosts: str) -> str:
    return textwrap.dedent(f"""
        [scheduler]
        allowed_hosts = {hosts}
    """)


@pytest.mark.parametrize(
    "hosts, host, origin, expected",
    [
        ("luigi.example.com", "luigi.example.com", "https://luigi.example.com", 200),
        ("luigi.example.com", "other.example.com", None, 403),
        ("luigi.example.com", "127.0.0.1", "https://luigi.example.com", 200),  # a proxy that rewrites Host
        ("*", "anything.example", None, 200),
        ("*", "anything.example", "http://evil.example", 403),  # '*' opens hosts, not other sites
    ],
)
def test_allowed_hosts_names_what_luigid_answers_to(tmp_path, hosts, host, origin, expected):
    with running_luigid(tmp_path, config=hosts_luigid_config(hosts)) as process:
        headers = {"Host": host, **({"Origin": origin} if origin else {})}
        reply = process.probe().request(
            "POST", "/api/ping", body=form({"worker": "w"}), headers={**FORM, **headers}
        )
    assert reply.status == expected, reply.body
