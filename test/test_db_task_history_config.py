"""``[scheduler] record_task_history`` and ``[task_history]``: defaults, the SQLite file, bad values."""

from __future__ import annotations

from pathlib import Path

import pytest

from luigi import configuration
from luigi.db_task_history import DbTaskHistory, HistorySettings, TaskHistoryError
from luigi.scheduler import Scheduler
from luigi.task_history import NopHistory


def configure(**sections: dict[str, str]) -> None:
    config = configuration.get_config()
    for section, options in sections.items():
        for option, value in options.items():
            config.set(section, option, value)


def test_the_defaults_keep_ninety_days_and_buffer_a_hundred_thousand_events() -> None:
    settings = HistorySettings()

    assert (settings.keep_days, settings.buffer_size, settings.batch_size) == (90.0, 100_000, 1000)
    assert settings.keep_seconds == 90 * 86400


def test_without_db_connection_the_history_is_a_sqlite_file_beside_the_state_path(tmp_path: Path) -> None:
    configure(scheduler={"state_path": str(tmp_path / "state" / "luigi-state.pickle")})

    history = DbTaskHistory()
    history.close()

    assert history.where == f"sqlite:///{tmp_path / 'state' / 'luigi-state.history.sqlite'}"
    assert (tmp_path / "state" / "luigi-state.history.sqlite").is_file()


def test_record_task_history_gives_the_scheduler_a_database_history(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    configure(
        scheduler={"record_task_history": "true"}, task_history={"db_connection": url, "keep_days": "7"}
    )

    scheduler = Scheduler()
    history = scheduler._task_history  # white-box: the scheduler exposes no accessor yet
    try:
        assert isinstance(history, DbTaskHistory)
        assert scheduler.has_task_history() and history.settings.keep_days == 7.0
    finally:
        history.close()


def test_without_record_task_history_nothing_is_recorded() -> None:
    assert isinstance(Scheduler()._task_history, NopHistory)


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("keep_days", "ninety", "[task_history] keep_days = 'ninety' is not a number"),
        ("buffer_size", "1.5", "[task_history] buffer_size = '1.5' is not an integer"),
        ("batch_size", "0", "[task_history] batch_size = 0 is not valid (expected an integer >= 1)"),
        ("keep_days", "-1", "[task_history] keep_days = -1.0 is not valid (expected a number >= 0)"),
    ],
)
def test_a_bad_option_value_is_named_in_the_error(option: str, value: str, expected: str) -> None:
    configure(task_history={option: value})

    with pytest.raises(TaskHistoryError) as bad:
        HistorySettings.from_config()

    assert expected in str(bad.value)


def test_a_db_connection_that_is_not_a_url_is_named_in_the_error() -> None:
    with pytest.raises(TaskHistoryError, match=r"db_connection 'not a url' is not a SQLAlchemy URL"):
        DbTaskHistory("not a url")


def test_a_history_file_whose_directory_cannot_be_made_is_named_in_the_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")

    with pytest.raises(TaskHistoryError, match="Cannot create the directory of the task history file"):
        DbTaskHistory(f"sqlite:///{blocker / 'history.sqlite'}")
