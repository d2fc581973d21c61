"""A disk that fills up midway: the output's parent is a small tmpfs (as root, the CI case) that holds about
half of what a solo run writes; without root, a file-size limit (RLIMIT_FSIZE) makes the same writes fail with
EFBIG. The command exits 3 (storage/I-O, not findings) with one error line naming a path under the output, and
leaves nothing behind: no staging directory, no partial file, no ``_metadata``; the source is unchanged."""

from __future__ import annotations

import json
import os
import resource
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support.console import SCRIPT
from support.faults import command, console_env, lay_out, run, snapshot

CASES = {  # command -> fixture
    "relocate-copy": "2.3.0-rocksdb-incremental",
    "drop": "2.3.0-unaligned",
    "rescale": "2.3.0-unaligned",
}
ROOT_USER = os.geteuid() == 0


@contextmanager
def small_disk(where: Path, size: int) -> Iterator[None]:
    where.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], check=True)
    try:
        yield
    finally:
        subprocess.run(["umount", str(where)], check=True)


def _written(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


@pytest.mark.timeout(120)
@pytest.mark.parametrize("cmd", list(CASES))
def test_a_full_disk_is_an_io_error_that_leaves_nothing(tmp_path: Path, cmd: str) -> None:
    layout = lay_out(tmp_path / "in", CASES[cmd])
    source = snapshot(layout.root)
    solo_to = tmp_path / "solo" / layout.fx.info["job_id"]
    solo = run(command(layout, cmd, to=solo_to))
    assert solo.code == 0, solo.output
    size = max(4096, _written(solo_to.parent) // 2 // 4096 * 4096)
    disk = tmp_path / "disk"
    to = disk / layout.fx.info["job_id"]
    args = command(layout, cmd, "--json", to=to)
    if ROOT_USER:
        with small_disk(disk, size):
            to.mkdir()
            done = subprocess.run([str(SCRIPT), *args], env=console_env(), capture_output=True, text=True, timeout=90)
            left = sorted(str(p.relative_to(disk)) for p in disk.rglob("*"))
    else:  # the largest file a solo run writes no longer fits
        largest = max(p.stat().st_size for p in solo_to.parent.rglob("*") if p.is_file())

        def limit() -> None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (largest // 2, largest // 2))

        to.mkdir(parents=True)
        done = subprocess.run(
            [str(SCRIPT), *args], env=console_env(), capture_output=True, text=True, timeout=90, preexec_fn=limit
        )
        left = sorted(str(p.relative_to(disk)) for p in disk.rglob("*"))
    output = done.stdout + done.stderr
    assert "Traceback" not in output, output
    assert done.returncode == 3, f"a full disk is an I/O error (exit 3), not exit {done.returncode}:\n{output}"
    error = json.loads(done.stdout)
    assert error["category"] == "storage", error
    assert str(to) in error["error"], f"the error names no path under the output {to}: {error['error']!r}"
    assert left == [to.name], f"left on the full disk: {left}"
    assert snapshot(layout.root) == source
