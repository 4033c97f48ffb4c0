"""A real S3 endpoint for tests: moto's standalone server in a subprocess on a free 127.0.0.1 port.

The server checks signatures: the fixture creates an IAM user with full access and hands out its key, so
a wrong secret or an unknown key id is refused as AWS would refuse it. Tests call ``configure()`` (the
autouse fixture resets the config before each test) and take a fresh bucket from ``new_bucket()``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from helpers.luigid import free_port, wait_until
from helpers.services import require_module, unavailable

__all__ = ["S3Server", "s3_server"]

_START_ATTEMPTS = 3  # a free port can be taken by someone else before moto binds it
_FULL_ACCESS = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}


@dataclass(frozen=True)
class S3Server:
    """Where the test server listens and the credentials it accepts."""

    endpoint_url: str
    access_key: str
    secret_key: str
    region: str = "us-east-1"

    def configure(self) -> None:
        """Set the ``[s3]`` options so that a plain ``S3Client()`` reaches this server."""
        from luigi.configuration import get_config

        config = get_config()
        config.set("s3", "endpoint_url", self.endpoint_url)
        config.set("s3", "aws_access_key_id", self.access_key)
        config.set("s3", "aws_secret_access_key", self.secret_key)
        config.set("s3", "region_name", self.region)

    def boto3_client(self) -> Any:
        """A plain boto3 S3 client on this server, for setting up and checking contents in tests."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=self.region,
        )

    def new_bucket(self) -> str:
        """Create a bucket no other test uses and return its name."""
        name = f"luigi-test-{uuid.uuid4().hex[:20]}"
        self.boto3_client().create_bucket(Bucket=name)
        return name


def _require_moto_server() -> None:
    require_module("boto3", "s3")
    for module in ("moto", "flask", "flask_cors"):
        if importlib.util.find_spec(module) is None:
            unavailable(f"moto's server needs the Python module {module} (pip install 'moto[server]')")


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/moto-api/data.json", timeout=1):
            return True
    except (urllib.error.URLError, OSError):
        return False


def _start(workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start moto on a free port and wait until it answers; retry on another port if it exits."""
    log_path = workdir / "moto.log"
    for _ in range(_START_ATTEMPTS):
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                cwd=workdir,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        if _started(process, url):
            return process, url
    tail = log_path.read_text(errors="replace")[-2000:]
    raise RuntimeError(f"moto server did not start after {_START_ATTEMPTS} attempts; its log ends:\n{tail}")


def _started(process: subprocess.Popen[bytes], url: str) -> bool:
    """Wait until the server answers (True) or exits (False); a server that does neither is stopped."""
    try:
        wait_until(lambda: process.poll() is not None or _answers(url), what=f"moto server on {url}")
    except AssertionError:
        _stop(process)
        raise
    return process.poll() is None


def _create_user_and_require_auth(url: str) -> tuple[str, str]:
    """Make an IAM user with full access, then switch moto to checking every request's signature."""
    import boto3

    # Until auth is switched on, moto accepts any key: these placeholders only make botocore sign at all.
    placeholders = {"aws_access_key_id": "setup", "aws_secret_access_key": "setup"}
    iam = boto3.client("iam", endpoint_url=url, region_name="us-east-1", **placeholders)
    iam.create_user(UserName="luigi-tests")
    iam.put_user_policy(UserName="luigi-tests", PolicyName="all", PolicyDocument=json.dumps(_FULL_ACCESS))
    key = iam.create_access_key(UserName="luigi-tests")["AccessKey"]
    request = urllib.request.Request(
        f"{url}/moto-api/reset-auth", data=b"0", method="POST", headers={"Content-Type": "text/plain"}
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        answer.read()
    return key["AccessKeyId"], key["SecretAccessKey"]


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """moto's S3 server for this test session (one per xdist worker), stopped at the end."""
    _require_moto_server()
    with tempfile.TemporaryDirectory(prefix="luigi-moto-") as workdir:
        process, url = _start(Path(workdir))
        try:
            access_key, secret_key = _create_user_and_require_auth(url)
            yield S3Server(endpoint_url=url, access_key=access_key, secret_key=secret_key)
        finally:
            with contextlib.suppress(OSError):
                _stop(process)
