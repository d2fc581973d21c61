"""The names every part of spillway agrees on: a checkpoint's ``_metadata``, its ``chk-N`` directory, and
which paths live on another file system than this machine's (``s3://``, ``gs://``, ``hdfs://`` …).

Pure text: deciding whether a path is remote must not import a file-system client (pyarrow costs every
command's start-up time)."""

from __future__ import annotations

import os
import re

METADATA = "_metadata"
CHK_DIR = re.compile(r"^chk-(\d+)$")  # the directory Flink writes checkpoint N into
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def scheme_of(text: str | os.PathLike[str]) -> str | None:
    """``s3`` for ``s3://b/k`` (lower case); None for a path without ``scheme://``."""
    m = _SCHEME.match(os.fspath(text))
    return m.group(1).lower() if m else None


def is_remote(text: str | os.PathLike[str]) -> bool:
    """True for ``scheme://…`` URIs other than ``file://`` (local paths and ``file:`` stay local)."""
    scheme = scheme_of(text)
    return scheme is not None and scheme != "file"
