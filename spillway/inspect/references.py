"""Before a written checkpoint is renamed into place: does every file it names exist?

This check is deliberately simple and separate from the code that decided the paths (rescale, the repairs,
pinning, the resolver's automatic rebasing): it reads the written ``_metadata`` and looks for each file
exactly where a restoring Flink would, after only the rules it is given — the output's own final place
(the staging directory stands for it) and the rebase rules the user declared. A file it cannot find there
is missing, however the writer found it.

Local files are ``stat``-ed (a regular file); remote ones are asked for by one info call each (HEAD on object
stores), never read. Whether a file is long enough is validate's question (its file-size rules), asked by the
same self-check.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from spillway.errors import SpillwayError
from spillway.formats.metadata_codec import decode_metadata
from spillway.model.checkpoint import CheckpointMetadata, is_file_backed
from spillway.model.walk import all_stream_handles
from spillway.safe_io import read_regular
from spillway.storage import remote_copies
from spillway.storage.names import METADATA


@dataclass(frozen=True)
class Reference:
    name: str  # as the _metadata writes it
    relative: bool
    where: str  # operator, subtask and state kind, for the message


def references(checkpoint: CheckpointMetadata) -> Iterator[Reference]:
    """Every file-backed handle of the checkpoint, coordinator state included."""
    for site, h in all_stream_handles(checkpoint):
        if not is_file_backed(h):
            continue
        sub = f" subtask {site.subtask.index}" if site.subtask is not None else ""
        yield Reference(h.file_name, bool(h.relative), f"{site.operator.label()}{sub} {site.kind}")


def missing_references(out_dir: Path, final_prefix: str | None, rules: list[str] | None = None) -> list[str]:
    """One line per file the checkpoint written in ``out_dir`` names but that is not there. ``final_prefix``:
    the output's own directory as its paths name it (found in ``out_dir``); ``rules``: ``OLD=NEW`` prefixes the
    user declared, applied to absolute paths in order (the first that matches)."""
    meta = out_dir / METADATA
    checkpoint = decode_metadata(read_regular(meta), str(meta))
    pairs = ([(final_prefix, str(out_dir))] if final_prefix else []) + [_pair(r) for r in rules or []]
    problems: list[str] = []
    seen: dict[str, str | None] = {}
    for ref in references(checkpoint):
        key = ("\0" if ref.relative else "") + ref.name
        if key not in seen:
            seen[key] = _absent(out_dir / ref.name if ref.relative else _apply(pairs, ref.name))
        if (why := seen[key]) is not None:
            problems.append(f"{ref.name}: referenced by {ref.where}, {why}")
    return problems


def _pair(rule: str) -> tuple[str, str]:
    old, _, new = rule.partition("=")
    return old, new


def _location(path: str) -> str:
    """A path or URI as a comparable location: ``file:/x``, ``file:///x`` and ``/x`` are one place."""
    if path.startswith("file://"):
        path = path[len("file://") :]
    elif path.startswith("file:"):
        path = path[len("file:") :]
    return path.rstrip("/") or "/"


def _apply(pairs: list[tuple[str, str]], name: str) -> str:
    place = _location(name)
    for old, new in pairs:
        base = _location(old)
        if place == base or place.startswith(base.rstrip("/") + "/"):
            return _location(new).rstrip("/") + place[len(base.rstrip("/")) :]
    return place


def _absent(place: Path | str) -> str | None:
    """Why the file is not at ``place`` (None: it is there)."""
    text = os.fspath(place)
    if "://" in text:
        return _absent_remote(text)
    if remote_copies.pending(text) is not None:
        return None  # a remote source's file, not fetched: the store listed it when the source was opened
    try:
        st = os.stat(text)
    except FileNotFoundError:
        return f"which does not exist ({text})"
    except OSError as exc:
        return f"which cannot be looked at ({text}: {exc.strerror or exc})"
    if not stat.S_ISREG(st.st_mode):
        return f"which is not a regular file ({text})"
    return None


def _absent_remote(uri: str) -> str | None:
    from spillway.storage import fs  # pyarrow: only for an output that names remote files

    try:
        found = fs.info(fs.locate(uri))
    except SpillwayError as exc:  # unreachable, refused, or a scheme no file system here knows
        return f"which cannot be looked at ({exc})"
    if found.type != fs.pafs.FileType.File:
        return f"which does not exist ({uri})"
    return None
