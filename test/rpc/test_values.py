"""What a value arriving over RPC may be: each kind accepts what Luigi's clients send and names the
problem with anything a database could not store or a page should not show."""

from __future__ import annotations

import pytest

from luigi.rpc_values import MAX_DEPTH, MAX_NAME_CHARS, checker, free_problem, text_problem


@pytest.mark.parametrize(
    "kind, value",
    [
        ("name", "Task_2024_01_01_abc123"),
        ("name", "Ünïcødé_名前_😀"),  # a surrogate pair in JSON decodes to one valid character
        ("str", "x" * 100_000),
        ("names", "a@x, b@y"),
        ("names", ["a@x", "b@y"]),
        ("names?", None),
        ("int", 2**63 - 1),
        ("int", -(2**63)),
        ("number", 1e300),
        ("limit", 50),
        ("limit", float("inf")),  # Luigi's max_batch_size default, sent as Infinity: no limit
        ("dict[number]", {"cpu": 2, "mem": 0.5}),
        ("list[name]", ["A", "B"]),
        ("any", {"traceback": "line 1\nline 2", "nul in free text": "a\x00b", "n": [1, 2.5, None, True]}),
        ("log_tail", {"run": "a1b2c3d4e5f60001", "offset": 0, "chunk": "INFO: done\n"}),
        ("log_tail?", None),
    ],
)
def test_values_luigi_clients_send_pass(kind, value):
    assert checker(kind)(value) is None


@pytest.mark.parametrize(
    "kind, value, problem",
    [
        ("name", "Evil_\ud800", "lone surrogate '\\ud800' at position 5"),
        ("name", "A\x00B", "holds a NUL character at position 1"),
        ("name", "x" * (MAX_NAME_CHARS + 1), f"more than the limit of {MAX_NAME_CHARS}"),
        ("str", 5, "must be a string, got 5 (int)"),
        ("str?", 5, "must be a string or null, got 5 (int)"),
        ("names?", True, "must be a string or a list of strings or null, got True (bool)"),
        ("names", ["ok", "\udfff"], "item 1 is not valid Unicode text"),
        ("bool", 1, "must be a boolean"),
        ("int", True, "must be an integer"),
        ("int", 2**63, "integer of 64 bits, outside the 64-bit range"),
        ("number", float("nan"), "is nan, which is not a finite number"),
        ("number", float("inf"), "is inf, which is not a finite number"),
        ("limit", float("-inf"), "is -inf, which is not a finite number"),
        ("limit", float("nan"), "is nan, which is not a finite number"),
        ("limit", "inf", "must be a number, got 'inf' (str)"),
        ("dict[number]", {"cpu": -(2**70)}, "entry 'cpu' is an integer of 71 bits"),
        ("dict[number]", {"c\ud800": 1}, "is not valid Unicode text"),
        ("list[name]", ["A", 3], "must be a list of strings"),
        ("any", {"a": ["ok", {"b": "\ud800"}]}, "entry 'a' entry 'b' is not valid Unicode text"),
        ("any", [float("-inf")], "item 0 is -inf"),
        ("dict", {"k": {1, 2}}, "holds a set, which is not a JSON value"),
        ("dict", {"i": "x\ud800"}, "entry 'i' is not valid Unicode text"),
        ("dict", {"n": 2**64}, "entry 'n' is an integer of 65 bits"),
        ("dict", {"k\ud800": None}, "entry 'k\\ud800' is not valid Unicode text"),
        ("list[name]", ["A", "B\x00"], "item 1 holds a NUL character at position 1"),
        ("list[name]", ["A", "x" * (MAX_NAME_CHARS + 1)], f"item 1 is {MAX_NAME_CHARS + 1} characters long"),
        ("log_tail", {"run": "r", "offset": 0}, "must be an object with run, offset and chunk"),
        ("log_tail", {"run": "r", "offset": 0, "chunk": "", "x": 1}, "must be an object with run, offset"),
        ("log_tail", ["run", "offset", "chunk"], "must be an object with run, offset and chunk"),
        ("log_tail", {"run": "r", "offset": -1, "chunk": ""}, "offset must not be negative"),
        ("log_tail", {"run": "r", "offset": 0, "chunk": 7}, "chunk must be a string"),
    ],
)
def test_anything_unfit_to_store_is_named(kind, value, problem):
    found = checker(kind)(value)
    assert found is not None and problem in found


def test_free_values_may_nest_only_so_deep():
    value: object = "leaf"
    for _ in range(MAX_DEPTH):
        value = [value]
    assert free_problem(value) is None
    assert free_problem([value]) == f"item 0 is nested more than {MAX_DEPTH} levels deep"


def test_a_long_surrogate_free_text_is_checked_by_length_first():
    assert text_problem("é" * 10, limit=5) == "is 10 characters long, more than the limit of 5"
