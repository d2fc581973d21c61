"""After every writing command (rescale, repair *), the exact restore instructions: the path Flink restores from,
the release line, each operator's parallelism and the configuration key — text and ``--json`` ``restore``, through
the installed console script. Expected values come from the fixture's job (ids.json, fixture.json: what Flink built
and which release wrote it) and from the written directory itself, never from spillway's output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.console import run
from support.fixtures import fixture_named

from spillway.flink.features import parse_release

PATH_KEYS = {"execution.savepoint.path", "execution.state-recovery.path"}


def _job(name: str) -> tuple[str, dict[str, int]]:
    """(release that wrote the fixture, operator name -> parallelism as Flink built the job)."""
    root = fixture_named(name).root
    ids = json.loads((root / "ids.json").read_text())
    release = json.loads((root / "fixture.json").read_text())["release"]
    return release, {n["name"]: n["parallelism"] for n in ids["stream_nodes"]}


def _covers(release_line: str, release: str) -> bool:
    first, _, last = release_line.partition("-")
    return parse_release(first) <= parse_release(release) <= parse_release(last or first)


def _check(restore: dict[str, Any], out: Path, release: str) -> None:
    assert restore["path"] == str(out.absolute()) and (out / "_metadata").is_file()
    assert _covers(restore["release_line"], release), restore["release_line"]
    assert len(restore["config"]) == 1 and restore["config"][next(iter(restore["config"]))] == restore["path"]
    assert next(iter(restore["config"])) in PATH_KEYS
    assert restore["command"].startswith(f"flink run -s {out.absolute()}")


def test_repair_prints_how_to_restore_its_output(tmp_path: Path) -> None:
    fx = fixture_named("1.20.3-prod")
    release, flink = _job("1.20.3-prod")
    out = tmp_path / "stripped"
    args = ["repair", "strip-channel-state", str(fx.checkpoint_dir), "--plan", str(fx.root / "plan.json")]
    code, stdout, stderr = run([*args, "--operator", "slow-count", "--out", str(out), "--json"])
    assert code == 0, stderr
    restore = json.loads(stdout)["restore"]
    _check(restore, out, release)
    # a repair keeps every operator's parallelism: the job's own, named by the plan (uid != name in this job)
    assert restore["parallelism"] == flink
    code, text, stderr = run([*args, "--operator", "slow-count", "--out", str(tmp_path / "again")], columns=300)
    assert code == 0, stderr
    key = next(iter(restore["config"]))
    assert (
        f"flink run -s {(tmp_path / 'again').absolute()}" in text
        and f"{key}: {(tmp_path / 'again').absolute()}" in text
    )
    assert f"restore with Flink {restore['release_line']}" in text
    assert "parallelism per operator: " in text and f"slow-count={flink['slow-count']}" in text


def test_rescale_prints_the_new_parallelism_to_restore_with(tmp_path: Path) -> None:
    fx = fixture_named("1.20.3-counted")
    release, flink = _job("1.20.3-counted")
    out = tmp_path / "p3"
    args = ["rescale", str(fx.checkpoint_dir), "--plan", str(fx.root / "plan.json"), "-p", "count=3"]
    code, stdout, stderr = run(
        [*args, "--key", "count=tuple:0:long", "--master", "inprocess", "--out", str(out), "--json"]
    )
    assert code == 0, stderr
    restore = json.loads(stdout)["restore"]
    _check(restore, out, release)
    assert restore["parallelism"] == {**flink, "count": 3}
    code, stdout, stderr = run([*args, "--key", "count=tuple:0:long", "--master", "inprocess", "--dry-run", "--json"])
    assert code == 0, stderr
    assert json.loads(stdout)["restore"] is None  # nothing written, nothing to restore


def test_a_2x_checkpoint_is_restored_by_a_key_2x_reads(tmp_path: Path) -> None:
    # which key each release reads is checked against Flink's own jars in tests/integration/test_restore_keys.py
    fx = fixture_named("2.3.0-counted")
    out = tmp_path / "relocated"
    code, stdout, stderr = run(
        ["repair", "relocate", str(fx.checkpoint_dir), "--out", str(out), "--from", "file:/nowhere", "--to", "file:/x",
         "--json"]
    )  # fmt: skip
    assert code == 0, stderr
    restore = json.loads(stdout)["restore"]
    _check(restore, out, "2.3.0")
    # 2.x stores each operator's uid: the operators are named by it
    ids = json.loads((fx.root / "ids.json").read_text())["stream_nodes"]
    assert restore["parallelism"] == {n["uid"]: n["parallelism"] for n in ids}
