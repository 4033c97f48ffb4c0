"""Generated hostile values at every argument of every RPC method of a real ``luigid`` never harm it.

Lone surrogates, NUL, integers past 64 bits, NaN and Infinity, wrong types, deep nesting and huge
strings go to each argument in turn (through a form POST, as Luigi's client sends, or our JSON batch);
no answer may be a 5xx, and after a ``kill -9`` and a clean restart every task registered before is
still there with its status. Seeded, so a failure replays; ``LUIGI_FUZZ_EXAMPLES`` sets the number of
calls (300 here; run ``LUIGI_FUZZ_EXAMPLES=20000 pytest test/server/test_luigid_hostile_fuzz.py`` by hand).
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any
from urllib.parse import urlencode

import pytest
from helpers.luigid import HttpProbe, running_luigid
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from luigi.rpc_methods import RPC_METHODS, RpcMethod

EXAMPLES = int(os.environ.get("LUIGI_FUZZ_EXAMPLES", "300"))
# Nothing generated can name these, so the calls cannot legitimately change them.
SEEDED_TASKS = {"Seeded_A_q7": "PENDING", "Seeded_B_q7": "DONE", "Seeded_C_q7": "FAILED"}
SEEDED_WORKER = "seeded-worker-q7"
SEEDED_RESOURCE = ("seeded_cpu_q7", 3)
# Long enough that no housekeeping during a long run by hand removes a seeded task or worker.
CONFIG = """
[scheduler]
worker_disconnect_delay = 1000000
remove_delay = 1000000
"""

# A valid value for each kind: what a call carries in the arguments not under attack.
VALID = {
    "name": "Fuzz",
    "str": "",
    "bool": False,
    "int": 1,
    "number": 1,
    "limit": 1,
    "dict": {},
    "any": None,
    "list[name]": [],
    "dict[number]": {},
    "names": [],
}


def nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value] if depth % 2 else {"k": value}
    return value


surrogates = st.text(
    alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=3
)
with_surrogate = st.builds(lambda a, s, b: a + s + b, st.text(max_size=8), surrogates, st.text(max_size=8))
with_nul = st.builds(lambda a, b: f"{a}\x00{b}", st.text(max_size=8), st.text(max_size=8))
huge_ints = st.one_of(st.integers(min_value=2**63), st.integers(max_value=-(2**63) - 1))
non_finite = st.sampled_from([float("nan"), float("inf"), float("-inf")])
huge_strings = st.integers(min_value=4097, max_value=200_000).map(lambda n: "x" * n)
deep = st.integers(min_value=33, max_value=300).map(nested)
wrong_types = st.one_of(
    st.booleans(),
    st.none(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.lists(st.integers(), max_size=4),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=4),
)
scalars = st.one_of(with_surrogate, with_nul, huge_ints, non_finite, huge_strings, deep, wrong_types)
hostile = st.one_of(
    scalars,
    st.lists(scalars, min_size=1, max_size=3),
    st.dictionaries(st.one_of(st.text(max_size=6), with_surrogate), scalars, min_size=1, max_size=3),
)


def valid_kwargs(method: RpcMethod) -> dict[str, Any]:
    """Valid values for the method's required arguments."""
    return {p.name: VALID[p.kind.rstrip("?")] for p in method.parameters if p.required}


@st.composite
def hostile_calls(draw: st.DrawFn) -> tuple[str, dict[str, Any], bool]:
    """A method, its kwargs with one argument (or a ``**kwargs`` name) hostile, and whether to batch."""
    method = RPC_METHODS[draw(st.sampled_from(sorted(RPC_METHODS)))]
    kwargs = valid_kwargs(method)
    targets = [p.name for p in method.parameters] + (["<keyword>"] if method.var_keyword else [])
    if not targets:
        targets = ["<unexpected>"]
    target = draw(st.sampled_from(targets))
    value = draw(hostile)
    if target in ("<keyword>", "<unexpected>"):
        kwargs[draw(st.one_of(with_surrogate, st.text(max_size=6)))] = value
    else:
        kwargs[target] = value
    return method.name, kwargs, draw(st.booleans())


def send(probe: HttpProbe, name: str, kwargs: dict[str, Any], batched: bool) -> int:
    """POST the call as a form (Luigi's way) or inside a JSON ``_batch`` (ours); the call's status."""
    if batched:
        body = json.dumps({"calls": [{"method": name, "kwargs": kwargs}]}, allow_nan=True)
        reply = probe.request("POST", "/api/_batch", body=body, headers={"Content-Type": "application/json"})
        if reply.status != 200:
            return reply.status
        [part] = reply.json()["response"]
        return int(part.get("status", 200))
    data = urlencode({"data": json.dumps(kwargs, allow_nan=True)})
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    return probe.request("POST", f"/api/{name}", body=data, headers=headers).status


def seed_state(probe: HttpProbe) -> None:
    assert probe.call("add_worker", {"worker": SEEDED_WORKER, "info": {}}).status == 200
    for task_id, status in SEEDED_TASKS.items():
        kwargs = {"worker": SEEDED_WORKER, "task_id": task_id, "family": "Seeded", "status": status}
        assert probe.call("add_task", kwargs).status == 200
    name, amount = SEEDED_RESOURCE
    assert probe.call("update_resource", {"resource": name, "amount": amount}).status == 200


def seeded_state(probe: HttpProbe) -> dict[str, Any]:
    tasks = probe.call("task_list", {"status": "", "upstream_status": ""}, verb="GET").json()["response"]
    resources = probe.call("resource_list", {}, verb="GET").json()["response"]
    return {
        "tasks": {task_id: tasks[task_id]["status"] for task_id in SEEDED_TASKS if task_id in tasks},
        "resource": next((r["num_total"] for r in resources if r["name"] == SEEDED_RESOURCE[0]), None),
    }


EXPECTED = {"tasks": SEEDED_TASKS, "resource": SEEDED_RESOURCE[1]}


@pytest.mark.slow
def test_hostile_values_at_every_argument_of_every_method_never_cost_the_state(tmp_path):
    with running_luigid(tmp_path, config=CONFIG) as first:
        probe = first.probe()
        seed_state(probe)
        statuses: dict[int, int] = {}

        @seed(20261201)
        @settings(
            max_examples=EXAMPLES,
            database=None,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(call=hostile_calls())
        def throw(call: tuple[str, dict[str, Any], bool]) -> None:
            status = send(probe, *call)
            statuses[status] = statuses.get(status, 0) + 1
            assert status < 500, call

        throw()
        assert seeded_state(probe) == EXPECTED
        assert "Traceback" not in first.logs()
        first.stop(signal.SIGKILL)
    print(f"answers by status over {sum(statuses.values())} calls: {dict(sorted(statuses.items()))}")
    assert statuses.get(400, 0) > EXAMPLES // 2  # most generated values are refused, as they should be

    with running_luigid(tmp_path, config=CONFIG) as second:
        assert seeded_state(second.probe()) == EXPECTED
        second.stop(signal.SIGTERM)
    with running_luigid(tmp_path, config=CONFIG) as third:
        assert seeded_state(third.probe()) == EXPECTED
        assert "could not be read" not in second.logs() + third.logs()
    assert not list(tmp_path.glob("*.corrupt-*"))
