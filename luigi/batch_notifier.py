"""Batched failure e-mails of the central scheduler: the ``[batch_email]`` section.

Placeholder holding only the ``batch_email`` Config (so its ``--batch-email-*`` flags exist after
``import luigi``); the notifier itself comes with the batched e-mail work.
"""

from __future__ import annotations

from luigi import parameter
from luigi.task import Config

__all__ = ["batch_email"]


class batch_email(Config):
    """``[batch_email]``: how often and how the scheduler's batched failure e-mails are put together."""

    email_interval = parameter.IntParameter(default=60, description="Minutes between two batched e-mails.")
    batch_mode = parameter.ChoiceParameter(
        default="unbatched_params",
        choices=("family", "all", "unbatched_params"),
        description="What one line of the e-mail stands for: a task family ('family'), one task id "
        "('all'), or a family with its unbatched parameter values ('unbatched_params').",
    )
    error_lines = parameter.IntParameter(
        default=20, description="Last lines of each error kept in the e-mail (0 keeps them all)."
    )
    error_messages = parameter.IntParameter(default=1, description="Distinct errors kept per line.")
    group_by_error_messages = parameter.BoolParameter(
        default=True, description="Put lines that failed with the same errors into one group."
    )
