"""luigi.contrib.s3 in pipelines: tasks write and read S3Targets on a real (moto) S3 server."""

from __future__ import annotations

import gzip
import importlib
import subprocess
import sys
import tempfile

import pytest
from helpers.s3_server import s3_server  # noqa: F401  # the session fixture

import luigi
import luigi.format
from luigi.contrib.s3 import (
    S3Client,
    S3EmrTarget,
    S3FlagTarget,
    S3FlagTask,
    S3PathTask,
    S3Target,
)
from luigi.event import Event
from luigi.execution_summary import LuigiStatusCode


@pytest.fixture
def s3(s3_server):  # noqa: F811  # the fixture imported above
    s3_server.configure()
    return s3_server


@pytest.fixture
def bucket(s3) -> str:
    return s3.new_bucket()


@pytest.fixture
def local_tmp(tmp_path, monkeypatch):
    """Where AtomicS3File stages uploads during this test, to check that nothing is left behind."""
    staging = tmp_path / "staging"
    staging.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(staging))
    return staging


def object_keys(s3, bucket: str) -> list[str]:
    listing = s3.boto3_client().list_objects_v2(Bucket=bucket)
    return [item["Key"] for item in listing.get("Contents", [])]


def object_bytes(s3, bucket: str, key: str) -> bytes:
    return s3.boto3_client().get_object(Bucket=bucket, Key=key)["Body"].read()


class WriteWords(luigi.Task):
    bucket = luigi.Parameter()
    fail_after = luigi.IntParameter(default=-1)

    def output(self):
        return S3Target(f"s3://{self.bucket}/words/list.txt")

    def run(self):
        with self.output().open("w") as out:
            for number, word in enumerate(["alpha", "beta", "gamma"]):
                if number == self.fail_after:
                    raise RuntimeError("the word source broke")
                out.write(f"{word}\n")


class ShoutWords(luigi.Task):
    bucket = luigi.Parameter()

    def requires(self):
        return WriteWords(bucket=self.bucket)

    def output(self):
        return S3Target(f"s3://{self.bucket}/words/shouted.txt")

    def run(self):
        with self.input().open("r") as words, self.output().open("w") as out:
            for line in words:
                out.write(line.upper())


def test_a_task_reads_what_its_dependency_wrote_to_s3(s3, bucket, local_tmp):
    assert luigi.build([ShoutWords(bucket=bucket)], local_scheduler=True) is True

    assert object_bytes(s3, bucket, "words/list.txt") == b"alpha\nbeta\ngamma\n"
    assert object_bytes(s3, bucket, "words/shouted.txt") == b"ALPHA\nBETA\nGAMMA\n"
    assert list(local_tmp.iterdir()) == []  # staged uploads are cleaned up


def test_a_task_failing_mid_write_leaves_no_object(s3, bucket, local_tmp, events):
    seen, listen = events
    listen(Event.FAILURE)

    result = luigi.build(
        [WriteWords(bucket=bucket, fail_after=2)], local_scheduler=True, detailed_summary=True
    )

    assert result.status == LuigiStatusCode.FAILED
    assert [str(args[1]) for _, args in seen] == ["the word source broke"]
    assert object_keys(s3, bucket) == []
    assert list(local_tmp.iterdir()) == []


def test_nothing_is_visible_until_the_written_file_is_closed(s3, bucket):
    target = S3Target(f"s3://{bucket}/late.txt")
    with target.open("w") as out:
        out.write("not yet\n")
        out.flush()
        assert not target.exists()
        assert object_keys(s3, bucket) == []
    assert target.exists()
    assert object_bytes(s3, bucket, "late.txt") == b"not yet\n"


def test_an_unclosed_write_that_is_dropped_uploads_nothing(s3, bucket, local_tmp):
    out = S3Target(f"s3://{bucket}/dropped.txt", format=luigi.format.Nop).open("w")
    out.write(b"half")
    del out
    assert object_keys(s3, bucket) == []
    assert list(local_tmp.iterdir()) == []


class NeedsInput(luigi.Task):
    source = luigi.Parameter()
    bucket = luigi.Parameter()

    def requires(self):
        return S3PathTask(path=self.source)

    def output(self):
        return S3Target(f"s3://{self.bucket}/copied.txt")

    def run(self):
        with self.input().open("r") as source, self.output().open("w") as out:
            out.write(source.read())


def test_s3_path_task_is_an_external_dependency(s3, bucket):
    source = f"s3://{bucket}/incoming/data.txt"
    task = NeedsInput(source=source, bucket=bucket)

    missing = luigi.build([task], local_scheduler=True, detailed_summary=True)
    assert missing.status == LuigiStatusCode.MISSING_EXT
    assert object_keys(s3, bucket) == []

    s3.boto3_client().put_object(Bucket=bucket, Key="incoming/data.txt", Body=b"from elsewhere")
    assert luigi.build([NeedsInput(source=source, bucket=bucket)], local_scheduler=True) is True
    assert object_bytes(s3, bucket, "copied.txt") == b"from elsewhere"


class CountParts(luigi.Task):
    dataset = luigi.Parameter()
    flag = luigi.OptionalParameter(default=None)
    bucket = luigi.Parameter()

    def requires(self):
        return S3FlagTask(path=self.dataset, flag=self.flag)

    def output(self):
        return S3Target(f"s3://{self.bucket}/count.txt")

    def run(self):
        parts = [path for path in S3Client().listdir(self.dataset) if "part-" in path]
        with self.output().open("w") as out:
            out.write(str(len(parts)))


def test_s3_flag_task_without_a_flag_waits_for_success_marker(s3, bucket):
    dataset = f"s3://{bucket}/dataset/"
    client = s3.boto3_client()
    for part in ("part-00000", "part-00001"):
        client.put_object(Bucket=bucket, Key=f"dataset/{part}", Body=b"rows")

    first = luigi.build(
        [CountParts(dataset=dataset, bucket=bucket)], local_scheduler=True, detailed_summary=True
    )
    assert first.status == LuigiStatusCode.MISSING_EXT

    client.put_object(Bucket=bucket, Key="dataset/_SUCCESS", Body=b"")
    assert luigi.build([CountParts(dataset=dataset, bucket=bucket)], local_scheduler=True) is True
    assert object_bytes(s3, bucket, "count.txt") == b"2"


def test_s3_flag_task_with_a_custom_flag(s3, bucket):
    dataset = f"s3://{bucket}/spark-out/"
    client = s3.boto3_client()
    client.put_object(Bucket=bucket, Key="spark-out/part-00000", Body=b"rows")
    client.put_object(Bucket=bucket, Key="spark-out/_SUCCESS", Body=b"")
    task = CountParts(dataset=dataset, flag="_DONE", bucket=bucket)

    assert (
        luigi.build([task], local_scheduler=True, detailed_summary=True).status == LuigiStatusCode.MISSING_EXT
    )
    client.put_object(Bucket=bucket, Key="spark-out/_DONE", Body=b"")
    assert (
        luigi.build([CountParts(dataset=dataset, flag="_DONE", bucket=bucket)], local_scheduler=True) is True
    )


def test_s3_flag_target_needs_a_directory_path(s3, bucket):
    with pytest.raises(ValueError, match="must end with a slash"):
        S3FlagTarget(f"s3://{bucket}/dataset")


def test_s3_emr_target_is_a_deprecated_flag_target(s3, bucket):
    with pytest.warns(DeprecationWarning, match="S3FlagTarget"):
        target = S3EmrTarget(f"s3://{bucket}/emr/")
    assert not target.exists()
    s3.boto3_client().put_object(Bucket=bucket, Key="emr/_SUCCESS", Body=b"")
    assert target.exists()


class WriteCompressed(luigi.Task):
    bucket = luigi.Parameter()

    def output(self):
        return S3Target(f"s3://{self.bucket}/logs.gz", format=luigi.format.Gzip)

    def run(self):
        with self.output().open("w") as out:
            out.write(b"line one\nline two\n" * 1000)


class ReadCompressed(luigi.Task):
    bucket = luigi.Parameter()

    def requires(self):
        return WriteCompressed(bucket=self.bucket)

    def output(self):
        return S3Target(f"s3://{self.bucket}/line-count.txt", format=luigi.format.UTF8)

    def run(self):
        with self.input().open("r") as compressed:
            count = sum(1 for _ in compressed)
        with self.output().open("w") as out:
            out.write(f"{count} lines\n")


def test_gzip_format_stores_standard_gzip_and_reads_it_back(s3, bucket):
    assert luigi.build([ReadCompressed(bucket=bucket)], local_scheduler=True) is True

    stored = object_bytes(s3, bucket, "logs.gz")
    assert stored[:2] == b"\x1f\x8b"
    assert gzip.decompress(stored) == b"line one\nline two\n" * 1000
    assert object_bytes(s3, bucket, "line-count.txt") == b"2000 lines\n"


def test_nop_format_round_trips_bytes(s3, bucket):
    payload = bytes(range(256)) * 64
    target = S3Target(f"s3://{bucket}/blob.bin", format=luigi.format.Nop)
    with target.open("w") as out:
        out.write(payload)
    with target.open("r") as back:
        assert back.read() == payload
    assert object_bytes(s3, bucket, "blob.bin") == payload


def test_text_and_gzip_chain_round_trips_unicode(s3, bucket):
    target = S3Target(f"s3://{bucket}/notes.txt.gz", format=luigi.format.UTF8 >> luigi.format.Gzip)
    with target.open("w") as out:
        out.write("café\nnaïve\n")
    with target.open("r") as back:
        assert back.readlines() == ["café\n", "naïve\n"]
    assert gzip.decompress(object_bytes(s3, bucket, "notes.txt.gz")).decode("utf-8") == "café\nnaïve\n"


def test_upload_options_of_the_target_reach_s3(s3, bucket):
    target = S3Target(f"s3://{bucket}/page.html", ContentType="text/html", Metadata={"origin": "luigi"})
    with target.open("w") as out:
        out.write("<p>hi</p>")
    head = s3.boto3_client().head_object(Bucket=bucket, Key="page.html")
    assert head["ContentType"] == "text/html"
    assert head["Metadata"] == {"origin": "luigi"}


def test_luigi_s3_is_a_deprecated_alias(s3):
    sys.modules.pop("luigi.s3", None)
    with pytest.warns(DeprecationWarning, match=r"luigi\.contrib\.s3"):
        alias = importlib.import_module("luigi.s3")
    assert alias.S3Target is S3Target
    assert alias.S3Client is S3Client


def run_python(code: str) -> str:
    answer = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return answer.stdout.strip()


def test_importing_the_module_does_not_import_boto3():
    code = "import sys, luigi.contrib.s3; print('boto3' in sys.modules or 'botocore' in sys.modules)"
    assert run_python(code) == "False"


def test_without_boto3_first_use_names_the_extra_to_install():
    code = (
        "import sys\n"
        "sys.modules['boto3'] = sys.modules['botocore'] = None  # as if not installed\n"
        "from luigi.contrib.optional import MissingExtraError\n"
        "from luigi.contrib.s3 import S3Target\n"
        "target = S3Target('s3://bucket/key')\n"
        "try:\n"
        "    target.exists()\n"
        "except MissingExtraError as exc:\n"
        "    print(exc)\n"
    )
    assert "pip install 'luigi[s3]'" in run_python(code)
