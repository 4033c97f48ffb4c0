"""Tasks that run Apache Spark applications through ``spark-submit``, and PySpark code written inline.

``SparkSubmitTask`` turns its properties (each read from the ``[spark]`` config section unless a subclass
overrides it) into a ``spark-submit`` command line and runs it as an ``ExternalProgramTask``: the Spark
UI's address found in the driver's log becomes the task's tracking URL, and a job that fails becomes a
``SparkJobError`` that leads with the driver's own error. ``PySparkTask`` runs its ``main(sc, *args)`` on
the driver through ``luigi.contrib.pyspark_runner``, handing the task over as a pickle written to a
private directory of the run (and deleted after it).

Spark configuration values whose key names a secret (``spark.hadoop.fs.s3a.secret.key``,
``spark.ssl.keyStorePassword``, ...) never go on the command line: they are written to a private
``--properties-file`` for the run, so no log line or error text can show them. The worker needs no
Spark library of its own, only a ``spark-submit`` (``pip install 'luigi[spark]'`` brings one).
"""

from __future__ import annotations

from luigi.contrib.spark.driver_output import TRACKING_URL_PATTERN, SparkJobError
from luigi.contrib.spark.pyspark_task import PySparkTask
from luigi.contrib.spark.submit import SparkSubmitTask

__all__ = ["TRACKING_URL_PATTERN", "PySparkTask", "SparkJobError", "SparkSubmitTask"]
