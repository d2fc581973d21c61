"""A written checkpoint names only files that exist: a moved source's shared files are named where they are.

The source is a real RocksDB-incremental checkpoint (Flink 2.3.0 and 1.12.5) whose job directory was moved: its
``_metadata`` names the shared SST files under a directory that does not exist on this machine, and spillway finds
them by their place in the job directory. Every writing command must write an output whose files all exist
without any ``--rebase`` (checked by ``spillway validate`` of the output, and by listing each absolute file the
output names), or write nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.console import spillway
from support.fixtures import fixture_named
from support.written import moved_job

from spillway.formats.metadata_codec import decode_metadata
from spillway.model.checkpoint import is_file_backed
from spillway.model.walk import all_stream_handles

pytestmark = pytest.mark.timeout(300)


def absolute_names(out: Path) -> list[str]:
    cp = decode_metadata((out / "_metadata").read_bytes())
    return sorted({h.file_name for _, h in all_stream_handles(cp) if is_file_backed(h) and not h.relative})


def local(name: str) -> str:
    return name[len("file:") :] if name.startswith("file:") else name


def assert_restorable_here(out: Path, job: Path) -> None:
    names = absolute_names(out)
    assert names, "the fixture's output keeps the shared SST files by absolute path"
    for name in names:
        assert os.path.isfile(local(name)), f"{name}: named by the output, not on this machine"
        assert Path(local(name)).resolve().is_relative_to(job.resolve()), name
    check = spillway("validate", str(out), "--json")
    assert check.code == 0, check.output
    doc = json.loads(check.out)
    assert doc["summary"]["error"] == 0 and doc["rebased"] == [], check.out


@pytest.mark.parametrize(
    ("fixture", "master"),
    [("2.3.0-rocksdb-incremental", "inprocess"), ("2.0.0-rocksdb-incremental", "inprocess"),
     ("2.3.0-rocksdb-incremental", "local[2]")],
)  # fmt: skip
def test_rescale_of_a_moved_job_names_its_shared_files_where_they_are(
    tmp_path: Path, fixture: str, master: str
) -> None:
    chk, gone = moved_job(tmp_path, fixture)
    out = tmp_path / "out"
    plan = fixture_named(fixture).root / "plan.json"
    done = spillway(
        "rescale", str(chk), "--plan", str(plan), "-p", "len=3", "--out", str(out), "--master", master, "--json"
    )
    assert done.code == 0, done.output
    assert any("where the files are now" in n for n in json.loads(done.out)["notes"])
    assert not any(gone in n for n in absolute_names(out))
    assert_restorable_here(out, chk.parent)


@pytest.mark.parametrize(
    "fixture", ["2.3.0-rocksdb-incremental", "1.12.5-rocksdb-incremental", "1.10.3-rocksdb-incremental"]
)
@pytest.mark.parametrize(
    "command",
    [["repair", "strip-channel-state", "--force"], ["repair", "drop-operator", "--operator", "tostr"]],
    ids=["strip", "drop"],
)
def test_repairs_of_a_moved_job_name_its_shared_files_where_they_are(
    tmp_path: Path, command: list[str], fixture: str
) -> None:
    chk, gone = moved_job(tmp_path, fixture)
    out = tmp_path / "out"
    plan = fixture_named(fixture).root / "plan.json"
    done = spillway(*command, str(chk), "--plan", str(plan), "--out", str(out), "--json")
    assert done.code == 0, done.output
    pinned = [c for c in json.loads(done.out)["changes"] if "where the files are now" in c["what"]]
    assert pinned and pinned[0]["count"] > 0, done.out
    assert not any(gone in n for n in absolute_names(out))
    assert_restorable_here(out, chk.parent)


def test_without_pinning_the_check_refuses_and_nothing_is_published(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reference check stands on its own: with pinning switched off the output would name the old paths,
    and the rescale is refused before the rename, leaving nothing at --out and no staging."""
    from spillway.errors import SpillwayError
    from spillway.inspect.topology import load_plan
    from spillway.rescale import rescale as rescale_module
    from spillway.storage.load import load_checkpoint
    from spillway.storage.pinning import Pinned

    chk, gone = moved_job(tmp_path, "2.3.0-rocksdb-incremental")
    monkeypatch.setattr(rescale_module, "pin_found_paths", lambda cp, loaded: Pinned(cp))
    out = tmp_path / "out"
    plan = load_plan(fixture_named("2.3.0-rocksdb-incremental").root / "plan.json")
    with pytest.raises(SpillwayError, match="self-check") as refused:
        rescale_module.rescale(load_checkpoint(chk), plan, {"len": 3}, out, master=None)
    assert gone in str(refused.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["moved"]
