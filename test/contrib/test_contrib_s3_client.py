"""S3Client against a real (moto) S3 server: listing, copying, moving, removing, uploads, configuration."""

from __future__ import annotations

import datetime
import json
import os

import pytest
from helpers.s3_server import s3_server  # noqa: F401  # the session fixture

import luigi
import luigi.contrib.s3.client as s3_client_module
from luigi.configuration import add_config_path, get_config
from luigi.contrib.s3 import (
    DeprecatedBotoClientException,
    FileNotFoundException,
    InvalidDeleteException,
    S3Client,
    S3Target,
)
from luigi.target import FileAlreadyExists, MissingParentDirectory

MiB = 1024 * 1024


@pytest.fixture
def s3(s3_server):  # noqa: F811  # the fixture imported above
    s3_server.configure()
    return s3_server


@pytest.fixture
def bucket(s3) -> str:
    return s3.new_bucket()


@pytest.fixture
def filled(s3, bucket) -> str:
    """A bucket holding a small tree: two top-level files, a nested directory and a directory marker."""
    client = s3.boto3_client()
    for key in ("tree/a.txt", "tree/b.txt", "tree/sub/c.txt", "tree/sub/deeper/d.txt", "other.txt"):
        client.put_object(Bucket=bucket, Key=key, Body=key.encode())
    client.put_object(Bucket=bucket, Key="tree/empty/", Body=b"")
    client.put_object(Bucket=bucket, Key="hadoop_$folder$", Body=b"")
    return bucket


def keys(s3, bucket: str, prefix: str = "") -> list[str]:
    paginator = s3.boto3_client().get_paginator("list_objects_v2")
    return [
        item["Key"]
        for page in paginator.paginate(Bucket=bucket, Prefix=prefix)
        for item in page.get("Contents", [])
    ]


def test_exists_and_isdir_tell_objects_from_directories(s3, filled):
    client = S3Client()
    assert client.exists(f"s3://{filled}/tree/a.txt")
    assert not client.isdir(f"s3://{filled}/tree/a.txt")
    assert client.exists(f"s3://{filled}/tree") and client.isdir(f"s3://{filled}/tree/")
    assert client.isdir(f"s3://{filled}/tree/empty")  # a `dir/` marker
    assert client.isdir(f"s3://{filled}/hadoop")  # a `dir_$folder$` marker
    assert client.exists(f"s3://{filled}") and client.isdir(f"s3://{filled}/")
    assert not client.exists(f"s3://{filled}/tree/missing.txt")
    assert not client.exists(f"s3://{filled}/tre")  # a key prefix is not a directory
    assert not client.isdir(f"s3://{filled}/nothing")


def test_listdir_yields_every_file_below_recursively_with_full_paths(s3, filled):
    listed = list(S3Client().listdir(f"s3://{filled}/tree"))
    assert listed == [
        f"s3://{filled}/tree/a.txt",
        f"s3://{filled}/tree/b.txt",
        f"s3://{filled}/tree/sub/c.txt",
        f"s3://{filled}/tree/sub/deeper/d.txt",
    ]


def test_list_yields_paths_relative_to_the_directory(s3, filled):
    assert list(S3Client().list(f"s3://{filled}/tree/sub/")) == ["c.txt", "deeper/d.txt"]


def test_listdir_can_return_keys_and_filter_by_modification_time(s3, filled):
    client = S3Client()
    summaries = list(client.listdir(f"s3://{filled}/tree/sub", return_key=True))
    assert [(item.bucket_name, item.key, item.size) for item in summaries] == [
        (filled, "tree/sub/c.txt", len("tree/sub/c.txt")),
        (filled, "tree/sub/deeper/d.txt", len("tree/sub/deeper/d.txt")),
    ]
    past = datetime.datetime(2000, 1, 1)  # naive datetimes count as UTC
    future = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1)
    assert len(list(client.listdir(f"s3://{filled}/tree", start_time=past, end_time=future))) == 4
    assert list(client.listdir(f"s3://{filled}/tree", start_time=future)) == []
    assert list(client.listdir(f"s3://{filled}/tree", end_time=past)) == []


def test_listdir_of_a_missing_directory_is_empty(s3, bucket):
    assert list(S3Client().listdir(f"s3://{bucket}/nowhere")) == []


def test_put_string_get_key_and_get_as_bytes(s3, bucket, tmp_path):
    client = S3Client()
    client.put_string("héllo", f"s3://{bucket}/greeting.txt", ContentType="text/plain")
    assert client.get_as_bytes(f"s3://{bucket}/greeting.txt") == "héllo".encode()
    assert client.get_as_string(f"s3://{bucket}/greeting.txt") == "héllo"
    key = client.get_key(f"s3://{bucket}/greeting.txt")
    assert (key.bucket_name, key.key, key.size) == (bucket, "greeting.txt", len("héllo".encode()))
    assert client.get_key(f"s3://{bucket}/absent.txt") is None

    local = tmp_path / "down.txt"
    client.get(f"s3://{bucket}/greeting.txt", str(local))
    assert local.read_text(encoding="utf-8") == "héllo"


def test_put_uploads_a_local_file(s3, bucket, tmp_path):
    local = tmp_path / "report.csv"
    local.write_text("a,b\n1,2\n")
    S3Client().put(str(local), f"s3://{bucket}/reports/report.csv")
    assert (
        s3.boto3_client().get_object(Bucket=bucket, Key="reports/report.csv")["Body"].read() == b"a,b\n1,2\n"
    )


def test_put_multipart_uploads_in_parts_of_the_given_size(s3, bucket, tmp_path):
    local = tmp_path / "big.bin"
    payload = os.urandom(11 * MiB)
    local.write_bytes(payload)

    S3Client().put_multipart(str(local), f"s3://{bucket}/big.bin", part_size=5 * MiB)

    client = s3.boto3_client()
    head = client.head_object(Bucket=bucket, Key="big.bin")
    assert head["ContentLength"] == len(payload)
    assert head["ETag"].strip('"').endswith("-3")  # S3's ETag of a multipart object counts its parts
    assert client.get_object(Bucket=bucket, Key="big.bin")["Body"].read() == payload
    assert client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_copy_a_file_and_a_directory(s3, filled):
    client = S3Client()
    assert client.copy(f"s3://{filled}/tree/a.txt", f"s3://{filled}/copies/a.txt") == (1, len("tree/a.txt"))
    count, size = client.copy(f"s3://{filled}/tree/sub", f"s3://{filled}/copies/sub", threads=4)
    assert (count, size) == (2, len("tree/sub/c.txt") + len("tree/sub/deeper/d.txt"))
    assert keys(s3, filled, "copies/") == ["copies/a.txt", "copies/sub/c.txt", "copies/sub/deeper/d.txt"]
    assert client.get_as_string(f"s3://{filled}/copies/sub/deeper/d.txt") == "tree/sub/deeper/d.txt"
    assert client.exists(f"s3://{filled}/tree/a.txt")  # the source stays


def test_copying_an_empty_directory_copies_nothing(s3, bucket):
    client = S3Client()
    client.mkdir(f"s3://{bucket}/copydir/")

    assert client.copy(f"s3://{bucket}/copydir/", f"s3://{bucket}/copydir_new/") == (0, 0)
    assert keys(s3, bucket) == ["copydir/"]


def test_copying_a_directory_copies_its_files_but_not_its_marker(s3, bucket):
    client = S3Client()
    client.mkdir(f"s3://{bucket}/copydir/")
    client.put_string("x", f"s3://{bucket}/copydir/file")

    assert client.copy(f"s3://{bucket}/copydir", f"s3://{bucket}/copydir_new") == (1, 1)
    assert keys(s3, bucket) == ["copydir/", "copydir/file", "copydir_new/file"]


def test_copy_of_a_missing_source_says_so(s3, bucket):
    with pytest.raises(FileNotFoundException, match=rf"s3://{bucket}/nope.txt"):
        S3Client().copy(f"s3://{bucket}/nope.txt", f"s3://{bucket}/dest.txt")


def test_move_a_file_and_a_directory(s3, filled):
    client = S3Client()
    client.move(f"s3://{filled}/other.txt", f"s3://{filled}/moved/other.txt")
    client.move(f"s3://{filled}/tree/sub/", f"s3://{filled}/moved/sub/")
    assert keys(s3, filled, "moved/") == ["moved/other.txt", "moved/sub/c.txt", "moved/sub/deeper/d.txt"]
    assert not client.exists(f"s3://{filled}/other.txt")
    assert not client.exists(f"s3://{filled}/tree/sub")


def test_remove_files_and_directories(s3, filled):
    client = S3Client()
    assert client.remove(f"s3://{filled}/other.txt") is True
    assert client.remove(f"s3://{filled}/other.txt") is False  # nothing left to delete
    with pytest.raises(InvalidDeleteException, match="Must use recursive delete"):
        client.remove(f"s3://{filled}/tree", recursive=False)
    with pytest.raises(InvalidDeleteException, match="root of bucket"):
        client.remove(f"s3://{filled}/")
    assert client.remove(f"s3://{filled}/tree") is True
    assert client.remove(f"s3://{filled}/hadoop") is True  # a `_$folder$` marker alone is a directory
    assert keys(s3, filled) == []


def test_remove_deletes_more_objects_than_one_request_takes(s3, bucket, monkeypatch):
    # S3 takes 1000 keys per DeleteObjects; a smaller batch shows the batching with fewer uploads.
    monkeypatch.setattr(s3_client_module, "_DELETE_BATCH", 10)
    client = s3.boto3_client()
    for number in range(25):
        client.put_object(Bucket=bucket, Key=f"many/{number:04d}", Body=b"")
    assert S3Client().remove(f"s3://{bucket}/many") is True
    assert keys(s3, bucket) == []


def test_mkdir_writes_a_directory_marker_once(s3, bucket):
    client = S3Client()
    client.mkdir(f"s3://{bucket}/made")
    assert keys(s3, bucket) == ["made/"]
    assert client.isdir(f"s3://{bucket}/made")
    client.mkdir(f"s3://{bucket}/made")  # already a directory: nothing to do
    with pytest.raises(FileAlreadyExists):
        client.mkdir(f"s3://{bucket}/made", raise_if_exists=True)
    with pytest.raises(MissingParentDirectory, match="parent"):
        client.mkdir(f"s3://{bucket}/absent/child", parents=False)
    client.mkdir(f"s3://{bucket}/made/child", parents=False)
    assert keys(s3, bucket) == ["made/", "made/child/"]


def test_keys_may_contain_question_marks_and_hashes(s3, bucket):
    client = S3Client()
    client.put_string("odd", f"s3://{bucket}/odd?name#frag.txt")
    assert keys(s3, bucket) == ["odd?name#frag.txt"]
    assert client.exists(f"s3://{bucket}/odd?name#frag.txt")


def test_paths_that_are_not_s3_urls_are_refused(s3):
    with pytest.raises(ValueError, match="Not an S3 path"):
        S3Client().exists("/local/path")
    with pytest.raises(ValueError, match="names no bucket"):
        S3Target("s3:///key")


def test_arguments_of_the_old_boto_client_are_refused_with_advice(s3, bucket):
    with pytest.raises(DeprecatedBotoClientException, match="ServerSideEncryption"):
        S3Client().put_string("x", f"s3://{bucket}/x", encrypt_key=True)
    with pytest.raises(DeprecatedBotoClientException, match="region_name"):
        S3Client(host="s3-us-west-1.amazonaws.com")


def test_constructor_arguments_override_the_config(s3, bucket):
    get_config().set("s3", "aws_secret_access_key", "not-the-secret")
    client = S3Client(aws_secret_access_key=s3.secret_key)
    client.put_string("ok", f"s3://{bucket}/override.txt")
    assert keys(s3, bucket) == ["override.txt"]


def test_options_come_from_a_config_file(s3_server, tmp_path):  # noqa: F811  # the fixture imported above
    config_file = tmp_path / "luigi.cfg"
    config_file.write_text(
        "[s3]\n"
        f"endpoint_url = {s3_server.endpoint_url}\n"
        f"aws_access_key_id = {s3_server.access_key}\n"
        f"aws_secret_access_key = {s3_server.secret_key}\n"
        f"region_name = {s3_server.region}\n"
        "connect_timeout = 5\n"
        "max_attempts = 2\n"
        "addressing_style = path\n"
    )
    add_config_path(str(config_file))
    bucket = s3_server.new_bucket()
    S3Client().put_string("from file", f"s3://{bucket}/configured.txt")
    assert keys(s3_server, bucket) == ["configured.txt"]


def test_unknown_config_options_are_ignored_with_a_warning(s3, bucket):
    get_config().set("s3", "colour", "blue")
    with pytest.warns(UserWarning, match="'colour'"):
        client = S3Client()
    client.put_string("x", f"s3://{bucket}/x")
    assert keys(s3, bucket) == ["x"]


def test_a_role_is_assumed_when_configured(s3, bucket):
    trust = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}],
    }
    access = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
    import boto3

    iam = boto3.client(
        "iam",
        endpoint_url=s3.endpoint_url,
        aws_access_key_id=s3.access_key,
        aws_secret_access_key=s3.secret_key,
        region_name=s3.region,
    )
    role_name = f"writer-{bucket}"[:64]
    role = iam.create_role(RoleName=role_name, AssumeRolePolicyDocument=json.dumps(trust))["Role"]
    iam.put_role_policy(RoleName=role_name, PolicyName="all", PolicyDocument=json.dumps(access))
    config = get_config()
    config.set("s3", "aws_role_arn", role["Arn"])
    config.set("s3", "aws_role_session_name", "luigi-test")
    config.set("s3", "sts_endpoint_url", s3.endpoint_url)

    client = S3Client()
    assert f"role {role['Arn']}" in repr(client)
    client.put_string("as the role", f"s3://{bucket}/role.txt")
    assert client.get_as_string(f"s3://{bucket}/role.txt") == "as the role"


class TouchAll(luigi.Task):
    bucket = luigi.Parameter()
    number = luigi.IntParameter()

    def output(self):
        return S3Target(f"s3://{self.bucket}/many/{self.number:03d}.txt")

    def run(self):
        with self.output().open("w") as out:
            out.write(str(self.number))


def test_targets_write_from_parallel_workers(s3, bucket):
    tasks = [TouchAll(bucket=bucket, number=number) for number in range(30)]
    assert luigi.build(tasks, local_scheduler=True, workers=3) is True
    assert len(keys(s3, bucket, "many/")) == 30


def test_clients_with_the_same_options_share_one_boto3_client(s3, bucket):
    first, second = S3Target(f"s3://{bucket}/a").fs, S3Target(f"s3://{bucket}/b").fs
    assert first is not second
    assert first._client is second._client  # building a boto3 client costs more than a completion check
    assert S3Client(aws_secret_access_key="other")._client is not first._client
