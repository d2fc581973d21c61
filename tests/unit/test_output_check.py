"""The writers' self-check (spillway.inspect.output_check.validated_output): it must see the output as the
final checkpoint will be (its absolute paths sent to the temporary directory), refuse any validate error
with the first one named, pass the plan and extra rebase rules on, and run the writer's extra check.

Built from real fixtures: 1.10.3-aligned names its keyed-state files by absolute path inside its own chk-3
(oracle.json: FileStateHandle file:/tmp/spillway-fixtures/1.10.3-aligned/checkpoints/<job>/chk-3/…), so a
copy under the writer's temporary name finds them only through the final-prefix rule.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from support.fixtures import dump_nodes, fixture_named

from spillway.inspect.output_check import validated_output
from spillway.inspect.topology import load_plan
from spillway.inspect.validate import validate
from spillway.model.checkpoint import KeyGroupRange, KeyGroupsHandle
from spillway.storage.load import load_checkpoint
from spillway.storage.safe_writer import PlannedOutput, WriteError, write_checkpoint

OLD = fixture_named("1.10.3-aligned")
NEW = fixture_named("2.3.0-unaligned")
FINAL = f"file:{OLD.info['generated_at']}/{OLD.info['checkpoint']}"  # where Flink wrote chk-3


def _as_partial(tmp_path: Path, fx=OLD) -> tuple[Path, PlannedOutput]:  # type: ignore[no-untyped-def]
    """A copy of the fixture's chk-N under a name like the writer's temporary directory: nothing in its
    path lets automatic rebasing find the files by their trailing components."""
    tmp = tmp_path / ".out.spillway-0123abcd.partial"
    shutil.copytree(fx.checkpoint_dir, tmp)
    return tmp, PlannedOutput(load_checkpoint(tmp, [f"{FINAL}={tmp}"]).checkpoint, final_prefix=FINAL)


def test_the_final_prefix_sends_absolute_paths_to_the_temporary_directory(tmp_path: Path) -> None:
    tmp, plan = _as_partial(tmp_path)
    assert validated_output()(tmp, plan) == validate(load_checkpoint(tmp, [f"{FINAL}={tmp}"])).findings
    no_prefix = PlannedOutput(plan.checkpoint)
    with pytest.raises(WriteError) as err:
        validated_output()(tmp, no_prefix)  # without the rule the keyed-state files are not found
    assert "file-exists: missing file" in str(err.value)


def test_rebase_rules_are_passed_on(tmp_path: Path) -> None:
    """Without the final prefix the keyed-state files are found only through the given rule: the self-check
    then sees exactly what validate sees with that rule — every file found, Flink's checkpoint clean."""
    tmp, plan = _as_partial(tmp_path)
    no_prefix = PlannedOutput(plan.checkpoint)
    rule = f"{FINAL}={tmp}"
    found = validated_output(rebase=[rule])(tmp, no_prefix)
    expected = validate(load_checkpoint(tmp, [rule]))
    assert found == expected.findings and not expected.errors
    flink_listed = {
        n["path"] for n in dump_nodes(json.loads(OLD.oracle.read_text())) if n.get("type") == "FileStateHandle"
    }
    assert expected.files_checked == len(flink_listed)  # every file Flink's loader listed (oracle.json) was looked at
    with pytest.raises(WriteError, match="file-exists: missing file"):
        validated_output(rebase=[f"{FINAL}-elsewhere={tmp}"])(tmp, no_prefix)  # a rule that matches nothing


def test_a_validate_error_refuses_the_output_naming_the_first(tmp_path: Path) -> None:
    tmp, plan = _as_partial(tmp_path)
    victim = next(p for p in tmp.iterdir() if p.name != "_metadata")
    victim.write_bytes(victim.read_bytes()[:10])
    expected = validate(load_checkpoint(tmp, [f"{FINAL}={tmp}"])).errors
    assert expected
    with pytest.raises(WriteError) as err:
        validated_output()(tmp, plan)
    first = expected[0]
    assert str(err.value) == (
        f"self-check: validate found {len(expected)} errors in the output, first: "
        f"{first.rule}: {first.message} ({first.file or ''})"
    )
    assert first.file == str(victim)


def test_the_plan_is_passed_on(tmp_path: Path) -> None:
    tmp = tmp_path / "chk"
    shutil.copytree(NEW.checkpoint_dir, tmp)
    plan = PlannedOutput(load_checkpoint(tmp).checkpoint)
    good = load_plan(NEW.root / "jobgraph.json")
    assert [f for f in validated_output(good)(tmp, plan) if f.severity == "error"] == []
    doc = json.loads((NEW.root / "jobgraph.json").read_text())
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps(doc).replace('"parallelism": 2', '"parallelism": 5'))
    with pytest.raises(WriteError, match=r"validate found \d+ errors in the output, first: plan-mismatch: ") as err:
        validated_output(load_plan(wrong))(tmp, plan)
    assert str(err.value).endswith(" ()")  # a finding about the plan names no file


def test_the_extra_check_runs_on_the_temporary_directory_and_its_problems_refuse(tmp_path: Path) -> None:
    tmp = tmp_path / "chk"
    shutil.copytree(NEW.checkpoint_dir, tmp)
    plan = PlannedOutput(load_checkpoint(tmp).checkpoint)
    seen: list[Path] = []

    def fine(path: Path) -> list[str]:
        seen.append(path)
        return []

    assert validated_output(extra_check=fine)(tmp, plan) is not None and seen == [tmp]
    with pytest.raises(WriteError) as err:
        validated_output(extra_check=lambda p: [f"p{i}" for i in range(7)])(tmp, plan)
    assert str(err.value) == "self-check: p0; p1; p2; p3; p4"


def _oracle_ranges(fx: Any, operator: str) -> dict[int, tuple[int, int]]:
    """Subtask -> the key-group range Flink gave its managed keyed state (oracle.json, Flink's own dump)."""
    op = next(o for o in json.loads(fx.oracle.read_text())["operators"] if o["name"] == operator)
    return {s["index"]: tuple(s["managed_keyed_state"][0]["key_group_range"]) for s in op["subtasks"]}


def test_an_output_with_swapped_key_group_ranges_is_refused_and_never_renamed(tmp_path: Path) -> None:
    """slow's two subtasks with their keyed state swapped: tiled without gap or overlap, so only the per-subtask rule
    sees it — subtask 0 holds [64, 127], which Flink's rule (KeyGroupRangeAssignment: subtask i of p owns
    [ceil(i*128/p), ceil((i+1)*128/p) - 1]) and Flink's own checkpoint (oracle.json) give subtask 1. In an input
    that is a warning; in an output spillway wrote it refuses the rename and leaves nothing behind."""
    flink = _oracle_ranges(NEW, "slow")
    assert flink == {i: ((i * 128 + 1) // 2, ((i + 1) * 128 + 1) // 2 - 1) for i in (0, 1)}  # Flink's rule, p=2
    loaded = load_checkpoint(NEW.checkpoint_dir)
    cp = loaded.checkpoint
    slow = next(o for o in cp.operators if o.name == "slow")
    a, b = slow.subtask(0), slow.subtask(1)
    assert a is not None and b is not None
    a.managed_keyed_state, b.managed_keyed_state = b.managed_keyed_state, a.managed_keyed_state
    as_input = validate(loaded)
    assert not as_input.errors and {f.rule for f in as_input.findings} >= {"key-group-range"}
    copies = {p: p.name for p in NEW.checkpoint_dir.iterdir() if p.name != "_metadata"}
    out = tmp_path / "out"
    with pytest.raises(WriteError) as err:
        write_checkpoint(PlannedOutput(cp, copies), out, validated_output())
    (lo, hi), (mine_lo, mine_hi) = flink[1], flink[0]
    assert str(err.value) == (
        "self-check: 2 keyed state handles of the output, first: key-group-range: slow subtask 0 managed keyed "
        f"state holds key groups [{lo}, {hi}], but Flink assigns it [{mine_lo}, {mine_hi}]: it would restore key "
        "groups the subtask does not own"
    )
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == []


def test_an_output_with_overlapping_key_group_ranges_is_refused(tmp_path: Path) -> None:
    """Subtask 1's keyed state also claims subtask 0's last key group (its first offset repeated): two subtasks
    hold key group 63, which Flink assigns subtask 0 only (oracle.json)."""
    flink = _oracle_ranges(NEW, "slow")
    cp = load_checkpoint(NEW.checkpoint_dir).checkpoint
    slow = next(o for o in cp.operators if o.name == "slow")
    h = slow.subtasks[1].managed_keyed_state
    assert isinstance(h, KeyGroupsHandle) and (h.key_groups.start, h.key_groups.last) == flink[1]
    h.key_groups = KeyGroupRange(flink[0][1], h.key_groups.count + 1)
    h.offsets = [h.offsets[0], *h.offsets]
    copies = {p: p.name for p in NEW.checkpoint_dir.iterdir() if p.name != "_metadata"}
    with pytest.raises(WriteError) as err:
        write_checkpoint(PlannedOutput(cp, copies), tmp_path / "out", validated_output())
    last = flink[0][1]
    assert str(err.value).startswith(
        "self-check: validate found 1 errors in the output, first: key-group-tiling: "
        f"managed_keyed_state key groups [{last}, {last}] also held by another subtask"
    )
    assert [p.name for p in tmp_path.iterdir()] == []


def test_an_output_whose_keyed_state_covers_part_of_its_range_passes(tmp_path: Path) -> None:
    """Subtask 1 keeps only key groups [64, 100] of its [64, 127] (the first 37 offsets): what Flink's own
    rescaling hands a subtask (an old handle's intersection with its range; KeyGroupsStateHandle.getIntersection).
    Nothing outside its range: written and renamed, the missing key groups only a gap warning."""
    flink = _oracle_ranges(NEW, "slow")
    cp = load_checkpoint(NEW.checkpoint_dir).checkpoint
    h = next(o for o in cp.operators if o.name == "slow").subtasks[1].managed_keyed_state
    assert isinstance(h, KeyGroupsHandle)
    start = flink[1][0]
    h.key_groups, h.offsets = KeyGroupRange(start, 37), h.offsets[:37]
    copies = {p: p.name for p in NEW.checkpoint_dir.iterdir() if p.name != "_metadata"}
    found = write_checkpoint(PlannedOutput(cp, copies), tmp_path / "out", validated_output())
    assert [(f.rule, f.message) for f in found if f.rule.startswith("key-group")] == [
        ("key-group-gap", f"managed_keyed_state: no subtask holds key groups [{start + 37}, {flink[1][1]}]"),
        (
            "key-group-range",
            f"managed_keyed_state covers [{start}, {start + 36}], Flink assigns [{flink[1][0]}, {flink[1][1]}]",
        ),
    ]
    assert (tmp_path / "out" / "_metadata").is_file()


def test_flinks_own_keyed_checkpoint_passes_the_output_check(tmp_path: Path) -> None:
    """The same checkpoint unchanged (every range Flink's): written, checked, renamed."""
    cp = load_checkpoint(NEW.checkpoint_dir).checkpoint
    copies = {p: p.name for p in NEW.checkpoint_dir.iterdir() if p.name != "_metadata"}
    found = write_checkpoint(PlannedOutput(cp, copies), tmp_path / "out", validated_output())
    assert not [f for f in found if f.rule.startswith("key-group")]
    assert (tmp_path / "out" / "_metadata").read_bytes() == NEW.metadata.read_bytes()
