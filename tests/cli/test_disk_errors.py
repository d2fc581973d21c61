"""A disk that fails a write (full, or refusing a file that large): the operator's terms, not the checkpoint's.

Through the installed console script, a writing command whose output lies on a file system with no space left
(a 64 KiB tmpfs filled up, when the tests run as root; otherwise the process may not write files larger than a
few KiB, so the same write fails with EFBIG): exit 3 (storage, not "findings": the checkpoint is fine), one
line naming the output (the failed ``write()`` names no file), the ``--json`` error document says "storage",
the source is byte-identical and nothing is left in the output's directory. And the CLI's funnel on its own:
any OSError, with or without a file name, is exit 3 naming a place.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import resource
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from support.console import ROOT, SCRIPT
from support.fixtures import fixture_named

from spillway.cli import output as cli_output
from spillway.cli.common import guarded

EXIT_STORAGE = 3  # docs/cli.md, "Exit codes"
FIXTURE = fixture_named("2.3.0-unaligned")
FILL = "filler"


@contextmanager
def no_space(tmp_path: Path) -> Iterator[tuple[Path, str, object]]:
    """A directory where writing fails, the system's words for it, and how the child process is started."""
    if os.geteuid() != 0:
        # Not root: no mount. A file-size limit makes the same write() fail (EFBIG), also without a file name.
        def small_files() -> None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails instead of killing
            resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))

        directory = tmp_path / "small"
        directory.mkdir()
        yield directory, os.strerror(errno.EFBIG), small_files
        return
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], check=True)
    try:
        with open(mount / FILL, "wb", buffering=0) as filler:  # fill it: the next write of any size fails
            try:
                while True:
                    filler.write(b"\0" * 4096)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
        yield mount, os.strerror(errno.ENOSPC), None
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
    }


@pytest.mark.timeout(120)
@pytest.mark.parametrize("json_out", [False, True])
def test_a_full_disk_is_a_storage_error_naming_the_output(tmp_path: Path, json_out: bool) -> None:
    source = FIXTURE.checkpoint_dir
    before = tree_digest(source)
    with no_space(tmp_path) as (directory, words, preexec):
        out = directory / "moved"
        args = ["repair", "relocate", str(source), "--from", "file:/nowhere", "--to", "file:/x", "--out", str(out)]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        run = subprocess.run(
            [str(SCRIPT), *args, *(["--json"] if json_out else [])],
            env=env,
            capture_output=True,
            text=True,
            timeout=100,
            stdin=subprocess.DEVNULL,
            preexec_fn=preexec,  # type: ignore[arg-type]
        )
        left = sorted(p.name for p in directory.iterdir())
    assert run.returncode == EXIT_STORAGE, run.stdout + run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    # the place that is full: the output, or the copy being written into its staging directory beside it
    assert lines[0].startswith(f"error: {directory}/") and out.name in lines[0] and words in lines[0], lines[0]
    assert str(source) not in lines[0].split(":")[0], lines[0]
    if json_out:
        doc = json.loads(run.stdout)
        assert (doc["schema"], doc["category"], doc["exit_code"]) == ("spillway.error/1", "storage", EXIT_STORAGE)
        assert doc["error"] == lines[0].removeprefix("error: ")
    assert left == ([FILL] if os.geteuid() == 0 else []), left  # no output, no staging directory
    assert tree_digest(source) == before


def funnel(error: OSError, output: object = None) -> tuple[int, str, dict[str, Any]]:
    """What ``guarded`` makes of ``error`` raised by a command body: exit code, stderr and the JSON error document."""
    stdout, stderr = io.StringIO(), io.StringIO()
    cli_output.use(cli_output.Output(stdout, stderr))

    def body() -> int:
        raise error

    try:
        with pytest.raises(SystemExit) as stop:
            guarded(body, json_out=True, output=output)
    finally:
        cli_output.use(None)
    return int(str(stop.value.code)), stderr.getvalue(), json.loads(stdout.getvalue())


ENOSPC = os.strerror(errno.ENOSPC)


@pytest.mark.parametrize(
    ("error", "output", "line"),
    [
        # a failed write() names no file: the command's output is named instead
        (OSError(errno.ENOSPC, ENOSPC), "/data/out", f"/data/out: {ENOSPC} (while writing the output)"),
        # the system named the file: that one
        (
            OSError(errno.ENOSPC, ENOSPC, "/data/out/.x.partial/_metadata"),
            "/data/out",
            f"/data/out/.x.partial/_metadata: {ENOSPC}",
        ),
        (
            PermissionError(errno.EACCES, os.strerror(errno.EACCES), "/data/out"),
            None,
            f"/data/out: {os.strerror(errno.EACCES)}",
        ),
        # a copy that runs out of room: the copy being written, not its source
        (
            OSError(errno.ENOSPC, ENOSPC, "/src/f", None, "/data/.out.partial/f"),
            "/data/out",
            f"/data/.out.partial/f: {ENOSPC} (copying /src/f)",
        ),
        # two files and not a write error: both, as the system gave them
        (
            OSError(errno.ENOENT, os.strerror(errno.ENOENT), "/a/x", None, "/b/y"),
            None,
            f"/a/x -> /b/y: {os.strerror(errno.ENOENT)}",
        ),
        # neither: say so rather than print an empty name
        (OSError(errno.EIO, os.strerror(errno.EIO)), None, f"{os.strerror(errno.EIO)} (the system named no file)"),
    ],
)
def test_every_os_error_is_a_storage_error_naming_a_place(error: OSError, output: object, line: str) -> None:
    code, stderr, doc = funnel(error, output)
    assert code == EXIT_STORAGE
    assert stderr.strip() == f"error: {line}"
    assert (doc["category"], doc["exit_code"], doc["error"], doc["kind"]) == (
        "storage",
        EXIT_STORAGE,
        line,
        type(error).__name__,
    )
