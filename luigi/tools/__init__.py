"""Tools built on the task model: ``luigi.tools.range`` (recurring tasks and backfills)."""
