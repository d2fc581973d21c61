"""Ranged reads of S3 objects as one signed GET each.

pyarrow's Python API opens an S3 object with a HEAD (to learn its size) before the first read, although a
listing gave the size already: for thousands of small channel-state files that is twice the requests. This
module sends the ranged GET alone, signed with AWS Signature Version 4 (stdlib ``hmac``/``hashlib``), on a
pool of keep-alive connections. It reaches the store the way :func:`spillway.storage.fs.locate` configures
pyarrow (``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``, else ``https://s3.<region>.amazonaws.com``, path-style
addressing) with credentials from the environment (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_SESSION_TOKEN``): the first source of the AWS SDK's default chain. Credentials that only the SDK finds
(profiles, instance roles, SSO) are left to pyarrow: :func:`access_from_env` gives None and the caller opens the
object through pyarrow as before.

Errors are ``OSError``\\ s worded like pyarrow's (``FileNotFoundError`` for a missing object, "timed out" when the
socket waits past its timeout), so the caller's retry and reporting treat both clients alike.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import os
import re
import ssl
import threading
import time
from dataclasses import dataclass, field
from functools import cache
from urllib.parse import quote, urlsplit

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()  # a GET has no body
_ATTEMPTS = 2  # like the pyarrow client spillway configures: a call and one retry
_TRANSIENT = frozenset({500, 502, 503, 504, 429})


@dataclass(frozen=True)
class Access:
    """Where and as whom to send the requests."""

    scheme: str  # "https" or "http"
    host: str  # host[:port] of the endpoint
    region: str
    access_key: str = field(repr=False)
    secret_key: str = field(repr=False)
    token: str | None = field(default=None, repr=False)
    ca_bundle: str | None = None  # certificates to trust instead of the system's (AWS_CA_BUNDLE)


def access_from_env(region: str | None, endpoint: str | None) -> Access | None:
    """The endpoint pyarrow is given (``endpoint``: ``scheme://host[:port]``, else AWS in ``region``) and the
    credentials of the environment; None when the environment has none (pyarrow's client looks further)."""
    key, secret = os.environ.get("AWS_ACCESS_KEY_ID", ""), os.environ.get("AWS_SECRET_ACCESS_KEY", "")
    if not key or not secret:
        return None
    region = region or "us-east-1"  # the SDK's default signing region for an endpoint named without one
    if endpoint:
        parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        scheme, host = parts.scheme or "https", parts.netloc
    else:
        scheme, host = "https", f"s3.{region}.amazonaws.com"
    if scheme not in ("http", "https") or not host:
        return None
    token, bundle = os.environ.get("AWS_SESSION_TOKEN") or None, os.environ.get("AWS_CA_BUNDLE") or None
    return Access(scheme, host, region, key, secret, token, bundle)


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def signed_headers(
    access: Access, method: str, host: str, path: str, headers: dict[str, str], when: time.struct_time
) -> dict[str, str]:
    """``headers`` plus ``Host``, ``x-amz-date``, ``x-amz-content-sha256`` (of an empty body), the session token
    if any, and the SigV4 ``Authorization`` over all of them. ``path`` is already URI-encoded, without a query."""
    amz_date = time.strftime("%Y%m%dT%H%M%SZ", when)
    day = amz_date[:8]
    every = {k.lower(): " ".join(v.split()) for k, v in headers.items()}
    every.update({"host": host, "x-amz-date": amz_date, "x-amz-content-sha256": EMPTY_SHA256})
    if access.token:
        every["x-amz-security-token"] = access.token
    names = sorted(every)
    canonical = "\n".join(
        [method, path, "", "".join(f"{n}:{every[n]}\n" for n in names), ";".join(names), EMPTY_SHA256]
    )
    scope = f"{day}/{access.region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = _hmac(_hmac(_hmac(_hmac(f"AWS4{access.secret_key}".encode(), day), access.region), "s3"), "aws4_request")
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    every["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={access.access_key}/{scope}, SignedHeaders={';'.join(names)}, "
        f"Signature={signature}"
    )
    return every


_idle_lock = threading.Lock()
# (scheme, host, certificates, timeout) -> open keep-alive connections no request is using: taken by one request at
# a time and put back after a whole answer (the reads run on short-lived threads: connections cannot be per thread)
_idle: dict[tuple[str, str, str | None, float], list[http.client.HTTPConnection]] = {}


@cache
def _tls(ca_bundle: str | None) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=ca_bundle)


def _take(access: Access, seconds: float) -> http.client.HTTPConnection:
    with _idle_lock:
        free = _idle.get((access.scheme, access.host, access.ca_bundle, seconds))
        if free:
            return free.pop()
    if access.scheme == "https":
        return http.client.HTTPSConnection(access.host, timeout=seconds, context=_tls(access.ca_bundle))
    return http.client.HTTPConnection(access.host, timeout=seconds)


def _give_back(access: Access, seconds: float, conn: http.client.HTTPConnection) -> None:
    with _idle_lock:
        _idle.setdefault((access.scheme, access.host, access.ca_bundle, seconds), []).append(conn)


_CODE = re.compile(rb"<Code>([^<]{1,100})</Code>")
_MESSAGE = re.compile(rb"<Message>([^<]{1,300})</Message>")


def _refusal(status: int, reason: str, body: bytes) -> str:
    """The store's answer in one line: S3's error code and message when the body has them."""
    said = [m.group(1).decode("utf-8", "replace") for m in (_CODE.search(body), _MESSAGE.search(body)) if m]
    return ": ".join([f"HTTP {status}", *(said or [reason])])


def get_range(access: Access, bucket: str, key: str, offset: int, n: int, seconds: float) -> bytes:
    """Bytes ``offset`` … ``offset + n - 1`` of ``bucket/key`` in one GET (fewer where the object ends first,
    none when it ends before ``offset``); ``seconds`` bounds connecting and each wait for data. A transient
    answer (5xx, 429) or a dropped connection is tried once more."""
    if n <= 0:
        return b""
    path = "/" + quote(bucket, safe="") + "/" + quote(key, safe="/")
    last = ""
    for _ in range(_ATTEMPTS):
        headers = signed_headers(
            access, "GET", access.host, path, {"range": f"bytes={offset}-{offset + n - 1}"}, time.gmtime()
        )
        conn = _take(access, seconds)
        try:
            conn.request("GET", path, headers=headers)
            answer = conn.getresponse()
            body = answer.read()
        except TimeoutError:
            conn.close()
            raise TimeoutError(f"GET of s3://{bucket}/{key} timed out after {seconds:g} s") from None
        except ssl.SSLError as exc:  # a certificate not trusted, a protocol refused: no retry changes that
            conn.close()
            raise OSError(f"TLS: {exc}") from None
        except (OSError, http.client.HTTPException) as exc:  # reset, refused, closed while idle: a new connection
            conn.close()
            last = f"{type(exc).__name__}: {exc}".rstrip(": ")
            continue
        if answer.will_close:
            conn.close()
        else:
            _give_back(access, seconds, conn)
        status = answer.status
        if status == 206:
            return body
        if status == 200:  # a server that ignores Range sends the whole object
            return body[offset : offset + n]
        if status == 416:  # the object ends before offset
            return b""
        said = _refusal(status, answer.reason, body)
        if status == 404:
            raise FileNotFoundError(said)
        if status in _TRANSIENT:
            last = said
            continue
        raise PermissionError(said) if status == 403 else OSError(said)
    raise OSError(f"{last} ({_ATTEMPTS} attempts)")


class RangedObject:
    """One S3 object read by ranged GETs, as pyarrow's random-access file is (``read_at``), with no request made
    until the first read."""

    def __init__(self, access: Access, bucket: str, key: str, seconds: float) -> None:
        self.access, self.bucket, self.key, self.seconds = access, bucket, key, seconds

    def read_at(self, n: int, offset: int) -> bytes:
        return get_range(self.access, self.bucket, self.key, offset, n, self.seconds)

    def close(self) -> None:
        """Nothing to release: the connections are shared by every object's reads and kept for the next."""
