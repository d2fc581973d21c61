"""Local stand-ins for the files of a remote checkpoint, fetched only when something reads them.

A remote checkpoint is read through a local working directory (``_metadata`` and its files under the paths
the resolver gives them), but its files are not downloaded up front: the store's listing says which exist and
how large they are, and a file's bytes are fetched the first time a command reads it. So ``dump`` and ``files``
transfer ``_metadata`` alone, ``validate`` and ``analyze`` add the channel-state files they frame, and keyed
state (usually nearly all of a checkpoint's bytes) is never transferred to be looked at.

A fetched file is held in memory (an anonymous in-memory file, :func:`held`), up to a budget
(``SPILLWAY_STORAGE_MEMORY``): the channel-state readers frame it from there (:func:`arrive`), with no copy on
disk. Past the budget, and where a reader needs a path (a Spark worker, a copy into an output), it is written
to its local path (:func:`ensure_local`).

A path registered here and not on disk (not yet fetched, or held in memory) is :func:`pending`: code that
reads it by path without asking :func:`ensure_local` first finds no file (a loud "missing"), never a stand-in's
wrong bytes. While a fetch is under way (:func:`start`, which lets a command read each file as soon as it is
whole, e.g. validate framing one file while the next arrive) the file exists (on disk or in memory) at its
listed size: readers wait for it with :func:`arrive` or :func:`ensure_local`. Code that only needs existence
and size asks :func:`size_of`.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # a checkpoint with no remote file never loads concurrent.futures (and its logging)
    from concurrent.futures import Future

from spillway.storage.guard import cannot_write

# fetch(sources, created, arrived, stop): bring ``sources`` to their local paths, their reads in parallel; call
# ``created()`` once every local file exists at its listed size (its bytes still to come) and ``arrived(source)``
# as each file is whole; start no further read once ``stop`` is set; raise the first failure (leaving none of
# its files behind).
Fetcher = Callable[[list[Any], Callable[[], None], Callable[[Any], None], threading.Event], None]


@dataclass(frozen=True)
class Pending:
    """A remote file known from a listing: its size there, and what ``fetch`` (given many sources at once,
    to read them in parallel) needs to bring it to its local path."""

    uri: str
    size: int
    source: Any
    fetch: Fetcher


_lock = threading.Lock()
_pending: dict[str, Pending] = {}  # local path -> the remote file it stands for, until its bytes are all here
_names: dict[str, set[str]] = {}  # local directory -> names of pending files in it
_arrivals: dict[str, Future[None]] = {}  # local path -> done once its fetch has brought it whole (or failed)
_stops: list[threading.Event] = []  # one per fetch under way: set, it reads no further part
_uris: dict[str, str] = {}  # local path -> the remote file's URI, fetched or not (what users are shown)
_held: dict[str, int] = {}  # local path -> descriptor of the in-memory file holding its bytes (not on disk)
_spilling = threading.Lock()  # one file written out of memory at a time (never twice)


def register(local: str, uri: str, size: int, source: Any, fetch: Fetcher) -> None:
    """``local`` stands for the remote file ``uri`` (``size`` bytes there); ``fetch([source, …])`` downloads
    it (and others) to their local paths (:data:`Fetcher`)."""
    path = os.path.abspath(local)
    with _lock:
        _uris[path] = uri
        if path in _pending or os.path.lexists(path):
            return
        _pending[path] = Pending(uri, size, source, fetch)
        parent, _, name = path.rpartition("/")
        _names.setdefault(parent or "/", set()).add(name)


def register_missing(local: str, uri: str) -> None:
    """``local`` stands for ``uri``, which the store does not list: nothing to fetch, but shown by its URI."""
    with _lock:
        _uris[os.path.abspath(local)] = uri


def shown(local: str) -> str:
    """``local`` as users know it: the URI of the remote file it stands for, else ``local`` itself."""
    return _uris.get(os.path.abspath(local), local) if _uris else local


def uri_of(local: str | os.PathLike[str]) -> str | None:
    """The remote file ``local`` stands for (fetched or not); None for a file of this machine."""
    return _uris.get(os.path.abspath(os.fspath(local))) if _uris else None


def pending(local: str | os.PathLike[str]) -> Pending | None:
    """The remote file ``local`` stands for while it is not on disk (not fetched, or held in memory)."""
    return _pending.get(os.path.abspath(os.fspath(local)))


def hold(local: str, fd: int) -> None:
    """``local``'s bytes are (being) fetched into the in-memory file ``fd``, which this module now owns."""
    with _lock:
        _held[os.path.abspath(local)] = fd


def held(local: str | os.PathLike[str]) -> int | None:
    """The descriptor of the in-memory file holding ``local``'s bytes (None: on disk, or not a remote file).
    Its bytes may still be arriving: read them only after :func:`arrive`."""
    return _held.get(os.path.abspath(os.fspath(local))) if _held else None


def present(local: str | os.PathLike[str]) -> bool:
    """Whether ``local`` exists, on disk or in memory."""
    return held(local) is not None or os.path.lexists(local)


def names_in(directory: str) -> frozenset[str]:
    """Names of the not yet fetched files of ``directory`` (a listing of it misses them)."""
    return frozenset(_names.get(os.path.abspath(directory or "/"), ()))


def size_of(local: str | os.PathLike[str]) -> int | None:
    """The size of the regular file at ``local`` (its size in the store while not fetched); None when there
    is no regular file."""
    found = pending(local)
    if found is not None:
        return found.size
    try:
        st = os.stat(local)
    except OSError:
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def arrive(local: str | os.PathLike[str] | None) -> None:
    """``local``'s remote file, if it stands for one, whole (in memory or on disk): fetched now, or waited for
    while another thread's fetch brings it (never fetched twice)."""
    if local is not None:
        prefetch([os.fspath(local)])


def ensure_local(local: str | os.PathLike[str] | None) -> None:
    """``local``'s remote file, if it stands for one, whole on disk at ``local`` (:func:`arrive`, then written
    out of memory if it is held there: no second transfer)."""
    if local is not None:
        prefetch([os.fspath(local)])
        _spill(os.path.abspath(os.fspath(local)))


def _spill(path: str) -> None:
    """Write the in-memory file of ``path`` to ``path`` (a new file; a partial one is removed) and drop it."""
    with _spilling:
        fd = _held.get(path)
        if fd is None:
            return
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise cannot_write(path, exc) from None
        try:
            size, offset = os.fstat(fd).st_size, 0
            while offset < size:
                chunk = os.pread(fd, min(8 << 20, size - offset), offset)
                if not chunk:
                    break
                offset += len(chunk)
                left = memoryview(chunk)
                while left:
                    left = left[os.write(out, left) :]
        except BaseException as exc:
            os.close(out)
            os.unlink(path)  # no partial file may pass for the whole
            if isinstance(exc, OSError):
                raise cannot_write(path, exc) from None
            raise
        os.close(out)
        with _lock:
            _held.pop(path, None)
            _on_disk(path)
        os.close(fd)  # blobs opened on it hold descriptors of their own


def _on_disk(path: str) -> None:
    """``path``'s bytes are all on disk now: no longer pending (called with the lock held)."""
    if _pending.pop(path, None) is not None:
        parent, _, name = path.rpartition("/")
        _names.get(parent or "/", set()).discard(name)


def prefetch(locals_: Iterable[str | None]) -> None:
    """Every one of ``locals_`` that stands for a remote file, whole on disk: fetched all at once (their reads in
    parallel), or waited for where a fetch is under way."""
    waits = start(locals_)
    try:
        for arrival in waits:
            arrival.result()
    except BaseException:
        abandon()  # an error or Ctrl-C here: the reads still queued are not worth finishing
        raise


def start(locals_: Iterable[str | None]) -> list[Future[None]]:
    """Begin fetching every one of ``locals_`` that stands for a remote file and is not being fetched yet, in the
    order given (the caller's reading order: the first to be read arrive first), and return, for each that is
    still to arrive, a future done when it has. The fetch runs in the background; once this returns, each file
    being fetched exists at its local path with its listed size, and must not be read before its future is
    done (:func:`ensure_local` waits for it)."""
    from concurrent.futures import Future

    paths = list(dict.fromkeys(os.path.abspath(x) for x in locals_ if x))
    todo: list[tuple[str, Pending]] = []
    waits: list[Future[None]] = []
    with _lock:
        for p in paths:
            arrival = _arrivals.get(p)
            if arrival is None:
                found = _pending.get(p)
                if found is None:
                    continue  # a local file, or one already here
                arrival = _arrivals[p] = Future()
                todo.append((p, found))
            if not arrival.done() or arrival.exception() is not None:
                waits.append(arrival)
    by_fetcher: dict[Fetcher, list[tuple[str, Pending]]] = {}
    for p, found in todo:  # one fetch per fetcher (equal bound methods are one): their reads run together
        by_fetcher.setdefault(found.fetch, []).append((p, found))
    for fetcher, group in by_fetcher.items():
        _begin(fetcher, group)
    return waits


def _begin(fetcher: Fetcher, group: list[tuple[str, Pending]]) -> None:
    """Run one fetch of ``group`` in a background thread; return once its local files exist (or it failed)."""
    by_source = {id(found.source): p for p, found in group}
    created = threading.Event()
    stop = threading.Event()

    def arrived(source: Any) -> None:
        p = by_source[id(source)]
        with _lock:
            if p not in _held:  # held in memory: still no file at p
                _on_disk(p)
        _arrivals[p].set_result(None)

    def run() -> None:
        try:
            fetcher([found.source for _, found in group], created.set, arrived, stop)
        except BaseException as exc:  # every file not yet whole fails with it, for whoever waits on it
            for p, _ in group:
                if not _arrivals[p].done():
                    _arrivals[p].set_exception(exc)
        finally:
            created.set()
            with _lock:
                _stops.remove(stop)

    with _lock:
        _stops.append(stop)
    worker = threading.Thread(target=run, name="spillway-fetch", daemon=True)
    worker.start()
    created.wait()


def abandon() -> None:
    """Stop every fetch under way from starting further reads (after an error or an interrupt elsewhere: the
    process is about to end, and its files are not waited for)."""
    with _lock:
        for stop in _stops:
            stop.set()
