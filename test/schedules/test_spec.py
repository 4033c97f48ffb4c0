"""Reading ``[schedule:<name>]`` sections from a real config file: what a good one gives, and the one line
a bad one gets (naming the section and the key)."""

from __future__ import annotations

import textwrap
from datetime import datetime
from pathlib import Path

import pytest

from luigi.configuration import LuigiConfigParser
from luigi.schedules.spec import ScheduleConfigError, read_schedules
from luigi.schedules.timing import CronCadence, EveryCadence


def parse(tmp_path: Path, text: str) -> list:
    path = tmp_path / "luigid.cfg"
    path.write_text(textwrap.dedent(text))
    parser = LuigiConfigParser()
    parser.read([str(path)])
    return read_schedules(parser)


def test_a_full_section_is_read_as_written(tmp_path):
    (specs,) = parse(
        tmp_path,
        f"""
        [scheduler]
        record_task_history = false

        [schedule:daily_report]
        cron = 0 6 * * *
        command = --module pipeline DailyReport --date {{scheduled_time:%Y-%m-%d}} --label "a b"
        timezone = Europe/Berlin
        catchup = true
        cwd = {tmp_path}
        env.PYTHONPATH = /srv/pipelines
        env.REPORT_MODE = full
        """,
    )
    assert specs.name == "daily_report"
    assert isinstance(specs.cadence, CronCadence) and specs.cadence.expression == "0 6 * * *"
    assert specs.zone.key == "Europe/Berlin" and specs.catchup is True
    assert specs.cwd == str(tmp_path)
    assert dict(specs.env) == {"PYTHONPATH": "/srv/pipelines", "REPORT_MODE": "full"}
    slot = datetime(2024, 5, 1, 6, 0, tzinfo=specs.zone).timestamp()
    assert specs.arguments_for(slot) == [
        "--module",
        "pipeline",
        "DailyReport",
        "--date",
        "2024-05-01",
        "--label",
        "a b",
    ]


def test_defaults_are_utc_no_catchup_and_the_schedule_name_placeholder(tmp_path):
    (spec,) = parse(tmp_path, "[schedule:tick]\nevery = 5m\ncommand = --module m T --who {schedule}\n")
    assert spec.cadence == EveryCadence(300.0, "5m")
    assert spec.zone.key == "UTC" and spec.catchup is False and spec.cwd is None and not spec.env
    assert spec.deadline is None
    assert spec.arguments_for(0.0) == ["--module", "m", "T", "--who", "tick"]


@pytest.mark.parametrize(
    ("written", "seconds"),
    [("45m", 2700), ("2h", 7200), ("1h30m", 5400), ("90 s", 90), ("1 d", 86400), ("P1DT2H", 93600)],
)
def test_a_deadline_is_any_duration_read_in_seconds(tmp_path, written, seconds):
    (spec,) = parse(tmp_path, f"[schedule:tick]\nevery = 5m\ncommand = --module m T\ndeadline = {written}\n")
    assert spec.deadline == seconds


def test_no_schedule_sections_means_no_schedules(tmp_path):
    assert parse(tmp_path, "[scheduler]\nstate_path = /tmp/x\n[scheduleish]\nx = 1\n") == []


GOOD = "every = 30s\ncommand = --module m T\n"


@pytest.mark.parametrize(
    ("section", "key", "words"),
    [
        ("[schedule:a]\nevery = 30s\ncommand = --module m T\nretries = 3\n", "retries", "unknown key"),
        ("[schedule:a]\ncron = 61 * * * *\ncommand = --module m T\n", "cron", "not a cron expression"),
        ("[schedule:a]\ncron = every day\ncommand = --module m T\n", "cron", "not a cron expression"),
        ("[schedule:a]\nevery = 30s\ncommand =\n", "command", "is empty"),
        ("[schedule:a]\nevery = 30s\n", "command", "missing"),
        ("[schedule:a]\nevery = 30s\ncommand = --module 'm T\n", "command", "cannot be split"),
        ("[schedule:a]\nevery = 30s\ncommand = --module m T --d {when}\n", "command", "bad placeholder"),
        ("[schedule:a]\nevery = 30s\ncommand = --module m T --local-scheduler\n", "command", "must not"),
        ("[schedule:a]\n" + GOOD + "timezone = Mars/Olympus\n", "timezone", "not a known time zone"),
        ("[schedule:a]\ncron = 0 6 * * *\n" + GOOD, "cron/every", "has both"),
        ("[schedule:a]\ncommand = --module m T\n", "cron/every", "needs one of"),
        ("[schedule:a]\nevery = 0s\ncommand = --module m T\n", "every", "not an interval"),
        ("[schedule:a]\nevery = 30 seconds\ncommand = --module m T\n", "every", "not an interval"),
        ("[schedule:a]\n" + GOOD + "catchup = sometimes\n", "catchup", "not true or false"),
        ("[schedule:a]\n" + GOOD + "cwd = /no/such/dir\n", "cwd", "not a directory"),
        ("[schedule:a]\n" + GOOD + "env.1BAD = x\n", "env.1BAD", "environment variable name"),
        ("[schedule:a b]\n" + GOOD, "name", "not a schedule name"),
        ("[schedule:a]\n" + GOOD + "deadline = soon\n", "deadline", "write e.g. 45m, 2h"),
        ("[schedule:a]\n" + GOOD + "deadline = 0m\n", "deadline", "not a positive duration"),
        ("[schedule:a]\n" + GOOD + "deadline = -5m\n", "deadline", "not a positive duration"),
    ],
)
def test_a_bad_section_is_one_line_naming_the_section_and_the_key(tmp_path, section, key, words):
    section_name = section.split("]")[0].lstrip("[")
    with pytest.raises(ScheduleConfigError) as refused:
        parse(tmp_path, f"[schedule:fine]\n{GOOD}\n{section}")
    message = str(refused.value)
    assert message.startswith(f"[{section_name}] {key}: ")
    assert words in message
    assert "\n" not in message


def test_a_toml_config_may_give_env_as_a_table(tmp_path):
    from luigi.configuration import LuigiTomlParser

    path = tmp_path / "luigid.toml"
    path.write_text(
        '["schedule:hourly"]\nevery = "1h"\ncommand = "--module m T"\ncatchup = true\n'
        'env = { PYTHONPATH = "/srv" }\n'
    )
    parser = LuigiTomlParser()
    parser.read([str(path)])
    (spec,) = read_schedules(parser)
    assert (spec.name, spec.cadence, spec.catchup, dict(spec.env)) == (
        "hourly",
        EveryCadence(3600.0, "1h"),
        True,
        {"PYTHONPATH": "/srv"},
    )
