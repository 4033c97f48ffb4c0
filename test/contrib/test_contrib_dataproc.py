"""luigi.contrib.dataproc: cluster and job tasks are done only when Dataproc says so.

Against the stand-in (helpers/dataproc_standin.py) through googleapiclient's own ``dataproc v1``
discovery client over real HTTP, handed to the module with `set_dataproc_client` as a user would for
another endpoint. Polling is ``[dataproc] *_poll_interval = 0``; the tests wait on conditions, not time.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import luigi
from luigi.contrib import dataproc
from luigi.contrib.dataproc import (
    CreateDataprocClusterTask,
    DataprocJobError,
    DataprocPysparkTask,
    DataprocSparkTask,
    DeleteDataprocClusterTask,
)

pytest.importorskip("googleapiclient")

from googleapiclient.errors import HttpError  # noqa: E402
from helpers.dataproc_standin import GONE, DataprocStandIn, dataproc_standin  # noqa: E402, F401
from helpers.outcomes import build_failing, meanwhile, printed_without  # noqa: E402

WHERE = {"gcloud_project_id": "proj", "dataproc_cluster_name": "etl", "dataproc_region": "europe-west1"}


@pytest.fixture
def gcp(dataproc_standin: DataprocStandIn) -> Iterator[DataprocStandIn]:  # noqa: F811
    """The stand-in as the module's client, polled without waiting; the module's client reset after."""
    config = luigi.configuration.get_config()
    config.set("dataproc", "job_poll_interval", "0")
    config.set("dataproc", "cluster_poll_interval", "0")
    dataproc.set_dataproc_client(dataproc_standin.client())
    yield dataproc_standin
    dataproc.set_dataproc_client(None)


def test_create_a_cluster_then_a_spark_job_then_delete_it_each_done_when_dataproc_says_so(
    gcp: DataprocStandIn,
):
    gcp.cluster_script = ["CREATING", "CREATING", "RUNNING"]

    assert luigi.build([CreateDataprocClusterTask(**WHERE, image_version="2.2")], local_scheduler=True)
    assert CreateDataprocClusterTask(**WHERE).complete()
    spark = DataprocSparkTask(**WHERE, main_class="org.example.Count", jars="gs://b/a.jar,gs://b/b.jar",
                              job_args="--day,2026-01-01")  # fmt: skip
    assert luigi.build([spark], local_scheduler=True)
    assert luigi.build([DeleteDataprocClusterTask(**WHERE)], local_scheduler=True)

    [job] = gcp.jobs.values()
    assert job.body == {
        "placement": {"clusterName": "etl"},
        "sparkJob": {"args": ["--day", "2026-01-01"], "mainClass": "org.example.Count",
                     "jarFileUris": ["gs://b/a.jar", "gs://b/b.jar"]},
    }  # fmt: skip
    assert job.step == 3  # polled PENDING, SETUP_DONE, RUNNING, DONE
    assert DeleteDataprocClusterTask(**WHERE).complete() and not CreateDataprocClusterTask(**WHERE).complete()


def test_the_cluster_body_names_network_zone_machines_scope_and_image(gcp: DataprocStandIn):
    assert luigi.build([CreateDataprocClusterTask(**WHERE, image_version="2.2")], local_scheduler=True)

    compute = "https://www.googleapis.com/compute/v1/projects/proj"
    machine = f"{compute}/zones/europe-west1-c/machineTypes/n1-standard-2"
    assert gcp.clusters["etl"].body == {
        "projectId": "proj",
        "clusterName": "etl",
        "config": {
            "gceClusterConfig": {
                "networkUri": f"{compute}/global/networks/default",
                "zoneUri": f"{compute}/zones/europe-west1-c",
                "serviceAccountScopes": ["https://www.googleapis.com/auth/cloud-platform"],
            },
            "masterConfig": {"numInstances": 1, "machineTypeUri": machine,
                             "diskConfig": {"bootDiskSizeGb": 100, "numLocalSsds": 0}},
            "workerConfig": {"numInstances": 2, "machineTypeUri": machine,
                             "diskConfig": {"bootDiskSizeGb": 100, "numLocalSsds": 0}},
            "secondaryWorkerConfig": {"numInstances": 0, "isPreemptible": True},
            "softwareConfig": {"imageVersion": "2.2"},
        },
    }  # fmt: skip


def test_a_pyspark_job_carries_its_file_extra_files_and_args(gcp: DataprocStandIn):
    gcp.add_cluster("etl", "RUNNING")

    task = DataprocPysparkTask(**WHERE, job_file="gs://b/main.py", extra_files="gs://b/lib.py")
    assert luigi.build([task], local_scheduler=True)

    [job] = gcp.jobs.values()
    assert job.body["pysparkJob"] == {"mainPythonFileUri": "gs://b/main.py", "pythonFileUris": ["gs://b/lib.py"],
                                      "args": []}  # fmt: skip


def test_a_job_in_error_fails_the_task_with_dataprocs_details(gcp: DataprocStandIn):
    gcp.add_cluster("etl", "RUNNING")
    gcp.job_script = ["PENDING", "RUNNING"]

    def fail() -> None:
        job_id = gcp.wait_for_job_state("RUNNING")
        gcp.end(gcp.jobs[job_id], state="ERROR", details="Job failed with message [Exit code 1]")

    with meanwhile(fail):
        error = build_failing(DataprocSparkTask(**WHERE, main_class="M"))

    [job_id] = gcp.jobs
    assert isinstance(error, DataprocJobError)
    assert str(error) == f"Dataproc job {job_id} ended ERROR: Job failed with message [Exit code 1]"


def test_a_job_cancelled_while_running_fails_the_task_as_cancelled(gcp: DataprocStandIn):
    gcp.add_cluster("etl", "RUNNING")
    gcp.job_script = ["PENDING", "RUNNING"]

    def cancel() -> None:
        job_id = gcp.wait_for_job_state("RUNNING")
        operator = gcp.client().projects().regions().jobs()
        operator.cancel(projectId="proj", region="europe-west1", jobId=job_id).execute()

    with meanwhile(cancel):
        error = build_failing(DataprocSparkTask(**WHERE, main_class="M"))

    assert isinstance(error, DataprocJobError)
    assert str(error).endswith(" ended CANCELLED: no details given by Dataproc")


def test_a_job_dataproc_no_longer_knows_fails_the_task_as_lost(gcp: DataprocStandIn):
    gcp.add_cluster("etl", "RUNNING")
    gcp.job_script = ["RUNNING", GONE]

    error = build_failing(DataprocSparkTask(**WHERE, main_class="M"))

    assert isinstance(error, HttpError) and error.resp.status == 404


def test_a_job_for_a_cluster_that_does_not_exist_fails_with_dataprocs_not_found(gcp: DataprocStandIn):
    error = build_failing(DataprocSparkTask(**WHERE, main_class="M"))

    assert isinstance(error, HttpError) and "Not found: Cluster etl" in str(error)
    assert gcp.jobs == {}


def test_a_cluster_that_ends_in_error_fails_the_create_task_and_is_not_complete(gcp: DataprocStandIn):
    gcp.cluster_script = ["CREATING", "ERROR"]

    error = build_failing(CreateDataprocClusterTask(**WHERE))

    assert isinstance(error, DataprocJobError) and str(error).startswith("Dataproc cluster etl is ERROR: ")
    assert not CreateDataprocClusterTask(**WHERE).complete()


def test_a_cluster_still_creating_is_not_complete(gcp: DataprocStandIn):
    gcp.add_cluster("etl", "CREATING")

    assert not CreateDataprocClusterTask(**WHERE).complete()


def test_a_client_set_after_the_classes_were_made_is_the_one_used(gcp: DataprocStandIn):
    assert CreateDataprocClusterTask.dataproc_client is dataproc.get_dataproc_client()


def test_the_module_imports_without_the_client_library_and_using_it_names_the_extra():
    code = (
        "from luigi.contrib.dataproc import DataprocSparkTask, get_dataproc_client\n"
        "t = DataprocSparkTask(gcloud_project_id='p', dataproc_cluster_name='c', main_class='M')\n"
        "try:\n    get_dataproc_client()\nexcept ImportError as e:\n    print(e)"
    )
    assert printed_without("googleapiclient", code) == (
        "luigi.contrib.dataproc needs the 'googleapiclient.discovery' package, which is not installed: "
        "pip install 'luigi[dataproc]' (or pip install google-api-python-client)"
    )
