"""``GET /api/openapi.json``: an OpenAPI 3.1 document of the whole RPC registry, served by a real luigid."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from helpers.luigid import running_luigid
from openapi_spec_validator import validate
from server.test_api import SCENARIO

from luigi.rpc_methods import RPC_METHODS, RpcMethod, RpcParameter
from luigi.rpc_values import KINDS, checker
from luigi.scheduler import Scheduler
from luigi.server.openapi import build_document, kind_schema

DOC = Path(__file__).resolve().parents[2] / "doc" / "api.md"
TOKEN = "s3cret-token"
DOC_TASK_ID = "Hello_2026_12_01_5b2c9a71d4"  # the failed task doc/api.md's examples name


def fetch_document(luigid: Any, token: str | None = None) -> dict[str, Any]:
    reply = luigid.probe(token=token).request("GET", "/api/openapi.json")
    assert reply.status == 200, reply.body
    assert reply.headers["Content-Type"].startswith("application/json")
    return reply.json()


def arguments_of(document: dict[str, Any], name: str) -> dict[str, Any]:
    return document["components"]["schemas"][f"{name}_arguments"]


@pytest.fixture(scope="module")
def luigid(tmp_path_factory):
    with running_luigid(tmp_path_factory.mktemp("luigid")) as process:
        yield process


@pytest.fixture(scope="module")
def document(luigid):
    return fetch_document(luigid)


# -- what luigid serves --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_luigid_serves_an_openapi_3_1_document_the_validator_accepts(document):
    validate(document)
    assert document["openapi"].startswith("3.1")
    assert "security" not in document  # no auth_token: the API, this document included, is open


@pytest.mark.slow
def test_every_registered_method_is_a_path_with_every_argument_and_its_required_ones(document):
    for name, method in RPC_METHODS.items():
        assert f"/api/{name}" in document["paths"], name
        arguments = arguments_of(document, name)
        assert list(arguments["properties"]) == list(method.parameter_names), name
        assert arguments.get("required", []) == [p.name for p in method.parameters if p.required], name


@pytest.mark.slow
def test_state_changing_methods_are_documented_post_only_and_luigid_refuses_their_get(luigid, document):
    probe = luigid.probe()
    for name, method in RPC_METHODS.items():
        verbs = set(document["paths"][f"/api/{name}"])
        assert verbs == ({"post"} if method.mutating else {"get", "post"}), name
        refused = probe.call(name, {}, verb="GET")
        assert (refused.status == 405) == method.mutating, (name, refused.status, refused.body)


@pytest.mark.slow
def test_every_answer_luigid_gives_fits_the_documented_response(luigid, document):
    probe = luigid.probe()
    for name, kwargs in SCENARIO:
        verb = "POST" if RPC_METHODS[name].mutating else "GET"
        reply = probe.call(name, kwargs, verb=verb)
        assert reply.status == 200, (name, reply.body)
        operation = document["paths"][f"/api/{name}"][verb.lower()]
        schema = operation["responses"]["200"]["content"]["application/json"]["schema"]
        jsonschema.validate(reply.json(), schema)


@pytest.mark.slow
def test_a_batch_answers_as_documented_with_its_refused_call_as_an_entry(luigid, document):
    calls = [{"method": "is_paused"}, {"method": "fetch_error", "kwargs": {}}, {"method": "task_counts"}]
    reply = luigid.probe().batch(calls)
    assert reply.status == 200
    answers = reply.json()["response"]
    assert [("error" in answer) for answer in answers] == [False, True, False]
    operation = document["paths"]["/api/_batch"]["post"]
    jsonschema.validate(reply.json(), operation["responses"]["200"]["content"]["application/json"]["schema"])
    form = operation["requestBody"]["content"]["application/x-www-form-urlencoded"]["schema"]
    jsonschema.validate({"data": {"calls": calls}}, form)


@pytest.mark.slow
def test_a_refused_call_answers_the_documented_error(luigid, document):
    reply = luigid.probe().call("task_list", {"limit": "yes"}, verb="GET")
    assert reply.status == 400
    assert "400" in document["paths"]["/api/task_list"]["get"]["responses"]
    jsonschema.validate(reply.json(), document["components"]["schemas"]["Error"])


@pytest.mark.slow
def test_with_an_auth_token_the_document_is_refused_without_it_like_every_api_call(tmp_path):
    with running_luigid(tmp_path, config=f"[scheduler]\nauth_token = {TOKEN}\n") as luigid:
        anonymous = luigid.probe()
        assert anonymous.request("GET", "/api/openapi.json").status == 401
        assert anonymous.call("task_list", verb="GET").status == 401
        assert luigid.probe(token="wrong").request("GET", "/api/openapi.json").status == 401
        document = fetch_document(luigid, token=TOKEN)
        validate(document)
        assert document["security"] == [{"bearerAuth": []}]
        assert document["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
        assert "401" in document["paths"]["/api/task_list"]["get"]["responses"]
        for line in [line for line in doc_curl_lines() if "Authorization" in line]:
            answer = run_curl(line, luigid.port, {"LUIGI_AUTH_TOKEN": TOKEN})
            assert "response" in answer, (line, answer)


# -- made from the registry ----------------------------------------------------------------------------------


class _WithCancel(Scheduler):
    def cancel_everything(self, reason: str, limit: float = float("inf")) -> list[str]:
        """Cancel every task."""
        return []


def test_a_method_added_to_the_registry_is_described_with_its_arguments_and_answer():
    added = RpcMethod(
        "cancel_everything",
        (RpcParameter("reason", "str"), RpcParameter("limit", "limit", float("inf"))),
        mutating=True,
    )
    document = build_document({**RPC_METHODS, added.name: added}, _WithCancel, auth=False)
    validate(document)
    operation = document["paths"]["/api/cancel_everything"]
    assert set(operation) == {"post"}
    assert operation["post"]["summary"] == "Cancel every task."
    arguments = arguments_of(document, "cancel_everything")
    assert set(arguments["properties"]) == {"reason", "limit"}
    assert arguments["required"] == ["reason"]
    envelope = operation["post"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert envelope["properties"]["response"] == {"type": "array", "items": {"type": "string"}}


def test_an_argument_of_a_kind_without_a_schema_names_the_fix():
    odd = RpcMethod("cancel_everything", (RpcParameter("reason", "blob"),), mutating=True)
    with pytest.raises(ValueError, match="No JSON Schema for the RPC kind 'blob'.*openapi.py"):
        build_document({odd.name: odd}, _WithCancel, auth=False)


# Values that JSON can carry, for comparing each kind's schema with its check. Left out: what JSON Schema
# cannot tell apart (1.0 from 1, lone surrogates, nesting depth) and what JSON cannot carry (Infinity).
SAMPLES: list[Any] = [
    None, True, False, 0, -5, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 1.5, "", "a", "x" * 4097,
    "a\x00b", [], ["a", "b"], ["a", 1], ["a\x00"], {}, {"a": 1}, {"a": 1.5, "b": -2}, {"a": "b"},
    {"a": True}, {"run": "r1", "offset": 0, "chunk": "hi"}, {"run": "r1", "offset": -1, "chunk": "hi"},
    {"run": "r1", "offset": 0}, {"run": "r1", "offset": 0, "chunk": "hi", "more": 1},
]  # fmt: skip


@pytest.mark.parametrize("kind", sorted(KINDS | {f"{kind}?" for kind in KINDS}))
def test_each_kind_s_schema_admits_exactly_the_values_its_check_admits(kind):
    components = build_document({}, Scheduler, auth=False)["components"]
    validator = jsonschema.Draft202012Validator({**kind_schema(kind), "components": components})
    check = checker(kind)
    for value in SAMPLES:
        assert validator.is_valid(value) == (check(value) is None), (kind, value)


# -- doc/api.md ----------------------------------------------------------------------------------------------


def doc_curl_lines() -> list[str]:
    """The ``curl`` lines of doc/api.md's shell examples, in order."""
    blocks = re.findall(r"```sh\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    return [line for block in blocks for line in block.splitlines() if line.startswith("curl ")]


def run_curl(line: str, port: int, env: dict[str, str] | None = None) -> Any:
    """Run one documented line as a user would (in a shell), aimed at ``port``; its JSON answer."""
    if shutil.which("curl") is None:
        if os.environ.get("CI"):
            pytest.fail("CI must check doc/api.md's examples, but curl is not installed")
        pytest.skip("curl is not installed")
    command = line.replace("localhost:8082", f"localhost:{port}")
    done = subprocess.run(
        ["bash", "-c", command], capture_output=True, text=True, timeout=30, env={**os.environ, **(env or {})}
    )
    assert done.returncode == 0, (line, done.stderr)
    return json.loads(done.stdout)


@pytest.mark.slow
def test_the_curl_examples_of_doc_api_md_work_against_a_real_luigid(tmp_path):
    lines = [line for line in doc_curl_lines() if "Authorization" not in line]
    assert len(lines) >= 6
    with running_luigid(tmp_path) as luigid:
        failed = {
            "worker": "w",
            "task_id": DOC_TASK_ID,
            "family": "Hello",
            "status": "FAILED",
            "expl": "boom",
        }
        assert luigid.probe().call("add_task", failed).status == 200
        answers = [run_curl(line, luigid.port) for line in lines]
    assert answers[0]["openapi"].startswith("3.1")
    by_method = {}
    for line, answer in zip(lines[1:], answers[1:], strict=True):
        assert set(answer) == {"response"}, (line, answer)
        by_method[re.search(r"/api/(\w+)", line).group(1)] = answer["response"]
    assert list(by_method["task_list"]) == [DOC_TASK_ID]
    assert "boom" in by_method["fetch_error"]["error"]
    assert by_method["_batch"] == [{"response": {"paused": False}}, {"response": []}]


def test_the_api_doc_is_linked_from_the_index():
    assert "(api.md)" in (DOC.parent / "index.md").read_text()
