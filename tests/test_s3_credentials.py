"""Wrong credentials on an object store: a one-line typed error that says what to check.

moto's server checks credentials only when started with `INITIAL_NO_AUTH_ACTION_COUNT`
(read when moto is imported), so this module starts a server of its own in a child
process, on 127.0.0.1 and a free port, and stops it at the end. Its first requests
(creating a user and an access key through IAM) are allowed without credentials;
every later request needs that key.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from s3_server import free_port

import lsm_lab
from lsm_lab.cli.app import main as cli_main
from lsm_lab.errors import StorageError

FREE_ACTIONS = 3  # create_user, put_user_policy, create_access_key


@pytest.fixture(scope="module")
def auth_s3() -> Iterator[dict[str, str]]:
    """storage_options with valid keys for a moto server that enforces credentials; a table at s3://auth-b/t."""
    import boto3

    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(FREE_ACTIONS)}
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("moto server did not start") from None
                time.sleep(0.2)
        iam: Any = boto3.client("iam", endpoint_url=endpoint, aws_access_key_id="x", aws_secret_access_key="x",
                                region_name="us-east-1")
        iam.create_user(UserName="u")
        iam.put_user_policy(UserName="u", PolicyName="all", PolicyDocument='{"Version": "2012-10-17", "Statement": '
                            '[{"Effect": "Allow", "Action": "*", "Resource": "*"}]}')
        key = iam.create_access_key(UserName="u")["AccessKey"]
        opts = {"aws_endpoint_url": endpoint, "aws_access_key_id": key["AccessKeyId"],
                "aws_secret_access_key": key["SecretAccessKey"], "aws_region": "us-east-1", "aws_allow_http": "true"}
        s3: Any = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=opts["aws_access_key_id"],
                               aws_secret_access_key=opts["aws_secret_access_key"], region_name="us-east-1")
        s3.create_bucket(Bucket="auth-b")
        t = lsm_lab.create_table("s3://auth-b/t", name="t", record_key="id", storage_options=opts)
        t.upsert([{"id": "a", "v": 1}, {"id": "b", "v": 2}])
        yield opts
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_right_keys_read(auth_s3: dict[str, str]) -> None:
    assert sorted(lsm_lab.open_table("s3://auth-b/t", storage_options=auth_s3).read().column("id").to_pylist()) \
        == ["a", "b"]


@pytest.mark.parametrize("change", [{"aws_secret_access_key": "wrong"}, {"aws_access_key_id": "AKIANOSUCHKEY0000000"}],
                         ids=["wrong secret", "unknown key"])
def test_wrong_credentials_are_a_storage_error_naming_the_object(auth_s3: dict[str, str],
                                                                 change: dict[str, str]) -> None:
    with pytest.raises(StorageError, match="access denied: check the credentials") as err:
        lsm_lab.open_table("s3://auth-b/t", storage_options={**auth_s3, **change}).read()
    assert "s3://auth-b/t/.hoodie" in str(err.value)


def test_wrong_credentials_in_the_cli_are_one_line(auth_s3: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    opts = [x for k, v in {**auth_s3, "aws_secret_access_key": "wrong"}.items() for x in ("--storage-option", f"{k}={v}")]
    assert cli_main(["read", "s3://auth-b/t", *opts]) != 0
    err = capsys.readouterr().err
    assert "access denied" in err and "Traceback" not in err
