"""Local stand-ins for the files of a remote checkpoint, fetched only when something reads them.

A remote checkpoint is read through a local working directory (``_metadata`` and its files under the paths
the resolver gives them), but its files are not downloaded up front: the store's listing says which exist and
how large they are, and a file's bytes are fetched the first time a command reads it. So ``dump`` and ``files``
transfer ``_metadata`` alone, ``validate`` and ``analyze`` add the channel-state files they frame, and keyed
state (usually nearly all of a checkpoint's bytes) is never transferred to be looked at.

A path registered here and not yet fetched does not exist on disk: code that reads it without asking
:func:`ensure_local` first finds no file (a loud "missing"), never a stand-in's wrong bytes. Code that only
needs existence and size asks :func:`size_of`.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Pending:
    """A remote file known from a listing: its size there, and what ``fetch`` (given many sources at once,
    to read them in parallel) needs to bring it to its local path."""

    uri: str
    size: int
    source: Any
    fetch: Callable[[list[Any]], None]


_lock = threading.Lock()
_pending: dict[str, Pending] = {}  # local path -> the remote file it stands for
_names: dict[str, set[str]] = {}  # local directory -> names of pending files in it
_fetching: dict[str, threading.Lock] = {}
_uris: dict[str, str] = {}  # local path -> the remote file's URI, fetched or not (what users are shown)


def register(local: str, uri: str, size: int, source: Any, fetch: Callable[[list[Any]], None]) -> None:
    """``local`` stands for the remote file ``uri`` (``size`` bytes there); ``fetch([source, …])`` downloads
    it (and others) to their local paths."""
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
    """The remote file ``local`` stands for while it has not been fetched."""
    return _pending.get(os.path.abspath(os.fspath(local)))


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


def ensure_local(local: str | os.PathLike[str] | None) -> None:
    """Fetch ``local``'s remote file now if it stands for one (once, whatever the number of threads asking)."""
    if local is not None:
        prefetch([os.fspath(local)])


def prefetch(locals_: Iterable[str | None]) -> None:
    """Fetch every one of ``locals_`` that stands for a remote file, all at once (their reads in parallel).
    A file being fetched by another thread is waited for, never fetched twice."""
    paths = sorted({p for p in (os.path.abspath(x) for x in locals_ if x) if p in _pending})
    if not paths:
        return
    with _lock:
        gates = [_fetching.setdefault(p, threading.Lock()) for p in paths]
    for gate in gates:  # in path order: two callers never wait for each other's gates in a cycle
        gate.acquire()
    try:
        todo = [_pending[p] for p in paths if p in _pending]  # others were fetched while this waited
        by_fetcher: dict[Callable[[list[Any]], None], list[Pending]] = {}
        for found in todo:  # one call per fetcher (equal bound methods are one): their reads run together
            by_fetcher.setdefault(found.fetch, []).append(found)
        for group in by_fetcher.values():
            group[0].fetch([found.source for found in group])
        with _lock:
            for p in paths:
                if _pending.pop(p, None) is not None:
                    parent, _, name = p.rpartition("/")
                    _names.get(parent or "/", set()).discard(name)
    finally:
        for gate in gates:
            gate.release()
