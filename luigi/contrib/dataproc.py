"""Google Cloud Dataproc for Luigi: create and delete clusters, and run Spark and PySpark jobs on them.

Needs the ``dataproc`` extra (google-api-python-client), imported when a client is first needed, not at
import as Luigi did. The client is ``discovery.build("dataproc", "v1")`` with Google's default
credentials; `set_dataproc_client` replaces it (another endpoint, other credentials, a test's client).
Jobs travel as Dataproc's JSON job description: nothing of the task is pickled.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import luigi
from luigi.contrib.optional import require

__all__ = [
    "CreateDataprocClusterTask",
    "DataprocBaseTask",
    "DataprocJobError",
    "DataprocPysparkTask",
    "DataprocSparkTask",
    "DeleteDataprocClusterTask",
    "dataproc",
    "get_dataproc_client",
    "set_dataproc_client",
]

logger = logging.getLogger(__name__)

_FEATURE = "luigi.contrib.dataproc"
_PACKAGE = "google-api-python-client"
_COMPUTE = "https://www.googleapis.com/compute/v1/projects/"
_CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
_HTTP_NOT_FOUND = 404

# Dataproc's job states: DONE is success; these end a job without it (Luigi 3.8 waited forever on them).
_JOB_DONE = "DONE"
_JOB_ENDED_BADLY = frozenset({"ERROR", "CANCELLED", "ATTEMPT_FAILURE"})
_CLUSTER_READY = frozenset({"RUNNING", "UPDATING"})
_CLUSTER_BROKEN = frozenset({"ERROR", "ERROR_DUE_TO_UPDATE"})

_dataproc_client: Any = None


class dataproc(luigi.Config):  # noqa: N801  # the [dataproc] section
    """The ``[dataproc]`` section (ours; Luigi hard-codes these): seconds between two status checks."""

    job_poll_interval = luigi.FloatParameter(default=5.0)
    cluster_poll_interval = luigi.FloatParameter(default=10.0)


class DataprocJobError(Exception):
    """A Dataproc job or cluster ended in a state that is not success (error, cancelled, broken)."""


def get_dataproc_client() -> Any:
    """The Dataproc API client the tasks use, built with Google's default credentials on first use."""
    global _dataproc_client
    if _dataproc_client is None:
        _dataproc_client = _default_client()
    return _dataproc_client


def set_dataproc_client(client: Any) -> None:
    """Use ``client`` (a ``discovery.build("dataproc", "v1", ...)`` resource) for every Dataproc task."""
    global _dataproc_client
    _dataproc_client = client


def _default_client() -> Any:
    discovery = require("googleapiclient.discovery", "dataproc", _FEATURE, _PACKAGE)
    google_auth = require("google.auth", "dataproc", _FEATURE, _PACKAGE)
    try:
        credentials, _project = google_auth.default()
    except google_auth.exceptions.DefaultCredentialsError as exc:
        raise DataprocJobError(
            f"{_FEATURE} found no Google credentials ({exc}): set GOOGLE_APPLICATION_CREDENTIALS or "
            "call luigi.contrib.dataproc.set_dataproc_client(...)"
        ) from exc
    return discovery.build("dataproc", "v1", cache_discovery=False, credentials=credentials)


def _is_not_found(exc: Exception) -> bool:
    return getattr(getattr(exc, "resp", None), "status", None) == _HTTP_NOT_FOUND


def _http_error() -> type[Exception]:
    return require("googleapiclient.errors", "dataproc", _FEATURE, _PACKAGE).HttpError


class _ModuleClient:
    """The class attribute ``dataproc_client``: the module's client at each use, so
    `set_dataproc_client` after the class was made still counts (Luigi captured it at class creation)."""

    def __get__(self, instance: object, owner: type) -> Any:
        return get_dataproc_client()


class _DataprocBaseTask(luigi.Task):
    """The project, cluster and region every Dataproc task names (none in the task id, as in Luigi)."""

    gcloud_project_id = luigi.Parameter(significant=False, positional=False)
    dataproc_cluster_name = luigi.Parameter(significant=False, positional=False)
    dataproc_region = luigi.Parameter(default="global", significant=False, positional=False)

    dataproc_client: Any = _ModuleClient()

    def _where(self) -> dict[str, str]:
        return {"projectId": self.gcloud_project_id, "region": self.dataproc_region}

    def _clusters(self) -> Any:
        return self.dataproc_client.projects().regions().clusters()

    def _get_cluster(self, **fields: str) -> dict[str, Any] | None:
        """The cluster's description, or None when Dataproc does not know it (404)."""
        request = self._clusters().get(clusterName=self.dataproc_cluster_name, **self._where(), **fields)
        try:
            return dict(request.execute())
        except _http_error() as exc:
            if _is_not_found(exc):
                return None
            raise


class DataprocBaseTask(_DataprocBaseTask):
    """A task that submits one job to the cluster and waits until Dataproc says it is DONE."""

    _job: dict[str, Any]
    _job_id: str

    def submit_job(self, job_config: dict[str, Any]) -> dict[str, Any]:
        """Submit ``job_config`` (Dataproc's SubmitJobRequest body) and remember the job's id."""
        jobs = self.dataproc_client.projects().regions().jobs()
        self._job = dict(jobs.submit(**self._where(), body=job_config).execute())
        self._job_id = str(self._job["reference"]["jobId"])
        logger.info("Submitted Dataproc job %s to cluster %s", self._job_id, self.dataproc_cluster_name)
        return self._job

    def submit_spark_job(self, jars: list[str], main_class: str, job_args: list[str] | None = None) -> Any:
        """Run ``main_class`` from ``jars`` with ``job_args`` as a Spark job on the cluster."""
        spark_job = {"args": job_args or [], "mainClass": main_class, "jarFileUris": jars}
        return self.submit_job(self._job_body("sparkJob", spark_job))

    def submit_pyspark_job(
        self, job_file: str, extra_files: list[str] | None = None, job_args: list[str] | None = None
    ) -> Any:
        """Run the Python file ``job_file`` (with ``extra_files`` on its path) as a PySpark job."""
        pyspark_job = {
            "mainPythonFileUri": job_file,
            "pythonFileUris": extra_files or [],
            "args": job_args or [],
        }
        return self.submit_job(self._job_body("pysparkJob", pyspark_job))

    def _job_body(self, kind: str, job: dict[str, Any]) -> dict[str, Any]:
        placement = {"clusterName": self.dataproc_cluster_name}
        return {"projectId": self.gcloud_project_id, "job": {"placement": placement, kind: job}}

    def wait_for_job(self) -> None:
        """Poll the job until DONE; DataprocJobError when it ends otherwise, HttpError when it is lost."""
        jobs = self.dataproc_client.projects().regions().jobs()
        while True:
            status = jobs.get(**self._where(), jobId=self._job_id).execute()["status"]
            state = status["state"]
            if state == _JOB_DONE:
                logger.info("Dataproc job %s is DONE", self._job_id)
                return
            if state in _JOB_ENDED_BADLY:
                details = status.get("details") or "no details given by Dataproc"
                raise DataprocJobError(f"Dataproc job {self._job_id} ended {state}: {details}")
            logger.debug("Dataproc job %s is %s", self._job_id, state)
            time.sleep(dataproc().job_poll_interval)


def _split(values: str) -> list[str]:
    """A comma-separated parameter as a list; empty gives an empty list, not ``[""]``."""
    return [value for value in values.split(",") if value]


class DataprocSparkTask(DataprocBaseTask):
    """Run a Spark job: ``main_class`` from the comma-separated ``jars``, with ``job_args`` (too)."""

    main_class = luigi.Parameter()
    jars = luigi.Parameter(default="")
    job_args = luigi.Parameter(default="")

    def run(self) -> None:
        self.submit_spark_job(
            jars=_split(self.jars), main_class=self.main_class, job_args=_split(self.job_args)
        )
        self.wait_for_job()


class DataprocPysparkTask(DataprocBaseTask):
    """Run a PySpark job: ``job_file``, with comma-separated ``extra_files`` and ``job_args``."""

    job_file = luigi.Parameter()
    extra_files = luigi.Parameter(default="")
    job_args = luigi.Parameter(default="")

    def run(self) -> None:
        self.submit_pyspark_job(
            job_file=self.job_file, extra_files=_split(self.extra_files), job_args=_split(self.job_args)
        )
        self.wait_for_job()


class CreateDataprocClusterTask(_DataprocBaseTask):
    """Create the cluster and wait until it is RUNNING; done while the cluster is up."""

    gcloud_zone = luigi.Parameter(default="europe-west1-c")
    gcloud_network = luigi.Parameter(default="default")
    master_node_type = luigi.Parameter(default="n1-standard-2")
    master_disk_size = luigi.Parameter(default="100")
    worker_node_type = luigi.Parameter(default="n1-standard-2")
    worker_disk_size = luigi.Parameter(default="100")
    worker_normal_count = luigi.Parameter(default="2")
    worker_preemptible_count = luigi.Parameter(default="0")
    image_version = luigi.Parameter(default="")

    def complete(self) -> bool:
        """Done while Dataproc reports the cluster RUNNING or UPDATING; absent, coming up, broken is not."""
        cluster = self._get_cluster()
        return cluster is not None and cluster["status"]["state"] in _CLUSTER_READY

    def _machine(self, node_type: str, disk_size: str, count: str) -> dict[str, Any]:
        zone = f"{_COMPUTE}{self.gcloud_project_id}/zones/{self.gcloud_zone}"
        return {
            "numInstances": int(count),
            "machineTypeUri": f"{zone}/machineTypes/{node_type}",
            "diskConfig": {"bootDiskSizeGb": int(disk_size), "numLocalSsds": 0},
        }

    def cluster_config(self) -> dict[str, Any]:
        """The Cluster body that ``clusters.create`` gets."""
        project = f"{_COMPUTE}{self.gcloud_project_id}"
        config: dict[str, Any] = {
            "gceClusterConfig": {
                "networkUri": f"{project}/global/networks/{self.gcloud_network}",
                "zoneUri": f"{project}/zones/{self.gcloud_zone}",
                "serviceAccountScopes": [_CLOUD_PLATFORM_SCOPE],
            },
            "masterConfig": self._machine(self.master_node_type, self.master_disk_size, "1"),
            "workerConfig": self._machine(
                self.worker_node_type, self.worker_disk_size, self.worker_normal_count
            ),
            "secondaryWorkerConfig": {
                "numInstances": int(self.worker_preemptible_count),
                "isPreemptible": True,
            },
        }
        if self.image_version:
            config["softwareConfig"] = {"imageVersion": self.image_version}
        return {
            "projectId": self.gcloud_project_id,
            "clusterName": self.dataproc_cluster_name,
            "config": config,
        }

    def run(self) -> None:
        self._clusters().create(**self._where(), body=self.cluster_config()).execute()
        logger.info("Creating Dataproc cluster %s", self.dataproc_cluster_name)
        while True:
            cluster = self._get_cluster()
            if cluster is None:
                raise DataprocJobError(
                    f"Dataproc cluster {self.dataproc_cluster_name} vanished while created"
                )
            state = cluster["status"]["state"]
            if state in _CLUSTER_READY:
                return
            if state in _CLUSTER_BROKEN:
                details = cluster["status"].get("detail") or "no detail given by Dataproc"
                raise DataprocJobError(f"Dataproc cluster {self.dataproc_cluster_name} is {state}: {details}")
            time.sleep(dataproc().cluster_poll_interval)


class DeleteDataprocClusterTask(_DataprocBaseTask):
    """Delete the cluster and wait until Dataproc no longer knows it; done when it is gone."""

    def complete(self) -> bool:
        return self._get_cluster(fields="status") is None

    def run(self) -> None:
        self._clusters().delete(clusterName=self.dataproc_cluster_name, **self._where()).execute()
        logger.info("Deleting Dataproc cluster %s", self.dataproc_cluster_name)
        while (cluster := self._get_cluster(fields="status")) is not None:
            if cluster["status"]["state"] in _CLUSTER_BROKEN:
                detail = cluster["status"].get("detail") or "no detail given by Dataproc"
                raise DataprocJobError(
                    f"Dataproc cluster {self.dataproc_cluster_name} failed to delete: {detail}"
                )
            time.sleep(dataproc().cluster_poll_interval)
