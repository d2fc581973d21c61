"""Progress bars on every long command: on stderr, only when stderr is a terminal, and gone when done.
Each command runs in a child process whose stderr is a pseudo-terminal (stdout a pipe), then again with
stderr a pipe (CliRunner), where no bar may appear."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.fixtures import fixture_named

from spillway.cli.app import app

ERASE_LINE = b"\x1b[2K"


def under_pty(args: list[str]) -> tuple[int, bytes, bytes]:
    """Run ``spillway ARGS`` with stderr on a pseudo-terminal: (exit code, stdout, what the terminal got)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS", "TERM")} | {"TERM": "xterm"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "spillway", *args],
        stdout=subprocess.PIPE,
        stderr=slave,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    os.close(slave)
    tty = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        tty += chunk
    os.close(master)
    stdout = proc.stdout.read() if proc.stdout else b""
    return proc.wait(timeout=120), stdout, tty


def _cases(tmp_path: Path) -> list[tuple[list[str], str]]:
    counted = fixture_named("2.3.0-counted")
    sql = fixture_named("2.3.0-sql")
    rocks = fixture_named("2.3.0-rocksdb-incremental")
    old = "file:" + rocks.info["generated_at"] + "/checkpoints/" + rocks.info["job_id"]
    new_job = tmp_path / "new" / rocks.info["job_id"]
    return [
        (
            ["rescale", str(counted.checkpoint_dir), "--plan", str(counted.root / "jobgraph.json"), "-p", "count=3",
             "--key", "count=tuple:0:long", "--master", "inprocess", "--out", str(tmp_path / "rescaled")],
            "rescale: routing old channels",
        ),
        (
            ["repair", "relocate", str(rocks.checkpoint_dir), "--out", str(new_job / rocks.checkpoint_dir.name),
             "--from", old, "--to", f"file:{new_job}", "--copy-data"],
            "copying data (--copy-data)",
        ),
        (
            ["analyze", str(sql.checkpoint_dir), "--plan", str(sql.root / "jobgraph.json"), "--parquet",
             str(tmp_path / "pq"), "--records"],
            "reading channel state",
        ),
        (["dump", str(sql.checkpoint_dir), "--json"], "building the JSON view"),
        (["dump", str(sql.checkpoint_dir), "--tree"], "decoding _metadata"),
        (["validate", str(sql.checkpoint_dir)], "channel-state files"),
    ]  # fmt: skip


def test_progress_bars_on_a_terminal_and_never_in_a_pipe(tmp_path: Path) -> None:
    for i, (args, stage) in enumerate(_cases(tmp_path / "tty")):
        code, stdout, tty = under_pty(args)
        assert code == 0, (args, tty.decode(errors="replace"), stdout)
        assert stage.encode() in tty, f"no '{stage}' bar for {args[:2]}: {tty!r}"
        assert ERASE_LINE in tty, "the bars are not cleared when done (transient)"
        assert b"\x1b[" not in stdout, "progress leaked onto stdout"
        piped_args, _ = _cases(tmp_path / f"pipe{i}")[i]
        res = CliRunner().invoke(app, piped_args)
        assert res.exit_code == 0, res.output
        assert stage not in res.output and "\x1b[" not in res.output, f"a bar in a pipe for {args[:2]}"


@pytest.mark.parametrize("stage", ["rescale: routing old channels"])
def test_no_bars_when_stderr_is_a_file(tmp_path: Path, stage: str) -> None:
    counted = fixture_named("2.3.0-counted")
    with open(tmp_path / "err", "wb") as err:
        res = subprocess.run(
            [sys.executable, "-m", "spillway", "rescale", str(counted.checkpoint_dir), "--plan",
             str(counted.root / "jobgraph.json"), "-p", "count=3", "--key", "count=tuple:0:long",
             "--master", "inprocess", "--out", str(tmp_path / "o")],
            stderr=err, stdout=subprocess.PIPE, timeout=120,
        )  # fmt: skip
    assert res.returncode == 0
    text = (tmp_path / "err").read_text()
    assert stage not in text and "\x1b[" not in text
