"""What goes wrong with S3 is reported once, clearly, naming the s3:// path and the cause, never a secret."""

from __future__ import annotations

import logging
import tempfile
import traceback

import pytest
from helpers.luigid import free_port
from helpers.s3_server import s3_server  # noqa: F401  # the session fixture

import luigi
from luigi.configuration import get_config
from luigi.contrib.s3 import (
    FileNotFoundException,
    S3AuthenticationError,
    S3BucketNotFoundError,
    S3Client,
    S3ConnectionError,
    S3Target,
)
from luigi.event import Event

WRONG_SECRET = "wr0ng-Secret-Value-1234567890abcdefXYZ"


@pytest.fixture
def s3(s3_server):  # noqa: F811  # the fixture imported above
    s3_server.configure()
    return s3_server


@pytest.fixture
def bucket(s3) -> str:
    return s3.new_bucket()


@pytest.fixture
def local_tmp(tmp_path, monkeypatch):
    staging = tmp_path / "staging"
    staging.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(staging))
    return staging


@pytest.fixture
def failures(events):
    """The exceptions tasks raised in run()."""
    seen, listen = events
    listen(Event.FAILURE)
    return lambda: [args[1] for _, args in seen]


def scheduling_error(caplog) -> str:
    """The one error a complete() check raised, as the worker logged it: ``module.Type: message``.

    Checked to be shown as a single exception, without a chained botocore traceback.
    """
    reports = [
        r.getMessage() for r in caplog.records if "due to error in complete() method" in r.getMessage()
    ]
    assert len(reports) == 1, reports
    assert "During handling" not in reports[0] and "direct cause" not in reports[0]
    return reports[0].rstrip().splitlines()[-1]


class Publish(luigi.Task):
    path = luigi.Parameter()

    def output(self):
        return S3Target(self.path)

    def run(self):
        with self.output().open("w") as out:
            out.write("published\n")


class Consume(luigi.Task):
    source = luigi.Parameter()
    dest = luigi.Parameter()

    def output(self):
        return luigi.LocalTarget(self.dest)

    def run(self):
        with S3Target(self.source).open("r") as source, self.output().open("w") as out:
            out.write(source.read())


def keys(s3, bucket: str) -> list[str]:
    return [item["Key"] for item in s3.boto3_client().list_objects_v2(Bucket=bucket).get("Contents", [])]


def only_error(errors: list[BaseException]) -> BaseException:
    """The single error reported, checked to be shown as one exception (no chained botocore traceback)."""
    assert len(errors) == 1, errors
    shown = "".join(traceback.format_exception(errors[0]))
    assert "During handling" not in shown and "direct cause" not in shown
    return errors[0]


ERRORS = "luigi.contrib.s3.errors"


def assert_no_secret(s3, *texts: str) -> None:
    for text in texts:
        assert WRONG_SECRET not in text
        assert s3.secret_key not in text


def test_a_wrong_secret_fails_the_task_naming_the_path_and_hiding_the_secret(s3, bucket, caplog):
    caplog.set_level(logging.DEBUG)
    get_config().set("s3", "aws_secret_access_key", WRONG_SECRET)
    task = Publish(path=f"s3://{bucket}/out.txt")

    assert luigi.build([task], local_scheduler=True) is False

    assert scheduling_error(caplog) == (
        f"{ERRORS}.S3AuthenticationError: Cannot check s3://{bucket}/out.txt: "
        "the secret access key is wrong (check [s3] aws_secret_access_key)"
    )
    client = S3Client()
    assert_no_secret(s3, caplog.text, task.task_id, str(task.output()), repr(client), repr(vars(client)))
    assert keys(s3, bucket) == []


def test_a_wrong_secret_is_refused_on_write_too(s3, bucket, local_tmp, caplog):
    caplog.set_level(logging.DEBUG)
    client = S3Client(aws_secret_access_key=WRONG_SECRET)
    target = S3Target(f"s3://{bucket}/direct.txt", client=client)

    with pytest.raises(
        S3AuthenticationError, match=rf"^Cannot write s3://{bucket}/direct.txt: the secret"
    ) as err:
        with target.open("w") as out:
            out.write("never stored\n")

    assert_no_secret(s3, str(err.value), caplog.text, repr(client), repr(vars(client)))
    assert keys(s3, bucket) == []
    assert list(local_tmp.iterdir()) == []


def test_an_unknown_access_key_is_reported_as_such(s3, bucket, caplog):
    get_config().set("s3", "aws_access_key_id", "AKIAUNKNOWNKEY000000")

    assert luigi.build([Publish(path=f"s3://{bucket}/out.txt")], local_scheduler=True) is False

    assert scheduling_error(caplog) == (
        f"{ERRORS}.S3AuthenticationError: Cannot check s3://{bucket}/out.txt: "
        "the server does not know the access key id (check [s3] aws_access_key_id)"
    )


def test_a_missing_bucket_fails_the_task_naming_the_bucket(s3, caplog):
    path = "s3://luigi-no-such-bucket-here/out.txt"

    assert luigi.build([Publish(path=path)], local_scheduler=True) is False

    assert scheduling_error(caplog) == (
        f"{ERRORS}.S3BucketNotFoundError: Cannot check {path}: "
        "bucket 'luigi-no-such-bucket-here' does not exist"
    )


def test_writing_into_a_missing_bucket_fails_on_close_and_leaves_nothing(s3, local_tmp):
    target = S3Target("s3://luigi-no-such-bucket-here/out.txt")
    out = target.open("w")
    out.write("lost\n")
    with pytest.raises(
        S3BucketNotFoundError, match="^Cannot write s3://luigi-no-such-bucket-here/out.txt: bucket"
    ):
        out.close()
    assert list(local_tmp.iterdir()) == []


def test_reading_a_missing_object_fails_the_task_naming_it(s3, bucket, tmp_path, failures):
    path = f"s3://{bucket}/never-written.txt"

    assert luigi.build([Consume(source=path, dest=str(tmp_path / "copy.txt"))], local_scheduler=True) is False

    error = only_error(failures())
    assert isinstance(error, FileNotFoundException) and isinstance(error, FileNotFoundError)
    assert str(error) == f"Cannot read {path}: no such object"
    assert not (tmp_path / "copy.txt").exists()


def test_a_refused_connection_fails_the_task_naming_the_endpoint(s3, bucket, caplog):
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    get_config().set("s3", "endpoint_url", endpoint)
    get_config().set("s3", "max_attempts", "1")

    assert luigi.build([Publish(path=f"s3://{bucket}/out.txt")], local_scheduler=True) is False

    assert scheduling_error(caplog) == (
        f"{ERRORS}.S3ConnectionError: Cannot check s3://{bucket}/out.txt: "
        f"cannot connect to {endpoint} (connection refused)"
    )
    assert_no_secret(s3, caplog.text)


def test_a_refused_connection_is_also_a_connection_error(s3, bucket):
    get_config().set("s3", "endpoint_url", f"http://127.0.0.1:{free_port()}")
    get_config().set("s3", "max_attempts", "1")
    with pytest.raises(S3ConnectionError, match=rf"^Cannot read s3://{bucket}/x: cannot connect") as err:
        S3Client().get_as_string(f"s3://{bucket}/x")
    assert isinstance(err.value, ConnectionError)  # callers may catch the built-in type


def test_missing_credentials_say_where_to_set_them(s3, bucket, monkeypatch, tmp_path):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # never ask a cloud metadata service
    config = get_config()
    config.remove_option("s3", "aws_access_key_id")
    config.remove_option("s3", "aws_secret_access_key")

    with pytest.raises(S3AuthenticationError, match=rf"^Cannot read s3://{bucket}/x: no AWS credentials"):
        S3Client().get_as_bytes(f"s3://{bucket}/x")
