"""Credentials printed by a task are masked in its log: the built-in patterns, ``[task_log] redact``, and
their reach over output written in pieces (``Scrubber`` with a ``Redaction``)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from luigi import configuration
from luigi.worker.log_redaction import (
    BUILT_IN_PATTERNS,
    BUILT_IN_SOURCES,
    MASK,
    Redaction,
    RedactPatternError,
    configured_patterns,
)
from luigi.worker.loop import Worker
from luigi.worker.output_capture import LONGEST_LINE, STDERR, STDOUT, Scrubber

DEFAULTS = Redaction(BUILT_IN_SOURCES)
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"  # AWS's documented example: 40 characters


def only(name: str) -> Redaction:
    """The built-in pattern ``name`` alone, so that each case shows which pattern masks it."""
    return Redaction([next(pattern.regex for pattern in BUILT_IN_PATTERNS if pattern.name == name)])


@pytest.mark.parametrize(
    ("line", "masked"),
    [
        ("password=hunter22 user=ann", f"password={MASK} user=ann"),
        ("db_password: hunter22", f"db_password: {MASK}"),
        ("PGPASSWORD=hunter22", f"PGPASSWORD={MASK}"),
        ("passwd:hunter22", f"passwd:{MASK}"),
        ("MYSQL_PWD=hunter22", f"MYSQL_PWD={MASK}"),
        ("pwd=hunter22", f"pwd={MASK}"),
        ("pass=hunter22", f"pass={MASK}"),
        ('{"password": "two words", "user": "ann"}', f'{{"password": "{MASK}", "user": "ann"}}'),
        ("{'passphrase': 'x y z'}", f"{{'passphrase': '{MASK}'}}"),
        (
            "https://api.example.com/v1?api_key=abc123&page=2",
            f"https://api.example.com/v1?api_key={MASK}&page=2",
        ),
        ("access_token=ya29.a0Af client_secret=GOCSPX-1", f"access_token={MASK} client_secret={MASK}"),
        ("X-Api-Key: 0f3c9a", f"X-Api-Key: {MASK}"),
    ],
)
def test_the_value_of_a_password_or_token_key_is_masked_and_the_key_kept(line: str, masked: str) -> None:
    assert only("key_value").redact(line) == masked


@pytest.mark.parametrize(
    "line",
    [
        "max_tokens=100 tokenizer=bert",  # a key that only starts with a secret's word
        "bypass=1 compass: north passes=3",  # pass inside another word
        "password_file=/etc/secrets/db",  # the key names a file, the value is a path
        "the password was wrong",  # no value given
        "password:\nnext line",  # a value never comes from the next line
        "sort_key=name keyboard=us",
    ],
)
def test_ordinary_keys_and_prose_are_left_alone_by_the_key_value_pattern(line: str) -> None:
    assert only("key_value").redact(line) == line


def test_a_command_lines_secret_option_loses_its_value() -> None:
    line = "running dump --password hunter22 --api-key abc123 --host db --passes 3"
    assert (
        only("option_value").redact(line)
        == f"running dump --password {MASK} --api-key {MASK} --host db --passes 3"
    )


@pytest.mark.parametrize(
    ("line", "masked"),
    [
        ("Authorization: Bearer eyJhbGciOi.J9.xyz", f"Authorization: Bearer {MASK}"),
        ("authorization: Basic dXNlcjpwYXNz", f"authorization: Basic {MASK}"),
        ("headers={'Authorization': 'token ghp_abc123'}", f"headers={{'Authorization': 'token {MASK}'}}"),
    ],
)
def test_an_authorization_header_keeps_its_scheme_and_loses_its_credentials(line: str, masked: str) -> None:
    assert only("authorization").redact(line) == masked


def test_a_bare_bearer_token_is_masked_but_the_word_in_prose_is_not() -> None:
    assert only("bearer").redact("retrying with Bearer abc123def456") == f"retrying with Bearer {MASK}"
    assert only("bearer").redact("bearer ya29.a0AfH6SM") == f"bearer {MASK}"
    prose = "the bearer of bad news, Bearer tokens expire"
    assert only("bearer").redact(prose) == prose


@pytest.mark.parametrize(
    "line",
    [
        f"aws_secret_access_key = {AWS_SECRET}",
        f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}",
        f'"SecretAccessKey": "{AWS_SECRET}"',
        f"secret_key     {AWS_SECRET}     shared-credentials-file",
    ],
)
def test_an_aws_secret_access_key_after_its_key_name_is_masked(line: str) -> None:
    redacted = only("aws_secret_access_key").redact(line)
    assert AWS_SECRET not in redacted and MASK in redacted


def test_a_forty_character_hash_without_a_secret_key_name_is_left_alone() -> None:
    line = "commit 3f786850e387550fdab836ed7e6dc881de23001b secret: 3f786850e387550fdab836ed7e6dc881de23001b0"
    assert only("aws_secret_access_key").redact(line) == line  # the second is 41 characters: no key


def test_an_aws_access_key_id_is_masked_wherever_it_appears() -> None:
    line = "using AKIAIOSFODNN7EXAMPLE and ASIAY34FZKBOKMUTVV7A for s3"
    assert only("aws_access_key_id").redact(line) == f"using {MASK} and {MASK} for s3"
    ordinary = "AKIA is a prefix; akiaiosfodnn7example is lower case; AKIAIOSFODNN7EXAMPLE1 is too long"
    assert only("aws_access_key_id").redact(ordinary) == ordinary


def test_a_urls_password_is_masked_and_its_user_and_host_kept() -> None:
    line = "connecting to postgresql://ann:hunter22@db.example:5432/sales and redis://:s3cr%40t@cache:6379/0"
    masked = f"connecting to postgresql://ann:{MASK}@db.example:5432/sales and redis://:{MASK}@cache:6379/0"
    assert only("url_password").redact(line) == masked


def test_urls_without_a_password_are_left_alone() -> None:
    line = "see http://host:8080/path, ssh://git@github.com/x and mailto:ann@example.com"
    assert only("url_password").redact(line) == line


def test_every_built_in_pattern_together_masks_each_shape_once() -> None:
    line = "password=hunter22 Bearer abc123def456 AKIAIOSFODNN7EXAMPLE s3://k:v4lue@b"
    assert DEFAULTS.redact(line) == f"password={MASK} Bearer {MASK} {MASK} s3://k:{MASK}@b"


def test_a_line_without_any_credential_comes_back_unchanged() -> None:
    line = "INFO: [pid 4242] Worker Worker(salt=1, workers=1) done Talks(root=/tmp/x, n=3)\n"
    assert DEFAULTS.redact(line) == line


# -- the [task_log] section ------------------------------------------------------------------------------


def test_the_built_in_patterns_are_on_by_default() -> None:
    assert configured_patterns() == BUILT_IN_SOURCES


def test_own_patterns_come_one_per_line_after_the_built_in_ones() -> None:
    configuration.get_config().set("task_log", "redact", "\nsk_live_[0-9a-z]+\ncustomer=(?P<id>\\d+)\n")
    patterns = configured_patterns()
    assert patterns == (*BUILT_IN_SOURCES, "sk_live_[0-9a-z]+", r"customer=(?P<id>\d+)")
    own = Redaction(patterns)
    assert own.redact("key sk_live_4ec39 for customer=1234 done") == f"key {MASK} for customer={MASK} done"


def test_redact_defaults_false_leaves_only_the_own_patterns() -> None:
    configuration.get_config().set("task_log", "redact_defaults", "false")
    configuration.get_config().set("task_log", "redact", "internal-[0-9]+")
    patterns = configured_patterns()
    assert patterns == ("internal-[0-9]+",)
    assert Redaction(patterns).redact("password=hunter22 internal-77") == f"password=hunter22 {MASK}"


def test_a_pattern_that_does_not_compile_stops_the_worker_at_start_naming_the_setting_and_the_line() -> None:
    configuration.get_config().set("task_log", "redact", "fine-[0-9]+\nbroken(unclosed")
    with pytest.raises(RedactPatternError) as raised:
        Worker()
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("[task_log] redact: 'broken(unclosed' is not a regular expression")
    assert "fix or remove that line" in message


def test_the_luigi_command_reports_a_bad_pattern_in_one_line_and_runs_nothing(tmp_path: Path) -> None:
    (tmp_path / "one_task.py").write_text("import luigi\n\nclass Noted(luigi.Task):\n    pass\n")
    (tmp_path / "luigi.cfg").write_text(
        textwrap.dedent(
            """\
            [task_log]
            redact =
                order-[0-9]+
                broken(unclosed
            """
        )
    )
    env = {
        **os.environ,
        "LUIGI_CONFIG_PATH": str(tmp_path / "luigi.cfg"),
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    command = [sys.executable, "-m", "luigi", "--module", "one_task", "Noted", "--local-scheduler"]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 4 and done.stdout == ""
    assert done.stderr == (
        "luigi.worker.log_redaction.RedactPatternError: [task_log] redact: 'broken(unclosed' is not a regular"
        " expression (missing ), unterminated subpattern at position 6); fix or remove that line\n"
    )


# -- output written in pieces --------------------------------------------------------------------------


def scrubbed(pieces: list[str], secrets: list[str] = ()) -> str:
    scrubber = Scrubber(secrets, DEFAULTS)
    return "".join(scrubber.scrub(piece) for piece in pieces) + scrubber.scrub("", final=True)


def test_a_credential_printed_in_pieces_within_one_line_is_masked() -> None:
    pieces = ["conn", "ecting pass", "word=hun", "ter22 ok\nnext ", "AKIAIOSFOD", "NN7EXAMPLE\n"]
    assert scrubbed(pieces) == f"connecting password={MASK} ok\nnext {MASK}\n"


def test_an_unfinished_line_waits_for_its_end_and_a_finished_one_goes_at_once() -> None:
    scrubber = Scrubber([], DEFAULTS)
    assert scrubber.scrub("done line\npassword=hun") == "done line\n"
    assert scrubber.scrub("ter22\r") == f"password={MASK}\r"  # a carriage return ends a line too
    assert scrubber.scrub("last words") == ""
    assert scrubber.scrub("", final=True) == "last words"


def test_hidden_parameter_values_and_patterns_are_masked_together() -> None:
    assert scrubbed(["user tok-", "9f3a2 with pass", "word=hunter22\n"], ["tok-9f3a2"]) == (
        f"user {MASK} with password={MASK}\n"
    )


def test_a_line_longer_than_the_longest_is_masked_in_pieces_rather_than_held_whole() -> None:
    scrubber = Scrubber([], DEFAULTS)
    released = scrubber.scrub("x" * (LONGEST_LINE + 10) + " password=hunter22")
    assert released.startswith("x" * LONGEST_LINE) and "hunter22" not in released


def test_a_stderr_line_in_the_middle_of_a_stdout_line_neither_splits_it_nor_is_masked_with_it() -> None:
    scrubber = Scrubber([], DEFAULTS)
    pieces = [
        scrubber.scrub("header Authorization: Bea", stream=STDOUT),
        scrubber.scrub("INFO: running Talks\n", stream=STDERR),
        scrubber.scrub("rer eyJhbGc.token-77 sent\n", stream=STDOUT),
    ]
    assert pieces == ["", "INFO: running Talks\n", f"header Authorization: Bearer {MASK} sent\n"]


def test_what_each_stream_held_comes_out_at_the_end() -> None:
    scrubber = Scrubber([], DEFAULTS)
    assert scrubber.scrub("out password=hunter22", stream=STDOUT) == ""
    assert scrubber.scrub("err AKIAIOSFODNN7EXAMPLE", stream=STDERR) == ""
    assert scrubber.scrub("", final=True) == f"out password={MASK}err {MASK}"
