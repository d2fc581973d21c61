"""Where rewriting commands read and write: a local working copy of a remote source, a local
staging directory for a remote output (published after its self-check).

SRC and the output may be local paths or URIs of any file system pyarrow.fs knows (``s3://…``,
``file:///…``).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from spillway.errors import UsageError
from spillway.safe_io import real_path
from spillway.storage.load import LoadedCheckpoint
from spillway.storage.locate import strip_file_scheme
from spillway.storage.names import is_remote

_CHK_NAME = re.compile(r"^chk-\d+$")


@dataclass
class Workspace:
    """Where a rewriting command (repair, rescale) reads its source and writes its output."""

    loaded: LoadedCheckpoint
    rebase: list[str]  # --rebase rules plus those reaching a remote source's downloaded files
    target: Path  # where the local writer puts the output (a staging directory when the output is remote)
    final_prefix: str  # the output directory as the new _metadata names it
    remote_out: str | None = None

    @property
    def shown_out(self) -> str:
        return self.remote_out or str(self.target)


def protected_directory(checkpoint_dir: Path) -> Path:
    """What an output must stay out of: the job directory of a ``chk-N`` (its siblings, ``shared/`` and
    ``taskowned/`` belong to the job; a new ``chk-999`` there would be taken for the newest checkpoint),
    else the checkpoint directory itself."""
    real = real_path(checkpoint_dir)
    return real.parent if _CHK_NAME.match(real.name) else real


def refuse_output_inside_source(target: Path, checkpoint_dir: Path) -> None:
    protected = protected_directory(checkpoint_dir)
    if target == protected or protected in target.parents:
        raise UsageError(
            f"--out {target} is inside the source's directory {protected}: write the new checkpoint "
            "elsewhere (spillway never adds files to its input)"
        )


@contextmanager
def output_workspace(loaded: LoadedCheckpoint, out_dir: str) -> Iterator[Workspace]:
    """Where a rewriting command writes from an opened checkpoint: the output's self-check rules are the
    user's ``--rebase`` rules the checkpoint was opened with, plus, for a remote source, those reaching the
    local copies of its files (the output reads them from the same copies)."""
    workdir: Path | None = None
    made: os.stat_result | None = None
    try:
        remote_src = loaded.location.uri is not None
        rules = [str(r) for r in loaded.resolver.rules if remote_src or not r.internal]
        if is_remote(out_dir):
            workdir = Path(tempfile.mkdtemp(prefix="spillway-work-"))
            made = os.lstat(workdir)
            final = out_dir.rstrip("/")
            name = final.rpartition("/")[2] or "checkpoint"
            yield Workspace(loaded, rules, workdir / "output" / name, final, final)
        else:
            target = real_path(strip_file_scheme(out_dir) or out_dir)
            refuse_output_inside_source(target, loaded.location.checkpoint_dir)
            yield Workspace(loaded, rules, target, f"file:{target}")
    finally:
        if workdir is not None and made is not None and _same(workdir, made):
            shutil.rmtree(workdir, ignore_errors=True)  # the private directory this run made, and only that


def _same(path: Path, made: os.stat_result) -> bool:
    try:
        now = os.lstat(path)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (made.st_dev, made.st_ino)
