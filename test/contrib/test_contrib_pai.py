"""luigi.contrib.pai: PaiTask submits an OpenPAI job and is done only when OpenPAI says the job succeeded.

Against the stand-in (helpers/pai_standin.py), which speaks OpenPAI's REST calls over real HTTP: token,
submit, status, stop. Polling is ``[OpenPai] poll_interval = 0``; the tests wait on conditions, not time.
"""

from __future__ import annotations

import json
import logging

import pytest

import luigi
from luigi.contrib.pai import OpenPai, PaiJob, PaiTask, Port, TaskRole, slot_to_dict

requests = pytest.importorskip("requests")

from helpers.outcomes import build_failing, meanwhile, printed_without  # noqa: E402
from helpers.pai_standin import LOST, PASSWORD, USERNAME, PaiStandIn, pai_standin  # noqa: E402, F401


class Train(PaiTask):
    """A user's task: one job named after its parameter, two task roles."""

    run_name = luigi.Parameter(default="train-1")

    @property
    def name(self) -> str:
        return self.run_name

    @property
    def image(self) -> str:
        return "openpai/pai.example.tensorflow"

    @property
    def tasks(self) -> list[TaskRole]:
        return [
            TaskRole(
                "ps", "python train.py --role ps", memoryMB=4096, portList=[Port("grpc", port_number=2)]
            ),
            TaskRole("worker", "python train.py --role worker", taskNumber=2, gpuNumber=1),
        ]


@pytest.fixture
def pai(pai_standin: PaiStandIn) -> PaiStandIn:  # noqa: F811
    """The stand-in, configured as a user would in the [OpenPai] section, polled without waiting."""
    config = luigi.configuration.get_config()
    config.set("OpenPai", "pai_url", pai_standin.url)
    config.set("OpenPai", "username", USERNAME)
    config.set("OpenPai", "password", PASSWORD)
    config.set("OpenPai", "poll_interval", "0")
    return pai_standin


def test_a_job_that_succeeds_makes_the_task_done_after_polling_through_its_states(pai: PaiStandIn):
    pai.script = ["WAITING", "UNKNOWN", "RUNNING", "RUNNING", "SUCCEEDED"]

    task = Train()
    assert luigi.build([task], local_scheduler=True)

    job = pai.jobs["train-1"]
    assert job.step == 4  # one status GET per state, the last one SUCCEEDED
    assert task.complete()  # and OpenPAI's word is what complete() reports afterwards


def test_the_job_config_is_openpais_json_with_the_tasks_roles_and_defaults(pai: PaiStandIn):
    assert luigi.build([Train(run_name="cfg")], local_scheduler=True)

    assert pai.jobs["cfg"].config == {
        "jobName": "cfg",
        "image": "openpai/pai.example.tensorflow",
        "outputDir": "$PAI_DEFAULT_FS_URI/cfg/output",
        "virtualCluster": "default",
        "retryCount": 0,
        "taskRoles": [
            {
                "name": "ps", "command": "python train.py --role ps", "taskNumber": 1, "cpuNumber": 1,
                "memoryMB": 4096, "shmMB": 64, "gpuNumber": 0,
                "portList": [{"label": "grpc", "beginAt": 0, "portNumber": 2}],
            },
            {
                "name": "worker", "command": "python train.py --role worker", "taskNumber": 2,
                "cpuNumber": 1, "memoryMB": 2048, "shmMB": 64, "gpuNumber": 1, "portList": [],
            },
        ],
    }  # fmt: skip
    assert pai.token_requests == [{"username": USERNAME, "password": PASSWORD, "expiration": 3600}]


def test_luigis_succeed_state_also_counts_as_done(pai: PaiStandIn):
    pai.script = ["RUNNING", "SUCCEED"]  # the state name Luigi 3.8's PaiTask waits for

    assert luigi.build([Train()], local_scheduler=True)


def test_a_failed_job_fails_the_task_with_openpais_exit_reason(pai: PaiStandIn):
    pai.script = ["RUNNING"]

    def fail() -> None:
        pai.wait_for_state("RUNNING")
        pai.end(pai.jobs["train-1"], state="FAILED", appExitType="NON_TRANSIENT", appExitCode=3,
                appExitDiagnostics="worker-0 exited: out of memory\n")  # fmt: skip

    with meanwhile(fail):
        error = build_failing(Train())

    assert isinstance(error, RuntimeError)
    assert str(error) == (
        "OpenPAI job train-1 ended FAILED: exit type NON_TRANSIENT; exit code 3; "
        "worker-0 exited: out of memory"
    )
    assert not Train().complete()


def test_a_job_an_operator_stops_while_running_fails_the_task_as_stopped(pai: PaiStandIn):
    pai.script = ["WAITING", "RUNNING"]

    def stop() -> None:
        pai.wait_for_state("RUNNING")
        answer = requests.put(f"{pai.url}/api/v1/jobs/train-1/executionType", json={"value": "STOP"})
        assert answer.status_code == 202

    with meanwhile(stop):
        error = build_failing(Train())

    assert str(error) == "OpenPAI job train-1 ended STOPPED: exit type USER_STOP; UserApplicationKill"


def test_a_job_openpai_no_longer_knows_fails_the_task_as_lost(pai: PaiStandIn):
    pai.script = ["RUNNING", LOST]

    error = build_failing(Train())

    assert isinstance(error, requests.exceptions.HTTPError)
    assert str(error) == (
        "OpenPAI has no status for job 'train-1' (unknown or lost): HTTP 404: Job train-1 is not found."
    )


def test_a_job_name_already_on_the_cluster_is_refused_with_openpais_reason(pai: PaiStandIn):
    assert luigi.build([Train(run_name="taken")], local_scheduler=True)
    pai.jobs["taken"].ended = {"state": "FAILED"}  # the earlier job of that name is not a success

    error = build_failing(Train(run_name="taken"))

    assert isinstance(error, requests.exceptions.HTTPError)
    assert str(error) == "OpenPAI refused job 'taken': HTTP 409: Job name taken already exists."


def test_wrong_credentials_fail_when_the_task_is_made_naming_the_config_to_fix(pai: PaiStandIn):
    luigi.configuration.get_config().set("OpenPai", "password", "wrong")

    with pytest.raises(Exception, match=r"gave no token to user 'luigi' \(HTTP 400: Invalid user name or "):
        Train()
    assert pai.jobs == {}


def test_the_token_never_appears_in_the_log_or_the_task_id(pai: PaiStandIn, caplog):
    pai.script = ["RUNNING", "FAILED"]
    caplog.set_level(logging.DEBUG)

    task = Train()
    build_failing(task)

    assert caplog.text and pai.jobs["train-1"].step == 1  # the run was logged and polled
    assert pai.token not in caplog.text and PASSWORD not in caplog.text
    assert pai.token not in task.task_id and pai.token not in repr(task)


def test_complete_is_false_before_the_job_exists_without_submitting_anything(pai: PaiStandIn):
    assert not Train().complete()
    assert pai.jobs == {}


def test_nothing_is_pickled_the_wire_carries_only_json():
    job = PaiJob("j", "img", [TaskRole("r", "echo hi")])
    job.dataDir = "hdfs://data"

    assert json.loads(json.dumps(job, default=slot_to_dict)) == {
        "jobName": "j", "image": "img", "dataDir": "hdfs://data",
        "taskRoles": [{"name": "r", "command": "echo hi", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 2048,
                       "shmMB": 64, "gpuNumber": 0, "portList": []}],
    }  # fmt: skip


def test_a_job_without_task_roles_is_refused_naming_the_fix():
    with pytest.raises(TypeError, match=r"PaiJob 'j' needs tasks, a non-empty list of TaskRole"):
        PaiJob("j", "img", [])


def test_the_config_section_has_luigis_keys_and_defaults():
    config = OpenPai()
    assert (config.pai_url, config.username, config.password, config.expiration) == (
        "http://127.0.0.1:9186", "admin", None, 3600,
    )  # fmt: skip


def test_the_module_imports_without_requests_and_using_it_names_the_extra():
    code = (
        "import luigi\n"
        "from luigi.contrib.pai import PaiTask, PaiJob, TaskRole, Port, OpenPai, slot_to_dict\n"
        "class T(PaiTask):\n    name = 'n'\n    image = 'i'\n    tasks = []\n"
        "try:\n    T()\nexcept ImportError as e:\n    print(e)"
    )
    assert printed_without("requests", code) == (
        "luigi.contrib.pai needs the 'requests' package, which is not installed: "
        "pip install 'luigi[pai]' (or pip install requests)"
    )


def test_openpai_mocked_with_responses_as_in_luigis_tests_is_seen():
    responses = pytest.importorskip("responses")
    url = "http://127.0.0.1:9186"
    with responses.RequestsMock() as mocked:
        mocked.add(responses.POST, f"{url}/api/v1/token", json={"token": "t"}, status=200)
        mocked.add(responses.GET, f"{url}/api/v1/jobs/train-1", status=404)
        mocked.add(responses.POST, f"{url}/api/v1/jobs", json={"message": "ok"}, status=202)
        mocked.add(responses.GET, f"{url}/api/v1/jobs/train-1", json={"jobStatus": {"state": "SUCCEED"}})

        task = Train()
        assert luigi.build([task], local_scheduler=True)

        assert task.complete()
        assert [call.request.method for call in mocked.calls] == ["POST", "GET", "POST", "GET", "GET"]
        assert mocked.calls[2].request.headers["Authorization"] == "Bearer t"
