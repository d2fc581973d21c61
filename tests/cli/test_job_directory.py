"""A job directory with a damaged ``chk-N`` (issue 21, item 4): ``dump`` and ``files`` report that one
checkpoint as damaged (exit 1) and still answer for the others.

The job directory: the fixture's ``chk-3`` copied as ``chk-2`` and ``chk-3``, and a ``chk-4`` whose
``_metadata`` is the first 100 bytes of the real one (a truncated write). Expected operators come from
``oracle.json``, expected files from the fixture's directory. Runs the installed console script.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from support.console import spillway
from support.fixtures import Fixture, fixture_named

FIXTURE = "2.3.0-unaligned"


def damaged_job(fx: Fixture, root: Path) -> Path:
    job = root / fx.info["job_id"]
    for name in ("chk-2", "chk-3", "chk-4"):
        shutil.copytree(fx.checkpoint_dir, job / name)
    (job / "chk-4" / "_metadata").write_bytes(fx.metadata.read_bytes()[:100])
    return job


def oracle_operator_ids(fx: Fixture) -> list[str]:
    return sorted(op["operator_id"] for op in json.loads(fx.oracle.read_text())["operators"])


def own_files(fx: Fixture) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in fx.checkpoint_dir.iterdir() if p.name != "_metadata"}


def test_dump_passes_over_the_damaged_newest_checkpoint(tmp_path: Path) -> None:
    fx = fixture_named(FIXTURE)
    job = damaged_job(fx, tmp_path)
    run = spillway("dump", str(job), "--json")
    assert run.code == 1, run.output
    doc = json.loads(run.out)
    assert doc["source"]["metadata_path"] == str(job / "chk-3" / "_metadata")
    assert sorted(op["operator_id"] for op in doc["operators"]) == oracle_operator_ids(fx)
    [damaged] = doc["source"]["damaged"]
    assert damaged["checkpoint"] == str(job / "chk-4")
    assert damaged["error"].startswith(str(job / "chk-4" / "_metadata") + ": byte ")
    assert f"{job / 'chk-4'}: damaged" in run.err

    text = spillway("dump", str(job))
    assert text.code == 1
    assert "picked the newest readable of 3 checkpoints: chk-3 (1 newer damaged)" in text.out


def test_files_answers_for_every_readable_checkpoint(tmp_path: Path) -> None:
    fx = fixture_named(FIXTURE)
    job = damaged_job(fx, tmp_path)
    run = spillway("files", str(job), "--json")
    assert run.code == 1, run.output
    doc = json.loads(run.out)
    assert [c["directory"] for c in doc["checkpoints"]] == ["chk-2", "chk-3"]
    assert [d["checkpoint"] for d in doc["damaged"]] == [str(job / "chk-4")]
    assert doc["missing"] == []
    for i, chk in enumerate(("chk-2", "chk-3")):
        mine = {Path(f["path"]).name: f["size"] for f in doc["files"] if i in f["checkpoints"]}
        assert mine == own_files(fx), chk
    assert f"{job / 'chk-4'}: damaged, left out" in run.err


def test_every_checkpoint_damaged_is_the_error_itself(tmp_path: Path) -> None:
    fx = fixture_named(FIXTURE)
    job = damaged_job(fx, tmp_path)
    for name in ("chk-2", "chk-3"):
        (job / name / "_metadata").write_bytes(fx.metadata.read_bytes()[:100])
    for command in ("dump", "files"):
        run = spillway(command, str(job))
        assert run.code == 1
        lines = [line for line in run.err.splitlines() if line.startswith("error:")]
        assert len(lines) == 1 and "_metadata: byte " in lines[0], run.err
