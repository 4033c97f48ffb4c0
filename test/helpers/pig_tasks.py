"""PigJobTasks the Pig tests run, in process and through the ``luigi`` command, as ``helpers.pig_tasks``."""

from __future__ import annotations

import luigi
from luigi.contrib.pig import PigJobTask


class SimplePigScript(PigJobTask):
    """Runs ``script`` with no options, parameters or properties."""

    script = luigi.Parameter()
    destination = luigi.Parameter()

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(self.destination)

    def pig_script_path(self) -> str:
        return self.script


class UppercaseWithPig(SimplePigScript):
    """Hands the script its input and output as ``$input`` and ``$output``, in local mode, with a property."""

    source = luigi.Parameter()

    def pig_options(self) -> list[str]:
        return ["-x", "local"]

    def pig_parameters(self) -> dict[str, str]:
        return {"input": self.source, "output": self.destination}

    def pig_properties(self) -> dict[str, str]:
        return {"pig.additional.jars": "/path/to/your/jar"}

    def pig_env_vars(self) -> dict[str, str]:
        return {"PIG_OPTS": "-Dmapreduce.job.queuename=luigi"}
