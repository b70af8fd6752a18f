"""Stores on object storage (s3://, gs://, az://): plain-language errors for what LanceDB raises there.

LanceDB reaches an object store itself (its Rust object_store client), configured by the standard
environment variables: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, and for an
S3-compatible server AWS_ENDPOINT (plus AWS_ALLOW_HTTP=true for a plain-http one); GOOGLE_* and
AZURE_* likewise. Nothing here talks to the store: when a connect or read fails, LanceDB raises a
ValueError or OSError whose text is a Rust debug dump of the HTTP attempt. ``describe_failure`` turns
that into one sentence that names the endpoint, the cause and the variable to check, so a caller
never sees the dump or a traceback.
"""

from __future__ import annotations

import os
import re

REMOTE_SCHEMES = ("s3://", "s3+ddb://", "gs://", "az://", "abfss://")
SETTINGS_HINT = (
    "credentials and endpoint come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, "
    "AWS_ENDPOINT and AWS_ALLOW_HTTP (or the GOOGLE_*/AZURE_* equivalents)"
)
# (pattern in LanceDB's error text, what it means); the first that matches wins. The text always
# carries the retry settings ("retry_timeout: 180s"), so a bare "timeout" would match every error.
CAUSES: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"InvalidAccessKeyId|SignatureDoesNotMatch|AccessDenied|status: 403|Forbidden", re.I),
        "the object store at {endpoint} refused the credentials (403: wrong key or secret, or no access)",
    ),
    (
        re.compile(r"ConnectionRefused|tcp connect error|kind: (Connect|Timeout)|dns error|timed out", re.I),
        "the object store endpoint {endpoint} cannot be reached (connection failed)",
    ),
    (re.compile(r"NoSuchBucket", re.I), "the bucket of {uri} does not exist at {endpoint}"),
    (
        re.compile(r"Table '[^']*' was not found|not found|NotFound|status: 404", re.I),
        "there is no table at {uri} (publish one with `just pack --to {uri}`)",
    ),
)


def is_remote(db_uri: str) -> bool:
    """True for a URI LanceDB serves from object storage rather than a local directory."""
    return db_uri.startswith(REMOTE_SCHEMES)


def endpoint() -> str:
    """The endpoint LanceDB will use: AWS_ENDPOINT (or AWS_ENDPOINT_URL), else the provider's own."""
    return os.environ.get("AWS_ENDPOINT") or os.environ.get("AWS_ENDPOINT_URL") or "the provider's default"


def describe_failure(db_uri: str, error: BaseException) -> str:
    """One sentence for a failed connect/read of ``db_uri``: cause, endpoint, and what to check."""
    text = str(error)
    for pattern, cause in CAUSES:
        if pattern.search(text):
            return f"{cause.format(endpoint=endpoint(), uri=db_uri)}; {SETTINGS_HINT}"
    first_line = text.splitlines()[0][:200] if text else type(error).__name__
    return f"the object store for {db_uri} failed ({type(error).__name__}: {first_line}); {SETTINGS_HINT}"
