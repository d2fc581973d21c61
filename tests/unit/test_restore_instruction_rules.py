"""The restore instructions a writing command prints (spillway/inspect/restore_instructions.py), in process.

Expected values come from Flink: which releases write each fixture's format (fixture.json names the release that
wrote it), which configuration key each release reads the restore path from (SavepointConfigOptions'
``execution.savepoint.path`` up to 1.19, StateRecoveryOptions' ``execution.state-recovery.path`` from 1.20 on,
the old key still read by 1.20 as its deprecated name; tests/integration/test_restore_keys.py reads both from
every release's jar), and each operator's name, id and parallelism as Flink built the job (ids.json).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from support.fixtures import fixture_named

from spillway.flink.features import Release, dialects, parse_release
from spillway.inspect.restore_instructions import (
    NEW_PATH_KEY,
    OLD_PATH_KEY,
    operator_parallelism,
    path_key,
    release_line,
    restore_instructions,
    restore_lines,
)
from spillway.storage.load import load_checkpoint

OLD = "execution.savepoint.path"
NEW = "execution.state-recovery.path"
DEPRECATED = f"Flink 1.20 reads {OLD} as the deprecated name of {NEW}"

# fixture -> (the release line of its format as docs/format/versions.md lists it, key every release of it reads,
# the deprecation note: the line reaches 1.20, which reads the old key only as the new one's deprecated name)
LINES = {
    "1.10.3-aligned": ("1.3-1.10", OLD, False),
    "1.11.4-prod": ("1.11", OLD, False),
    "1.12.5-prod": ("1.11-1.15", OLD, False),
    "1.15.4-prod": ("1.11-1.15", OLD, False),
    "1.17.2-prod": ("1.16-1.20", OLD, True),
    "1.20.3-prod": ("1.16-1.20", OLD, True),
    "2.0.0-prod": ("2.0", NEW, False),
    "2.3.0-counted": ("2.1-2.3", NEW, False),
}


def _features(name: str) -> Any:
    return load_checkpoint(fixture_named(name).checkpoint_dir).checkpoint.features


def _release(name: str) -> str:
    release: str = json.loads((fixture_named(name).root / "fixture.json").read_text())["release"]
    return release


def test_the_keys_are_flinks_option_names() -> None:
    assert (OLD_PATH_KEY, NEW_PATH_KEY) == (OLD, NEW)


@pytest.mark.parametrize("name", sorted(LINES))
def test_each_format_restores_with_its_release_line_and_the_key_all_of_them_read(name: str) -> None:
    line, key, deprecated = LINES[name]
    features = _features(name)
    assert release_line(features) == line
    first, _, last = line.partition("-")
    assert parse_release(first) <= parse_release(_release(name)) <= parse_release(last or first)
    assert path_key(features) == key
    path = f"/restore/{name}/chk 7"
    restore = restore_instructions(path, features, {"count": 3, "Source: numbers": 2})
    assert restore == {
        "path": path,
        "release_line": line,
        "parallelism": {"count": 3, "Source: numbers": 2},
        "config": {key: path},
        "command": f"flink run -s '/restore/{name}/chk 7' …",
        "notes": [DEPRECATED] if deprecated else [],
    }


def test_a_format_no_released_flink_writes_yet_takes_the_newest_key() -> None:
    (future,) = dialects(7)
    assert future.first_release is None and future.last_release is None
    assert path_key(future) == NEW
    restore = restore_instructions("/p", future, {})
    assert restore["config"] == {NEW: "/p"} and restore["notes"] == []
    assert restore["command"] == "flink run -s /p …"


def test_the_parallelism_is_the_jobs_own_per_operator_named_as_flink_named_it() -> None:
    fx = fixture_named("2.3.0-counted")
    ids = json.loads((fx.root / "ids.json").read_text())
    flink = {n["operator_id"]: (n["uid"] or n["name"], n["parallelism"]) for n in ids["stream_nodes"]}
    operators = load_checkpoint(fx.checkpoint_dir).checkpoint.operators
    got = operator_parallelism((o, flink[o.operator_id][1]) for o in operators)
    assert got == {flink[o.operator_id][0]: flink[o.operator_id][1] for o in operators}


def test_names_several_operators_share_each_keep_their_entry() -> None:
    """1.20.3-shapes-no-uid: Flink's default names repeat (six ``Map``), and a 1.x checkpoint stores ids only, so
    each operator is labelled by the plan's name; where a name repeats, the id is appended, and none is lost."""
    fx = fixture_named("1.20.3-shapes-no-uid")
    ids = json.loads((fx.root / "ids.json").read_text())
    names = {n["operator_id"]: n["name"] for n in ids["stream_nodes"]}
    parallelism = {n["operator_id"]: n["parallelism"] for n in ids["stream_nodes"]}
    operators = [o for o in load_checkpoint(fx.checkpoint_dir).checkpoint.operators if o.operator_id in names]
    shown = [names[o.operator_id] for o in operators]
    assert any(shown.count(n) > 1 for n in shown)  # the case under test: a name shared in the checkpoint
    got = operator_parallelism([(o, parallelism[o.operator_id]) for o in operators], names)
    want = {
        (
            names[o.operator_id]
            if shown.count(names[o.operator_id]) == 1
            else f"{names[o.operator_id]} ({o.operator_id})"
        ): (parallelism[o.operator_id])
        for o in operators
    }
    assert got == want and len(got) == len(operators)
    # without the plan's names a 1.x operator is shown by its id
    assert operator_parallelism([(o, 1) for o in operators]) == {o.operator_id: 1 for o in operators}


def test_the_lines_for_people_say_all_of_it() -> None:
    restore = restore_instructions("/out/p3", _features("1.20.3-prod"), {"count": 3, "Source: numbers": 2})
    assert restore_lines(restore) == [
        "restore with Flink 1.16-1.20 (the release line that wrote the source checkpoint):",
        f"  flink run -s /out/p3 …   or   {OLD}: /out/p3",
        "  parallelism per operator: count=3, Source: numbers=2",
        f"  note: {DEPRECATED}",
    ]
    plain = restore_instructions("/out/p3", _features("2.3.0-counted"), {"count": 3})
    assert restore_lines(plain) == [
        "restore with Flink 2.1-2.3 (the release line that wrote the source checkpoint):",
        f"  flink run -s /out/p3 …   or   {NEW}: /out/p3",
        "  parallelism per operator: count=3",
    ]


def test_a_line_that_starts_at_1_20_takes_the_key_1_20_introduced() -> None:
    """Every release from 1.20 on reads StateRecoveryOptions' key; a format first written by 1.20 needs no other."""
    line = replace(_features("1.20.3-prod"), first_release=Release(1, 20), last_release=Release(1, 20))
    assert path_key(line) == NEW
    assert restore_instructions("/p", line, {})["notes"] == []
    assert path_key(replace(line, first_release=Release(1, 19))) == OLD
