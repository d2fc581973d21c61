"""The parts of ``_metadata`` no fixture exercises on its own, written and read as Flink lays them out
(docs/format/metadata.md, from MetadataV2V3SerializerBase): master states, the operator-state "present" flags of
a checkpoint built in memory, and the writer's refusals."""

from __future__ import annotations

import struct

import pytest
from support.fixtures import fixture_named

from spillway.formats.errors import CheckpointFormatError
from spillway.formats.javaser import JavaObject, JavaSerializationError
from spillway.formats.metadata_codec import decode_metadata, encode_metadata, properties_from_java
from spillway.model.checkpoint import MasterState

BASE = "2.3.0-unaligned"  # V6, the newest layout Flink writes


def _utf(text: str) -> bytes:
    """Java's DataOutput.writeUTF for ASCII: a 2-byte length, then the bytes."""
    return struct.pack(">H", len(text)) + text.encode()


def _master_state(version: int, name: str, payload: bytes) -> bytes:
    """magic 0xC96B1696, the byte length L of the rest, then i32 version, utf name, i32 n and n payload bytes."""
    rest = struct.pack(">i", version) + _utf(name) + struct.pack(">i", len(payload)) + payload
    return struct.pack(">Ii", 0xC96B1696, len(rest)) + rest


def test_master_states_are_read_and_written_in_flinks_layout() -> None:
    data = fixture_named(BASE).metadata.read_bytes()
    # Header (magic, version), the checkpoint id, then the master-state count: 0 in every fixture.
    assert data[16:20] == struct.pack(">i", 0)
    states = [(3, "hook-a", b"\x01\x02\x03"), (1, "b", b"")]
    made = data[:16] + struct.pack(">i", 2) + b"".join(_master_state(*s) for s in states) + data[20:]

    read = decode_metadata(made)
    assert [(m.version, m.name, m.payload) for m in read.master_states] == states
    assert encode_metadata(read) == made

    built = decode_metadata(data)
    built.master_states = [MasterState(name, version, payload) for version, name, payload in states]
    assert encode_metadata(built) == made


@pytest.mark.parametrize("name", ["1.10.3-aligned", "1.15.4-unaligned", BASE])  # V2, V3, V6
def test_a_checkpoint_built_without_present_flags_is_written_with_flinks(name: str) -> None:
    """Flink writes 1 before an operator-state handle and 0 for none; a checkpoint built in memory has no stored
    flags (None) and must come out as the bytes Flink wrote."""
    data = fixture_named(name).metadata.read_bytes()
    cp = decode_metadata(data)
    subtasks = [s for op in cp.operators for s in op.subtasks if not s.finished]
    assert any(s.managed_operator_state for s in subtasks) and any(s.raw_operator_state is None for s in subtasks)
    for s in subtasks:
        s.managed_operator_present = s.raw_operator_present = None
    assert encode_metadata(cp) == data


def test_stored_present_flags_are_kept() -> None:
    """A reader takes any non-zero flag as present (and then reads a handle, possibly the null one): keep what a
    file says rather than normalise it."""
    cp = decode_metadata(fixture_named(BASE).metadata.read_bytes())
    running = [(op.operator_id, s) for op in cp.operators for s in op.subtasks if not s.finished]
    op_a, with_state = next((o, s) for o, s in running if s.managed_operator_state)
    op_b, without = next((o, s) for o, s in running if s.raw_operator_state is None and s is not with_state)
    with_state.managed_operator_present = 5
    without.raw_operator_present = 1  # present, but the handle is the null handle
    back = {op.operator_id: op for op in decode_metadata(encode_metadata(cp)).operators}
    a, b = back[op_a].subtask(with_state.index), back[op_b].subtask(without.index)
    assert a is not None and b is not None
    assert a.managed_operator_present == 5 and a.managed_operator_state == with_state.managed_operator_state
    assert (b.raw_operator_present, b.raw_operator_state) == (1, None)


def test_the_writer_refuses_what_it_cannot_write() -> None:
    cp = decode_metadata(fixture_named(BASE).metadata.read_bytes())
    cp.properties_raw = None
    with pytest.raises(ValueError) as info:
        encode_metadata(cp)
    assert str(info.value) == "metadata V4+ needs the serialized CheckpointProperties (properties_raw)"
    cp.format_version = 99
    with pytest.raises(ValueError) as info:
        encode_metadata(cp)
    assert str(info.value) == f"cannot write metadata format version 99 (dialect {cp.format_dialect})"


def test_raw_operator_and_raw_keyed_state_are_written_and_read_back() -> None:
    """No fixture job uses raw state; Flink writes it exactly like managed state, behind its own flag (operator)
    or in its own slot (keyed): each raw handle is one more copy of a managed handle's bytes."""
    data = fixture_named("1.15.4-unaligned").metadata.read_bytes()
    cp = decode_metadata(data)
    subtasks = [s for op in cp.operators for s in op.subtasks if not s.finished]
    operator = next(s for s in subtasks if s.managed_operator_state and s.raw_operator_state is None)
    keyed = next(s for s in subtasks if s.managed_keyed_state and s.raw_keyed_state is None)
    operator.raw_operator_state, operator.raw_operator_present = operator.managed_operator_state, None
    keyed.raw_keyed_state = keyed.managed_keyed_state
    written = encode_metadata(cp)
    back = {(op.operator_id, s.index): s for op in decode_metadata(written).operators for s in op.subtasks}
    ids = {id(s): (op.operator_id, s.index) for op in cp.operators for s in op.subtasks}
    a, b = back[ids[id(operator)]], back[ids[id(keyed)]]
    assert (a.raw_operator_present, a.raw_operator_state) == (1, operator.managed_operator_state)
    assert b.raw_keyed_state == keyed.managed_keyed_state
    assert encode_metadata(decode_metadata(written)) == written


def test_an_operator_without_a_name_is_written_with_the_empty_string() -> None:
    """V5+: absence is written as the empty string (a Java UTF of length 0), and read back as no name."""
    data = fixture_named(BASE).metadata.read_bytes()
    cp = decode_metadata(data)
    op = next(o for o in cp.operators if o.name)
    name_bytes = len(op.name.encode())
    op.name = None
    written = encode_metadata(cp)
    assert len(written) == len(data) - name_bytes
    assert next(o for o in decode_metadata(written).operators if o.operator_id == op.operator_id).name is None


def test_a_fully_finished_operator_keeps_its_negative_count_and_gets_flinks_otherwise() -> None:
    """Flink writes -1 as the subtask count of a fully finished operator (docs/format/finished-state.md); a reader
    takes any negative count as "fully finished", so a stored one is kept, and anything else becomes -1."""
    fx = fixture_named("2.3.0-finished")
    data = fx.metadata.read_bytes()
    for marker, written in ((-5, -5), (0, -1), (3, -1)):
        cp = decode_metadata(data)
        op = next(o for o in cp.operators if o.fully_finished)
        op.finished_marker = marker
        back = next(o for o in decode_metadata(encode_metadata(cp)).operators if o.operator_id == op.operator_id)
        assert (back.fully_finished, back.finished_marker, back.subtasks) == (True, written, [])
        if written == -1:
            assert encode_metadata(cp) == data


def test_v7_reference_markers() -> None:
    """V7 (apache/flink source, after 2.3.0): per running subtask a byte, 1 when a reference checkpoint id follows,
    any other value for none (Flink writes 0). A marker of 1 without an id cannot be written as 1 (the reader
    would take the next 8 bytes as an id); any other stored marker is kept."""
    cp = decode_metadata(fixture_named(BASE).metadata.read_bytes())
    cp.format_version = 7
    running = [s for op in cp.operators for s in op.subtasks if not s.finished]
    running[0].ref_marker, running[1].ref_marker = 1, 7
    back = [s for op in decode_metadata(encode_metadata(cp)).operators for s in op.subtasks if not s.finished]
    assert [(s.ref_marker, s.ref_checkpoint_id) for s in back[:2]] == [(0, None), (7, None)]


def test_properties_of_another_class_are_kept_raw_with_a_note() -> None:
    """V4+ ends with a Java-serialized CheckpointProperties. Valid Java serialization of anything else (here the
    string "abc": TC_STRING 0x74, a 2-byte length, the bytes) is kept as raw bytes with a note, not refused."""
    data = fixture_named(BASE).metadata.read_bytes()
    raw = decode_metadata(data).properties_raw
    assert raw is not None and data.endswith(raw)
    other = b"\xac\xed\x00\x05" + b"\x74" + _utf("abc")
    cp = decode_metadata(data[: len(data) - len(raw)] + other)
    assert (cp.properties, cp.properties_raw) == (None, other)
    assert cp.properties_note == "expected CheckpointProperties, found str (at byte 0 of the serialized object)"
    with pytest.raises(JavaSerializationError) as info:
        properties_from_java(JavaObject("java.util.ArrayList"))
    assert (str(info.value), info.value.offset, info.value.unsupported) == (
        "expected CheckpointProperties, found java.util.ArrayList (at byte 0 of the serialized object)",
        0,
        True,
    )


@pytest.mark.parametrize("flags", [(1, 0, 1, 0, 1, 0, 1), (0, 1, 0, 1, 0, 1, 0)])
def test_each_checkpoint_property_flag_is_read_from_its_own_field(flags: tuple[int, ...]) -> None:
    """Java serialization writes an object's primitive fields in the order its class descriptor lists them
    (sorted by name): discardCancelled, discardFailed, discardFinished, discardSubsumed, discardSuspended,
    forced, unclaimed; here right after the descriptor's end ('x', TC_ENDBLOCKDATA) and its null superclass
    ('p', TC_NULL). Every fixture has the same retained-checkpoint flags (0 0 1 1 0 0 0): set others."""
    data = fixture_named(BASE).metadata.read_bytes()
    seen = b"xp" + bytes([0, 0, 1, 1, 0, 0, 0])
    assert data.count(seen) == 1
    cp = decode_metadata(data.replace(seen, b"xp" + bytes(flags)))
    p = cp.properties
    assert p is not None
    read = (p.discard_cancelled, p.discard_failed, p.discard_finished, p.discard_subsumed)
    assert (*read, p.discard_suspended, p.forced, p.unclaimed) == tuple(bool(f) for f in flags)


def test_a_file_cut_short_is_refused_naming_the_file() -> None:
    data = fixture_named(BASE).metadata.read_bytes()
    with pytest.raises(CheckpointFormatError) as info:
        decode_metadata(data[:100], "chk-3/_metadata")
    assert info.value.file == "chk-3/_metadata" and str(info.value).startswith("chk-3/_metadata: byte ")


def test_merged_channel_handles_are_not_written_before_v6() -> None:
    """V5 has no type byte before a channel handle, so it cannot hold the merged kinds (docs/format/metadata.md)."""
    cp = decode_metadata(fixture_named("2.3.0-one-file-per-subtask").metadata.read_bytes())
    cp.format_version = 5
    with pytest.raises(ValueError) as info:
        encode_metadata(cp)
    assert str(info.value) == "a MergedInputChannelStateHandle needs metadata V6 or later"
