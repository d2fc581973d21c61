"""``spillway files`` and ``spillway diff`` end to end through the CLI, on real Flink checkpoints.

Expected file sets come from ``oracle.json`` (Flink's own decode of each fixture) and from the files on
disk, never from the code under test. Several retained checkpoints of one job are made by copying a
fixture's job directory and adding a ``chk-N`` written by ``spillway repair drop-operator``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support.fixtures import Fixture, fixture_named

from spillway.cli.app import app

CHANNEL_KINDS = {"input_channel_state", "result_subpartition_state"}
STATE_KINDS = ("managed_operator_state", "raw_operator_state", "managed_keyed_state", "raw_keyed_state", *CHANNEL_KINDS)


def run(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def run_json(*args: str, code: int = 0) -> dict[str, Any]:
    result = run(*args, "--json")
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


def _file_names(node: Any, out: list[str]) -> None:
    """Every file name inside an oracle handle: absolute ``path`` or ``relative_path``."""
    if isinstance(node, dict):
        if node.get("type") in ("FileStateHandle", "SegmentFileStateHandle") and "path" in node:
            out.append(node["path"])
        if node.get("type") == "RelativeFileStateHandle":
            out.append("\0rel:" + node["relative_path"])
        for v in node.values():
            _file_names(v, out)
    elif isinstance(node, list):
        for v in node:
            _file_names(v, out)


def oracle_refs(fx: Fixture) -> dict[str, set[tuple[str, str]]]:
    """Job-relative file name ('shared/…', 'chk-3/…') -> {(operator id, state kind)}, from Flink's decode."""
    doc = json.loads(fx.oracle.read_text())
    job_id, chk = fx.info["job_id"], fx.checkpoint_dir.name
    refs: dict[str, set[tuple[str, str]]] = {}
    for op in doc["operators"]:
        for sub in op["subtasks"]:
            for kind in STATE_KINDS:
                names: list[str] = []
                _file_names(sub[kind], names)
                for name in names:
                    rel = f"{chk}/{name[5:]}" if name.startswith("\0rel:") else name.split(f"/{job_id}/", 1)[1]
                    refs.setdefault(rel, set()).add((op["operator_id"], kind))
    return refs


def shown_by_checkpoint(doc: dict[str, Any]) -> list[set[str]]:
    per: list[set[str]] = [set() for _ in doc["checkpoints"]]
    for f in doc["files"]:
        for i in f["checkpoints"]:
            per[i].add(f["shown"])
    return per


# --------------------------------------------------------------------------------------------------
# files: one checkpoint


@pytest.mark.parametrize(
    "name", ["2.3.0-rocksdb-incremental", "2.0.0-rocksdb-incremental", "1.12.5-rocksdb-incremental"]
)
def test_files_lists_what_flink_references_with_sizes_on_disk(name: str) -> None:
    fx = fixture_named(name)
    expected = oracle_refs(fx)
    assert any(n.startswith("shared/") for n in expected), "fixture has no shared SST files"
    doc = run_json("files", str(fx.checkpoint_dir))
    assert doc["schema"] == "spillway.files/1"
    assert {f["shown"] for f in doc["files"]} == set(expected)
    job_dir = fx.checkpoint_dir.parent
    for f in doc["files"]:
        assert f["exists"] is True
        assert f["size"] == os.path.getsize(job_dir / f["shown"]), f["shown"]
        assert f["area"] == f["shown"].split("/", 1)[0]
        assert set(f["state_kinds"]) == {k for _, k in expected[f["shown"]]}
        assert set(f["operators"]) == {o for o, _ in expected[f["shown"]]}
    (cp,) = doc["checkpoints"]
    shared = [n for n in expected if n.startswith("shared/")]
    own = [n for n in expected if n.startswith(fx.checkpoint_dir.name + "/")]
    assert cp["groups"]["shared"] == {"files": len(shared), "bytes": sum(os.path.getsize(job_dir / n) for n in shared)}
    assert cp["groups"]["own"]["files"] == len(own)
    assert cp["missing"] == 0 and doc["missing"] == []
    assert cp["bytes"] == sum(os.path.getsize(job_dir / n) for n in expected)


def test_files_table_never_breaks_file_names(monkeypatch: pytest.MonkeyPatch) -> None:
    fx = fixture_named("2.3.0-rocksdb-incremental")
    monkeypatch.setenv("COLUMNS", "60")
    result = run("files", str(fx.checkpoint_dir))
    assert result.exit_code == 0, result.output
    assert "…" not in result.stdout
    for name in oracle_refs(fx):
        assert name in result.stdout, name


def test_files_missing_file_exits_1(tmp_path: Path) -> None:
    fx = fixture_named("2.3.0-rocksdb-incremental")
    job = tmp_path / fx.info["job_id"]
    shutil.copytree(fx.checkpoint_dir.parent, job)
    gone = sorted(n for n in oracle_refs(fx) if n.startswith("shared/"))[0]
    (job / gone).unlink()
    doc = run_json("files", str(job), code=1)
    (entry,) = [f for f in doc["files"] if f["shown"] == gone]
    assert entry["exists"] is False and entry["size"] is None
    assert doc["checkpoints"][0]["missing"] == 1


# --------------------------------------------------------------------------------------------------
# files: several retained checkpoints


def _add_checkpoint(fx: Fixture, job: Path, n: int, drop: str) -> Path:
    """A new chk-n in ``job``: chk-3 without operator ``drop`` (spillway's own writer)."""
    out = job.parent / f"out-{n}"
    result = run(
        "repair", "drop-operator", str(job / "chk-3"), "--out", str(out), "--operator", drop,
        "--plan", str(fx.root / "jobgraph.json"),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return Path(shutil.move(str(out), str(job / f"chk-{n}")))


def _without(refs: dict[str, set[tuple[str, str]]], drop: set[tuple[str, str]]) -> set[str]:
    """The names a copy of chk-3 references once the handles (operator id, state kind) in ``drop`` are gone."""
    keep = set()
    for name, users in refs.items():
        left = users - drop
        if left:
            keep.add(name)
    return keep


@pytest.fixture
def retained(tmp_path: Path) -> tuple[Fixture, Path, list[set[str]]]:
    """2.3.0-rocksdb-incremental as a job with chk-3 (Flink's), chk-4 (without tostr), chk-5 (without slow)."""
    fx = fixture_named("2.3.0-rocksdb-incremental")
    ids = {o["name"]: o["operator_id"] for o in json.loads(fx.oracle.read_text())["operators"]}
    job = tmp_path / fx.info["job_id"]
    shutil.copytree(fx.checkpoint_dir.parent, job)
    _add_checkpoint(fx, job, 4, "tostr")
    _add_checkpoint(fx, job, 5, "slow")
    refs = oracle_refs(fx)
    r3 = set(refs)
    # Dropping an operator drops both halves of its channels: tostr -> slow, slow -> len.
    r4 = _without(refs, {(ids["tostr"], k) for k in STATE_KINDS} | {(ids["slow"], "input_channel_state")})
    r5 = _without(
        refs,
        {(ids["slow"], k) for k in STATE_KINDS}
        | {(ids["tostr"], "result_subpartition_state"), (ids["len"], "input_channel_state")},
    )

    # Relative files (the channel-state file of chk-3) are copied into the new checkpoint's directory.
    def moved(names: set[str], chk: str) -> set[str]:
        return {f"{chk}/{n.split('/', 1)[1]}" if n.startswith("chk-3/") and (job / chk / n.split("/", 1)[1]).exists()
                else n for n in names}  # fmt: skip

    return fx, job, [r3, moved(r4, "chk-4"), moved(r5, "chk-5")]


def test_files_job_dir_means_every_retained_checkpoint(retained: tuple[Fixture, Path, list[set[str]]]) -> None:
    _, job, expected = retained
    doc = run_json("files", str(job))
    assert [c["directory"] for c in doc["checkpoints"]] == ["chk-3", "chk-4", "chk-5"]
    assert shown_by_checkpoint(doc) == expected
    shown = {f["path"]: f["shown"] for f in doc["files"]}
    for i, cp in enumerate(doc["checkpoints"]):
        others = set().union(*(e for j, e in enumerate(expected) if j != i))
        gone = expected[i] - others
        assert {shown[p] for p in cp["unreferenced_if_dropped"]["paths"]} == gone, cp["directory"]
        assert cp["unreferenced_if_dropped"]["bytes"] == sum(os.path.getsize(job / n) for n in gone)
    both = {n for n in set().union(*expected) if sum(n in e for e in expected) > 1}
    assert {shown[p] for p in doc["shared"]["paths"]} == both
    assert any(n.startswith("shared/") for n in both)  # the SST files of slow: chk-3 and chk-4


def test_files_two_paths_what_dropping_one_frees(retained: tuple[Fixture, Path, list[set[str]]]) -> None:
    _, job, (r3, _, r5) = retained
    doc = run_json("files", str(job / "chk-3"), str(job / "chk-5"))
    gone = {f["shown"] for f in doc["files"] if f["path"] in doc["checkpoints"][0]["unreferenced_if_dropped"]["paths"]}
    assert gone == r3 - r5
    assert {n for n in gone if n.startswith("shared/")} == {n for n in r3 if n.startswith("shared/")}
    table = run("files", str(job / "chk-3"), str(job / "chk-5"))
    assert table.exit_code == 0, table.output
    assert f"dropping chk-3 leaves {len(r3 - r5)} files" in table.stdout


def test_files_in_another_checkpoints_directory(tmp_path: Path) -> None:
    # Flink 1.10 names its files absolutely: a checkpoint written from chk-3 keeps pointing into chk-3.
    fx = fixture_named("1.10.3-aligned")
    job = tmp_path / fx.info["job_id"]
    shutil.copytree(fx.checkpoint_dir.parent, job)
    _add_checkpoint(fx, job, 4, "src")
    refs = oracle_refs(fx)
    src = {o["operator_id"] for o in json.loads(fx.oracle.read_text())["operators"]} - {
        o for users in refs.values() for o, _ in users
    }
    kept = {n for n, users in refs.items() if {o for o, _ in users} - src}
    doc = run_json("files", str(job))
    chk4 = doc["checkpoints"][1]
    in_chk3 = {n for n in kept if n.startswith("chk-3/")}
    assert in_chk3, "fixture has no absolute file in chk-3"
    assert chk4["groups"]["other checkpoint"]["files"] == len(in_chk3)
    assert shown_by_checkpoint(doc)[1] == kept
    assert all(f["exists"] for f in doc["files"])


# --------------------------------------------------------------------------------------------------
# diff


def test_diff_identical() -> None:
    fx = fixture_named("2.3.0-unaligned")
    result = run("diff", str(fx.checkpoint_dir), str(fx.root / "checkpoints"))
    assert result.exit_code == 0, result.output
    assert "identical" in result.stdout
    doc = run_json("diff", str(fx.checkpoint_dir), str(fx.checkpoint_dir))
    assert doc["schema"] == "spillway.diff/1" and doc["identical"] is True


def test_diff_strip_channel_state_shows_channel_differences_only(tmp_path: Path) -> None:
    fx = fixture_named("2.3.0-unaligned")
    out = tmp_path / "stripped"
    assert run("repair", "strip-channel-state", str(fx.checkpoint_dir), "--out", str(out)).exit_code == 0
    doc = run_json("diff", str(fx.checkpoint_dir), str(out), code=1)
    assert doc["identical"] is False
    assert doc["checkpoint"] == {}
    assert doc["operators"]["added"] == [] and doc["operators"]["removed"] == []
    changed = doc["operators"]["changed"]
    assert changed
    for c in changed:
        assert set(c["changes"]) <= {"input_channel_bytes", "output_channel_bytes", "in_flight_bytes"}, c
        assert c["changes"]["in_flight_bytes"]["b"] == 0
    expected_gone = {n for n, users in oracle_refs(fx).items() if {k for _, k in users} <= CHANNEL_KINDS}
    assert {f["shown"] for f in doc["files"]["removed"]} == expected_gone
    assert doc["files"]["added"] == []
    table = run("diff", str(fx.checkpoint_dir), str(out))
    assert table.exit_code == 1 and "different" in table.stdout


def test_diff_rescale_reports_parallelism(tmp_path: Path) -> None:
    fx = fixture_named("2.3.0-counted")
    out = tmp_path / "p4"
    result = run(
        "rescale", str(fx.root / "checkpoints"), "--plan", str(fx.root / "jobgraph.json"), "-p", "count=4",
        "--key", "count=tuple:0:long", "--master", "inprocess", "--out", str(out),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = run_json("diff", str(fx.root / "checkpoints"), str(out), code=1)
    by_label = {c["label"]: c["changes"] for c in doc["operators"]["changed"]}
    assert by_label["count"]["parallelism"] == {"a": 2, "b": 4}
    assert all("parallelism" not in ch for label, ch in by_label.items() if label != "count")
    assert "max_parallelism" not in by_label["count"]
    table = run("diff", str(fx.root / "checkpoints"), str(out))
    assert table.exit_code == 1
    assert "parallelism" in table.stdout and "b71731f1c0df9c3076c4a455334d0ad6" in table.stdout


def test_diff_across_releases_format_version_and_names() -> None:
    old, new = fixture_named("1.20.3-unaligned"), fixture_named("2.3.0-unaligned")
    doc = run_json("diff", str(old.checkpoint_dir), str(new.checkpoint_dir), code=1)
    assert doc["checkpoint"]["format_version"] == {"a": 4, "b": 6}
    names = {o["operator_id"]: o["name"] for o in json.loads(new.oracle.read_text())["operators"]}
    changed = {c["operator_id"]: c for c in doc["operators"]["changed"]}
    assert set(changed) == set(names)  # same uids, so the same operator ids: nothing added or removed
    for op_id, name in names.items():
        assert changed[op_id]["changes"]["name"] == {"a": None, "b": name}
        assert changed[op_id]["renamed"] is False


def test_diff_dropped_operator(retained: tuple[Fixture, Path, list[set[str]]]) -> None:
    _, job, (r3, r4, _) = retained
    doc = run_json("diff", str(job / "chk-3"), str(job / "chk-4"), code=1)
    assert [o["name"] for o in doc["operators"]["removed"]] == ["tostr"]
    assert {f["shown"] for f in doc["files"]["removed"]} == r3 - r4
    assert {f["shown"] for f in doc["files"]["added"]} == r4 - r3
    assert doc["files"]["shared"] == len(r3 & r4)


def test_diff_usage_error() -> None:
    assert run("diff", "/no/such/checkpoint", "/no/such/either").exit_code == 2
    assert run("files").exit_code == 2
