"""Every repair proven by real Flink: the repaired checkpoint is restored on a MiniCluster
(tests/support/flink_harness.py).

- relocate: a checkpoint moved with --copy-data restores from its new place after the old one is deleted;
- clear-finished: a checkpoint Flink refuses for a changed topology restores once the markers are cleared;
- drop-operator: the checkpoint restores into a job without that operator, no --allowNonRestoredState needed;
- strip-channel-state: the job's own output shows exactly the loss spillway reported.

Restores take ~10 s each; set-ups are shared per module and the number of restores is kept small.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.fixtures import Fixture, fixture_named
from support.flink_harness import restore

from spillway.cli.app import app
from spillway.formats.metadata_codec import decode_metadata, encode_metadata
from spillway.inspect.finished import check
from spillway.inspect.topology import load_plan
from spillway.model.checkpoint import FileHandle, RelativeFileHandle, SegmentFileHandle
from spillway.model.walk import all_stream_handles, transform_stream_handles
from spillway.storage.load import load_checkpoint

pytestmark = pytest.mark.flink

runner = CliRunner()


def repair(*args: str) -> dict:
    """Run ``spillway repair … --json``; the report on success, a failure with the output otherwise."""
    res = runner.invoke(app, ["repair", *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def explain(res: dict) -> str:
    return json.dumps({k: res.get(k) for k in ("outcome", "stage", "error", "causes", "log")}, indent=1)


def absolute_paths(chk: Path) -> set[str]:
    cp = load_checkpoint(chk).checkpoint
    return {h.path for _, h in all_stream_handles(cp) if isinstance(h, FileHandle | SegmentFileHandle)}


def job_dir_of(fx: Fixture) -> str:
    """The job directory as the fixture's _metadata names it (file:/tmp/spillway-fixtures/<name>/checkpoints/<id>)."""
    return "file:" + fx.info["generated_at"] + "/checkpoints/" + fx.info["job_id"]


def place_at(fx: Fixture, job_dir: Path) -> Path:
    """A real copy of the fixture whose _metadata names ``job_dir`` (made by relocate itself, which reads the
    fixture's files where they are): the "location A" a user would move a checkpoint away from."""
    chk = job_dir / fx.checkpoint_dir.name
    repair(
        "relocate",
        str(fx.checkpoint_dir),
        "--out",
        str(chk),
        "--from",
        job_dir_of(fx),
        "--to",
        f"file:{job_dir}",
        "--copy-data",
    )
    return chk


# ---------------------------------------------------------------------------------------------- relocate


@pytest.mark.parametrize(
    "name", ["2.3.0-rocksdb-incremental", "2.3.0-file-merging", "2.0.0-rocksdb-incremental", "1.20.3-file-merging"]
)
def test_relocated_checkpoint_restores_after_the_original_is_deleted(tmp_path: Path, name: str) -> None:
    """Incremental RocksDB (FileStateHandle in shared/ + relative channel-state files) and file merging
    (SegmentFileStateHandle + the file-merging directories)."""
    fx = fixture_named(name)
    job = fx.info["job_id"]
    chk_a = place_at(fx, tmp_path / "A" / job)
    paths_a = absolute_paths(chk_a)
    assert paths_a and all(p.startswith(f"file:{tmp_path}/A/{job}/") for p in paths_a)

    chk_b = tmp_path / "B" / job / chk_a.name
    doc = repair(
        "relocate",
        str(chk_a),
        "--out",
        str(chk_b),
        "--from",
        f"file:{tmp_path}/A",
        "--to",
        f"file:{tmp_path}/B",
        "--copy-data",
    )
    changes = {c["what"]: c["count"] for c in doc["changes"]}
    assert sum(n for what, n in changes.items() if what.startswith("paths rewritten")) >= len(paths_a)
    shutil.rmtree(tmp_path / "A")
    assert absolute_paths(chk_b) == {p.replace(f"{tmp_path}/A/", f"{tmp_path}/B/") for p in paths_a}
    # Everything but the paths is as it was: the metadata equals the original's with the prefix replaced.
    original = decode_metadata(fx.metadata.read_bytes())
    transform_stream_handles(original, lambda h: _moved(h, job_dir_of(fx), f"file:{tmp_path}/B/{job}"))
    _move_dirs(original, job_dir_of(fx), f"file:{tmp_path}/B/{job}")
    assert encode_metadata(original) == (chk_b / "_metadata").read_bytes()

    res = restore(fx.release, fx.info["scenario"], chk_b, run_seconds=2, workdir=tmp_path / "work")
    assert res["outcome"] == "restored", explain(res)


def _moved(h: object, old: str, new: str) -> object:
    if isinstance(h, FileHandle | SegmentFileHandle) and h.path.startswith(old):
        h.path = new + h.path[len(old) :]
    return h


def _move_dirs(cp, old: str, new: str) -> None:
    for op in cp.operators:
        for sub in op.subtasks:
            for h in (sub.managed_operator_state, sub.raw_operator_state):
                dirs = h.file_merging if h is not None else None
                for attr in ("task_owned_dir", "shared_dir") if dirs is not None else ():
                    value = getattr(dirs, attr)
                    if value.startswith(old):
                        setattr(dirs, attr, new + value[len(old) :])


@pytest.mark.parametrize("name", ["2.3.0-unaligned", "1.15.4-counted"])
def test_relative_handles_written_by_relocate_restore(tmp_path: Path, name: str) -> None:
    """--relative: Flink ≥ 2.0 already writes chk-N files as relative handles, so location A is a copy of
    2.3.0-unaligned whose channel-state files are named by absolute path (as Flink 1.x and savepoints of
    other tools do). relocate --relative makes them relative again; Flink restores the result from B.
    1.15.4-counted: the same on metadata V3 (1.15 writes its channel-state files as relative handles too)."""
    fx = fixture_named(name)
    chk_a = tmp_path / "A" / fx.info["job_id"] / fx.checkpoint_dir.name
    chk_a.mkdir(parents=True)
    cp = decode_metadata(fx.metadata.read_bytes())

    def absolute(h: object) -> object:
        if isinstance(h, RelativeFileHandle):
            shutil.copyfile(fx.checkpoint_dir / h.relative_path, chk_a / h.relative_path)
            return FileHandle(f"file:{chk_a}/{h.relative_path}", h.state_size)
        return h

    transform_stream_handles(cp, absolute)
    (chk_a / "_metadata").write_bytes(encode_metadata(cp))
    assert absolute_paths(chk_a), "location A names its files by absolute path"

    chk_b = tmp_path / "B" / fx.info["job_id"] / chk_a.name
    doc = repair(
        "relocate",
        str(chk_a),
        "--out",
        str(chk_b),
        "--from",
        f"file:{tmp_path}/A",
        "--to",
        f"file:{tmp_path}/B",
        "--relative",
    )
    shutil.rmtree(tmp_path / "A")
    made = {c["what"]: c["count"] for c in doc["changes"]}["file handles made relative"]
    relative = [h for _, h in all_stream_handles(decode_metadata(fx.metadata.read_bytes()))]
    assert made == sum(isinstance(h, RelativeFileHandle) for h in relative) > 0
    assert not absolute_paths(chk_b)
    # ... and the result is exactly the checkpoint Flink wrote.
    assert (chk_b / "_metadata").read_bytes() == fx.metadata.read_bytes()
    res = restore(fx.release, fx.info["scenario"], chk_b, run_seconds=2, workdir=tmp_path / "work")
    assert res["outcome"] == "restored", explain(res)


# ---------------------------------------------------------------------------------------------- clear-finished


def test_cleared_checkpoint_restores_where_the_original_is_refused(tmp_path: Path) -> None:
    """2.3.0-finished into the job where `slow` also feeds the fully finished `bsink`: Flink refuses the
    original (a fully finished vertex behind a running one). clear-finished on exactly what spillway's
    verdict names makes it restorable."""
    fx = fixture_named("2.3.0-finished")
    variant = "rewired-fully-finished"
    plan = tmp_path / "plan.json"
    refused = restore(
        fx.release, fx.info["scenario"], fx.checkpoint_dir, variant=variant, plan_out=plan, workdir=tmp_path / "w1"
    )
    assert refused["outcome"] == "refused", explain(refused)
    assert "fully finished vertices predeceased with the ones not fully finished" in refused["error"]
    verdict = check(load_plan(str(plan)), load_checkpoint(fx.checkpoint_dir).checkpoint)
    assert [v.rule for v in verdict.violations] == ["fully-finished-predecessor"]

    out = tmp_path / "cleared"
    doc = repair("clear-finished", str(fx.checkpoint_dir), "--out", str(out), "--plan", str(plan))
    assert [c["what"] for c in doc["changes"]] == ["bsink: fully finished -> running (no state)"]
    # The new job has an operator the checkpoint lacks (tolong; V5+ stores every operator's name): the source has
    # that mismatch under this plan too, so the self-check keeps it and says so instead of refusing.
    assert any("the source already has" in w and "'tolong'" in w for w in doc["warnings"]), doc["warnings"]
    after = check(load_plan(str(plan)), load_checkpoint(out).checkpoint)
    assert after.restorable, after.violations

    res = restore(fx.release, fx.info["scenario"], out, variant=variant, run_seconds=2, workdir=tmp_path / "w2")
    assert res["outcome"] == "restored", explain(res)
    # bsink now runs (it has a running input); the rest of the bounded branch is still finished
    tasks = res["tasks"]
    assert {tasks[f"bsink: Writer ({i}/2)"] for i in (1, 2)} <= {"RUNNING", "FINISHED"}, tasks
    assert tasks["bmap (1/2)"] == tasks["bmap (2/2)"] == "FINISHED", tasks


# ---------------------------------------------------------------------------------------------- drop-operator


def test_dropped_operator_restores_without_allow_non_restored_state(tmp_path: Path) -> None:
    """2.3.0-unaligned into the same job without `slow` (RestoreCheck variant "without-slow": tostr -rebalance->
    len -> sink). Flink refuses the original unless --allowNonRestoredState; after drop-operator it restores
    strictly. `slow` holds keyed state and channel state: the other halves of its channels (tostr's output
    state) go with it."""
    fx = fixture_named("2.3.0-unaligned")
    variant = "without-slow"
    refused = restore(fx.release, fx.info["scenario"], fx.checkpoint_dir, variant=variant, workdir=tmp_path / "w1")
    assert refused["outcome"] == "refused", explain(refused)
    assert "because the operator is not available in the new program" in refused["error"]
    slow = next(o for o in decode_metadata(fx.metadata.read_bytes()).operators if o.name == "slow")
    assert slow.operator_id in refused["error"]

    out = tmp_path / "dropped"
    doc = repair(
        "drop-operator",
        str(fx.checkpoint_dir),
        "--out",
        str(out),
        "--operator",
        "slow",
        "--plan",
        str(fx.root / "jobgraph.json"),
    )
    assert doc["records_dropped"] > 0  # in-flight records into and out of slow
    cp = decode_metadata((out / "_metadata").read_bytes())
    assert cp.operator(slow.operator_id) is None
    assert not any(s.input_channel_state or s.result_subpartition_state for o in cp.operators for s in o.subtasks)

    res = restore(fx.release, fx.info["scenario"], out, variant=variant, run_seconds=2, workdir=tmp_path / "w2")
    assert res["outcome"] == "restored", explain(res)
    assert res["allow_non_restored_state"] is False


# ---------------------------------------------------------------------------------------------- strip-channel-state

COUNTED_RELEASES = ["2.0.0", "1.20.3", "1.15.4"]  # besides 2.3.0: strip everything, one restore each
TOTAL = 200_000  # fromSequence(0..199999): what the bounded job counts when nothing is lost


def counted_results(res: dict) -> tuple[dict[int, int], int]:
    """(records per key as counted by `count`, records that reached `check`) from the job's result lines."""
    per_key: dict[int, int] = {}
    checked = 0
    for line in res["results"]:
        kind, *fields = line.split()
        if kind == "count":
            per_key[int(fields[0])] = int(fields[1])
        elif kind == "check":
            checked += int(fields[0])
    return per_key, checked


@pytest.fixture(scope="module")
def counted_intact() -> tuple[dict[int, int], int]:
    """The counted job's figures with nothing lost (what Flink reports restoring the original checkpoint)."""
    per_key = {k: len(range(k, TOTAL, 32)) for k in range(32)}
    return per_key, TOTAL


@pytest.mark.parametrize(
    ("release", "operator"),
    [
        pytest.param("2.3.0", None, id="2.3.0-all"),
        pytest.param("2.3.0", "check", id="2.3.0-check-only"),
        *(pytest.param(r, None, id=f"{r}-all") for r in COUNTED_RELEASES),
    ],
)
def test_stripped_checkpoint_loses_exactly_what_was_reported(
    tmp_path: Path, release: str, operator: str | None, counted_intact: tuple[dict[int, int], int]
) -> None:
    """Strip channel state (all, or only the channels into `check`), restore until the bounded job ends: the
    job's own counts fall short by exactly the records spillway reported, edge by edge. A record dropped on
    src->parse or parse->count never reaches `count` nor `check`; one dropped on count->check only misses
    from `check`. The source's split state is kept, so nothing is read twice. Each release's own
    `<release>-counted` fixture, restored in that release (plan: its jobgraph.json)."""
    fx = fixture_named(f"{release}-counted")
    out = tmp_path / "stripped"
    args = ["--operator", operator] if operator else []
    doc = repair(
        "strip-channel-state",
        str(fx.checkpoint_dir),
        "--out",
        str(out),
        "--plan",
        str(fx.root / "jobgraph.json"),
        *args,
    )
    channels = doc["channels"]
    assert doc["records_dropped"] == sum(c["records"] for c in channels) > 0
    # Before 2.0 the metadata holds no operator names: the report names the ends of a channel as the plan
    # does (or by id where nothing binds); Flink's own ids.json says which uid each name or id is.
    nodes = json.loads((fx.root / "ids.json").read_text())["stream_nodes"]
    uid_of = {n["operator_id"]: n["uid"] for n in nodes} | {n["name"]: n["uid"] for n in nodes}
    for c in channels:
        c["upstream"], c["downstream"] = (
            uid_of.get(c["upstream"], c["upstream"]),
            uid_of.get(c["downstream"], c["downstream"]),
        )
    assert {(c["upstream"], c["downstream"]) for c in channels} <= {
        ("src", "parse"),
        ("parse", "count"),
        ("count", "check"),
    }
    before_count = sum(c["records"] for c in channels if c["downstream"] in ("parse", "count"))
    if operator == "check":
        assert {(c["upstream"], c["downstream"]) for c in channels} == {("count", "check")}
        assert before_count == 0

    res = restore(fx.release, fx.info["scenario"], out, until_finished=True, workdir=tmp_path / "work")
    assert res["outcome"] == "restored", explain(res)
    per_key, checked = counted_results(res)
    intact_per_key, intact_total = counted_intact
    assert sum(intact_per_key.values()) - sum(per_key.values()) == before_count
    assert all(per_key[k] <= n for k, n in intact_per_key.items())
    assert intact_total - checked == doc["records_dropped"]
