"""The SigV4 signature of spillway's own ranged GET (spillway/storage/s3_get.py), against signatures computed
elsewhere: the worked example of AWS's documentation and botocore's signer (the AWS SDK for Python)."""

from __future__ import annotations

import time

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from spillway.storage import s3_get

# "Signature Calculations for the Authorization Header: Transferring Payload in a Single Chunk", example "GET
# Object" (AWS S3 API reference, sig-v4-header-based-auth): its keys, request and published signature.
DOC_ACCESS = s3_get.Access(
    "https", "examplebucket.s3.amazonaws.com", "us-east-1", "AKIAIOSFODNN7EXAMPLE",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
)  # fmt: skip
DOC_SIGNATURE = "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"


def test_the_signature_of_aws_documented_get_object_example() -> None:
    when = time.strptime("20130524T000000Z", "%Y%m%dT%H%M%SZ")
    headers = s3_get.signed_headers(DOC_ACCESS, "GET", DOC_ACCESS.host, "/test.txt", {"Range": "bytes=0-9"}, when)
    assert headers["authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
        f"SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, Signature={DOC_SIGNATURE}"
    )
    assert headers["x-amz-content-sha256"] == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_the_signature_equals_botocores_for_a_session_and_an_awkward_key() -> None:
    """A session token (signed as x-amz-security-token), a port in the host, another region, and a key whose
    characters need percent-encoding: botocore's S3 signer signs the same request the same way."""
    access = s3_get.Access("http", "127.0.0.1:9000", "eu-west-3", "AKIDEXAMPLE", "s3cr3t/+=", "the-session-token")
    path = "/ckpt/job%20a/chk-3/f~%2B%C3%A9"
    request = AWSRequest(method="GET", url=f"http://{access.host}{path}", headers={"Range": "bytes=100-8388707"})
    request.headers["X-Amz-Content-SHA256"] = s3_get.EMPTY_SHA256
    S3SigV4Auth(Credentials("AKIDEXAMPLE", "s3cr3t/+=", "the-session-token"), "s3", "eu-west-3").add_auth(request)
    when = time.strptime(request.headers["X-Amz-Date"], "%Y%m%dT%H%M%SZ")  # botocore signs for the time now
    ours = s3_get.signed_headers(access, "GET", access.host, path, {"range": "bytes=100-8388707"}, when)
    assert ours["authorization"] == request.headers["Authorization"]
    assert ours["x-amz-security-token"] == "the-session-token"


def test_without_credentials_in_the_environment_pyarrow_is_left_to_find_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    assert s3_get.access_from_env("us-east-1", None) is None
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKID")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    aws = s3_get.access_from_env("eu-west-3", None)
    assert aws is not None and (aws.scheme, aws.host, aws.token) == ("https", "s3.eu-west-3.amazonaws.com", None)
    local = s3_get.access_from_env(None, "http://127.0.0.1:5000")
    assert local is not None and (local.scheme, local.host, local.region) == ("http", "127.0.0.1:5000", "us-east-1")
