"""S3Client makes its boto3 objects as Luigi does: Luigi users' tests that patch boto3 see their mocks used.

``boto3.resource("s3", ...)`` builds the resource (and so the client, ``resource.meta.client``) and
``boto3.client("sts")`` assumes a configured role; both are looked up when a client first needs them.
"""

from __future__ import annotations

import datetime
from unittest import mock

import pytest

from luigi.configuration import get_config
from luigi.contrib.s3 import DeprecatedBotoClientException, S3Client, S3Target

pytest.importorskip("boto3")


def test_with_no_config_the_resource_is_boto3_resource_with_luigis_exact_arguments():
    with mock.patch("boto3.resource") as resource:
        s3 = S3Client().s3

    resource.assert_called_once_with(
        "s3", aws_access_key_id=None, aws_secret_access_key=None, aws_session_token=None
    )
    assert s3 is resource.return_value


def test_configured_keys_reach_boto3_resource():
    get_config().set("s3", "aws_access_key_id", "foo")
    get_config().set("s3", "aws_secret_access_key", "bar")

    with mock.patch("boto3.resource") as resource:
        assert S3Client().s3 is resource.return_value

    resource.assert_called_once_with(
        "s3", aws_access_key_id="foo", aws_secret_access_key="bar", aws_session_token=None
    )


def test_every_request_goes_through_the_patched_resources_client():
    with mock.patch("boto3.resource") as resource:
        client = resource.return_value.meta.client
        client.get_object.return_value = {"Body": mock.Mock(read=mock.Mock(return_value=b"stored"))}
        S3Client().put_string("hello", "s3://bucket/dir/key.txt")
        assert S3Client().get_as_string("s3://bucket/dir/key.txt") == "stored"

    put = client.put_object.call_args.kwargs
    assert (put["Bucket"], put["Key"]) == ("bucket", "dir/key.txt")
    client.get_object.assert_called_once_with(Bucket="bucket", Key="dir/key.txt")


def test_an_s3_target_checks_existence_through_the_patched_resource():
    with mock.patch("boto3.resource") as resource:
        client = resource.return_value.meta.client
        client.head_object.return_value = {"ContentLength": 5}
        assert S3Target("s3://bucket/out.txt").exists() is True

    client.head_object.assert_called_once_with(Bucket="bucket", Key="out.txt")


def test_a_configured_role_is_assumed_through_boto3_client_and_its_keys_build_the_resource():
    get_config().set("s3", "aws_role_arn", "arn:aws:iam::123456789012:role/loader")
    get_config().set("s3", "aws_role_session_name", "nightly")

    with mock.patch("boto3.client") as client, mock.patch("boto3.resource") as resource:
        role = client.return_value.assume_role.return_value["Credentials"]
        assert S3Client().s3 is resource.return_value

    client.assert_called_once_with("sts")
    client.return_value.assume_role.assert_called_once_with(
        RoleArn="arn:aws:iam::123456789012:role/loader", RoleSessionName="nightly"
    )
    resource.assert_called_once_with(
        "s3",
        aws_access_key_id=role.get("AccessKeyId"),
        aws_secret_access_key=role.get("SecretAccessKey"),
        aws_session_token=role.get("SessionToken"),
    )


def test_an_option_boto3_refuses_is_luigis_deprecated_boto_client_exception():
    client = S3Client("AKIDEXAMPLE", "secret", colour="blue")

    with pytest.raises(DeprecatedBotoClientException, match="unexpected keyword argument 'colour'"):
        client.put_string("x", "s3://bucket/key")


@pytest.mark.parametrize(
    ("valid_for", "assumed"), [(datetime.timedelta(hours=1), 1), (datetime.timedelta(minutes=5), 2)]
)
def test_assumed_role_credentials_are_renewed_shortly_before_they_expire(valid_for, assumed):
    get_config().set("s3", "aws_role_arn", "arn:aws:iam::123456789012:role/loader")
    expiration = datetime.datetime.now(datetime.timezone.utc) + valid_for

    with mock.patch("boto3.client") as client, mock.patch("boto3.resource"):
        client.return_value.assume_role.return_value = {
            "Credentials": {
                "AccessKeyId": "k",
                "SecretAccessKey": "s",
                "SessionToken": "t",
                "Expiration": expiration,
            }
        }
        S3Client().put_string("first", "s3://bucket/a")
        S3Client().put_string("second", "s3://bucket/b")

    assert client.return_value.assume_role.call_count == assumed
