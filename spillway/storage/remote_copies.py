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
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Pending:
    """A remote file known from a listing: its size there and how to bring it to its local path."""

    uri: str
    size: int
    fetch: Callable[[], None]


_lock = threading.Lock()
_pending: dict[str, Pending] = {}  # local path -> the remote file it stands for
_names: dict[str, set[str]] = {}  # local directory -> names of pending files in it
_fetching: dict[str, threading.Lock] = {}
_uris: dict[str, str] = {}  # local path -> the remote file's URI, fetched or not (what users are shown)


def register(local: str, uri: str, size: int, fetch: Callable[[], None]) -> None:
    """``local`` stands for the remote file ``uri`` (``size`` bytes there); ``fetch()`` downloads it to ``local``."""
    path = os.path.abspath(local)
    with _lock:
        _uris[path] = uri
        if path in _pending or os.path.lexists(path):
            return
        _pending[path] = Pending(uri, size, fetch)
        parent, _, name = path.rpartition("/")
        _names.setdefault(parent or "/", set()).add(name)


def register_missing(local: str, uri: str) -> None:
    """``local`` stands for ``uri``, which the store does not list: nothing to fetch, but shown by its URI."""
    with _lock:
        _uris[os.path.abspath(local)] = uri


def shown(local: str) -> str:
    """``local`` as users know it: the URI of the remote file it stands for, else ``local`` itself."""
    return _uris.get(os.path.abspath(local), local) if _uris else local


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
    if local is None:
        return
    path = os.path.abspath(os.fspath(local))
    if path not in _pending:
        return
    with _lock:
        gate = _fetching.setdefault(path, threading.Lock())
    with gate:
        found = _pending.get(path)
        if found is None:  # fetched by another thread meanwhile
            return
        found.fetch()
        with _lock:
            del _pending[path]
            parent, _, name = path.rpartition("/")
            _names.get(parent or "/", set()).discard(name)
