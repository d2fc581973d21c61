"""Checkpoints on object stores and other remote file systems, through ``pyarrow.fs``.

Everything else in spillway reads and writes local files. This module is the one place that talks to
``s3://``, ``gs://``, ``hdfs://``, ``abfs://``… (and ``file://``): it opens a remote checkpoint through a
local working directory (:func:`materialize`: ``_metadata`` now, every other file listed and fetched only
when a command reads it, as parallel ranged reads: :func:`fetch_files`) and publishes a local, already
self-checked output to a remote place (:func:`publish_dir`, :func:`put_files`), so the decode/validate/write
code stays local.

Publishing follows the local writer's rule — never overwrite, never leave a half-written output
that looks complete: objects go to a temporary sibling prefix first, are read back and compared
byte for byte (SHA-256), then moved into place with ``_metadata`` moved LAST (an output without
``_metadata`` is not a checkpoint); on any failure everything written is deleted again. On S3 a
move is a server-side copy plus a delete.

Credentials and endpoints come from the usual environment of each store (for S3:
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``, ``AWS_ENDPOINT_URL`` for
S3-compatible servers, …). Flink's scheme aliases ``s3a``/``s3p``/``s3n`` are read as ``s3``; paths
in ``_metadata`` are never rewritten by this module.

Every remote call is bounded (:func:`timeout`, ``--storage-timeout`` / ``SPILLWAY_STORAGE_TIMEOUT``,
default 30 s): S3 gets it as its connect and read timeout with one retry at most; every call on any
store also runs under a watchdog, because not every client has a read timeout (GCS retries for 15
minutes by default). Reading one file is bounded as a whole, not per read: what one call may take plus a
second per started MiB (:func:`transfer_allowance`), so a store that drips fails while a large file that keeps
arriving does not. A store that cannot be reached or read raises :class:`StorageError` (exit 3),
one line naming the URI, apart from a checkpoint that is damaged (exit 1).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, TypeVar

from spillway import progress
from spillway.errors import Message, StorageError, message_of
from spillway.formats.errors import CheckpointFormatError
from spillway.formats.metadata_codec import decode_metadata
from spillway.model.checkpoint import CheckpointMetadata, is_file_backed
from spillway.model.paths import path_problem
from spillway.model.walk import leaf_stream_handles
from spillway.safe_io import real_path
from spillway.storage import remote_copies, s3_get
from spillway.storage.guard import WRITE_ERRNOS, WriteError, cannot_write
from spillway.storage.hdfs_client import quiet_stderr, why_no_hdfs_client
from spillway.storage.locate import LocateError, checkpoint_dirs_in, find_metadata_in
from spillway.storage.names import METADATA, is_remote, scheme_of
from spillway.storage.rules import PathRule, location_of
from spillway.storage.timeouts import TIMEOUT_SETTING, timeout

if TYPE_CHECKING:
    import pyarrow.fs as pafs
else:

    class _LazyPyarrowFs:
        """``pyarrow.fs``, imported on first use: importing pyarrow (and numpy with it) costs every command
        start-up ~0.15 s, and only remote paths and the repair/rescale writers need it."""

        def __getattr__(self, name: str) -> Any:
            import pyarrow.fs

            return getattr(pyarrow.fs, name)

    pafs = _LazyPyarrowFs()

_ALIASES = {"s3a": "s3", "s3p": "s3", "s3n": "s3"}
_CHUNK = 8 << 20


@cache
def _bucketed() -> tuple[type, ...]:
    """Object stores: pyarrow paths start with the bucket (a build may lack one of them)."""
    return tuple(c for c in (getattr(pafs, "S3FileSystem", None), getattr(pafs, "GcsFileSystem", None)) if c)


T = TypeVar("T")

_S3_ATTEMPTS = 2  # a call and one retry: a transient error passes, a dead endpoint fails in bounded time


def _deadline(fs: Any) -> float:
    """How long the watchdog waits for one call: past the client's own timeouts, which give the more
    precise message (an S3 call may be tried twice)."""
    attempts = _S3_ATTEMPTS if isinstance(fs, getattr(pafs, "S3FileSystem", ())) else 1
    return timeout() * attempts + 2


class _NoAnswer(Exception):
    """A call that had not returned by its deadline (left running in its thread)."""


def _within(seconds: float, call: Callable[..., T], *args: Any) -> T:
    """``call(*args)`` in a daemon thread; :class:`_NoAnswer` when it has not returned within ``seconds``. The
    thread is left behind: a client blocked in a read cannot be interrupted, and being a daemon it does not keep
    the process from ending with the error."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["value"] = call(*args)
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=work, name="spillway-storage", daemon=True)
    worker.start()
    worker.join(max(seconds, 0.0))
    if worker.is_alive():
        raise _NoAnswer
    if "error" in box:
        raise box["error"]
    return box["value"]


def bounded(uri: str, what: str, deadline: float, call: Callable[..., T], *args: Any) -> T:
    """``call(*args)``, or a StorageError when it has not returned within ``deadline`` seconds (:func:`_within`)."""
    try:
        return _within(deadline, call, *args)
    except _NoAnswer:
        raise StorageError(Message(f"{uri}: {what}: no answer within {deadline:g} s (", TIMEOUT_SETTING, ")")) from None


def _remote_call(loc: Location, what: str, call: Callable[..., T], *args: Any) -> T:
    if isinstance(loc.fs, pafs.LocalFileSystem):
        return call(*args)
    return bounded(loc.uri, what, _deadline(loc.fs), call, *args)


@dataclass(frozen=True)
class Location:
    """One file or directory: the URI as the user or ``_metadata`` writes it, and where pyarrow finds it."""

    uri: str
    fs: pafs.FileSystem = field(repr=False, compare=False)
    path: str

    def child(self, name: str) -> Location:
        return Location(f"{self.uri.rstrip('/')}/{name}", self.fs, f"{self.path.rstrip('/')}/{name}")

    @property
    def name(self) -> str:
        return PurePosixPath(self.path).name

    @property
    def parent(self) -> Location:
        return Location(self.uri.rstrip("/").rpartition("/")[0], self.fs, str(PurePosixPath(self.path).parent))


@cache
def _filesystem(scheme: str, authority: str, seconds: float) -> pafs.FileSystem:
    """One pyarrow file system per store, bucket/host and timeout (``seconds`` on its calls)."""
    uri = f"{scheme}://{authority}/"
    if scheme == "s3":
        return _s3(authority, seconds)
    if scheme in ("gs", "gcs"):
        from datetime import timedelta

        # Without a limit the client retries a failing call for 15 minutes.
        return pafs.GcsFileSystem(retry_time_limit=timedelta(seconds=seconds))
    if scheme in ("hdfs", "viewfs"):
        return _hdfs(scheme, authority, seconds)
    fs, _ = bounded(uri, "cannot open the file system", seconds + 2, pafs.FileSystem.from_uri, uri)
    return fs


def _s3(bucket: str, seconds: float) -> pafs.FileSystem:
    """S3 as ``FileSystem.from_uri`` would open it (credentials, region and endpoint from the usual
    environment), but with connect and read timeouts and a bounded number of attempts."""
    options: dict[str, Any] = {
        "connect_timeout": seconds,
        "request_timeout": seconds,
        "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=_S3_ATTEMPTS),
    }
    endpoint, region = _s3_place(bucket, seconds)
    if endpoint:
        scheme, sep, host = endpoint.partition("://")
        options["endpoint_override"] = (host if sep else endpoint).rstrip("/")
        options["scheme"] = scheme if sep else "https"
    if region:
        options["region"] = region
    return pafs.S3FileSystem(**options)


def _s3_place(bucket: str, seconds: float) -> tuple[str | None, str | None]:
    """The endpoint the environment names (None: AWS itself) and the region to sign for (None: the client's
    default), as both S3 clients (pyarrow's and :mod:`spillway.storage.s3_get`) are given them."""
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if not region and not endpoint:
        region = _bucket_region(bucket, seconds)
    return endpoint, region or None


@cache
def _bucket_region(bucket: str, seconds: float) -> str:
    """The bucket's own region (a bucket in another region answers only with a redirect)."""
    return bounded(f"s3://{bucket}", "cannot find the bucket's region", seconds + 2, pafs.resolve_s3_region, bucket)


def _s3_direct(bucket: str, seconds: float) -> s3_get.Access | None:
    """How to GET ``bucket``'s objects without pyarrow (one request per read, no HEAD); None when the
    credentials are not in the environment (pyarrow's client then finds them). Read from the environment at each
    open, like the file system of :func:`_filesystem` when it is made."""
    endpoint, region = _s3_place(bucket, seconds)
    return s3_get.access_from_env(region, endpoint)


def _hdfs(scheme: str, authority: str, seconds: float) -> pafs.FileSystem:
    """HDFS through libhdfs (a JVM in this process): what is missing is said up front, in one line,
    instead of the client library's dozens of failed ``dlopen`` attempts on stderr."""
    missing = why_no_hdfs_client()
    if missing:
        raise StorageError(f"{scheme}://{authority}: cannot open HDFS here: {missing}")
    host, _, port = authority.partition(":")
    millis = str(int(seconds * 1000))
    conf = {
        "ipc.client.connect.timeout": millis,
        "ipc.client.connect.max.retries": "1",
        "ipc.client.connect.max.retries.on.timeouts": "1",
        "dfs.client.socket-timeout": millis,
    }

    def connect() -> pafs.FileSystem:
        return pafs.HadoopFileSystem(host or "default", int(port) if port.isdigit() else 8020, extra_conf=conf)

    with quiet_stderr():
        # seconds + 10: the JVM starts first
        return bounded(f"{scheme}://{authority}", "cannot open the file system", seconds + 10, connect)


def locate(uri: str) -> Location:
    """The file system and in-store path of ``uri`` (``s3://bucket/key``, ``file:///x``, ``hdfs://nn/x`` …)."""
    text = str(uri).rstrip("/") or str(uri)
    scheme = scheme_of(text)
    if scheme is None or scheme == "file":
        local = text[len("file://") :] if text.startswith("file://") else text
        return Location(text, pafs.LocalFileSystem(), str(real_path(local)))
    rest = text[len(scheme) + 3 :]
    authority, _, key = rest.partition("/")
    try:
        fs = _filesystem(_ALIASES.get(scheme, scheme), authority, timeout())
    except (OSError, ValueError) as exc:
        raise StorageError(f"{uri}: cannot open the file system: {one_line(exc)}") from None
    except StorageError as exc:
        # "<store>: what went wrong" -> named by the URI the user gave
        raise StorageError(Message(f"{uri}: ", _after_the_place(message_of(exc)))) from None
    # pyarrow names object-store paths bucket-first; other file systems by absolute path
    path = f"{authority}/{key}".rstrip("/") if isinstance(fs, _bucketed()) else "/" + key
    return Location(text, fs, path)


def one_line(exc: BaseException) -> str:
    """A client's error message as one short line (they run to several, with request ids and metadata)."""
    text = str(exc)
    for cut in (". Detail:", " error_info={", "; Details:"):
        text = text.split(cut)[0]
    text = " ".join(text.split())
    return text if len(text) <= 300 else text[:297] + "..."


def _after_the_place(said: str) -> str:
    """What went wrong, without the place a message starts with (``<place>: ...``)."""
    if isinstance(said, Message) and said.parts and isinstance(said.parts[0], str):
        return Message(said.parts[0].partition(": ")[2], *said.parts[1:])
    return said.partition(": ")[2]


def _fail(loc: Location, what: str, exc: BaseException) -> StorageError:
    detail = "does not exist" if isinstance(exc, FileNotFoundError) else one_line(exc)
    if _CLIENT_TIMEOUT.search(detail):  # the client gave up on its own: say which setting bounds it
        return StorageError(Message(f"{loc.uri}: {what}: {detail} (", TIMEOUT_SETTING, ")"))
    return StorageError(f"{loc.uri}: {what}: {detail}")


# How the clients say they gave up waiting (S3 through curl: code 28).
_CLIENT_TIMEOUT = re.compile(r"curlCode: 28\b|timed out|Timeout was reached", re.IGNORECASE)


def info(loc: Location) -> pafs.FileInfo:
    try:
        return _remote_call(loc, "cannot look it up", loc.fs.get_file_info, loc.path)
    except (OSError, ValueError) as exc:
        raise _fail(loc, "cannot look it up", exc) from None


def exists(loc: Location) -> bool:
    """A file, or a directory / prefix that holds something."""
    i = info(loc)
    if i.type == pafs.FileType.File:
        return True
    if i.type == pafs.FileType.Directory:
        return bool(_list(loc))
    return False


def _list(loc: Location) -> list[pafs.FileInfo]:
    selector = pafs.FileSelector(loc.path, recursive=True, allow_not_found=True)
    try:
        return _remote_call(loc, "cannot list it", loc.fs.get_file_info, selector)
    except (OSError, ValueError) as exc:
        raise _fail(loc, "cannot list it", exc) from None


def list_files(loc: Location) -> dict[str, int]:
    """Every file under a directory / prefix: path relative to it -> size."""
    base = loc.path.rstrip("/") + "/"
    return {i.path[len(base) :]: i.size for i in _list(loc) if i.type == pafs.FileType.File}


# The slowest average rate a transfer may have: one file may take what one call may, plus a second per started MiB.
MIN_RATE = 1 << 20


def transfer_allowance(fs: Any, size: int) -> float:
    """Seconds one whole file of ``size`` bytes may take to arrive: what one call may take, plus ``size`` at
    :data:`MIN_RATE` (a large file that keeps arriving is not cut short; one that stalls or drips is)."""
    return _deadline(fs) + -(-size // MIN_RATE)  # whole MiB, rounded up


def _chunks(loc: Location, what: str) -> Iterable[bytes]:
    """The file's bytes in chunks. Remote: the whole file has one deadline (:func:`transfer_allowance`), from
    the first call on; a read still waiting at the deadline fails, naming the URI and the allowance."""
    if isinstance(loc.fs, pafs.LocalFileSystem):
        with loc.fs.open_input_stream(loc.path) as stream:
            while chunk := stream.read(_CHUNK):
                yield chunk
        return
    start = time.monotonic()
    stream = bounded(loc.uri, what, _deadline(loc.fs), loc.fs.open_input_file, loc.path)
    late = False
    try:
        size = bounded(loc.uri, what, _deadline(loc.fs) - (time.monotonic() - start), stream.size)
        allowance = transfer_allowance(loc.fs, size)
        while True:
            try:
                chunk = _within(start + allowance - time.monotonic(), stream.read, _CHUNK)
            except _NoAnswer:
                late = True
                raise StorageError(
                    Message(
                        f"{loc.uri}: {what}: not all {size} bytes within {allowance:g} s, the time one file of "
                        "this size is given (",
                        TIMEOUT_SETTING,
                        ", and a second per started MiB)",
                    )
                ) from None
            if not chunk:
                return
            yield chunk
    finally:
        if not late:  # a read still running holds the stream: leave it to that thread
            stream.close()


def read_bytes(loc: Location) -> bytes:
    try:
        return b"".join(_chunks(loc, "cannot read it"))
    except (OSError, ValueError) as exc:
        raise _fail(loc, "cannot read it", exc) from None


def download(loc: Location, local: Path) -> None:
    """``loc``'s bytes as the new local file ``local`` (never over an existing one; a partial copy is removed,
    only while it still is the file this call made)."""
    local.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(local, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise cannot_write(local, exc) from None
    made = os.fstat(fd)
    try:
        with os.fdopen(fd, "wb") as dst:
            for chunk in _chunks(loc, "cannot download it"):
                dst.write(chunk)
    except BaseException as exc:
        with contextlib.suppress(OSError):  # no partial copy may pass for the file
            now = os.stat(local, follow_symlinks=False)
            if (now.st_dev, now.st_ino) == (made.st_dev, made.st_ino):
                os.unlink(local)
        if isinstance(exc, OSError) and exc.filename is None and exc.errno in WRITE_ERRNOS:
            raise cannot_write(local, exc) from None  # the local disk, not the store
        if isinstance(exc, (OSError, ValueError)):
            raise _fail(loc, "cannot download it", exc) from None
        raise


def upload(local: Path, loc: Location) -> None:
    try:
        with open(local, "rb") as src:
            dst = _remote_call(loc, "cannot write it", loc.fs.open_output_stream, loc.path)
            try:
                while chunk := src.read(_CHUNK):
                    _remote_call(loc, "cannot write it", dst.write, chunk)
            finally:
                _remote_call(loc, "cannot write it", dst.close)
    except (OSError, ValueError) as exc:
        raise _fail(loc, "cannot write it", exc) from None


def sha256_of(loc: Location) -> str:
    h = hashlib.sha256()
    try:
        for chunk in _chunks(loc, "cannot read it back"):
            h.update(chunk)
    except (OSError, ValueError) as exc:
        raise _fail(loc, "cannot read it back", exc) from None
    return h.hexdigest()


def _sha256_local(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def move(src: Location, dst: Location) -> None:
    """A rename where the store has one; copy + delete on object stores."""
    try:
        _remote_call(dst, f"cannot move {src.uri} here", src.fs.move, src.path, dst.path)
    except (OSError, ValueError) as exc:
        raise _fail(dst, f"cannot move {src.uri} here", exc) from None


def _delete_file_quietly(loc: Location) -> None:
    """Best-effort removal of one object this run wrote (never a directory / prefix: it may hold others')."""
    with contextlib.suppress(OSError, ValueError, StorageError):
        if info(loc).type == pafs.FileType.File:
            _remote_call(loc, "cannot delete it", loc.fs.delete_file, loc.path)


def _delete_dir_if_empty(loc: Location) -> None:
    with contextlib.suppress(OSError, ValueError, StorageError):
        if info(loc).type == pafs.FileType.Directory and not list_files(loc):
            _remote_call(loc, "cannot delete it", loc.fs.delete_dir, loc.path)


def _refuse_taken(dst: Location) -> None:
    """Just before a move: the destination must still be free. Object stores offer no move that refuses to
    replace, so a writer racing this one between the check and the move is not excluded."""
    if info(dst).type != pafs.FileType.NotFound:
        raise WriteError(f"{dst.uri}: appeared while this run was publishing; spillway never overwrites")


def delete_quietly(loc: Location) -> None:
    """Best-effort clean-up after a failure (the original error is what the user needs to see)."""
    try:
        i = info(loc)
        if i.type == pafs.FileType.Directory:
            _remote_call(loc, "cannot delete it", loc.fs.delete_dir, loc.path)
        elif i.type == pafs.FileType.File:
            _remote_call(loc, "cannot delete it", loc.fs.delete_file, loc.path)
    except (OSError, ValueError, StorageError):
        pass


def require_container(loc: Location) -> None:
    """Fail early and clearly when an object store's bucket does not exist (writes would fail late)."""
    if isinstance(loc.fs, _bucketed()):
        bucket = loc.path.split("/", 1)[0]
        # A bucket the store says is not there is a wrong path (exit 2, like a missing local directory);
        # one it refuses to show raises a StorageError from info() (exit 3).
        if info(Location(loc.uri, loc.fs, bucket)).type != pafs.FileType.Directory:
            raise LocateError(f"{loc.uri}: bucket {bucket!r} does not exist")


# ------------------------------------------------------------------------------------------------ reading


@dataclass
class Materialized:
    """A local working copy of a remote checkpoint: load it with ``rebase`` and it reads like the original."""

    uri: str  # the remote checkpoint directory (chk-N / savepoint directory)
    checkpoint_dir: Path  # local: _metadata and every file named relative to it
    rebase: list[str]  # OLD=NEW rules sending absolute remote paths to their downloaded copies
    files: int = 0  # files downloaded, _metadata included
    bytes: int = 0
    note: str | None = None  # "picked the newest of 3 checkpoints: chk-12" for a job directory
    missing: int = 0  # referenced remote files that do not exist (reported by the commands, not here)
    checkpoint: CheckpointMetadata | None = None  # _metadata decoded (once: the loader takes it from here)

    @property
    def metadata_uri(self) -> str:
        return f"{self.uri.rstrip('/')}/{METADATA}"


class StoreTree:
    """:class:`spillway.storage.locate.Tree` on a store: paths are URIs; a kind is one info call (HEAD), the
    directories in a prefix one listing."""

    def kind(self, path: str) -> str | None:
        found = info(locate(path)).type
        if found == pafs.FileType.File:
            return "file"
        return "dir" if found == pafs.FileType.Directory else None

    def subdirs(self, path: str) -> list[str]:
        loc = locate(path)
        selector = pafs.FileSelector(loc.path, recursive=False, allow_not_found=True)
        try:
            found = _remote_call(loc, "cannot list it", loc.fs.get_file_info, selector)
        except (OSError, ValueError) as exc:
            raise _fail(loc, "cannot list it", exc) from None
        return [PurePosixPath(i.path).name for i in found if i.type == pafs.FileType.Directory]

    def child(self, path: str, name: str) -> str:
        return f"{path.rstrip('/')}/{name}"


def checkpoint_dirs(uri: str) -> list[Location]:
    """The ``chk-N`` directories of a job's checkpoint directory (or of a root holding one job) in a store,
    oldest first; empty for anything else (:func:`spillway.storage.locate.checkpoint_dirs_in`)."""
    return [locate(c) for c in checkpoint_dirs_in(StoreTree(), locate(uri).uri)]


def find_metadata(uri: str) -> tuple[Location, str | None]:
    """``_metadata`` of what ``uri`` names, found like a local path's
    (:func:`spillway.storage.locate.find_metadata_in`)."""
    loc = locate(uri)
    require_container(loc)
    meta, note = find_metadata_in(StoreTree(), loc.uri)
    return locate(meta), note


def _key(uri: str) -> str:
    return hashlib.sha256(uri.encode()).hexdigest()[:12]


def materialize(uri: str, workdir: Path, rules: Iterable[PathRule] = ()) -> Materialized:
    """Download ``_metadata`` into ``workdir`` and stand in for the files it names (relative to its directory,
    and every absolute remote file, after ``rules``: a ``file:`` path rebased onto ``s3://`` too) with
    :mod:`spillway.storage.remote_copies`: one listing per directory says which exist and their sizes, and a
    file is downloaded only when a command reads it. Several checkpoints may share one ``workdir``: a file
    they share is fetched once. Absolute local paths are left to the usual resolution."""
    meta, note = find_metadata(uri)
    chk = meta.parent
    local_chk = workdir / "checkpoint" / _key(chk.uri) / (chk.name or "checkpoint")
    data = read_bytes(meta)
    # One stage for the whole decode: a large _metadata (100 MB: seconds) shows a bar while it is read.
    bar = progress.stage("decoding _metadata", len(data), "bytes")
    try:
        checkpoint = decode_metadata(data, meta.uri)  # a damaged _metadata fails before anything is written
        bar.update(len(data))
    finally:
        bar.done()
    local_chk.mkdir(parents=True, exist_ok=True)
    (local_chk / METADATA).write_bytes(data)
    result = Materialized(chk.uri, local_chk, [], 1, len(data), note, checkpoint=checkpoint)
    relative: set[str] = set()
    absolute: set[str] = set()
    for h in leaf_stream_handles(checkpoint, coordinator=True):
        if is_file_backed(h):
            (relative if h.relative else absolute).add(h.file_name)
    for rel in sorted(relative):
        if path_problem(rel, relative=True) is not None:  # ".." or a NUL: never a local path outside the copy
            raise CheckpointFormatError(meta.uri, None, "", f"relative path {rel!r} escapes the checkpoint directory")
    _stand_in([(chk.child(rel), local_chk / rel) for rel in sorted(relative)], result)
    result.rebase = fetch_referenced(absolute, list(rules), workdir / "mirror", result, meta.uri)
    return result


def fetch_referenced(
    names: Iterable[str], rules: list[PathRule], mirror: Path, result: Materialized, source: str
) -> list[str]:
    """Stand in for every remote file among ``names`` (each after the first rule that applies to it) under
    ``mirror`` (:func:`_stand_in`); return the rules sending those remote paths to their local places."""
    schemes: set[str] = set()
    pairs: list[tuple[Location, Path]] = []
    for name in sorted(names):
        target = next((new for r in rules if (new := r.apply(name)) is not None), name)
        if not is_remote(target):
            continue
        scheme, rest = location_of(target)
        if any(p in ("", ".", "..") for p in rest.split("/")) or path_problem(target) is not None:
            raise CheckpointFormatError(source, None, "", f"referenced path {target!r} is not a plain file path")
        schemes.add(scheme)
        pairs.append((locate(target), mirror / scheme / rest))
    _stand_in(pairs, result)
    return [f"{s}://={mirror / s}/" for s in sorted(schemes)]


def _stand_in(pairs: list[tuple[Location, Path]], result: Materialized) -> None:
    """Register each remote file of ``pairs`` at its local path, fetched when first read
    (:func:`spillway.storage.remote_copies.ensure_local`); existence and size come from one listing of each
    directory (never a read). A file the listing lacks is counted missing, like a missing local file."""
    by_dir: dict[str, tuple[Location, list[tuple[Location, Path]]]] = {}
    for loc, local in pairs:
        parent = loc.parent
        by_dir.setdefault(parent.uri, (parent, []))[1].append((loc, local))
    for parent, members in by_dir.values():
        sizes = list_dir(parent)
        for loc, local in members:
            if local.exists():
                remote_copies.register_missing(str(local), loc.uri)  # only its name: it is here already
                continue  # fetched already for another checkpoint sharing this working directory
            size = sizes.get(loc.name)
            if size is None:
                result.missing += 1
                remote_copies.register_missing(str(local), loc.uri)
                continue
            remote_copies.register(str(local), loc.uri, size, Transfer(loc, local, size), _fetch_many)


_memory_lock = threading.Lock()
_in_memory = 0  # bytes of remote files this process holds in memory (remote_copies.held), never given back


def _fetch_many(
    transfers: list[Any], created: Callable[[], None], arrived: Callable[[Any], None], stop: threading.Event
) -> None:
    """Fetch ``transfers``, each into memory while the budget (:func:`memory_budget`) has room for it, the
    others (larger, or past the budget) to disk."""
    global _in_memory
    memory: set[Path] = set()
    if hasattr(os, "memfd_create"):
        with _memory_lock:
            room = memory_budget() - _in_memory
            for t in transfers:
                if 0 < t.size <= room:
                    memory.add(t.target)
                    room -= t.size
                    _in_memory += t.size

    def kept(t: Transfer, fd: int) -> None:
        remote_copies.hold(str(t.target), fd)

    fetch_files(transfers, created=created, arrived=arrived, stop=stop, in_memory=memory, kept=kept)


def list_dir(loc: Location) -> dict[str, int]:
    """The files directly in a directory / prefix: name -> size (one listing; none for a missing one)."""
    selector = pafs.FileSelector(loc.path, recursive=False, allow_not_found=True)
    try:
        found = _remote_call(loc, "cannot list it", loc.fs.get_file_info, selector)
    except (OSError, ValueError) as exc:
        raise _fail(loc, "cannot list it", exc) from None
    return {PurePosixPath(i.path).name: i.size for i in found if i.type == pafs.FileType.File}


# ------------------------------------------------------------------------------------------------ writing


def _temporary_sibling(loc: Location) -> Location:
    return loc.parent.child(f".{loc.name}.spillway-{uuid.uuid4().hex[:8]}.partial")


def check_target(uri: str) -> Location:
    """The output location, refused when something is already there (spillway never overwrites)."""
    loc = locate(uri)
    require_container(loc)
    if exists(loc):
        raise WriteError(f"{uri}: already exists; spillway never overwrites (choose another output location)")
    return loc


def publish_dir(local_dir: Path, uri: str) -> int:
    """Copy the finished local checkpoint directory ``local_dir`` to ``uri``: every file under a
    temporary sibling prefix, each read back and compared (SHA-256), then moved into place with
    ``_metadata`` last. Returns the number of files. Nothing stays behind when any step fails."""
    target = check_target(uri)
    files = sorted(p.relative_to(local_dir).as_posix() for p in local_dir.rglob("*") if p.is_file())
    if METADATA not in files:
        raise WriteError(f"{local_dir}: no _metadata to publish")
    order = [f for f in files if f != METADATA] + [METADATA]
    tmp = _temporary_sibling(target)
    uploaded: list[Location] = []
    moved: list[Location] = []
    try:
        for rel in order:
            uploaded.append(tmp.child(rel))  # before the upload: a half-written object is removed too
            upload(local_dir / rel, tmp.child(rel))
        for rel in order:
            if sha256_of(tmp.child(rel)) != _sha256_local(local_dir / rel):
                raise StorageError(f"{tmp.child(rel).uri}: self-check: read back differs from what was written")
        for rel in order:
            _refuse_taken(target.child(rel))
            move(tmp.child(rel), target.child(rel))
            moved.append(target.child(rel))
        if info(target.child(METADATA)).size != (local_dir / METADATA).stat().st_size:
            raise StorageError(f"{target.child(METADATA).uri}: self-check: size differs after the move")
    except BaseException:
        # Only what this run wrote, object by object; _metadata first: a partial output must stop looking like
        # a checkpoint at once.
        for loc in sorted(moved, key=lambda m: m.name != METADATA):
            _delete_file_quietly(loc)
        for loc in uploaded:
            _delete_file_quietly(loc)
        _delete_dir_if_empty(tmp)
        raise
    _delete_dir_if_empty(tmp)
    return len(order)


def _into_place(tmp: Location, dst: Location, fill: Callable[[], None]) -> None:
    """``dst`` written by way of ``tmp``: ``fill`` writes ``tmp`` and checks it; it is then moved to ``dst``
    unless another writer took ``dst`` meanwhile. On any failure ``tmp`` is deleted, never ``dst``."""
    try:
        fill()
        _refuse_taken(dst)
        move(tmp, dst)
    except BaseException:
        _delete_file_quietly(tmp)
        raise


def put_files(pairs: Iterable[tuple[Path, str]]) -> list[str]:
    """Copy local files to absolute remote URIs (relocate --copy-data): each to a temporary name, read
    back and compared, then moved. A destination that exists with the same bytes is kept; one with
    other bytes is an error. Returns the URIs written (for :func:`delete_files` if a later step fails)."""
    written: list[str] = []
    try:
        for local, uri in pairs:
            dst = locate(uri)
            require_container(dst)
            digest = _sha256_local(local)
            existing = info(dst)
            if existing.type == pafs.FileType.File:
                if existing.size == local.stat().st_size and sha256_of(dst) == digest:
                    continue
                raise WriteError(f"{uri}: exists with different content; not overwritten")
            tmp = _temporary_sibling(dst)

            def uploaded(local: Path = local, tmp: Location = tmp, digest: str = digest) -> None:
                upload(local, tmp)
                if sha256_of(tmp) != digest:
                    raise StorageError(f"{tmp.uri}: self-check: read back differs from what was written")

            _into_place(tmp, dst, uploaded)
            written.append(uri)
    except BaseException:
        delete_files(written)
        raise
    return written


# S3's CopyObject copies at most 5 GiB in one request (larger objects need a multipart copy pyarrow does not do).
SERVER_COPY_LIMIT = 5 << 30


def copies_in_store(source: Location, target_uri: str, size: int) -> bool:
    """Whether the store itself can copy ``source`` to ``target_uri`` (S3 CopyObject, GCS rewrite): both on the
    same object store (one scheme: spillway reaches every bucket of a scheme through one endpoint) and small
    enough for one copy request."""
    return isinstance(source.fs, _bucketed()) and _store(source.uri) == _store(target_uri) and size <= SERVER_COPY_LIMIT


def _store(uri: str) -> str | None:
    scheme = scheme_of(uri)
    return _ALIASES.get(scheme, scheme) if scheme else None


def copy_files(pairs: Iterable[tuple[Location, str]]) -> list[str]:
    """Copy objects to absolute URIs on the same store without moving their bytes through this machine
    (relocate --copy-data between buckets or prefixes): each to a temporary name by the store's own copy, its
    size checked against the source's, then moved. A destination that exists with the same bytes is kept (they
    are compared by reading both); one with other bytes is an error. Returns the URIs written (for
    :func:`delete_files` if a later step fails)."""
    written: list[str] = []
    try:
        for src, uri in pairs:
            dst = locate(uri)
            require_container(dst)
            size = info(src).size
            existing = info(dst)
            if existing.type == pafs.FileType.File:
                if existing.size == size and sha256_of(dst) == sha256_of(src):
                    continue
                raise WriteError(f"{uri}: exists with different content; not overwritten")
            tmp = _temporary_sibling(dst)

            def copied(src: Location = src, dst: Location = dst, tmp: Location = tmp, size: int = size) -> None:
                what = f"cannot copy {src.uri} here"
                try:
                    bounded(tmp.uri, what, transfer_allowance(dst.fs, size), dst.fs.copy_file, src.path, tmp.path)
                except (OSError, ValueError) as exc:
                    raise _fail(dst, what, exc) from None
                made = info(tmp)
                if made.type != pafs.FileType.File or made.size != size:
                    raise StorageError(f"{tmp.uri}: self-check: {made.size} bytes after the copy, {size} in {src.uri}")

            _into_place(tmp, dst, copied)
            written.append(uri)
    except BaseException:
        delete_files(written)
        raise
    return written


def delete_files(uris: Iterable[str]) -> None:
    """Undo :func:`put_files`: the objects it wrote (files only, never a prefix)."""
    for uri in uris:
        _delete_file_quietly(locate(uri))


# ------------------------------------------------------------------------------------------------ bulk reads

PART = 8 << 20  # one ranged GET: large enough to amortise a request, small enough to bound memory
WORKERS_ENV = "SPILLWAY_STORAGE_READS"
DEFAULT_WORKERS = 16  # ranged GETs in flight (S3 serves many connections per client well)
_ATTEMPTS = 3  # a ranged read failing transiently (not by a timeout) is tried this often, with backoff
_BACKOFF = 0.5  # seconds before the second attempt, doubled before each next one


MEMORY_ENV = "SPILLWAY_STORAGE_MEMORY"
DEFAULT_MEMORY_MIB = 512  # most checkpoints' channel state fits; a larger one goes to disk past it


def memory_budget() -> int:
    """Bytes of a remote checkpoint's files a process may hold in memory (``SPILLWAY_STORAGE_MEMORY``, MiB,
    default :data:`DEFAULT_MEMORY_MIB`; 0: every file on disk)."""
    text = os.environ.get(MEMORY_ENV, "")
    try:
        mib = int(text) if text else DEFAULT_MEMORY_MIB
    except ValueError:
        raise StorageError(f"{MEMORY_ENV}={text!r}: expected a whole number of MiB") from None
    return max(0, mib) << 20


def read_workers() -> int:
    """How many ranged reads may be in flight (``SPILLWAY_STORAGE_READS``, default :data:`DEFAULT_WORKERS`)."""
    text = os.environ.get(WORKERS_ENV, "")
    try:
        value = int(text) if text else DEFAULT_WORKERS
    except ValueError:
        raise StorageError(f"{WORKERS_ENV}={text!r}: expected a whole number of reads in flight") from None
    return max(1, value)


@dataclass(frozen=True)
class Transfer:
    """One remote file to bring to a new local file: ``size`` bytes as the store listed them."""

    source: Location
    target: Path
    size: int


class _Abandoned(StorageError):
    """A fetch told to stop (:func:`spillway.storage.remote_copies.abandon`): no further part is read (one line,
    exit 3, should anything still wait for such a file)."""


def fetch_files(
    transfers: list[Transfer],
    workers: int | None = None,
    part: int = PART,
    *,
    created: Callable[[], None] | None = None,
    arrived: Callable[[Transfer], None] | None = None,
    stop: threading.Event | None = None,
    in_memory: set[Path] | frozenset[Path] = frozenset(),
    kept: Callable[[Transfer, int], None] | None = None,
) -> int:
    """Download ``transfers`` as ranged reads of ``part`` bytes, ``workers`` of them in flight across all files
    (memory: about ``workers × part``, whatever the sizes). Each read has its own deadline
    (:func:`transfer_allowance`) and is retried with backoff on a transient error; a file shorter than listed
    fails. Progress is reported by bytes. Every target is new (never over an existing file); when anything fails,
    the files this call created are removed and the first error is raised. Returns the bytes transferred.

    The files are fetched in the order given, each opened (a HEAD on S3) in the task reading its first part, so
    the first files are whole while the last are still being read. ``created()`` is called once every target
    exists at its listed size (its bytes still to come), ``arrived(t)`` (on a read thread) as each is whole, so a
    reader may start on a file long before the last arrives; ``stop``, once set, lets no further part start.

    A transfer whose target is in ``in_memory`` goes to a new in-memory file instead (no file on disk), handed
    to ``kept(t, fd)`` as soon as it exists at its listed size (before ``created()``): the descriptor is the
    caller's from then on, whatever happens."""
    import queue
    from concurrent.futures import ThreadPoolExecutor

    from spillway import progress

    created_files: list[tuple[Path, os.stat_result]] = []
    fds: dict[Path, int] = {}
    inputs: dict[Path, Any] = {}
    left: dict[Path, int] = {}  # parts still to read, per target
    lock = threading.Lock()
    results: queue.SimpleQueue[int | BaseException] = queue.SimpleQueue()
    total = sum(t.size for t in transfers)
    bar = progress.stage("reading from the store", total, "bytes")
    pool = ThreadPoolExecutor(max_workers=workers or read_workers(), thread_name_prefix="spillway-read")

    def whole(t: Transfer) -> None:
        handle = inputs.pop(t.target, None)
        if handle is not None:
            with contextlib.suppress(OSError, ValueError):
                handle.close()
        if arrived is not None:
            arrived(t)

    def read(t: Transfer, offset: int) -> None:
        try:
            if stop is not None and stop.is_set():
                raise _Abandoned(f"{t.source.uri}: not read: the command stopped reading from the store")
            if offset == 0:  # the file's first part opens it and queues the others (they share the handle)
                inputs[t.target] = _open_input(t.source)
                for later in range(part, t.size, part):
                    pool.submit(read, t, later)
            n = _read_part(t, inputs[t.target], fds[t.target], offset, min(part, t.size - offset))
            with lock:
                left[t.target] -= 1
                done = left[t.target] == 0
            if done:
                whole(t)
            results.put(n)
        except BaseException as exc:  # handed to the calling thread, which stops at the first
            results.put(exc)

    given: set[Path] = set()  # in-memory files handed to ``kept``: not this call's to close
    made_dirs: set[Path] = set()
    try:
        for t in transfers:
            if t.target in in_memory:
                fd = fds[t.target] = os.memfd_create(t.target.name, os.MFD_CLOEXEC)
                try:
                    os.ftruncate(fd, t.size)
                except OSError as exc:
                    raise cannot_write(t.target, exc) from None
                if kept is not None:
                    kept(t, fd)
                    given.add(t.target)
                left[t.target] = -(-t.size // part)
                continue
            if t.target.parent not in made_dirs:
                t.target.parent.mkdir(parents=True, exist_ok=True)
                made_dirs.add(t.target.parent)
            try:
                fd = os.open(t.target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            except OSError as exc:
                raise cannot_write(t.target, exc) from None
            fds[t.target] = fd
            created_files.append((t.target, os.fstat(fd)))
            try:
                os.ftruncate(fd, t.size)  # its listed size now: a reader told it has arrived sees every byte
            except OSError as exc:
                raise cannot_write(t.target, exc) from None
            left[t.target] = -(-t.size // part)
        if created is not None:
            created()
        parts = 0
        for t in transfers:
            if t.size == 0:
                whole(t)
                continue
            pool.submit(read, t, 0)
            parts += left[t.target]
        for _ in range(parts):
            got = results.get()
            if isinstance(got, BaseException):
                raise got
            bar.advance(got)
        return total
    except BaseException:
        if stop is not None:
            stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
        for path, made in created_files:
            with contextlib.suppress(OSError):  # only the files this call made: never a file another wrote
                now = os.stat(path, follow_symlinks=False)
                if (now.st_dev, now.st_ino) == (made.st_dev, made.st_ino):
                    os.unlink(path)
        raise
    finally:
        pool.shutdown(wait=True)
        for target, fd in fds.items():
            if target not in given:
                os.close(fd)
        for handle in inputs.values():
            with contextlib.suppress(OSError, ValueError):
                handle.close()
        bar.done()


def _open_input(loc: Location) -> Any:
    """A random-access handle on ``loc`` (its ranged reads may run in parallel). On S3 with the credentials in
    the environment, each read is one signed ranged GET and opening sends nothing (pyarrow would send a HEAD for
    the size, which the listing gave already)."""
    if isinstance(loc.fs, getattr(pafs, "S3FileSystem", ())):
        bucket, _, key = loc.path.partition("/")
        access = _s3_direct(bucket, timeout())
        if access is not None:
            return s3_get.RangedObject(access, bucket, key, timeout())
    try:
        return _remote_call(loc, "cannot read it", loc.fs.open_input_file, loc.path)
    except (OSError, ValueError) as exc:
        raise _fail(loc, "cannot read it", exc) from None


def _read_part(t: Transfer, source: Any, fd: int, offset: int, n: int) -> int:
    """``n`` bytes of ``t.source`` at ``offset`` into ``fd`` (one ranged GET), retried on transient errors."""
    what = f"cannot read bytes {offset}-{offset + n - 1}"
    for attempt in range(_ATTEMPTS):
        try:
            data = _read_range(t.source, source, offset, n, what)
        except FileNotFoundError as exc:
            raise _fail(t.source, what, exc) from None
        except (OSError, ValueError, StorageError) as exc:
            # A read past its deadline is not tried again: the deadline bounds the whole wait (docs/cli.md).
            if attempt + 1 == _ATTEMPTS or isinstance(exc, StorageError) or _CLIENT_TIMEOUT.search(str(exc)):
                raise exc if isinstance(exc, StorageError) else _fail(t.source, what, exc) from None
            time.sleep(_BACKOFF * 2**attempt)
            continue
        if len(data) != n:
            raise StorageError(f"{t.source.uri}: {what}: the file ended after {offset + len(data)} bytes")
        os.pwrite(fd, data, offset)
        return n
    raise AssertionError("unreachable")


def _read_range(loc: Location, source: Any, offset: int, n: int, what: str) -> bytes:
    """One ranged read under its own deadline: what a call may take plus a second per started MiB."""
    allowance = transfer_allowance(loc.fs, n)
    try:
        return bytes(_within(allowance, source.read_at, n, offset))
    except _NoAnswer:
        raise StorageError(
            Message(f"{loc.uri}: {what}: no answer within {allowance:g} s (", TIMEOUT_SETTING, ")")
        ) from None
