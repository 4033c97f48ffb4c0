"""What goes wrong with S3 surfaces as botocore's own errors, as in Luigi, explained by a note naming the
s3:// path, the cause and the fix, and never showing a secret."""

from __future__ import annotations

import logging
import sys
import tempfile

import pytest
from helpers.luigid import free_port
from helpers.s3_server import s3_server  # noqa: F401  # the session fixture

import luigi
from luigi.configuration import get_config
from luigi.contrib.s3 import FileNotFoundException, S3Client, S3Target
from luigi.event import Event

botocore_exceptions = pytest.importorskip("botocore.exceptions")
ClientError = botocore_exceptions.ClientError

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
    """The one error a complete() check raised, as the worker logged it (traceback and notes)."""
    reports = [
        r.getMessage() for r in caplog.records if "due to error in complete() method" in r.getMessage()
    ]
    assert len(reports) == 1, reports
    return reports[0]


def assert_explained(exc: BaseException, note: str) -> None:
    """The error carries our note (Python 3.11+ has notes; on 3.10 the error is botocore's alone)."""
    if sys.version_info >= (3, 11):
        assert note in getattr(exc, "__notes__", []), getattr(exc, "__notes__", None)


def code_of(exc: BaseException) -> str:
    assert isinstance(exc, ClientError), repr(exc)
    return exc.response["Error"]["Code"]


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


def assert_no_secret(s3, *texts: str) -> None:
    for text in texts:
        assert WRONG_SECRET not in text
        assert s3.secret_key not in text


def test_a_wrong_secret_fails_the_task_with_botocores_error_explained_and_hidden(s3, bucket, caplog):
    caplog.set_level(logging.DEBUG)
    get_config().set("s3", "aws_secret_access_key", WRONG_SECRET)
    task = Publish(path=f"s3://{bucket}/out.txt")

    assert luigi.build([task], local_scheduler=True) is False

    report = scheduling_error(caplog)
    assert "botocore.exceptions.ClientError: An error occurred (SignatureDoesNotMatch)" in report
    if sys.version_info >= (3, 11):
        assert (
            f"Cannot check s3://{bucket}/out.txt: "
            "the secret access key is wrong (check [s3] aws_secret_access_key)"
        ) in report
    client = S3Client()
    assert_no_secret(s3, caplog.text, task.task_id, str(task.output()), repr(client), repr(vars(client)))
    assert keys(s3, bucket) == []


def test_a_wrong_secret_is_refused_on_write_too(s3, bucket, local_tmp, caplog):
    caplog.set_level(logging.DEBUG)
    client = S3Client(aws_secret_access_key=WRONG_SECRET)
    target = S3Target(f"s3://{bucket}/direct.txt", client=client)

    with pytest.raises(ClientError) as err:
        with target.open("w") as out:
            out.write("never stored\n")

    assert code_of(err.value) == "SignatureDoesNotMatch"
    assert_explained(
        err.value,
        f"Cannot write s3://{bucket}/direct.txt: the secret access key is wrong "
        "(check [s3] aws_secret_access_key)",
    )
    assert_no_secret(s3, str(err.value), *getattr(err.value, "__notes__", []), caplog.text, repr(client))
    assert keys(s3, bucket) == []
    assert list(local_tmp.iterdir()) == []


def test_an_unknown_access_key_is_reported_as_such(s3, bucket, caplog):
    get_config().set("s3", "aws_access_key_id", "AKIAUNKNOWNKEY000000")

    assert luigi.build([Publish(path=f"s3://{bucket}/out.txt")], local_scheduler=True) is False

    report = scheduling_error(caplog)
    assert "botocore.exceptions.ClientError: An error occurred (InvalidAccessKeyId)" in report
    if sys.version_info >= (3, 11):
        assert "the server does not know the access key id (check [s3] aws_access_key_id)" in report


def test_a_missing_bucket_fails_the_task_with_botocores_no_such_bucket(s3, caplog):
    path = "s3://luigi-no-such-bucket-here/out.txt"

    assert luigi.build([Publish(path=path)], local_scheduler=True) is False

    report = scheduling_error(caplog)
    assert "An error occurred (NoSuchBucket)" in report
    if sys.version_info >= (3, 11):
        assert f"Cannot check {path}: bucket 'luigi-no-such-bucket-here' does not exist" in report


def test_except_clauses_written_for_luigi_catch_a_missing_bucket(s3):
    client = S3Client()
    path = "s3://luigi-no-such-bucket-here/out.txt"

    with pytest.raises(client.s3.meta.client.exceptions.NoSuchBucket) as modelled:
        client.put_string("lost", path)
    try:
        client.remove(path)
    except ClientError as exc:  # how Luigi users catch it
        caught = exc
    assert code_of(modelled.value) == code_of(caught) == "NoSuchBucket"
    assert_explained(caught, f"Cannot remove {path}: bucket 'luigi-no-such-bucket-here' does not exist")


def test_writing_into_a_missing_bucket_fails_on_close_and_leaves_nothing(s3, local_tmp):
    target = S3Target("s3://luigi-no-such-bucket-here/out.txt")
    out = target.open("w")
    out.write("lost\n")
    with pytest.raises(target.fs.s3.meta.client.exceptions.NoSuchBucket) as err:
        out.close()
    assert_explained(
        err.value,
        "Cannot write s3://luigi-no-such-bucket-here/out.txt: bucket 'luigi-no-such-bucket-here' "
        "does not exist",
    )
    assert list(local_tmp.iterdir()) == []


def test_reading_a_missing_object_fails_the_task_with_luigis_file_not_found(s3, bucket, tmp_path, failures):
    path = f"s3://{bucket}/never-written.txt"

    assert luigi.build([Consume(source=path, dest=str(tmp_path / "copy.txt"))], local_scheduler=True) is False

    [error] = failures()
    assert isinstance(error, FileNotFoundException) and isinstance(error, FileNotFoundError)
    assert str(error) == f"Could not find file at {path}"
    assert error.__context__ is None  # shown alone, without the GET's botocore traceback
    assert not (tmp_path / "copy.txt").exists()


def test_reading_a_missing_object_with_the_client_is_botocores_no_such_key(s3, bucket):
    path = f"s3://{bucket}/never-written.txt"

    with pytest.raises(ClientError) as err:
        S3Client().get_as_string(path)

    assert code_of(err.value) == "NoSuchKey"
    assert_explained(err.value, f"Cannot read {path}: no such object")


def test_a_refused_connection_fails_the_task_naming_the_endpoint(s3, bucket, caplog):
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    get_config().set("s3", "endpoint_url", endpoint)
    get_config().set("s3", "max_attempts", "1")

    assert luigi.build([Publish(path=f"s3://{bucket}/out.txt")], local_scheduler=True) is False

    report = scheduling_error(caplog)
    assert "botocore.exceptions.EndpointConnectionError: Could not connect to the endpoint URL" in report
    if sys.version_info >= (3, 11):
        assert (
            f"Cannot check s3://{bucket}/out.txt: cannot connect to {endpoint} (connection refused)" in report
        )
    assert_no_secret(s3, caplog.text)


def test_missing_credentials_say_where_to_set_them(s3, bucket, monkeypatch, tmp_path):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # never ask a cloud metadata service
    config = get_config()
    config.remove_option("s3", "aws_access_key_id")
    config.remove_option("s3", "aws_secret_access_key")

    with pytest.raises(botocore_exceptions.NoCredentialsError) as err:
        S3Client().get_as_bytes(f"s3://{bucket}/x")

    assert_explained(
        err.value,
        f"Cannot read s3://{bucket}/x: no AWS credentials were found (set [s3] aws_access_key_id and "
        "aws_secret_access_key, or the AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY environment "
        "variables)",
    )
