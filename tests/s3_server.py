"""A real S3-compatible server on loopback for tests: moto's server mode (moto[server], a dev dependency).

No MinIO server ships in a PyPI or Debian package, so the tests run moto's HTTP server as its own
process. With ``auth`` (INITIAL_NO_AUTH_ACTION_COUNT) the first three requests create an IAM user,
its policy and its access key, and every later request must be signed with that key, so a wrong key
or secret gets a real 403. moto keeps its objects (and keys) in memory, so ``stop`` loses them: a test
that restarts the server uses one without auth, whose fixed key survives a restart, and publishes the
store again, as one would restore a bucket.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import boto3

REGION = "us-east-1"
BUCKET = "esp32-docs"
NO_AUTH_SETUP_CALLS = "3"  # create_user, put_user_policy, create_access_key


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class S3Server:
    """One moto server process on 127.0.0.1, its access key, and the env LanceDB reads them from."""

    def __init__(self, log: Path, *, auth: bool = True) -> None:
        self.port = free_port()
        self.auth = auth
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None
        self.key_id = "open-key"  # any key is accepted without auth
        self.secret = "open-secret"

    def start(self) -> S3Server:
        moto = Path(sys.executable).with_name("moto_server")
        env = {k: v for k, v in os.environ.items() if k != "INITIAL_NO_AUTH_ACTION_COUNT"}
        if self.auth:
            env["INITIAL_NO_AUTH_ACTION_COUNT"] = NO_AUTH_SETUP_CALLS
        with self.log.open("ab") as sink:
            self.process = subprocess.Popen(
                [str(moto), "-H", "127.0.0.1", "-p", str(self.port)], env=env, stdout=sink, stderr=sink
            )
        deadline = time.monotonic() + 300  # moto imports for seconds; minutes on a loaded machine
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    break
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto server did not start; see {self.log}") from None
                time.sleep(0.2)
        if self.auth:
            self._create_key()
        self.client().create_bucket(Bucket=BUCKET)
        return self

    def _create_key(self) -> None:
        iam = boto3.client(
            "iam",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id="setup",
            aws_secret_access_key="setup",
        )
        iam.create_user(UserName="docs")
        policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
        iam.put_user_policy(UserName="docs", PolicyName="all", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName="docs")["AccessKey"]
        self.key_id, self.secret = key["AccessKeyId"], key["SecretAccessKey"]

    def uri(self, prefix: str) -> str:
        return f"s3://{BUCKET}/{prefix}/esp_docs.lancedb"

    def client(self) -> Any:
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=self.key_id,
            aws_secret_access_key=self.secret,
        )

    def env(self, **overrides: str) -> dict[str, str]:
        """The process environment with the standard variables LanceDB's object store reads."""
        env = {
            **os.environ,
            "AWS_ACCESS_KEY_ID": self.key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret,
            "AWS_REGION": REGION,
            "AWS_ENDPOINT": self.endpoint,
            "AWS_ALLOW_HTTP": "true",
        }
        env.update(overrides)
        return env

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        self.process = None
