"""Special files and damaged sources: no hang, no traceback, nothing written that looks complete.

Built from a real 2.3.0 checkpoint; each case failed (hung or wrote a checkpoint) before its fix."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.fixtures import fixture_named

from spillway.cli.app import app

FX = fixture_named("2.3.0-unaligned")


def _copy(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "fx"
    shutil.copytree(FX.root, root)
    chk = root / FX.info["checkpoint"]
    channel_file = next(p for p in chk.iterdir() if p.name != "_metadata" and p.is_file())
    return root, channel_file


def _run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, list(args))
    assert "Traceback" not in res.output
    return res.exit_code, res.output


def _commands(root: Path, out: Path) -> dict[str, list[str]]:
    chk, plan = str(root / "checkpoints"), str(root / "jobgraph.json")
    return {
        "validate": ["validate", chk, "--plan", plan],
        "analyze": ["analyze", chk, "--plan", plan],
        "rescale": [
            "rescale",
            chk,
            "--plan",
            plan,
            "-p",
            "slow=3",
            "--key",
            "slow=string",
            "--master",
            "inprocess",
            "--out",
            str(out),
        ],
        "strip": ["repair", "strip-channel-state", chk, "--out", str(out)],
        "relocate": ["repair", "relocate", chk, "--from", "file:/nowhere", "--to", "file:/else", "--out", str(out)],
    }


@pytest.mark.parametrize("command", ["validate", "analyze", "rescale", "strip", "relocate"])
def test_a_fifo_in_place_of_a_channel_file_is_refused_without_opening(tmp_path: Path, command: str) -> None:
    root, channel_file = _copy(tmp_path)
    channel_file.unlink()
    os.mkfifo(channel_file)
    out = tmp_path / "out"
    code, output = _run(*_commands(root, out)[command])  # a hang here fails the suite's timeout
    assert code == 1, output
    assert "named pipe" in output or "not readable" in output
    assert not out.exists()


@pytest.mark.parametrize("command", ["validate", "analyze", "rescale", "strip"])
def test_a_symlink_loop_is_a_clean_error(tmp_path: Path, command: str) -> None:
    root, channel_file = _copy(tmp_path)
    channel_file.unlink()
    loop = channel_file.with_name("loop")
    os.symlink(channel_file.name, loop)
    os.symlink(loop.name, channel_file)
    out = tmp_path / "out"
    code, output = _run(*_commands(root, out)[command])
    assert code == 1, output
    assert not out.exists()


def test_force_writes_a_damaged_source_and_lists_the_damage(tmp_path: Path) -> None:
    root, channel_file = _copy(tmp_path)
    channel_file.write_bytes(channel_file.read_bytes()[:100])  # truncated
    out = tmp_path / "out"
    code, output = _run("repair", "strip-channel-state", str(root / "checkpoints"), "--out", str(out))
    assert code == 1 and "validate errors" in output and not out.exists()
    code, output = _run("repair", "strip-channel-state", str(root / "checkpoints"), "--out", str(out), "--force")
    assert code == 0, output
    assert "source damage kept (--force)" in output and (out / "_metadata").is_file()


def test_rescale_refuses_a_source_with_a_damaged_channel_file(tmp_path: Path) -> None:
    root, channel_file = _copy(tmp_path)
    data = bytearray(channel_file.read_bytes())
    data[0:4] = b"\x00\x00\x00\x63"  # unknown header version
    channel_file.write_bytes(bytes(data))
    out = tmp_path / "out"
    code, output = _run(*_commands(root, out)["rescale"])
    assert code == 1 and "validate errors" in output
    assert not out.exists() and not any(p.name.startswith(".out") for p in tmp_path.iterdir())
