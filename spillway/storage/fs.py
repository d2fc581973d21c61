"""Checkpoints on object stores and other remote file systems, through ``pyarrow.fs``.

Everything else in spillway reads and writes local files. This module is the one place that talks to
``s3://``, ``gs://``, ``hdfs://``, ``abfs://``… (and ``file://``): it brings a remote checkpoint to a
local working copy (:func:`materialize`) and publishes a local, already self-checked output to a
remote place (:func:`publish_dir`, :func:`put_files`), so the decode/validate/write code stays local.

Publishing follows the local writer's rule — never overwrite, never leave a half-written output
that looks complete: objects go to a temporary sibling prefix first, are read back and compared
byte for byte (SHA-256), then moved into place with ``_metadata`` moved LAST (an output without
``_metadata`` is not a checkpoint); on any failure everything written is deleted again. On S3 a
move is a server-side copy plus a delete.

Credentials and endpoints come from the usual environment of each store (for S3:
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``, ``AWS_ENDPOINT_URL`` for
S3-compatible servers, …), as pyarrow reads them. Flink's scheme aliases ``s3a``/``s3p``/``s3n`` are
read as ``s3``; paths in ``_metadata`` are never rewritten by this module.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from spillway.errors import SpillwayError
from spillway.formats.metadata_codec import decode_metadata
from spillway.model.checkpoint import is_file_backed
from spillway.model.walk import leaf_stream_handles
from spillway.safe_io import real_path

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

METADATA = "_metadata"
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_ALIASES = {"s3a": "s3", "s3p": "s3", "s3n": "s3"}
_CHK = re.compile(r"^chk-(\d+)$")
_CHUNK = 8 << 20


@cache
def _bucketed() -> tuple[type, ...]:
    """Object stores: pyarrow paths start with the bucket (a build may lack one of them)."""
    return tuple(c for c in (getattr(pafs, "S3FileSystem", None), getattr(pafs, "GcsFileSystem", None)) if c)


class StorageError(SpillwayError):
    """A remote file system could not be read or written as needed; the message names the URI."""


def scheme_of(text: str) -> str | None:
    m = _SCHEME.match(text)
    return m.group(1).lower() if m else None


def is_remote(text: str) -> bool:
    """True for ``scheme://…`` URIs other than ``file://`` (local paths and ``file:`` stay local)."""
    scheme = scheme_of(str(text))
    return scheme is not None and scheme != "file"


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
def _filesystem(scheme: str, authority: str) -> tuple[pafs.FileSystem, str]:
    """One pyarrow file system per store and bucket/host (pyarrow resolves credentials and region once)."""
    fs, root = pafs.FileSystem.from_uri(f"{scheme}://{authority}/")
    return fs, root


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
        fs, _ = _filesystem(_ALIASES.get(scheme, scheme), authority)
    except (OSError, ValueError) as exc:
        raise StorageError(f"{uri}: cannot open the file system: {exc}") from None
    # pyarrow names object-store paths bucket-first; other file systems by absolute path
    path = f"{authority}/{key}".rstrip("/") if isinstance(fs, _bucketed()) else "/" + key
    return Location(text, fs, path)


def _fail(loc: Location, what: str, exc: BaseException) -> StorageError:
    detail = str(exc).split(". Detail:")[0]
    if isinstance(exc, FileNotFoundError):
        detail = "does not exist"
    return StorageError(f"{loc.uri}: {what}: {detail}")


def info(loc: Location) -> pafs.FileInfo:
    try:
        return loc.fs.get_file_info(loc.path)
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
    try:
        return loc.fs.get_file_info(pafs.FileSelector(loc.path, recursive=True, allow_not_found=True))
    except (OSError, ValueError) as exc:
        raise _fail(loc, "cannot list it", exc) from None


def list_files(loc: Location) -> dict[str, int]:
    """Every file under a directory / prefix: path relative to it -> size."""
    base = loc.path.rstrip("/") + "/"
    return {i.path[len(base) :]: i.size for i in _list(loc) if i.type == pafs.FileType.File}


def read_bytes(loc: Location) -> bytes:
    try:
        with loc.fs.open_input_stream(loc.path) as fh:
            return fh.read()
    except (OSError, ValueError) as exc:
        raise _fail(loc, "cannot read it", exc) from None


def download(loc: Location, local: Path) -> None:
    local.parent.mkdir(parents=True, exist_ok=True)
    try:
        with loc.fs.open_input_stream(loc.path) as src, open(local, "wb") as dst:
            while chunk := src.read(_CHUNK):
                dst.write(chunk)
    except (OSError, ValueError) as exc:
        raise _fail(loc, "cannot download it", exc) from None


def upload(local: Path, loc: Location) -> None:
    try:
        with open(local, "rb") as src, loc.fs.open_output_stream(loc.path) as dst:
            while chunk := src.read(_CHUNK):
                dst.write(chunk)
    except (OSError, ValueError) as exc:
        raise _fail(loc, "cannot write it", exc) from None


def sha256_of(loc: Location) -> str:
    h = hashlib.sha256()
    try:
        with loc.fs.open_input_stream(loc.path) as fh:
            while chunk := fh.read(_CHUNK):
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
        src.fs.move(src.path, dst.path)
    except (OSError, ValueError) as exc:
        raise _fail(dst, f"cannot move {src.uri} here", exc) from None


def delete_quietly(loc: Location) -> None:
    """Best-effort clean-up after a failure (the original error is what the user needs to see)."""
    try:
        i = loc.fs.get_file_info(loc.path)
        if i.type == pafs.FileType.Directory:
            loc.fs.delete_dir(loc.path)
        elif i.type == pafs.FileType.File:
            loc.fs.delete_file(loc.path)
    except (OSError, ValueError):
        pass


def require_container(loc: Location) -> None:
    """Fail early and clearly when an object store's bucket does not exist (writes would fail late)."""
    if isinstance(loc.fs, _bucketed()):
        bucket = loc.path.split("/", 1)[0]
        if info(Location(loc.uri, loc.fs, bucket)).type != pafs.FileType.Directory:
            raise StorageError(f"{loc.uri}: bucket {bucket!r} does not exist (or is not accessible)")


# ------------------------------------------------------------------------------------------------ reading


@dataclass
class Materialized:
    """A local working copy of a remote checkpoint: load it with ``rebase`` and it reads like the original."""

    uri: str  # the remote checkpoint directory (chk-N / savepoint directory)
    checkpoint_dir: Path  # local: _metadata and every file named relative to it
    rebase: list[str]  # OLD=NEW rules sending absolute remote paths to their downloaded copies
    files: int = 0  # files downloaded, _metadata included
    bytes: int = 0


def find_metadata(uri: str) -> Location:
    """``_metadata`` of what ``uri`` names: the file itself, a chk-N/savepoint directory, or a job's
    checkpoint directory (newest chk-N), like local paths."""
    loc = locate(uri)
    require_container(loc)
    i = info(loc)
    if i.type == pafs.FileType.File:
        return loc
    if i.type == pafs.FileType.NotFound:
        raise StorageError(f"{uri}: no such file or directory")
    meta = loc.child(METADATA)
    if info(meta).type == pafs.FileType.File:
        return meta
    chks = []
    for rel in list_files(loc):
        parts = rel.split("/")
        if len(parts) == 2 and parts[1] == METADATA and (m := _CHK.match(parts[0])):
            chks.append((int(m.group(1)), parts[0]))
    if not chks:
        raise StorageError(f"{uri}: no _metadata here, and no chk-N directory holding one")
    return loc.child(max(chks)[1]).child(METADATA)


def materialize(uri: str, workdir: Path) -> Materialized:
    """Download ``_metadata``, the files it names relative to its directory, and every absolute remote
    file it references, into ``workdir``. Absolute local paths are left to the usual resolution."""
    meta = find_metadata(uri)
    chk = meta.parent
    local_chk = workdir / "checkpoint" / (chk.name or "checkpoint")
    data = read_bytes(meta)
    local_chk.mkdir(parents=True, exist_ok=True)
    (local_chk / METADATA).write_bytes(data)
    result = Materialized(chk.uri, local_chk, [], 1, len(data))
    checkpoint = decode_metadata(data, meta.uri)
    relative: set[str] = set()
    absolute: set[str] = set()
    for h in leaf_stream_handles(checkpoint, coordinator=True):
        if not is_file_backed(h):
            continue
        if h.relative:
            relative.add(h.file_name)
        elif is_remote(h.file_name):
            absolute.add(h.file_name)
    for rel in sorted(relative):
        parts = PurePosixPath(rel).parts
        if PurePosixPath(rel).is_absolute() or any(p in ("", ".", "..") for p in parts):
            raise StorageError(f"{meta.uri}: relative path {rel!r} escapes the checkpoint directory")
        _fetch(chk.child(rel), local_chk / rel, result)
    mirror = workdir / "mirror"
    schemes: set[str] = set()
    for path in sorted(absolute):
        scheme = path.split("://", 1)[0]
        rest = path.split("://", 1)[1]
        if any(p in ("", ".", "..") for p in rest.split("/")):
            raise StorageError(f"{meta.uri}: referenced path {path!r} is not a plain file path")
        schemes.add(scheme)
        _fetch(locate(path), mirror / scheme / rest, result)
    result.rebase = [f"{s}://={mirror / s}/" for s in sorted(schemes)]
    return result


def _fetch(loc: Location, local: Path, result: Materialized) -> None:
    if not local.exists():
        download(loc, local)
        result.files += 1
        result.bytes += local.stat().st_size


# ------------------------------------------------------------------------------------------------ writing


def _temporary_sibling(loc: Location) -> Location:
    return loc.parent.child(f".{loc.name}.spillway-{uuid.uuid4().hex[:8]}.partial")


def check_target(uri: str) -> Location:
    """The output location, refused when something is already there (spillway never overwrites)."""
    loc = locate(uri)
    require_container(loc)
    if exists(loc):
        raise StorageError(f"{uri}: already exists; spillway never overwrites (choose a new --out)")
    return loc


def publish_dir(local_dir: Path, uri: str) -> int:
    """Copy the finished local checkpoint directory ``local_dir`` to ``uri``: every file under a
    temporary sibling prefix, each read back and compared (SHA-256), then moved into place with
    ``_metadata`` last. Returns the number of files. Nothing stays behind when any step fails."""
    target = check_target(uri)
    files = sorted(p.relative_to(local_dir).as_posix() for p in local_dir.rglob("*") if p.is_file())
    if METADATA not in files:
        raise StorageError(f"{local_dir}: no _metadata to publish")
    order = [f for f in files if f != METADATA] + [METADATA]
    tmp = _temporary_sibling(target)
    moved: list[Location] = []
    try:
        for rel in order:
            upload(local_dir / rel, tmp.child(rel))
        for rel in order:
            if sha256_of(tmp.child(rel)) != _sha256_local(local_dir / rel):
                raise StorageError(f"{tmp.child(rel).uri}: self-check: read back differs from what was written")
        for rel in order:
            move(tmp.child(rel), target.child(rel))
            moved.append(target.child(rel))
        if info(target.child(METADATA)).size != (local_dir / METADATA).stat().st_size:
            raise StorageError(f"{target.child(METADATA).uri}: self-check: size differs after the move")
    except BaseException:
        # _metadata goes first: a partial output must stop looking like a checkpoint at once.
        for loc in sorted(moved, key=lambda m: m.name != METADATA):
            delete_quietly(loc)
        delete_quietly(tmp)
        raise
    delete_quietly(tmp)
    return len(order)


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
                raise StorageError(f"{uri}: exists with different content; not overwritten")
            tmp = dst.parent.child(f".{dst.name}.spillway-{uuid.uuid4().hex[:8]}.partial")
            try:
                upload(local, tmp)
                if sha256_of(tmp) != digest:
                    raise StorageError(f"{tmp.uri}: self-check: read back differs from what was written")
                move(tmp, dst)
            except BaseException:
                delete_quietly(tmp)
                raise
            written.append(uri)
    except BaseException:
        delete_files(written)
        raise
    return written


def delete_files(uris: Iterable[str]) -> None:
    for uri in uris:
        delete_quietly(locate(uri))
