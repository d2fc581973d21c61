"""``relocate --copy-data``'s destination root (``--to``) is an output too: claimed by one run at a time, a
dead run's copies there cleared by the next run whatever its ``--out``, and no copy at a final name before
the output referencing it has passed its self-check. Through the console script, on the real Flink 1.10
checkpoint (absolute file paths, shared/ files), with each run's ``--out`` outside ``--to``."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from support.console import ROOT, SCRIPT, spillway
from support.fixtures import fixture_named
from support.written import local_job

from spillway.formats.metadata_codec import decode_metadata
from spillway.model.checkpoint import is_file_backed
from spillway.model.walk import leaf_stream_handles

FX = fixture_named("1.10.3-rocksdb-incremental")
JOB = FX.info["job_id"]
CHK = FX.checkpoint_dir.name
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _relocate(src: Path, out: Path, to: Path) -> list[str]:
    return ["repair", "relocate", str(src / CHK), "--out", str(out), "--from", f"file:{src}", "--to", f"file:{to}",
            "--copy-data"]  # fmt: skip


def _referenced(out: Path) -> set[Path]:
    """Every absolute file the output's _metadata names, as local paths (Flink writes them ``file:/x``)."""
    meta = out / "_metadata"
    cp = decode_metadata(meta.read_bytes(), str(meta))
    return {
        Path(h.file_name.removeprefix("file:")) for h in leaf_stream_handles(cp) if is_file_backed(h) and not h.relative
    }


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if not p.is_dir()} if root.exists() else set()


def _claimed(lock: Path) -> bool:
    """The lock names its run (written once the run holds it; the file alone may predate the hold)."""
    try:
        return lock.stat().st_size > 0
    except FileNotFoundError:
        return False


def _wait_for(lock: Path, proc: subprocess.Popen[str]) -> bool:
    deadline = time.monotonic() + 60
    while not _claimed(lock) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.0005)
    return proc.poll() is None and _claimed(lock)


def _holding_to(src: Path, out: Path, to: Path) -> subprocess.Popen[str] | None:
    """A copy-data run stopped (SIGSTOP) while it holds ``to``'s claim; None if it finished before that."""
    lock = to.parent / f".{to.name}.spillway.lock"
    for _ in range(5):
        proc = subprocess.Popen([str(SCRIPT), *_relocate(src, out, to)], env=ENV, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        if _wait_for(lock, proc):
            proc.send_signal(signal.SIGSTOP)
            if _claimed(lock):
                return proc
            proc.send_signal(signal.SIGCONT)
        proc.wait(timeout=120)
        subprocess.run(["rm", "-rf", str(out), str(to)], check=True)
    return None


def test_two_runs_with_different_outputs_into_one_to_the_second_is_refused_and_the_first_output_is_whole(
    tmp_path: Path,
) -> None:
    src = local_job(tmp_path, FX)
    to = tmp_path / "new" / JOB
    first_out, second_out = tmp_path / "o1" / CHK, tmp_path / "o2" / CHK
    first = _holding_to(src, first_out, to)
    assert first is not None, "the first run was caught holding --to"
    try:
        second = spillway(*_relocate(src, second_out, to))
    finally:
        first.send_signal(signal.SIGCONT)
    code = first.wait(timeout=120)
    assert code == 0, first.stderr.read() if first.stderr else ""
    assert second.code == 3 and "is writing it" in second.err and f"pid {first.pid}" in second.err, second.output
    assert second.err.count("\n") == 1, second.err  # one line naming the other run
    assert not second_out.exists() and not second_out.parent.exists(), "the refused run left nothing"
    assert spillway("validate", str(first_out)).code == 0
    referenced = _referenced(first_out)
    assert referenced and all(p.is_file() for p in referenced), sorted(p for p in referenced if not p.is_file())
    assert _files(to) == referenced, "nothing under --to but the files the output references"
    assert not any(".spillway" in p.name for p in tmp_path.rglob("*")), "no lock, no staging left"


def test_after_kill_9_a_rerun_into_another_out_clears_the_dead_runs_copies_under_to(tmp_path: Path) -> None:
    src = local_job(tmp_path, FX)
    to = tmp_path / "new" / JOB
    lock = to.parent / f".{to.name}.spillway.lock"
    killed = 0
    for trial in range(4):
        dead_out, out = tmp_path / f"dead{trial}" / CHK, tmp_path / f"o{trial}" / CHK
        proc = subprocess.Popen([str(SCRIPT), *_relocate(src, dead_out, to)], env=ENV, text=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        if _wait_for(lock, proc):
            time.sleep(0.02 * trial)  # a little later into the copies each time
            proc.kill()
        proc.wait(timeout=120)
        if (dead_out / "_metadata").exists():
            subprocess.run(["rm", "-rf", str(dead_out.parent), str(to)], check=True)
            continue  # it had published: its copies are its files
        assert not dead_out.exists(), "nothing at the final path unless complete"
        killed += 1
        left = _files(to)
        rerun = spillway(*_relocate(src, out, to))
        assert rerun.code == 0, rerun.output
        assert "warning:" in rerun.err and "a spillway run that is gone" in rerun.err, (left, rerun.err)
        assert spillway("validate", str(out)).code == 0
        referenced = _referenced(out)
        assert all(p.is_file() for p in referenced)
        assert _files(to) == referenced, "the dead run's staged copies are gone"
        assert not any(".spillway" in p.name for p in to.parent.rglob("*")), "no lock, no staging left by --to"
        subprocess.run(["rm", "-rf", str(out.parent), str(dead_out.parent), str(to)], check=True)
    assert killed, "at least one run was killed before it published"


def test_a_failing_self_check_leaves_nothing_at_any_final_name_under_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check sees the copies only at their staged names (never at a final one), and when it fails nothing
    under --to is left, --to itself included."""
    from click.testing import CliRunner

    from spillway.cli.app import app
    from spillway.repair import workflow
    from spillway.storage.guard import WriteError

    src = local_job(tmp_path, FX)
    to = tmp_path / "new" / JOB
    seen: list[set[Path]] = []
    real = workflow.validated_output

    def failing(*args: object, **kwargs: object) -> object:
        check = real(*args, **kwargs)  # type: ignore[arg-type]

        def refuse(tmp: Path, plan: object) -> object:
            check(tmp, plan)  # type: ignore[arg-type]  # it passes: the staged copies are whole
            seen.append(_files(to))
            raise WriteError("self-check: refused by the test")

        return refuse

    monkeypatch.setattr(workflow, "validated_output", failing)
    res = CliRunner().invoke(app, _relocate(src, tmp_path / "o" / CHK, to))
    assert res.exit_code == 1 and "refused by the test" in res.output, res.output
    assert seen and seen[0], "the check ran with the copies staged"
    assert all(".spillway-" in str(p.relative_to(to)).split("/")[0] for p in seen[0]), sorted(seen[0])
    assert not to.exists() and not (tmp_path / "o").exists(), sorted(_files(tmp_path / "new"))
