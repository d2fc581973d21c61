"""Writes confined to the output, one writer per output, nothing left behind — through the installed console
script, on a real Flink 1.10 checkpoint (absolute file paths, shared/ files) moved with relocate --copy-data.

A sentinel directory outside the output holds what a crafted handle path points at; each test checks it is
byte-identical afterwards (and still there: a clean-up once deleted the file the source references)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from support.console import ROOT, SCRIPT, spillway
from support.fixtures import fixture_named
from support.written import local_job

from spillway.formats.metadata_codec import decode_metadata, encode_metadata
from spillway.model.checkpoint import StreamHandle, StreamLeaf, is_file_backed
from spillway.model.walk import transform_stream_handles

FX = fixture_named("1.10.3-rocksdb-incremental")
JOB = FX.info["job_id"]
CHK = FX.checkpoint_dir.name


def _tree(root: Path) -> dict[str, bytes | str]:
    found: dict[str, bytes | str] = {}
    for p in sorted(root.rglob("*")) if root.exists() else []:
        found[str(p.relative_to(root))] = (
            f"-> {os.readlink(p)}" if p.is_symlink() else "dir" if p.is_dir() else p.read_bytes()
        )
    return found


def _crafted(src: Path, to_outside: Path) -> Path:
    """Point one shared file's handle at ``to_outside`` through ``..`` components from inside the job
    (``SRC/JOB/CHK/../../../…``), keeping the same bytes there: the checkpoint reads the same data."""
    meta = src / CHK / "_metadata"
    cp = decode_metadata(meta.read_bytes(), str(meta))
    done: list[str] = []

    def fix(h: StreamLeaf) -> StreamHandle:
        if done or not is_file_backed(h) or h.relative or "/shared/" not in h.file_name:
            return h
        real = Path(h.file_name.removeprefix("file:"))
        to_outside.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(real, to_outside)
        ups = "/".join([".."] * 3)  # CHK/.. = JOB, JOB/.. = src, src/.. = base
        crafted = f"file:{src}/{CHK}/{ups}/{to_outside.relative_to(src.parent.parent)}"
        done.append(crafted)
        return h.with_file_name(crafted)

    transform_stream_handles(cp, fix)
    assert done, "the fixture has shared files"
    meta.write_bytes(encode_metadata(cp))
    return to_outside


def _relocate(src: Path, new: Path, *extra: str) -> list[str]:
    return ["repair", "relocate", str(src / CHK), "--out", str(new / CHK), "--from", f"file:{src}",
            "--to", f"file:{new}", "--copy-data", *extra]  # fmt: skip


def test_a_dotdot_handle_path_cannot_make_copy_data_write_or_delete_outside_to(tmp_path: Path) -> None:
    src = local_job(tmp_path, FX)
    victim = _crafted(src, tmp_path / "victim" / "state-1")  # SRC/JOB/CHK/../../../victim/state-1
    before = _tree(tmp_path / "victim")
    new = tmp_path / "new" / JOB  # NEW/JOB/CHK/../../../victim/state-1 is the same outside file
    run = spillway(*_relocate(src, new, "--force"))
    assert run.code != 0, run.output  # refused (the copy would land outside --to), never "self-check passed"
    assert "../../../victim/state-1" in run.err and run.err.count("\n") == 1, run.err  # one line naming it
    assert _tree(tmp_path / "victim") == before and victim.is_file()
    assert _tree(tmp_path / "new") == {}, "nothing written under --to, no --out, no claim or staging left"


def test_a_symlink_planted_in_the_destination_tree_is_not_followed(tmp_path: Path) -> None:
    src = local_job(tmp_path, FX)
    sentinel = tmp_path / "sentinel"
    sentinel.mkdir()
    (sentinel / "keep").write_bytes(b"not spillway's")
    new = tmp_path / "new" / JOB
    new.mkdir(parents=True)
    (new / "shared").symlink_to(sentinel)  # the copies of shared/ files would land in the sentinel
    before = _tree(sentinel)
    run = spillway(*_relocate(src, new))
    assert run.code == 1 and "outside" in run.err, run.output
    assert _tree(sentinel) == before
    assert _tree(tmp_path / "new") == {JOB: "dir", f"{JOB}/shared": f"-> {sentinel}"}


def _leftovers(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if ".spillway" in p.name)


def test_two_runs_into_one_output_one_wins_and_the_loser_touches_nothing(tmp_path: Path) -> None:
    src = local_job(tmp_path, FX)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for trial in range(4):
        new = tmp_path / f"new{trial}" / JOB
        procs = [
            subprocess.Popen([str(SCRIPT), *_relocate(src, new)], env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for _ in range(2)
        ]  # fmt: skip
        results = [(p.wait(timeout=120), p.stderr.read() if p.stderr else "") for p in procs]
        codes = sorted(code for code, _ in results)
        assert codes[0] == 0 and codes[1] != 0, results
        loser = next(err for code, err in results if code != 0)
        assert "is writing it" in loser or "already exists" in loser, loser
        assert _leftovers(tmp_path / f"new{trial}") == []
        check = spillway("validate", str(new / CHK))
        assert check.code == 0, check.output


@pytest.mark.parametrize(
    ("sig", "codes"), [(signal.SIGINT, (130, -signal.SIGINT)), (signal.SIGTERM, (143, -signal.SIGTERM))]
)
def test_ctrl_c_or_sigterm_during_copy_data_leaves_nothing(sig: int, codes: tuple[int, int], tmp_path: Path) -> None:
    """The signal as soon as the run has claimed its output (its lock appears), a little later each time: exit
    130 (143 for SIGTERM) and nothing under --to; or, if the run had published already, a complete output.
    (Killed by the signal itself: it came after the command's own handling; shells show 130/143 too.)"""
    src = local_job(tmp_path, FX)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    interrupted = 0
    for trial in range(6):
        new = tmp_path / f"new{trial}" / JOB
        lock = new / f".{CHK}.spillway.lock"
        proc = subprocess.Popen([str(SCRIPT), *_relocate(src, new)], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
        deadline = time.monotonic() + 60
        while not lock.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.001)
        if proc.poll() is None:
            time.sleep(0.01 * trial)  # a little later into the copies each time
            proc.send_signal(sig)
        code = proc.wait(timeout=60)
        err = proc.stderr.read() if proc.stderr else ""
        if (new / CHK / "_metadata").exists():
            # Published before the signal (it may still have come, while the report was printed): complete.
            assert _leftovers(tmp_path / f"new{trial}") == [], err
            assert spillway("validate", str(new / CHK)).code == 0
            continue
        interrupted += 1
        assert code in codes, err
        assert not (tmp_path / f"new{trial}").exists(), _tree(tmp_path / f"new{trial}")
    assert interrupted, "at least one run was interrupted while it worked"


def test_after_kill_9_a_rerun_clears_the_dead_runs_leftovers_says_so_and_succeeds(tmp_path: Path) -> None:
    src = local_job(tmp_path, FX)
    source_before = _tree(src)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    killed = cleared = 0
    for trial in range(6):
        new = tmp_path / f"new{trial}" / JOB
        lock = new / f".{CHK}.spillway.lock"
        proc = subprocess.Popen([str(SCRIPT), *_relocate(src, new)], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        deadline = time.monotonic() + 60
        while not lock.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.001)
        time.sleep(0.01 * trial)
        proc.kill()
        proc.wait(timeout=60)
        if (new / CHK / "_metadata").exists():
            continue  # it had published: nothing to clear
        killed += 1
        assert not (new / CHK).exists(), "nothing at the final path unless complete"
        stale = lock.exists() and lock.stat().st_size > 0  # killed holding a claim that names it
        rerun = spillway(*_relocate(src, new))
        assert rerun.code == 0, rerun.output
        if stale:
            cleared += 1
            assert "warning:" in rerun.err and "a stale claim of a spillway run that is gone" in rerun.err, rerun.err
        assert _leftovers(tmp_path / f"new{trial}") == []
        assert spillway("validate", str(new / CHK)).code == 0
    assert killed and cleared, (killed, cleared)
    assert _tree(src) == source_before, "the source is byte-identical"


def test_a_full_disk_is_an_io_error_naming_the_output_file_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 2.3.0-unaligned checkpoint's ~600 KiB of channel state copied into an output on a 200 KiB tmpfs (as
    root, through the console script), else with ENOSPC injected at the writer's one low-level write."""
    fx = fixture_named("2.3.0-unaligned")
    disk = tmp_path / "disk"
    disk.mkdir()
    args = ["repair", "relocate", str(fx.checkpoint_dir), "--out", str(disk / "o"), "--from", "/nowhere",
            "--to", "/elsewhere", "--json"]  # fmt: skip
    mounted = (
        os.geteuid() == 0
        and subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(disk)]).returncode == 0
    )
    try:
        if mounted:
            run = spillway(*args)
            code, out, err = run.code, run.out, run.err
        else:
            from click.testing import CliRunner

            from spillway.cli.app import app
            from spillway.storage import guard

            written: list[int] = []

            def write_all(fd: int, data: bytes) -> None:
                written.append(len(data))
                if sum(written) > 200 << 10:
                    raise OSError(28, "No space left on device")
                os.write(fd, data)

            monkeypatch.setattr(guard, "write_all", write_all)
            res = CliRunner().invoke(app, args)
            code, out, err = res.exit_code, res.stdout, res.output
        doc = json.loads(out.splitlines()[0])
        assert code == 3 and (doc["category"], doc["kind"]) == ("storage", "OutputIOError"), out + err
        name = doc["error"].split(": cannot write: ")[0]
        assert Path(name).parent == disk / "o" and (fx.checkpoint_dir / Path(name).name).is_file(), doc
        assert doc["error"].endswith(": cannot write: No space left on device (errno 28); nothing was left behind")
        assert list(disk.iterdir()) == [], "nothing partial, no claim"
    finally:
        if mounted:
            subprocess.run(["umount", str(disk)], check=True)
