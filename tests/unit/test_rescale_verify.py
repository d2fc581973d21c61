"""The rescale self-check (spillway/rescale/verify.py) against damaged output and wrong totals, on a real
rescale of the 2.3.0 "counted" checkpoint (parse and count 2 -> 3). Each damage must be reported, with
the count the job's data implies (exactly once: records written per edge = records read from it; a
broadcast edge delivers every record to every downstream subtask; a key group has exactly one owner)."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from support.moved import moved_counted

import spillway.rescale.verify as verify
from spillway.inspect.analyze import analyze
from spillway.inspect.topology import load_plan
from spillway.rescale.channel_writer import WrittenFile
from spillway.rescale.execute import MoveResult
from spillway.rescale.plan import BROADCAST, CUSTOM, HASH
from spillway.rescale.verify import check_file, check_totals, self_check
from spillway.storage.load import load_checkpoint

FIXTURE = Path(__file__).parents[1] / "fixtures" / "2.3.0-counted"


@pytest.fixture(scope="module")
def rescaled(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    return moved_counted(tmp_path_factory.mktemp("moved"))


def _with_data(move: MoveResult) -> list[WrittenFile]:
    return sorted((f for f in move.files if any(c.records for c in f.channels)), key=lambda f: f.name)


def test_every_misplaced_record_is_counted_across_blocks(rescaled, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    out, plan, move = rescaled
    monkeypatch.setattr(verify, "BLOCK", 1000)  # many blocks per channel
    keyed = next(e for e in plan.edges if e.rule == HASH).down_head
    f = next(f for f in _with_data(move) if f.operator_id == keyed)
    wrong = replace(f, down=(f.down + 1) % 3)  # the same bytes claimed for another subtask
    problems, _ = check_file(out, wrong, plan)
    for ch in (c for c in f.channels if c.records):
        where = f"{f.name} channel (gate {ch.gate}, input channel {ch.up}) of subtask {wrong.down}"
        # Every key group has exactly one owner: all records of the channel are on the wrong subtask.
        assert f"{where}: {ch.records} records whose key group belongs to another subtask" in problems, problems


def test_records_of_a_custom_partitioner_are_checked_for_their_subtask(rescaled) -> None:  # type: ignore[no-untyped-def]
    """The keyed edge read as a custom partitioner that sends every record to subtask 0 (tests/support/keyfns.py):
    the records the files hold on subtasks 1 and 2 all sit elsewhere than that partitioner says, subtask 0's
    none."""
    out, plan, move = rescaled
    keyed = next(e for e in plan.edges if e.rule == HASH)
    custom = replace(keyed, rule=CUSTOM, key=None, key_fn="support.keyfns:first_subtask")
    as_custom = replace(plan, edges=[custom if e is keyed else e for e in plan.edges])
    files = [f for f in _with_data(move) if f.operator_id == keyed.down_head]
    assert {f.down for f in files} == {0, 1, 2}
    checked = set()
    for f in files:
        problems, _ = check_file(out, f, as_custom)
        for ch in (c for c in f.channels if c.records and c.gate == keyed.gate):
            where = f"{f.name} channel (gate {ch.gate}, input channel {ch.up}) of subtask {f.down}"
            misplaced = f"{where}: {ch.records} records whose key group belongs to another subtask"
            assert (misplaced in problems) == (f.down != 0), (f.down, problems)
            checked.add(f.down)
    assert checked == {0, 1, 2}


def test_damage_in_several_files_is_all_reported(rescaled, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out, plan, move = rescaled
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    damaged = _with_data(move)[:2]
    for f in damaged:
        (copy / f.name).write_bytes((copy / f.name).read_bytes()[:-3])
    problems = self_check(copy, plan, move)
    for f in damaged:
        assert f"{f.name}: {f.size - 3} bytes on disk, {f.size} written" in problems, problems


def test_every_channel_with_missing_chunks_is_reported(rescaled, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out, plan, move = rescaled
    f = max(_with_data(move), key=lambda f: len([c for c in f.channels if c.offsets]))
    channels = [c for c in f.channels if c.offsets]
    assert len(channels) >= 2
    shutil.copytree(out, tmp_path / "copy")
    cut = channels[0].offsets[0]  # every channel loses its chunks: each is reported, not just the first
    (tmp_path / "copy" / f.name).write_bytes((out / f.name).read_bytes()[:cut])
    problems, _ = check_file(tmp_path / "copy", f, plan)
    for ch in channels:
        where = f"{f.name} channel (gate {ch.gate}, input channel {ch.up}) of subtask {f.down}: "
        assert any(p.startswith(where) and "(byte offset " in p for p in problems), (where, problems)


def _per_edge(plan, move: MoveResult, out: Path) -> dict[int, int]:  # type: ignore[no-untyped-def]
    """Records written per edge, counted from the files on disk (not from what the move reports it read): each
    new channel's chunks ([i32 length][payload]) joined and walked element by element, records being tags 0
    and 1 (docs/format/stream-elements.md); a channel belongs to the edge into its (operator, gate)."""
    edge_of = {(ep.down_head, ep.gate): ep.index for ep in plan.edges}
    written: dict[int, int] = {}
    for f in move.files:
        data = (out / f.name).read_bytes()
        for ch in f.channels:
            stream = b"".join(
                data[o + 4 : o + 4 + int.from_bytes(data[o : o + 4], "big", signed=True)] for o in ch.offsets
            )
            pos = records = 0
            while pos < len(stream):
                records += stream[pos + 4] in (0, 1)
                pos += 4 + int.from_bytes(stream[pos : pos + 4], "big", signed=True)
            assert pos == len(stream)
            edge = edge_of[(f.operator_id, ch.gate)]
            written[edge] = written.get(edge, 0) + records
    return written


def test_totals_balance_exactly_once(rescaled) -> None:  # type: ignore[no-untyped-def]
    out, plan, move = rescaled
    written = _per_edge(plan, move, out)  # exactly once: every record read is written once
    source = analyze(load_checkpoint(next(FIXTURE.glob("checkpoints/*/chk-*"))), load_plan(FIXTURE / "jobgraph.json"))
    # parse and count are rescaled: every edge (src -> parse -> count -> check) is moved, every record once
    assert sum(written.values()) == sum(c.records or 0 for c in source.channels) > 0
    assert check_totals(plan, move, written) == []
    assert check_totals(plan, MoveResult([], []), {}) == []  # nothing read, nothing written: nothing wrong


def test_a_lost_record_is_reported_per_source_and_per_edge(rescaled) -> None:  # type: ignore[no-untyped-def]
    out, plan, move = rescaled
    written = _per_edge(plan, move, out)
    rep = max(move.sources, key=lambda r: r.records)
    short = MoveResult(move.files, [replace(r, copies=r.copies - 1) if r is rep else r for r in move.sources])
    ep = plan.edges[plan.sources[rep.sid].edge]
    assert check_totals(plan, short, written) == [
        f"{plan.sources[rep.sid].label}: {rep.records} records read, {rep.records - 1} routed",
        f"edge {ep.label}: {written[ep.index] - 1} records routed, {written[ep.index]} written",
    ]
    assert check_totals(plan, MoveResult([], []), written) == [
        f"edge {e.label}: 0 records routed, {written[e.index]} written" for e in plan.edges if written.get(e.index)
    ]
    assert check_totals(plan, move, {}) == [
        f"edge {e.label}: {written[e.index]} records routed, 0 written" for e in plan.edges if written.get(e.index)
    ]


def test_a_broadcast_edge_delivers_every_record_to_every_subtask(rescaled) -> None:  # type: ignore[no-untyped-def]
    _, plan, move = rescaled
    rep = max(move.sources, key=lambda r: r.records)
    ep = plan.edges[plan.sources[rep.sid].edge]
    edges = [replace(e, rule=BROADCAST) if e is ep else e for e in plan.edges]
    broadcast = replace(plan, edges=edges)
    n = ep.new_down_p
    assert n > 1
    ok = MoveResult([], [replace(rep, copies=rep.records * n)])
    assert check_totals(broadcast, ok, {ep.index: rep.records * n}) == []
    once = MoveResult([], [replace(rep, copies=rep.records)])
    label = plan.sources[rep.sid].label
    assert check_totals(broadcast, once, {ep.index: rep.records}) == [
        f"{label}: {rep.records} records read, {rep.records} routed"
    ]


@pytest.mark.parametrize("block", [1000, 3000, 10_000])
def test_blocks_of_several_chunks_read_back_clean(rescaled, monkeypatch: pytest.MonkeyPatch, block: int) -> None:  # type: ignore[no-untyped-def]
    """Chunks (1 KiB here) gathered into blocks of one, several or all chunks: the same clean result."""
    out, plan, move = rescaled
    monkeypatch.setattr(verify, "BLOCK", block)
    assert self_check(out, plan, move) == []


def to_first_subtask(value: bytes, parallelism: int) -> int:
    """A user's custom partitioner (key_fns' ``module:function`` for a CUSTOM edge): everything to subtask 0."""
    return 0


def test_a_custom_edge_checks_where_its_partitioner_places_each_record(rescaled) -> None:  # type: ignore[no-untyped-def]
    """The self-check holds a CUSTOM edge's records to the user's partitioner as it holds a hash edge's to the key
    groups: with a partitioner that sends everything to subtask 0, every record on another subtask is misplaced."""
    out, plan, move = rescaled
    keyed = next(e for e in plan.edges if e.rule == HASH)
    custom = replace(keyed, rule=CUSTOM, key=None, key_fn=f"{__name__}:to_first_subtask")
    as_custom = replace(plan, edges=[custom if e is keyed else e for e in plan.edges])
    files = [f for f in _with_data(move) if f.operator_id == keyed.down_head]
    assert {f.down for f in files} >= {0, 1}
    found = 0
    for f in files:
        problems, _ = check_file(out, f, as_custom)
        misplaced = [p for p in problems if p.endswith("records whose key group belongs to another subtask")]
        expected = [
            f"{f.name} channel (gate {ch.gate}, input channel {ch.up}) of subtask {f.down}: {ch.records} records whose "
            "key group belongs to another subtask"
            for ch in f.channels
            if ch.records and ch.gate == keyed.gate and f.down != 0
        ]
        assert misplaced == expected, problems
        found += len(expected)
    assert found > 0
