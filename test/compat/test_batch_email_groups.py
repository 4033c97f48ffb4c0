"""Batched e-mails group keys with identical explanations, as Luigi's do (LUIGI_COMPAT j.6).

With ``[batch_email] group_by_error_messages`` (the default) keys whose kept explanations are identical form
one group; without it each key stands alone. Groups, and keys within a group, come in order of failures plus
scheduling failures, then disables (most first), then the smallest key; a group counts all its keys.
The e-mails are caught where users catch them, by replacing ``luigi.batch_notifier.send_email``.
"""

from __future__ import annotations

import textwrap

import pytest

import luigi.batch_notifier
from luigi import configuration
from luigi.batch_notifier import BatchNotifier

RECEIVER = "ops@example.com"


@pytest.fixture
def sent(monkeypatch) -> list[tuple[str, str]]:
    """The (subject, body) of each e-mail the notifier sends, to ``[email] receiver``."""
    configuration.get_config().set("email", "receiver", RECEIVER)
    mails: list[tuple[str, str]] = []

    def catch(subject, body, sender, recipients):
        assert tuple(recipients) == (RECEIVER,)
        mails.append((subject, body))

    monkeypatch.setattr(luigi.batch_notifier, "send_email", catch)
    return mails


def _body(sent: list[tuple[str, str]]) -> str:
    (mail,) = sent
    return mail[1]


def _mail_failures(sent: list[tuple[str, str]], failures: list[tuple[str, str]], **settings: bool) -> str:
    """The body of the one e-mail sent after each ``(family, error)`` failed once (no parameters)."""
    notifier = BatchNotifier(**settings)
    for family, expl in failures:
        notifier.add_failure(f"{family}()", family, {}, expl, [])
    notifier.send_email()
    return _body(sent)


# A() failed twice with "err X"; B(), C() and D() once each with "err Y": the larger group is theirs.
TWO_GROUPS = [("A", "err X"), ("A", "err X"), ("D", "err Y"), ("C", "err Y"), ("B", "err Y")]


def test_a_group_of_keys_sharing_an_error_comes_before_a_key_with_fewer_failures_than_the_group(sent):
    assert _mail_failures(sent, TWO_GROUPS) == textwrap.dedent(
        """\
        - B() (1 failure)
          C() (1 failure)
          D() (1 failure)

              err Y

        - A() (2 failures)

              err X"""
    )


def test_groups_with_as_many_failures_come_in_order_of_their_smallest_key(sent):
    failures = [("Z", "err Z"), ("Z", "err Z"), ("B", "err B"), ("A", "err B")]
    assert _mail_failures(sent, failures) == textwrap.dedent(
        """\
        - A() (1 failure)
          B() (1 failure)

              err B

        - Z() (2 failures)

              err Z"""
    )


def test_scheduling_failures_count_with_failures_and_disables_break_ties(sent):
    notifier = BatchNotifier()
    notifier.add_failure("A()", "A", {}, "err A", [])
    notifier.add_failure("A()", "A", {}, "err A", [])
    notifier.add_scheduling_fail("B()", "B", {}, "bad complete", [])
    notifier.add_failure("C()", "C", {}, "bad complete", [])
    notifier.add_disable("C()", "C", {}, [])
    notifier.send_email()
    assert _body(sent) == textwrap.dedent(
        """\
        - C() (1 failure, 1 disable)
          B() (1 scheduling failure)

              bad complete

        - A() (2 failures)

              err A"""
    )


def test_without_grouping_each_key_stands_alone_in_its_own_order(sent):
    assert _mail_failures(sent, TWO_GROUPS, group_by_error_messages=False) == textwrap.dedent(
        """\
        - A() (2 failures)

              err X

        - B() (1 failure)

              err Y

        - C() (1 failure)

              err Y

        - D() (1 failure)

              err Y"""
    )


def test_html_groups_come_in_the_same_order(sent):
    configuration.get_config().set("email", "format", "html")
    assert _mail_failures(sent, TWO_GROUPS) == (
        "<ul>\n<li>B() (1 failure)\n<br>C() (1 failure)\n<br>D() (1 failure)\n<pre>err Y</pre>\n"
        "<li>A() (2 failures)\n<pre>err X</pre>\n</ul>"
    )
