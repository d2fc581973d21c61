"""analyze on real fixtures, proven against the truth the fixture job writes into every record:
values on the keyBy edge are "key:srcSubtask:seq" (seq counted per source subtask, kept in the
operator list state "seq" of tostr)."""

from __future__ import annotations

import pytest
from support.fixtures import Fixture, all_fixtures, fixture_named

from spillway.flink.keygroups import java_string_hash, key_group_for_hash, operator_index
from spillway.formats.metadata_codec import decode_metadata
from spillway.formats.values import decode_value, read_long
from spillway.inspect.analyze import FULLY_FINISHED, NOT_RECORDED, PARTIALLY_FINISHED, RUNNING, analyze
from spillway.inspect.topology import load_plan
from spillway.storage.load import load_checkpoint

SCENARIOS = (
    "unaligned",
    "unaligned-p3",
    "one-file-per-subtask",
    "inline",
    "finished",
    "rocksdb-incremental",
    "file-merging",
)


def _has_channel_state(fx: Fixture) -> bool:
    cp = decode_metadata(fx.metadata.read_bytes())
    return any(s.input_channel_state or s.result_subpartition_state for o in cp.operators for s in o.subtasks)


# The fixtures of the standard job (src -> tostr -> keyBy -> slow -> ...) that caught channel state.
STANDARD_JOB = [f for f in all_fixtures() if f.info["scenario"] in SCENARIOS and _has_channel_state(f)]


def _run(fx: Fixture, keep: int = 10**9):
    loaded = load_checkpoint(fx.checkpoint_dir)
    return loaded, analyze(loaded, load_plan(fx.root / "jobgraph.json"), keep_records=keep)


def _seq_state(loaded, op_uid_or_name: str) -> dict[int, int]:
    """tostr's operator list state "seq" per subtask: the next sequence number it would emit."""
    op = next(o for o in loaded.checkpoint.operators if op_uid_or_name in (o.uid, o.name, o.operator_id))
    out = {}
    for sub in op.subtasks:
        h = sub.managed_operator_state
        entry = next(e for e in h.states if e.name == "seq")
        delegate = h.delegate
        if hasattr(delegate, "data"):
            data = delegate.data
        else:
            resolved = loaded.resolver.resolve(delegate)
            data = resolved.local.read_bytes()
            if hasattr(delegate, "start_pos"):
                data = data[delegate.start_pos : delegate.start_pos + delegate.state_size]
        out[sub.index] = read_long(data, entry.offsets[0])[0]
    return out


@pytest.mark.parametrize("fx", [pytest.param(f, id=f.name) for f in STANDARD_JOB])
def test_keyby_channels_match_what_the_job_sent(fx: Fixture) -> None:
    loaded, result = _run(fx)
    slow = next(o for o in loaded.checkpoint.operators if o.operator_id == "59fa767824610e31f4a11d6125e09bf4")
    keyby = [c for c in result.channels if c.ship_strategy == "HASH"]
    assert keyby and all(c.problem is None for c in keyby)
    assert len(keyby) == slow.parallelism * slow.parallelism
    seen: dict[int, set[int]] = {}
    for ch in keyby:
        u, d = ch.upstream["subtask"], ch.downstream["subtask"]
        assert ch.records == len(ch.record_list) > 0 or ch.records == 0
        last = -1
        for rec in ch.record_list:
            key, src, seq = decode_value("string", rec["value"]).split(":")
            assert int(src) == u, f"{ch.label}: record from subtask {src}"
            assert int(seq) > last, f"{ch.label}: out of order at record {rec['seq']}"
            last = int(seq)
            kg = key_group_for_hash(java_string_hash(key), slow.max_parallelism)
            assert operator_index(slow.max_parallelism, slow.parallelism, kg) == d
            assert int(seq) not in seen.setdefault(u, set()), "a record appears on two channels"
            seen[u].add(int(seq))
    # Everything in flight was emitted before the cut: below tostr's checkpointed counter.
    counters = _seq_state(loaded, "d8cec9b362de91fa6281b2882b1d6f93")  # murmur3("tostr")
    for u, seqs in seen.items():
        assert max(seqs) < counters[u]


def test_finished_states_from_flip147_markers() -> None:
    _loaded, result = _run(fixture_named("2.3.0-finished"), keep=0)
    states = {o.operator.uid: (o.finished_state, o.finished_subtasks) for o in result.operators}
    assert states["bsrc"] == (FULLY_FINISHED, [])
    assert states["psrc"] == (PARTIALLY_FINISHED, [0])
    assert states["slow"] == (RUNNING, [])
    _, old = _run(fixture_named("1.10.3-aligned"), keep=0)
    assert {o.finished_state for o in old.operators} == {NOT_RECORDED}


def test_in_flight_volume_adds_up() -> None:
    _loaded, result = _run(fixture_named("2.3.0-unaligned-p3"), keep=0)
    total_ops = sum(o.in_flight_bytes for o in result.operators)
    total_channels = sum(c.bytes for c in result.channels)
    assert total_ops == total_channels > 0
    assert sum(o.in_flight_records for o in result.operators) == sum(c.records or 0 for c in result.channels)
    for ch in result.channels:
        assert [b.seq for b in ch.buffers] == list(range(len(ch.buffers)))
        sides = [b.side for b in ch.buffers]
        assert sides == sorted(sides, key=lambda s: s != "input"), "input buffers replay first"


def test_junction_records_are_reported() -> None:
    found = 0
    for fx in STANDARD_JOB:
        _, result = _run(fx, keep=0)
        for ch in result.channels:
            if ch.junction_record:
                found += 1
                assert ch.junction_record["input_bytes"] > 0 and ch.problem is None
    assert found > 0, "some fixture should have a record straddling input and output state"
