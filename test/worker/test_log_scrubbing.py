"""A run's log never carries the values of its task's hidden and private parameters (``Scrubber``)."""

from __future__ import annotations

import luigi
from luigi.parameter import ParameterVisibility
from luigi.worker.output_capture import MASK, Scrubber, hidden_values


def scrubbed(pieces: list[str], secrets: list[str]) -> str:
    scrubber = Scrubber(secrets)
    return "".join(scrubber.scrub(piece) for piece in pieces) + scrubber.scrub("", final=True)


def test_each_secret_is_masked_wherever_it_appears():
    assert (
        scrubbed(["user=ann pw=hunter22 again hunter22\n"], ["hunter22"])
        == f"user=ann pw={MASK} again {MASK}\n"
    )


def test_a_secret_split_between_two_pieces_of_output_is_masked_too():
    assert scrubbed(["pw=hun", "ter22 ok\n"], ["hunter22"]) == f"pw={MASK} ok\n"


def test_the_longest_secret_is_masked_first_so_a_shorter_one_inside_it_leaves_no_trace():
    assert scrubbed(["token=abcd-efgh\n"], ["abcd", "abcd-efgh"]) == f"token={MASK}\n"


def test_values_too_short_to_be_secrets_leave_the_text_alone():
    assert scrubbed(["retries=3 flag=on\n"], ["3", "on"]) == "retries=3 flag=on\n"
    assert not Scrubber(["3", "on"])


def test_text_held_back_for_a_possible_secret_comes_out_at_the_end():
    scrubber = Scrubber(["hunter22"])
    assert scrubber.scrub("abc") == ""
    assert scrubber.scrub("", final=True) == "abc"


class Connects(luigi.Task):
    user = luigi.Parameter()
    password = luigi.Parameter(visibility=ParameterVisibility.PRIVATE)
    token = luigi.Parameter(visibility=ParameterVisibility.HIDDEN)
    port = luigi.IntParameter(default=5432, visibility=ParameterVisibility.HIDDEN)


def test_the_hidden_and_private_values_of_a_task_are_its_secrets():
    task = Connects(user="ann", password="hunter22", token="tok-123")
    assert sorted(hidden_values(task)) == ["5432", "hunter22", "tok-123"]
