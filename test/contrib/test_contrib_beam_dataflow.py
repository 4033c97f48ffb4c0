"""luigi.contrib.beam_dataflow: BeamDataflowJobTask builds Luigi's command line and runs a Beam program.

The runs are real: helpers/beam_pipeline.py is an Apache Beam pipeline the task starts with the
DirectRunner, through ``luigi.build``. The command line is checked flag by flag as Luigi builds it, with
Java's flag names and with Python's (which Beam's own option parser then reads).
"""

from __future__ import annotations

import logging
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from helpers.outcomes import build_failing
from helpers.services import require_module

import luigi
from luigi.contrib.beam_dataflow import BeamDataflowJobTask, DataflowJobError, DataflowParamKeys
from luigi.mock import MockTarget

PIPELINE = str(Path(__file__).parent.parent / "helpers" / "beam_pipeline.py")


class PythonKeys(DataflowParamKeys):
    """The Beam Python SDK's flag names."""

    runner = "runner"
    project = "project"
    zone = "zone"
    region = "region"
    staging_location = "staging_location"
    temp_location = "temp_location"
    gcp_temp_location = "temp_location"
    num_workers = "num_workers"
    autoscaling_algorithm = "autoscaling_algorithm"
    max_num_workers = "max_num_workers"
    disk_size_gb = "disk_size_gb"
    worker_machine_type = "worker_machine_type"
    worker_disk_type = "worker_disk_type"
    job_name = "job_name"
    service_account = "service_account_email"
    network = "network"
    subnetwork = "subnetwork"
    labels = "labels"


class JavaKeys(DataflowParamKeys):
    """The Beam Java SDK's flag names."""

    runner = "runner"
    project = "project"
    zone = "zone"
    region = "region"
    staging_location = "stagingLocation"
    temp_location = "tempLocation"
    gcp_temp_location = "gcpTempLocation"
    num_workers = "numWorkers"
    autoscaling_algorithm = "autoscalingAlgorithm"
    max_num_workers = "maxNumWorkers"
    disk_size_gb = "diskSizeGb"
    worker_machine_type = "workerMachineType"
    worker_disk_type = "workerDiskType"
    job_name = "jobName"
    service_account = "serviceAccount"
    network = "network"
    subnetwork = "subnetwork"
    labels = "labels"


class Files(luigi.ExternalTask):
    """Data that is already there: a folder of part files, or one file."""

    path = luigi.Parameter()

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(self.path)


class SumCounts(BeamDataflowJobTask):
    """A user's task: the Python pipeline with the DirectRunner, recording its callbacks as they come."""

    in_dir = luigi.Parameter()
    out = luigi.Parameter()

    dataflow_params = PythonKeys()
    runner = "DirectRunner"
    calls: list[Any] = []

    def dataflow_executable(self) -> list[str]:
        return [sys.executable, PIPELINE]

    def requires(self) -> luigi.Task:
        return Files(self.in_dir)

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(self.out)

    def before_run(self) -> None:
        self.calls.append("before_run")

    def on_successful_run(self) -> None:
        self.calls.append("on_successful_run")

    def validate_output(self) -> bool:
        self.calls.append("validate_output")
        return Path(self.out).exists()

    def on_successful_output_validation(self) -> None:
        self.calls.append("on_successful_output_validation")

    def cleanup_on_error(self, error: BaseException) -> None:
        self.calls.append(error)


@pytest.fixture
def counts(tmp_path: Path) -> Path:
    """A folder of two part files of ``name,count`` lines, and a file beside them the pattern leaves out."""
    folder = tmp_path / "counts"
    folder.mkdir()
    (folder / "part-00000").write_text("a,1\nb,2\n")
    (folder / "part-00001").write_text("a,2\nb,3\n")
    (folder / "_SUCCESS").write_text("not,data,at,all\n")
    return folder


@pytest.fixture
def beam() -> None:
    require_module("apache_beam", "test")
    SumCounts.calls = []


@pytest.mark.slow  # a Beam program with the DirectRunner: 10 s or more here
@pytest.mark.usefixtures("beam")
def test_a_pipeline_reads_its_input_parts_and_writes_its_output_with_the_direct_runner(counts, tmp_path):
    out = tmp_path / "totals.csv"
    task = SumCounts(in_dir=str(counts), out=str(out))

    assert luigi.build([task], local_scheduler=True)

    assert sorted(out.read_text().splitlines()) == ["a,3", "b,5"]
    assert SumCounts.calls == [
        "before_run",
        "on_successful_run",
        "validate_output",
        "on_successful_output_validation",
    ]


@pytest.mark.slow  # a Beam program with the DirectRunner: 10 s or more here
@pytest.mark.usefixtures("beam")
def test_the_dataflow_service_options_are_accepted_by_a_real_beam_program(counts, tmp_path):
    class WithServiceOptions(SumCounts):
        project = "some-project"
        region = "europe-west1"
        temp_location = str(tmp_path / "temp")
        num_workers = 2
        job_name = "sum-counts"
        labels = {"team": "data"}

    out = tmp_path / "totals.csv"

    assert luigi.build([WithServiceOptions(in_dir=str(counts), out=str(out))], local_scheduler=True)

    assert sorted(out.read_text().splitlines()) == ["a,3", "b,5"]


@pytest.mark.slow  # a Beam program with the DirectRunner: 10 s or more here
@pytest.mark.usefixtures("beam")
def test_a_failing_pipeline_fails_the_task_with_its_exit_code_and_error_after_cleanup(counts, tmp_path):
    (counts / "part-00002").write_text("c,three\n")
    out = tmp_path / "totals.csv"

    error = build_failing(SumCounts(in_dir=str(counts), out=str(out)))

    assert isinstance(error, DataflowJobError)
    assert isinstance(error, subprocess.CalledProcessError)
    assert error.returncode == 1
    assert "ValueError: invalid literal for int() with base 10: 'three'" in str(error)
    assert str(error).startswith(
        f"Beam pipeline exited 1 ({sys.executable} {PIPELINE} --runner=DirectRunner ...)"
    )
    assert SumCounts.calls[0] == "before_run"
    [cleaned_up_after] = SumCounts.calls[1:]
    assert isinstance(cleaned_up_after, subprocess.CalledProcessError)
    assert "invalid literal" in cleaned_up_after.output
    assert not out.exists()


@pytest.mark.slow  # a Beam program with the DirectRunner: 10 s or more here
@pytest.mark.usefixtures("beam")
def test_output_that_fails_validation_fails_the_task_after_cleanup(counts, tmp_path):
    class NeverValid(SumCounts):
        def validate_output(self) -> bool:
            return False

    error = build_failing(NeverValid(in_dir=str(counts), out=str(tmp_path / "totals.csv")))

    assert isinstance(error, ValueError)
    assert str(error) == "Output validation failed"
    assert SumCounts.calls == ["before_run", "on_successful_run", error]


@pytest.mark.usefixtures("beam")
def test_the_python_flags_are_read_by_beams_own_option_parser(counts, tmp_path):
    from apache_beam.options import pipeline_options as options

    class Configured(SumCounts):
        project = "some-project"
        region = "europe-west1"
        staging_location = "gs://bucket/staging"
        temp_location = "gs://bucket/temp"
        num_workers = 3
        max_num_workers = 5
        autoscaling_algorithm = "THROUGHPUT_BASED"
        disk_size_gb = 50
        worker_machine_type = "n1-standard-4"
        service_account = "runner@some-project.iam.gserviceaccount.com"
        network = "some-network"
        subnetwork = "regions/europe-west1/subnetworks/some-subnetwork"
        job_name = "sum-counts"

    flags = Configured(in_dir=str(counts), out=str(tmp_path / "o"))._get_dataflow_args()
    parsed = options.PipelineOptions(flags)

    google = parsed.view_as(options.GoogleCloudOptions)
    workers = parsed.view_as(options.WorkerOptions)
    assert parsed.view_as(options.StandardOptions).runner == "DirectRunner"
    assert (google.project, google.region, google.job_name) == ("some-project", "europe-west1", "sum-counts")
    assert (google.staging_location, google.temp_location) == ("gs://bucket/staging", "gs://bucket/temp")
    assert google.service_account_email == "runner@some-project.iam.gserviceaccount.com"
    assert (workers.num_workers, workers.max_num_workers, workers.disk_size_gb) == (3, 5, 50)
    assert (workers.autoscaling_algorithm, workers.machine_type) == ("THROUGHPUT_BASED", "n1-standard-4")
    assert (workers.network, workers.subnetwork) == ("some-network", Configured.subnetwork)


class JavaJob(BeamDataflowJobTask):
    """Luigi's example: a Java job class with every service option set."""

    dataflow_params = JavaKeys()
    runner = "DirectRunner"
    project = "some-project"
    zone = "europe-west1-c"
    region = "europe-west1"
    staging_location = "some-staging"
    temp_location = "some-temp"
    gcp_temp_location = "some-gcp-temp"
    num_workers = 1
    autoscaling_algorithm = "THROUGHPUT_BASED"
    max_num_workers = 2
    disk_size_gb = 5
    worker_machine_type = "n1-standard-4"
    worker_disk_type = "compute.googleapis.com/projects//zones//diskTypes/pd-ssd"
    network = "some-network"
    subnetwork = "some-subnetwork"
    job_name = "SomeJobName"
    service_account = "some-account@some-project.iam.gserviceaccount.com"
    labels = {"k1": "v1"}

    def dataflow_executable(self) -> list[str]:
        return ["java", "com.spotify.luigi.SomeJobClass"]

    def args(self) -> list[str]:
        return ["--extraArg=present"]

    def requires(self) -> luigi.Task:
        return Files("some-input-dir")

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget("some-output.txt")


def test_the_full_java_command_line_is_luigis():
    assert JavaJob()._mk_cmd_line() == [
        "java",
        "com.spotify.luigi.SomeJobClass",
        "--runner=DirectRunner",
        "--project=some-project",
        "--zone=europe-west1-c",
        "--region=europe-west1",
        "--stagingLocation=some-staging",
        "--tempLocation=some-temp",
        "--gcpTempLocation=some-gcp-temp",
        "--numWorkers=1",
        "--autoscalingAlgorithm=THROUGHPUT_BASED",
        "--maxNumWorkers=2",
        "--diskSizeGb=5",
        "--workerMachineType=n1-standard-4",
        "--workerDiskType=compute.googleapis.com/projects//zones//diskTypes/pd-ssd",
        "--network=some-network",
        "--subnetwork=some-subnetwork",
        "--jobName=SomeJobName",
        "--serviceAccount=some-account@some-project.iam.gserviceaccount.com",
        '--labels={"k1": "v1"}',
        "--extraArg=present",
        "--input=some-input-dir/part-*",
        "--output=some-output.txt",
    ]


class SimpleJob(BeamDataflowJobTask):
    """Only a runner: the options left unset (None, 0, empty) are left out of the command."""

    dataflow_params = JavaKeys()
    runner = "DirectRunner"
    num_workers = 0

    def dataflow_executable(self) -> list[str]:
        return ["java", "com.spotify.luigi.SomeJobClass"]

    def requires(self) -> Any:
        return Files("some-input-dir")

    def output(self) -> Any:
        return luigi.LocalTarget("some-output.txt")


def simple_job(**overrides: Any) -> SimpleJob:
    return type("Custom", (SimpleJob,), overrides)()


def test_unset_service_options_are_left_out():
    assert SimpleJob()._mk_cmd_line() == [
        "java",
        "com.spotify.luigi.SomeJobClass",
        "--runner=DirectRunner",
        "--input=some-input-dir/part-*",
        "--output=some-output.txt",
    ]


def test_named_inputs_take_their_file_pattern_and_the_others_part_star():
    job = simple_job(
        requires=lambda self: {"input1": Files("some-input-dir/"), "input2": Files("some-input-dir")},
        file_pattern=lambda self: {"input2": "*.some-ext"},
    )

    assert job._format_input_args() == [
        "--input1=some-input-dir/part-*",
        "--input2=some-input-dir/*.some-ext",
    ]


def test_a_list_of_inputs_becomes_one_comma_joined_flag():
    job = simple_job(requires=lambda self: [Files("some-input-1"), Files("some-input-2")])

    assert job._format_input_args() == ["--input=some-input-1/part-*,some-input-2/part-*"]


def test_a_tuple_or_a_list_of_tuples_names_its_inputs():
    one = simple_job(input=lambda self: ("some-key", luigi.LocalTarget("some-input")))
    several = simple_job(input=lambda self: [("a", luigi.LocalTarget("x")), ("b", luigi.LocalTarget("y"))])

    assert one._format_input_args() == ["--some-key=some-input/part-*"]
    assert several._format_input_args() == ["--a=x/part-*", "--b=y/part-*"]


def test_a_required_task_with_a_dict_of_outputs_gives_one_flag_per_output():
    job = simple_job(
        input=lambda self: {"model": {"weights": luigi.LocalTarget("w"), "vocab": luigi.LocalTarget("v")}}
    )

    assert job._format_input_args() == ["--model-weights=w/part-*", "--model-vocab=v/part-*"]


def test_a_dict_of_outputs_gives_one_flag_each_and_is_complete_only_with_all_of_them(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    job = simple_job(
        output=lambda self: {"first": luigi.LocalTarget(str(first)), "second": luigi.LocalTarget(str(second))}
    )
    first.write_text("done")

    assert job._format_output_args() == [f"--first={first}", f"--second={second}"]
    assert not job.complete()
    second.write_text("done")
    assert job.complete()


def test_no_runner_means_the_direct_runner_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="luigi-interface"):
        flags = simple_job(runner=None)._get_dataflow_args()

    assert flags == ["--runner=DirectRunner"]
    assert "sets no runner: using DirectRunner" in caplog.text


def test_the_dataflow_runner_is_passed_and_another_runner_is_refused():
    assert simple_job(runner="DataflowRunner")._get_dataflow_args() == ["--runner=DataflowRunner"]
    with pytest.raises(
        ValueError, match="runner is 'FlinkRunner': set it to 'DirectRunner' or 'DataflowRunner'"
    ):
        simple_job(runner="FlinkRunner")._get_dataflow_args()


def test_a_task_without_dataflow_params_is_refused_when_made():
    with pytest.raises(ValueError, match="dataflow_params must be a DataflowParamKeys instance"):
        simple_job(dataflow_params=None)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"file_pattern": lambda self: ["*.csv"]}, "file_pattern\\(\\) must return a dict"),
        ({"input": lambda self: "some-path"}, "Cannot pass the input 'some-path' to a Beam job"),
        ({"output": lambda self: ["a"]}, "output\\(\\) must be a Target or a dict of them"),
        ({"output": lambda self: MockTarget("m")}, "not MockTarget"),
    ],
)
def test_inputs_outputs_and_patterns_of_the_wrong_kind_are_refused(override, message):
    with pytest.raises(ValueError, match=message):
        simple_job(**override)._mk_cmd_line()


def test_a_bigquery_target_is_passed_as_project_dataset_and_table(monkeypatch):
    # luigi.contrib.bigquery is not part of this tree yet: a module of that name with its target's shape
    bigquery = types.ModuleType("luigi.contrib.bigquery")

    class BigQueryTarget(luigi.Target):
        def __init__(self, project_id: str, dataset_id: str, table_id: str) -> None:
            self.table = types.SimpleNamespace(
                project_id=project_id, dataset_id=dataset_id, table_id=table_id
            )

        def exists(self) -> bool:
            return False

    bigquery.BigQueryTarget = BigQueryTarget  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "luigi.contrib.bigquery", bigquery)
    job = simple_job(output=lambda self: BigQueryTarget("some-project", "some_dataset", "some_table"))

    assert job._format_output_args() == ["--output=some-project:some_dataset.some_table"]
