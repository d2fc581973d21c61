"""spillway's own ranged GET (spillway/storage/s3_get.py) on servers that check what it sends: a moto server that
verifies every request's SigV4 signature against the keys its IAM issued (so a wrongly signed request is refused,
as AWS refuses it), and a server that never answers. Bytes are compared with what was uploaded."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from support.endpoints import free_port, silent_server

from spillway.errors import StorageError, message_of
from spillway.storage import fs

KEY = "job a/chk-3/f~+é"  # characters the signature's canonical path must percent-encode
DATA = os.urandom(3 * 1024 * 1024 + 17)


@pytest.fixture(scope="module")
def signed_s3() -> Iterator[tuple[str, dict[str, str]]]:
    """A moto server that checks signatures (after the five set-up calls below, every request must be signed
    with a key its IAM issued), with ``ckpt/<KEY>`` and a user allowed to read it: (url, that user's env)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env={**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "5"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(200):  # a bare connect: an HTTP probe would count as one of the unchecked calls
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        url = f"http://127.0.0.1:{port}"
        setup = {"endpoint_url": url, "region_name": "us-east-1"}
        setup |= {"aws_access_key_id": "setup", "aws_secret_access_key": "setup"}
        s3, iam = boto3.client("s3", **setup), boto3.client("iam", **setup)
        s3.create_bucket(Bucket="ckpt")
        s3.put_object(Bucket="ckpt", Key=KEY, Body=DATA)
        iam.create_user(UserName="reader")
        key = iam.create_access_key(UserName="reader")["AccessKey"]
        policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
        iam.put_user_policy(UserName="reader", PolicyName="read", PolicyDocument=json.dumps(policy))
        env = {
            "AWS_ENDPOINT_URL": url,
            "AWS_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": key["AccessKeyId"],
            "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"],
        }
        yield url, env
    finally:
        proc.terminate()
        proc.wait(10)


def _use(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    fs._filesystem.cache_clear()


def test_signed_ranged_reads_bring_the_object_whole(
    signed_s3: tuple[str, dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, env = signed_s3
    _use(monkeypatch, env)
    loc = fs.locate(f"s3://ckpt/{KEY}")
    assert fs._s3_direct("ckpt", 30.0) is not None  # read by spillway's GET, not pyarrow's
    transfer = fs.Transfer(loc, tmp_path / "copy", len(DATA))
    assert fs.fetch_files([transfer], workers=3, part=1 << 20) == len(DATA)
    assert (tmp_path / "copy").read_bytes() == DATA
    fs._filesystem.cache_clear()


def test_a_wrongly_signed_read_is_refused_in_one_line_naming_the_object(
    signed_s3: tuple[str, dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, env = signed_s3
    _use(monkeypatch, {**env, "AWS_SECRET_ACCESS_KEY": "not-the-secret"})
    transfer = fs.Transfer(fs.locate(f"s3://ckpt/{KEY}"), tmp_path / "copy", len(DATA))
    with pytest.raises(StorageError) as caught:
        fs.fetch_files([transfer], workers=1)
    said = message_of(caught.value)
    assert said.startswith(f"s3://ckpt/{KEY}: cannot read bytes 0-{len(DATA) - 1}: HTTP 403: SignatureDoesNotMatch")
    assert "\n" not in said and not (tmp_path / "copy").exists()
    fs._filesystem.cache_clear()


def test_an_object_gone_since_the_listing_is_named_missing(
    signed_s3: tuple[str, dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, env = signed_s3
    _use(monkeypatch, env)
    transfer = fs.Transfer(fs.locate("s3://ckpt/job a/chk-3/gone"), tmp_path / "gone", 10)
    with pytest.raises(StorageError, match=r"^s3://ckpt/job a/chk-3/gone: cannot read bytes 0-9: does not exist$"):
        fs.fetch_files([transfer], workers=1)
    fs._filesystem.cache_clear()


def test_a_store_that_never_answers_fails_after_the_timeout_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with silent_server() as port:
        _use(monkeypatch, {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_REGION": "us-east-1"})
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        monkeypatch.setenv("SPILLWAY_STORAGE_TIMEOUT", "1")
        transfer = fs.Transfer(fs.locate("s3://ckpt/chk-1/file"), tmp_path / "file", 100)
        start = time.monotonic()
        with pytest.raises(StorageError) as caught:
            fs.fetch_files([transfer], workers=1)
        took = time.monotonic() - start
    said = message_of(caught.value)
    assert said.startswith("s3://ckpt/chk-1/file: cannot read bytes 0-99: ") and "timed out" in said, said
    assert "SPILLWAY_STORAGE_TIMEOUT" in said and 1 <= took < 5  # one wait of the timeout: not tried again
    assert not (tmp_path / "file").exists()
    fs._filesystem.cache_clear()


def _certificates(where: Path) -> tuple[Path, Path, Path]:
    """A private certificate authority and a server certificate it signed for 127.0.0.1: (ca, cert, key)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    span = (now - datetime.timedelta(days=1), now + datetime.timedelta(days=1))

    def cert(subject: str, key: ec.EllipticCurvePrivateKey, issuer: str, signer: ec.EllipticCurvePrivateKey,
             ca: bool) -> x509.Certificate:  # fmt: skip
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
        built = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(span[0])
            .not_valid_after(span[1])
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            san = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
            built = built.add_extension(san, critical=False)
        return built.sign(signer, hashes.SHA256())

    ca_key, server_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    paths = (where / "ca.pem", where / "server.pem", where / "server.key")
    paths[0].write_bytes(cert("test ca", ca_key, "test ca", ca_key, True).public_bytes(serialization.Encoding.PEM))
    server = cert("127.0.0.1", server_key, "test ca", ca_key, False)
    paths[1].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        server_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return paths


def test_a_private_certificate_authority_is_trusted_through_aws_ca_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An HTTPS endpoint whose certificate a private authority signed: read with ``AWS_CA_BUNDLE`` naming that
    authority (as the AWS clients take it), refused in one line without it."""
    import http.server
    import ssl
    import threading

    ca, cert, key = _certificates(tmp_path)

    class Ranges(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            first, last = (int(x) for x in self.headers["Range"].removeprefix("bytes=").split("-"))
            body = DATA[first : last + 1]
            self.send_response(206)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Ranges)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        endpoint = f"https://127.0.0.1:{server.server_address[1]}"
        env = {"AWS_ENDPOINT_URL": endpoint, "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "k"}
        _use(monkeypatch, {**env, "AWS_SECRET_ACCESS_KEY": "s", "AWS_CA_BUNDLE": str(ca)})
        transfer = fs.Transfer(fs.locate("s3://ckpt/tls/file"), tmp_path / "file", len(DATA))
        assert fs.fetch_files([transfer], workers=2, part=1 << 20) == len(DATA)
        assert (tmp_path / "file").read_bytes() == DATA
        monkeypatch.delenv("AWS_CA_BUNDLE")
        fs._filesystem.cache_clear()
        again = fs.Transfer(fs.locate("s3://ckpt/tls/file"), tmp_path / "again", len(DATA))
        with pytest.raises(StorageError) as caught:
            fs.fetch_files([again], workers=1)
        said = message_of(caught.value)
        assert said.startswith("s3://ckpt/tls/file: cannot read bytes 0-") and "CERTIFICATE_VERIFY_FAILED" in said
        assert "\n" not in said and not (tmp_path / "again").exists()
    finally:
        server.shutdown()
        server.server_close()
        fs._filesystem.cache_clear()
