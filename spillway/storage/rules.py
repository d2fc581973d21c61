"""Path prefix rules (``--rebase OLD=NEW``, ``repair relocate --from OLD --to NEW``) matched on the
location a path names, not on how it is spelled.

Flink writes local paths as ``file:/x`` (``Path.toString()``), users type ``/x`` or ``file:///x``;
``s3a://``, ``s3p://`` and ``s3n://`` are Flink's names for ``s3://``. A rule given in any of these
spellings applies to paths written in any other. A prefix matches whole path components only:
``/srv/x`` covers ``/srv/x`` and ``/srv/x/…``, never ``/srv/xy``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
# Flink's aliases of one store; a location is the same whichever of them names it.
_ALIASES = {"s3a": "s3", "s3p": "s3", "s3n": "s3"}


def location_of(path: str) -> tuple[str, str]:
    """(file system, path inside it) for any spelling: ``/x``, ``file:/x``, ``file:///x`` and
    ``file://localhost/x`` are all ``("file", "/x")``; ``s3a://b/k`` is ``("s3", "b/k")``."""
    if path.startswith("file:"):
        rest = path[len("file:") :]
        if rest.startswith("//"):
            rest = rest[2:]
            # file://host/x: an authority before the path (only "localhost" or empty make sense)
            rest = rest if rest.startswith("/") else "/" + rest.partition("/")[2]
        return "file", rest
    m = _SCHEME.match(path)
    if m is None or not path[m.end() :].startswith("//"):
        return "file", path
    scheme = m.group(1).lower()
    return _ALIASES.get(scheme, scheme), path[m.end() + 2 :]


def _is_plain_local(text: str) -> bool:
    return _SCHEME.match(text) is None


@dataclass(frozen=True)
class PathRule:
    """Replace the prefix ``old`` by ``new`` in paths that lie at or below ``old``."""

    old: str
    new: str

    def tail(self, path: str) -> str | None:
        """What follows ``old`` in ``path`` ("" for ``old`` itself, "/a" below it), or None when ``path``
        is not at or below ``old``."""
        fs_old, old = location_of(self.old)
        fs_path, here = location_of(path)
        if fs_old != fs_path:
            return None
        if old == "" or old.endswith("/"):
            # "s3://" (every path of the store) or a prefix that ends at a component boundary already
            return here[len(old) :] if here.startswith(old) else None
        if here == old or here.startswith(old + "/"):
            return here[len(old) :]
        return None

    def matches(self, path: str) -> bool:
        return self.tail(path) is not None

    def apply(self, path: str) -> str | None:
        """``path`` with ``old`` replaced by ``new``; None when the rule does not apply.

        A plain ``new`` (``/data``) replacing a ``file:``-spelled path keeps that spelling (``file:/data/…``):
        the output reads as Flink writes paths."""
        tail = self.tail(path)
        if tail is None:
            return None
        new = self.new
        if new.endswith("/") and tail.startswith("/"):
            tail = tail[1:]
        elif tail and not new.endswith("/") and not tail.startswith("/"):
            tail = "/" + tail
        if _is_plain_local(new) and new.startswith("/") and path.startswith("file:"):
            new = ("file://" if path.startswith("file://") else "file:") + new
        return new + tail

    def __str__(self) -> str:
        return f"{self.old}={self.new}"
