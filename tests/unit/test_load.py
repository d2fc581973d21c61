"""Opening a checkpoint the way every command does (spillway/storage/load.py): a job directory's newest readable
``chk-N``, the damaged newer ones reported; rebase rules that match nothing; the files referenced and missing.

The job directories are copies of real fixtures with more ``chk-N`` beside Flink's; expected counts come from the
files Flink wrote (the fixture's tree and Flink's own decode of ``_metadata``, oracle.json)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from support.fixtures import fixture_named, flink_files

from spillway import notices, progress
from spillway.formats.errors import CheckpointFormatError
from spillway.storage.load import Damaged, job_checkpoints, load_checkpoint, load_newest_readable, unmatched_rules
from spillway.storage.locate import Rebase

FIXTURE = "2.3.0-unaligned"  # one relative channel-state file per subtask, inside chk-N
KEYED = "1.10.3-aligned"  # absolute files inside chk-3 (keyed state of `slow`)


def _job(tmp_path: Path, name: str = FIXTURE) -> tuple[Path, Path]:
    """A copy of the fixture's job directory and its chk-N."""
    fx = fixture_named(name)
    root = tmp_path / fx.name
    shutil.copytree(fx.root, root)
    chk = root / fx.info["checkpoint"]
    return chk.parent, chk


def _another(chk: Path, number: int, metadata: bytes | None = None) -> Path:
    """chk-``number`` beside ``chk``: a copy of it, its ``_metadata`` replaced by ``metadata`` if given."""
    other = chk.parent / f"chk-{number}"
    shutil.copytree(chk, other)
    if metadata is not None:
        (other / "_metadata").write_bytes(metadata)
    return other


def _number(chk: Path) -> int:
    return int(chk.name.removeprefix("chk-"))


def test_a_damaged_newest_checkpoint_gives_the_newest_readable_and_says_so(tmp_path: Path) -> None:
    job, chk = _job(tmp_path)
    n = _number(chk)
    newer = _another(chk, n + 1, b"\x00\x00\x00\x01 not a checkpoint")
    newest = _another(chk, n + 2, (chk / "_metadata").read_bytes()[:40])
    loaded, damaged = load_newest_readable(job)
    assert loaded.location.metadata_path == chk / "_metadata"
    assert loaded.location.note == f"picked the newest readable of 3 checkpoints: {chk.name} (2 newer damaged)"
    assert [d.checkpoint for d in damaged] == [str(newest), str(newer)]  # newest first, as they were tried
    assert all(d.error for d in damaged)
    assert damaged[0].to_json() == {"checkpoint": str(newest), "error": damaged[0].error}


def test_a_readable_newest_checkpoint_is_picked_with_no_damage(tmp_path: Path) -> None:
    job, chk = _job(tmp_path)
    newest = _another(chk, _number(chk) + 1)
    loaded, damaged = load_newest_readable(job)
    assert (loaded.location.metadata_path, damaged) == (newest / "_metadata", [])
    assert loaded.location.note == f"picked the newest of 2 checkpoints: {newest.name}"


def test_when_no_checkpoint_decodes_the_newest_ones_error_is_raised(tmp_path: Path) -> None:
    job, chk = _job(tmp_path)
    (chk / "_metadata").write_bytes(b"\x00\x00\x00\x01 not a checkpoint")
    newest = _another(chk, _number(chk) + 1, b"")
    with pytest.raises(CheckpointFormatError) as raised:
        load_newest_readable(job)
    with pytest.raises(CheckpointFormatError) as alone:
        load_checkpoint(newest)
    assert str(raised.value) == str(alone.value)


def test_one_checkpoint_or_a_chk_dir_loads_as_named(tmp_path: Path) -> None:
    job, chk = _job(tmp_path)
    loaded, damaged = load_newest_readable(job)
    assert (loaded.location.metadata_path, loaded.location.note, damaged) == (chk / "_metadata", None, [])
    newer = _another(chk, _number(chk) + 1, b"")
    loaded, damaged = load_newest_readable(chk)  # a chk-N: that one, whatever is beside it
    assert (loaded.location.metadata_path, damaged) == (chk / "_metadata", [])
    assert job_checkpoints(chk) == [] and job_checkpoints(chk / "_metadata") == []
    assert job_checkpoints(job) == [str(chk), str(newer)]
    assert job_checkpoints(f"file:{job}") == [str(chk), str(newer)]  # as Flink names a local path


def test_a_local_checkpoint_may_be_named_as_flink_names_it(tmp_path: Path) -> None:
    _, chk = _job(tmp_path)
    for spelled in (f"file:{chk}", f"file://{chk}"):
        assert load_checkpoint(spelled).location.metadata_path == chk / "_metadata"


def test_survey_counts_the_files_flink_named_and_those_missing(tmp_path: Path) -> None:
    _, chk = _job(tmp_path)
    absolute, relative = flink_files(FIXTURE)
    assert relative and not absolute
    assert load_checkpoint(chk).survey_files() == (len(relative), 0)
    gone = sorted(relative)[0]
    (chk / gone).unlink()
    assert load_checkpoint(chk).survey_files() == (len(relative), 1)


def test_survey_and_resolve_cover_absolute_files_too(tmp_path: Path) -> None:
    _, chk = _job(tmp_path, KEYED)
    absolute, relative = flink_files(KEYED)
    assert absolute and not relative
    loaded = load_checkpoint(chk)
    assert loaded.survey_files() == (len(absolute), 0)
    resolved = load_checkpoint(chk).resolve_files()
    assert set(resolved) == absolute
    assert all(r.local is not None and r.local.is_file() and r.local.parent == chk for r in resolved.values())


def test_a_rebase_rule_matching_no_path_is_named(tmp_path: Path) -> None:
    _, chk = _job(tmp_path, KEYED)
    absolute, _ = flink_files(KEYED)
    flink_dir = sorted(absolute)[0].rpartition("/")[0]  # where Flink wrote the checkpoint
    used, unused = f"{flink_dir}={chk}", "/nowhere/at/all=/tmp"
    with notices.collecting() as warnings:
        loaded = load_checkpoint(chk, [used, unused])
    assert loaded.unmatched_rebase == [unused]
    assert len(warnings) == 1 and unused in warnings[0] and str(chk / "_metadata") in warnings[0]
    with notices.collecting() as warnings:
        assert load_checkpoint(chk, [used]).unmatched_rebase == []
    assert warnings == []
    assert unmatched_rules(loaded.checkpoint, []) == []
    assert unmatched_rules(loaded.checkpoint, [Rebase.parse(unused), Rebase.parse(unused + "2")]) == [
        unused,
        unused + "2",
    ]


def test_a_rule_matching_only_the_file_merging_directories_matches() -> None:
    """File-merging operator state names its directories (no handle opens them): a rule for them is not unused."""
    fx = fixture_named("1.20.3-file-merging")
    loaded = load_checkpoint(fx.checkpoint_dir)
    oracle = (fx.root / "oracle.json").read_text()
    dirs = sorted({d for key in ("shared_dir", "task_owned_dir") for d in _values(json.loads(oracle), key)})
    absolute, _ = flink_files(fx.name)
    only_named = [d for d in dirs if not any(p.startswith(d) for p in absolute)]  # no file of the checkpoint in it
    assert only_named
    for d in only_named:
        assert unmatched_rules(loaded.checkpoint, [Rebase.parse(f"{d}=/elsewhere")]) == []


def _values(node: Any, key: str) -> list[str]:
    if isinstance(node, dict):
        return [v for k, v in node.items() if k == key and isinstance(v, str)] + [
            x for v in node.values() for x in _values(v, key)
        ]
    if isinstance(node, list):
        return [x for v in node for x in _values(v, key)]
    return []


def test_damaged_is_said_as_json() -> None:
    assert Damaged("chk-9", "bad").to_json() == {"checkpoint": "chk-9", "error": "bad"}


def test_of_two_checkpoints_a_damaged_newest_is_passed_over_with_its_own_error(tmp_path: Path) -> None:
    job, chk = _job(tmp_path)
    newest = _another(chk, _number(chk) + 1, b"\x00\x00\x00\x01 not a checkpoint")
    with pytest.raises(CheckpointFormatError) as alone:
        load_checkpoint(newest)
    loaded, damaged = load_newest_readable(job)
    assert loaded.location.metadata_path == chk / "_metadata"
    assert damaged == [Damaged(str(newest), str(alone.value))]


def test_the_rebase_rules_apply_to_whichever_checkpoint_is_picked(tmp_path: Path) -> None:
    job, chk = _job(tmp_path, KEYED)
    unused = "/nowhere/at/all=/tmp"
    assert load_newest_readable(job, [unused])[0].unmatched_rebase == [unused]  # one checkpoint
    _another(chk, _number(chk) + 1, b"")
    loaded, damaged = load_newest_readable(job, [unused])  # several: the newest readable
    assert len(damaged) == 1 and loaded.unmatched_rebase == [unused]


def test_every_missing_file_is_counted(tmp_path: Path) -> None:
    _, chk = _job(tmp_path, "1.11.4-unaligned")  # three relative channel-state files
    _, relative = flink_files("1.11.4-unaligned")
    assert len(relative) >= 2
    for gone in sorted(relative)[:2]:
        (chk / gone).unlink()
    assert load_checkpoint(chk).survey_files() == (len(relative), 2)


def test_spillways_own_rules_are_applied_never_shown_nor_warned_about(tmp_path: Path) -> None:
    _, chk = _job(tmp_path, KEYED)
    absolute, _ = flink_files(KEYED)
    flink_dir = sorted(absolute)[0].rpartition("/")[0]
    with notices.collecting() as warnings:
        loaded = load_checkpoint(chk, internal=[f"{flink_dir}={chk}", "/nowhere/at/all=/tmp"])
    assert warnings == [] and loaded.unmatched_rebase == []
    resolved = loaded.resolve_files()
    assert set(resolved) == absolute and all(r.local is not None and r.local.parent == chk for r in resolved.values())
    assert loaded.resolver.rebases() == []  # spillway's own: applied, not shown
    shown = load_checkpoint(chk, [f"{flink_dir}={chk}"])
    shown.resolve_files()
    assert shown.resolver.rebases() == [{"from": flink_dir, "to": str(chk), "paths": len(absolute)}]


def test_a_path_that_is_no_local_path_holds_no_checkpoints() -> None:
    assert job_checkpoints("not a scheme://x") == []


class _Recorded:
    """A progress listener that keeps what each stage said."""

    def __init__(self) -> None:
        self.stages: list[list[object]] = []

    def stage(self, description: str, total: int | None, unit: str) -> _Recorded:
        self.stages.append([description, total, unit])
        return self

    def advance(self, n: int = 1) -> None:
        self.stages[-1].append(("advance", n))

    def update(self, completed: int, total: int | None = None) -> None:
        self.stages[-1].append(("update", completed))

    def done(self) -> None:
        self.stages[-1].append("done")


def test_decoding_is_one_stage_of_the_metadatas_bytes() -> None:
    fx = fixture_named(FIXTURE)
    size = fx.metadata.stat().st_size
    seen = _Recorded()
    with progress.listening(seen):
        load_checkpoint(fx.checkpoint_dir)
    assert seen.stages == [["decoding _metadata", size, "bytes", ("update", size), "done"]]


def test_a_metadata_that_does_not_decode_is_named_in_the_error(tmp_path: Path) -> None:
    chk = tmp_path / "chk-1"
    chk.mkdir()
    (chk / "_metadata").write_bytes(b"\x00\x00\x00\x01 not a checkpoint")
    with pytest.raises(CheckpointFormatError) as raised:
        load_checkpoint(chk)
    assert str(raised.value).startswith(f"{chk / '_metadata'}: byte 0 ")
