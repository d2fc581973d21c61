"""A directory tree's contents, to prove that something outside an output stayed byte-identical."""

from __future__ import annotations

import os
from pathlib import Path


def tree(root: Path) -> dict[str, bytes | str]:
    """Every entry under ``root``: a file's bytes, a symlink's target, a directory's marker."""
    found: dict[str, bytes | str] = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        found[rel] = f"-> {os.readlink(p)}" if p.is_symlink() else "dir" if p.is_dir() else p.read_bytes()
    return found
