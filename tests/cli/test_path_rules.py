"""``--rebase OLD=NEW`` and ``repair relocate --from/--to`` name a location, not a spelling (issue 21,
item 3): ``/srv/x``, ``file:/srv/x`` and ``file:///srv/x`` are one place; a rule that matches nothing is
said (a warning naming it, in text and --json), and a relocate that rewrites nothing is refused.

Runs the installed console script. Expected paths and sizes come from the fixture's own files
(``fixture.json``: where Flink wrote the checkpoint; ``oracle.json``: Flink's decode; the files on disk).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from support.console import spillway
from support.fixtures import Fixture, fixture_named

from spillway.formats.metadata_codec import decode_metadata
from spillway.model.checkpoint import is_file_backed
from spillway.model.walk import leaf_stream_handles

FIXTURE = "2.3.0-rocksdb-incremental"  # 14 SST files in shared/, named file:/tmp/spillway-fixtures/…


def oracle_paths(fx: Fixture) -> set[str]:
    """Every absolute file path Flink's own decode of the fixture names (FileStateHandle ``path``)."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") in ("FileStateHandle", "SegmentFileStateHandle") and "path" in node:
                found.add(node["path"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(json.loads(fx.oracle.read_text())["operators"])
    return found


def split_job(fx: Fixture, tmp_path: Path) -> tuple[Path, Path]:
    """The chk-N directory in one place and the job's shared/ in another (automatic rebasing cannot
    find shared/ from the chk-N): only an explicit rule reaches the SST files."""
    job = fx.root / "checkpoints" / fx.info["job_id"]
    chk = tmp_path / "a" / fx.checkpoint_dir.name
    shutil.copytree(fx.checkpoint_dir, chk)
    elsewhere = tmp_path / "b"
    shutil.copytree(job / "shared", elsewhere / fx.info["job_id"] / "shared")
    return chk, elsewhere


def shared_sizes(fx: Fixture) -> dict[str, int]:
    shared = fx.root / "checkpoints" / fx.info["job_id"] / "shared"
    return {p.name: p.stat().st_size for p in shared.iterdir()}


def old_prefix(fx: Fixture, spelling: str) -> str:
    local = fx.info["generated_at"] + "/checkpoints"
    return {
        "plain": local,
        "plain/": local + "/",
        "file:": "file:" + local,
        "file://": "file://" + local,
    }[spelling]


def test_the_fixture_names_its_shared_files_with_the_file_scheme() -> None:
    """What the cases below rely on: Flink wrote ``file:/…`` paths (so a plain ``/…`` rule is another spelling)."""
    fx = fixture_named(FIXTURE)
    paths = oracle_paths(fx)
    assert len(paths) == len(shared_sizes(fx)) == 14
    assert all(p.startswith("file:" + fx.info["generated_at"] + "/checkpoints/") for p in paths)


@pytest.mark.parametrize("spelling", ["plain", "plain/", "file:", "file://"])
def test_rebase_matches_any_spelling_of_the_location(spelling: str, tmp_path: Path) -> None:
    fx = fixture_named(FIXTURE)
    chk, elsewhere = split_job(fx, tmp_path)
    rule = f"{old_prefix(fx, spelling)}={elsewhere}"
    run = spillway("files", str(chk), "--rebase", rule, "--json")
    assert run.code == 0, run.output
    doc = json.loads(run.out)
    assert doc["missing"] == []
    found = {Path(f["local"]).name: f["size"] for f in doc["files"] if "/shared/" in (f["local"] or "")}
    assert found == shared_sizes(fx)
    assert doc["checkpoints"][0]["rebase_unmatched"] == []
    assert "warning" not in run.err


def test_without_the_rule_the_shared_files_are_missing(tmp_path: Path) -> None:
    """The control for the case above: the split really hides shared/ from automatic rebasing."""
    fx = fixture_named(FIXTURE)
    chk, _ = split_job(fx, tmp_path)
    run = spillway("files", str(chk), "--json")
    assert run.code == 1
    assert len(json.loads(run.out)["missing"]) == len(shared_sizes(fx))


@pytest.mark.parametrize("json_out", [False, True])
def test_a_rule_that_matches_nothing_is_a_warning_naming_it(json_out: bool, tmp_path: Path) -> None:
    fx = fixture_named(FIXTURE)
    chk, elsewhere = split_job(fx, tmp_path)
    # A prefix of the real one that ends inside a path component: it covers no path.
    partial = fx.info["generated_at"] + "/check"
    good = f"{old_prefix(fx, 'plain')}={elsewhere}"
    bad = f"{partial}={elsewhere}"
    for command in ("files", "dump"):
        run = spillway(command, str(chk), "--rebase", bad, "--rebase", good, *(["--json"] if json_out else []))
        assert run.code == 0, run.output
        warnings = [line for line in run.err.splitlines() if line.startswith("warning:")]
        assert len(warnings) == 1 and f"--rebase {bad}:" in warnings[0] and "matches no path" in warnings[0]
        if json_out:
            doc = json.loads(run.out)
            unmatched = doc["checkpoints"][0]["rebase_unmatched"] if command == "files" else doc["rebase_unmatched"]
            assert unmatched == [bad]


def test_path_rule_matches_whole_components_only() -> None:
    from spillway.storage.rules import PathRule

    rule = PathRule("/srv/flink/x", "/data/x")
    assert rule.apply("file:/srv/flink/x/chk-1/a") == "file:/data/x/chk-1/a"
    assert rule.apply("file:///srv/flink/x/chk-1/a") == "file:///data/x/chk-1/a"
    assert rule.apply("/srv/flink/x/chk-1/a") == "/data/x/chk-1/a"
    assert rule.apply("file:/srv/flink/xy/chk-1/a") is None
    assert rule.apply("s3://srv/flink/x/chk-1/a") is None
    assert PathRule("s3a://b/x", "s3://c/y").apply("s3://b/x/k") == "s3://c/y/k"  # Flink's aliases of s3
    assert PathRule("file:/srv/x", "s3://b/y").apply("/srv/x/k") == "s3://b/y/k"


# --------------------------------------------------------------------------------------------------
# repair relocate


def written_paths(metadata: Path) -> set[str]:
    cp = decode_metadata(metadata.read_bytes())
    return {h.file_name for h in leaf_stream_handles(cp, coordinator=True) if is_file_backed(h) and not h.relative}


@pytest.mark.parametrize("spelling", ["plain", "file://"])
def test_relocate_from_without_the_scheme_rewrites_file_paths(spelling: str, tmp_path: Path) -> None:
    fx = fixture_named(FIXTURE)
    old = old_prefix(fx, spelling)
    new_root = tmp_path / "moved"
    out = tmp_path / "out" / fx.checkpoint_dir.name
    args = ["--out", str(out), "--from", old, "--to", str(new_root)]
    run = spillway("repair", "relocate", str(fx.checkpoint_dir), *args)
    assert run.code == 0, run.output
    # Flink's spelling (file:/…) is kept; only the location changes.
    local = "file:" + fx.info["generated_at"] + "/checkpoints"
    expected = {"file:" + str(new_root) + p[len(local) :] for p in oracle_paths(fx)}
    assert written_paths(out / "_metadata") == expected


@pytest.mark.parametrize("json_out", [False, True])
def test_relocate_that_rewrites_nothing_is_refused(json_out: bool, tmp_path: Path) -> None:
    fx = fixture_named(FIXTURE)
    out = tmp_path / "out"
    args = ["--from", "/nowhere/flink", "--to", "/data/flink", *(["--json"] if json_out else [])]
    run = spillway("repair", "relocate", str(fx.checkpoint_dir), "--out", str(out), *args)
    assert run.code == 1, run.output
    assert not out.exists()
    errors = [line for line in run.err.splitlines() if line.strip()]
    assert len(errors) == 1 and "--from /nowhere/flink" in errors[0] and "nothing to relocate" in errors[0]
    assert f"{len(oracle_paths(fx))} absolute paths" in errors[0]
    if json_out:
        doc = json.loads(run.out)
        assert (doc["schema"], doc["exit_code"], doc["category"]) == ("spillway.error/1", 1, "findings")


def test_relocate_dry_run_that_rewrites_nothing_is_refused_too(tmp_path: Path) -> None:
    fx = fixture_named(FIXTURE)
    args = ["--from", "file:/nowhere", "--to", "file:/data", "--dry-run"]
    run = spillway("repair", "relocate", str(fx.checkpoint_dir), "--out", str(tmp_path / "out"), *args)
    assert run.code == 1 and "nothing to relocate" in run.err
