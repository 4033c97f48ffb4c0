"""AWS Batch, ECS and CloudWatch Logs on moto's server (the session's S3 server, which serves every service).

`aws` points plain ``boto3.client(...)`` calls at moto through boto3's own environment variables, as a
user's AWS settings would, in a region no other test uses, so each test sees only its own queues and
clusters. `aws.point_at(standin_url, "batch", "ecs")` sends those services to the stand-in instead
(helpers/aws_compute_standin.py) while Logs stays on moto.
"""

from __future__ import annotations

import itertools
import json
import os
import urllib.request
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

from helpers.s3_server import S3Server, s3_server

__all__ = ["MotoAws", "aws", "s3_server"]

# moto knows these regions; a test takes the next one so that regional state (queues, clusters) is its own
_REGIONS = itertools.cycle(
    [
        "us-east-2",
        "us-west-1",
        "us-west-2",
        "eu-west-1",
        "eu-west-2",
        "eu-west-3",
        "eu-central-1",
        "eu-north-1",
        "ap-south-1",
        "ap-northeast-1",
        "ap-northeast-2",
        "ap-southeast-1",
        "ap-southeast-2",
        "ca-central-1",
        "sa-east-1",
    ]
)
_ENDPOINT_VARIABLES = {"batch": "AWS_ENDPOINT_URL_BATCH", "ecs": "AWS_ENDPOINT_URL_ECS"}


@dataclass
class MotoAws:
    """The moto server, this test's region, and clients for setting up and checking what the task did."""

    server: S3Server
    region: str
    monkeypatch: pytest.MonkeyPatch

    def client(self, service: str) -> Any:
        """A boto3 client for ``service`` on moto, as the test's set-up tool."""
        import boto3

        return boto3.client(
            service,
            endpoint_url=self.server.endpoint_url,
            region_name=self.region,
            aws_access_key_id=self.server.access_key,
            aws_secret_access_key=self.server.secret_key,
        )

    def point_at(self, url: str, *services: str) -> None:
        """Send the plain boto3 clients of ``services`` ("batch", "ecs") to ``url`` instead of moto."""
        for service in services:
            self.monkeypatch.setenv(_ENDPOINT_VARIABLES[service], url)

    def configure_moto(self, path: str, settings: dict[str, Any]) -> None:
        """POST ``settings`` to one of moto's documented ``/moto-api/`` endpoints."""
        request = urllib.request.Request(
            f"{self.server.endpoint_url}/moto-api/{path}", data=json.dumps(settings).encode(), method="POST"
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            answer.read()

    def batch_queue(self, name: str, state: str = "ENABLED") -> str:
        """A Batch job queue on a fresh unmanaged compute environment (no instances needed to submit)."""
        role = self.client("iam").create_role(
            RoleName=f"batch-{uuid.uuid4().hex[:12]}", AssumeRolePolicyDocument="{}"
        )
        batch = self.client("batch")
        environment = batch.create_compute_environment(
            computeEnvironmentName=f"env-{name}",
            type="UNMANAGED",
            state="ENABLED",
            serviceRole=role["Role"]["Arn"],
        )
        order = [{"order": 1, "computeEnvironment": environment["computeEnvironmentArn"]}]
        batch.create_job_queue(jobQueueName=name, state=state, priority=1, computeEnvironmentOrder=order)
        return name


@pytest.fixture
def aws(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> MotoAws:  # noqa: F811  # the fixture above
    """Plain boto3 clients reach moto in a region of the test's own; the machine's AWS settings are hidden."""
    for name in [name for name in os.environ if name.startswith("AWS_")]:
        monkeypatch.delenv(name)
    region = next(_REGIONS)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint_url)
    monkeypatch.setenv("AWS_DEFAULT_REGION", region)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret_key)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    import boto3

    # boto3's default session keeps the credentials it first found: each test's (server's) keys need a new one
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    return MotoAws(server=s3_server, region=region, monkeypatch=monkeypatch)
