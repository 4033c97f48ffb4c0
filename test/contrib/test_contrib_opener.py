"""luigi.contrib.opener: pipelines whose targets are named by URL (file://, bare paths, mock://, s3://)."""

from __future__ import annotations

import gzip
import importlib.util
import logging
import subprocess
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import pytest
from helpers.services import unavailable

import luigi
from luigi.contrib.opener import (
    InvalidQuery,
    MockOpener,
    NoOpenerError,
    OpenerRegistry,
    OpenerTarget,
)
from luigi.local_target import LocalTarget
from luigi.mock import MockFileSystem, MockTarget

if TYPE_CHECKING:
    from helpers.s3_server import S3Server

# s3_server.py (the moto fixture) belongs to the luigi.contrib.s3 tests; without it only s3:// is skipped.
HAVE_S3_FIXTURE = importlib.util.find_spec("helpers.s3_server") is not None
pytest_plugins = ["helpers.s3_server"] if HAVE_S3_FIXTURE else []

PRIVATE = luigi.parameter.ParameterVisibility.PRIVATE


class WriteWords(luigi.Task):
    """Writes a few words to the target its URL names."""

    name = luigi.Parameter()
    url = luigi.Parameter(significant=False, visibility=PRIVATE)  # may carry credentials

    def output(self) -> Any:
        return OpenerTarget(self.url)

    def run(self) -> None:
        with self.output().open("w") as out:
            out.write("alpha beta gamma\n")


class CountWords(luigi.Task):
    """Reads WriteWords' output from one URL and writes the word count to another."""

    name = luigi.Parameter()
    source_url = luigi.Parameter(significant=False, visibility=PRIVATE)
    url = luigi.Parameter(significant=False, visibility=PRIVATE)

    def requires(self) -> luigi.Task:
        return WriteWords(name=self.name, url=self.source_url)

    def output(self) -> Any:
        return OpenerTarget(self.url)

    def run(self) -> None:
        with self.input().open("r") as source:
            count = len(source.read().split())
        with self.output().open("w") as out:
            out.write(f"{count}\n")


class BrokenWriter(WriteWords):
    """Fails halfway through writing its output."""

    def run(self) -> None:
        with self.output().open("w") as out:
            out.write("half of it")
            raise RuntimeError("the computation broke mid-write")


def _build(*tasks: luigi.Task) -> luigi.execution_summary.LuigiRunResult:
    return luigi.build(list(tasks), local_scheduler=True, detailed_summary=True)


def _mock_path() -> str:
    return f"opener-test/{uuid.uuid4().hex}/count.txt"


# -- file:// and bare paths --------------------------------------------------------------------------------


def test_pipeline_reads_a_file_url_and_writes_a_mock_url(tmp_path: Path) -> None:
    mock_path = _mock_path()
    task = CountWords(name="a", source_url=f"file://{tmp_path}/words.txt", url=f"mock://{mock_path}")

    assert _build(task).status == luigi.LuigiStatusCode.SUCCESS

    assert (tmp_path / "words.txt").read_text() == "alpha beta gamma\n"
    assert MockFileSystem().get_data(mock_path) == b"3\n"


def test_second_build_finds_the_url_targets_and_runs_nothing(tmp_path: Path) -> None:
    task = CountWords(name="b", source_url=str(tmp_path / "words.txt"), url=f"mock://{_mock_path()}")
    assert _build(task).status == luigi.LuigiStatusCode.SUCCESS
    (tmp_path / "words.txt").write_text("changed, so a rerun would count 4\n")

    second = _build(task)

    assert second.status == luigi.LuigiStatusCode.SUCCESS
    assert "1 complete ones were encountered" in second.summary_text
    assert MockFileSystem().get_data(task.output().path) == b"3\n"


def test_bare_and_file_urls_give_local_targets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)

    absolute = OpenerTarget(f"file://{tmp_path}/x.txt")
    from_path = OpenerTarget(tmp_path / "p.txt")
    relative = OpenerTarget("file://data/x.txt")
    bare = OpenerTarget("data/y.txt")

    assert isinstance(absolute, LocalTarget) and absolute.path == f"{tmp_path}/x.txt"
    assert isinstance(relative, LocalTarget) and relative.path == "data/x.txt"
    assert isinstance(bare, LocalTarget) and bare.path == "data/y.txt"
    assert isinstance(from_path, LocalTarget) and from_path.path == f"{tmp_path}/p.txt"
    assert OpenerTarget("file:///data/run#3.csv").path == "/data/run#3.csv"


def test_format_named_in_the_query_is_used_for_writing(tmp_path: Path) -> None:
    task = WriteWords(name="gz", url=f"file://{tmp_path}/words.txt.gz?format=Text>>Gzip")

    assert _build(task).status == luigi.LuigiStatusCode.SUCCESS

    assert gzip.decompress((tmp_path / "words.txt.gz").read_bytes()) == b"alpha beta gamma\n"
    assert task.output().path == f"{tmp_path}/words.txt.gz"


def test_json_query_values_and_keyword_arguments(tmp_path: Path) -> None:
    from_query = OpenerTarget(f"{tmp_path}/t.txt?is_tmp=true")
    bare_flag = OpenerTarget("mock://m/flag?mirror_on_stderr")
    overridden = OpenerTarget(
        f"{tmp_path}/t.txt?is_tmp=true&format=Gzip", is_tmp=False, format=luigi.format.Nop
    )

    assert from_query.is_tmp is True
    assert bare_flag._mirror_on_stderr is True
    assert overridden.is_tmp is False and overridden.format is luigi.format.Nop


def test_atomic_write_through_a_file_url_leaves_nothing_on_failure(tmp_path: Path) -> None:
    task = BrokenWriter(name="broken", url=f"file://{tmp_path}/out/words.txt")

    assert _build(task).status == luigi.LuigiStatusCode.FAILED

    assert list((tmp_path / "out").iterdir()) == []


# -- mock:// ----------------------------------------------------------------------------------------------


def test_mock_url_keeps_the_case_of_its_first_segment() -> None:
    target = OpenerTarget("mock://Reports/Q1.csv")

    assert isinstance(target, MockTarget)
    assert target.path == "Reports/Q1.csv"
    assert OpenerTarget("mock:///abs/path").path == "/abs/path"


def test_failing_mock_write_stores_nothing() -> None:
    path = _mock_path()

    assert (
        _build(BrokenWriter(name="mock-broken", url=f"mock://{path}")).status == luigi.LuigiStatusCode.FAILED
    )

    assert not MockFileSystem().exists(path)


# -- errors -------------------------------------------------------------------------------------------------


def test_unknown_query_argument_fails_the_task_naming_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    task = WriteWords(name="typo", url=f"{tmp_path}/w.txt?is_tpm=true")

    result = _build(task)

    assert result.status == luigi.LuigiStatusCode.SCHEDULING_FAILED
    assert f"Cannot open {tmp_path}/w.txt?is_tpm=true: unknown query argument 'is_tpm'" in caplog.text
    assert "(this opener takes: format, is_tmp)" in caplog.text
    assert not (tmp_path / "w.txt").exists()


def test_bad_query_values_are_refused() -> None:
    with pytest.raises(InvalidQuery, match="'is_tmp' must be JSON"):
        OpenerTarget("mock://x?is_tmp=yes-please")
    with pytest.raises(InvalidQuery, match="'format' needs a value"):
        OpenerTarget("mock://x?format")
    with pytest.raises(InvalidQuery, match="is given 2 times"):
        OpenerTarget("mock://x?is_tmp=true&is_tmp=false")
    with pytest.raises(InvalidQuery, match="format='Zstd' is not a luigi.format format .known: .*Gzip"):
        OpenerTarget("mock://x?format=Text>>Zstd")


def test_secrets_in_a_url_are_masked_in_errors_and_opener_path() -> None:
    with pytest.raises(InvalidQuery) as raised:
        OpenerTarget("mock://user:pw-1234@host/x?format=Nop&api_token=tok-5678")

    assert str(raised.value) == (
        "Cannot open mock://user:***@host/x?format=Nop&api_token=***: "
        "unknown query argument 'api_token' (this opener takes: format, is_tmp, mirror_on_stderr)"
    )
    plain = OpenerTarget("mock://x?is_tmp=true")
    assert plain.opener_path == "mock://x?is_tmp=true"


def test_unknown_scheme_starts_with_luigis_text_then_names_the_registered_ones() -> None:
    with pytest.raises(NoOpenerError) as raised:
        OpenerTarget("foo://bar.txt")

    assert str(raised.value).startswith("No opener for foo")  # Luigi's text, which users' tests match
    assert str(raised.value) == (
        "No opener for foo in foo://bar.txt "
        "(registered: file://, mock://, s3://, s3n://); register one with OpenerRegistry.add()"
    )


def test_get_opener_of_an_unknown_scheme_says_no_opener_for_it() -> None:
    with pytest.raises(NoOpenerError, match=r"^No opener for ftp \(registered: mock://\); register one"):
        OpenerRegistry([MockOpener]).get_opener("ftp")


def test_a_registry_takes_custom_openers() -> None:
    class ScratchOpener(MockOpener):
        """``scratch://name``: a mock file under ``scratch/``."""

        names = ["scratch"]

        @classmethod
        def get_target(cls, scheme: str, path: str, fragment: str, *args: Any, **kwargs: Any) -> Any:
            return MockTarget(f"scratch{path}")

    registry = OpenerRegistry([ScratchOpener])

    target = registry.open("scratch:///notes.txt")

    assert isinstance(target, MockTarget) and target.path == "scratch/notes.txt"
    assert target.opener_path == "scratch:///notes.txt"
    with pytest.raises(NoOpenerError):
        registry.open("mock://elsewhere")


def test_importing_the_module_imports_neither_boto3_nor_the_s3_module() -> None:
    code = (
        "import sys, luigi.contrib.opener as o; o.OpenerTarget('mock://x'); "
        "assert not {'boto3', 'luigi.contrib.s3'} & set(sys.modules), 'imported the s3 client'"
    )

    subprocess.run([sys.executable, "-c", code], check=True)


# -- s3:// -------------------------------------------------------------------------------------------------


@pytest.fixture
def s3(request: pytest.FixtureRequest) -> S3Server:
    """The moto server of test/helpers/s3_server.py, with [s3] left unconfigured: the URL says it all."""
    if not HAVE_S3_FIXTURE:
        unavailable("test/helpers/s3_server.py (the luigi.contrib.s3 test fixture) is missing")
    pytest.importorskip("luigi.contrib.s3")
    return request.getfixturevalue("s3_server")


def _s3_url(server: S3Server, bucket: str, key: str, **extra: str) -> str:
    query = {
        "endpoint_url": server.endpoint_url,
        "region_name": server.region,
        "aws_access_key_id": server.access_key,
        "aws_secret_access_key": server.secret_key,
        **extra,
    }
    return f"s3://{bucket}/{key}?{urlencode(query)}"


def test_s3_url_with_credentials_in_the_query_is_written_and_read(
    s3: S3Server, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    bucket = s3.new_bucket()
    source = _s3_url(s3, bucket, "in/words.txt")
    task = CountWords(
        name="s3", source_url=source, url=_s3_url(s3, bucket, "out/count.txt", ContentType="text/plain")
    )

    assert _build(task).status == luigi.LuigiStatusCode.SUCCESS

    objects = s3.boto3_client()
    assert objects.get_object(Bucket=bucket, Key="in/words.txt")["Body"].read() == b"alpha beta gamma\n"
    counted = objects.get_object(Bucket=bucket, Key="out/count.txt")
    assert counted["Body"].read() == b"3\n" and counted["ContentType"] == "text/plain"
    target = OpenerTarget(source)
    assert str(target) == f"s3://{bucket}/in/words.txt"
    for text in (str(target), repr(target), target.opener_path, repr(target.fs), caplog.text):
        assert s3.secret_key not in text


def test_s3_url_for_a_missing_bucket_fails_without_showing_the_secret(
    s3: S3Server, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    missing = f"no-such-bucket-{uuid.uuid4().hex[:12]}"
    task = WriteWords(name="s3-missing", url=_s3_url(s3, missing, "words.txt"))

    result = _build(task)

    assert result.status != luigi.LuigiStatusCode.SUCCESS
    assert f"s3://{missing}" in caplog.text
    assert s3.secret_key not in caplog.text and s3.secret_key not in result.summary_text


def test_s3_url_with_a_wrong_secret_fails_without_showing_it(
    s3: S3Server, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    bucket = s3.new_bucket()
    wrong_secret = f"wrong-{uuid.uuid4().hex}"
    url = _s3_url(s3, bucket, "words.txt", aws_secret_access_key=wrong_secret)
    task = WriteWords(name="s3-wrong-secret", url=url)

    result = _build(task)

    assert result.status != luigi.LuigiStatusCode.SUCCESS
    assert f"s3://{bucket}/words.txt" in caplog.text
    assert wrong_secret not in caplog.text and wrong_secret not in result.summary_text
    assert s3.boto3_client().list_objects_v2(Bucket=bucket).get("KeyCount") == 0
