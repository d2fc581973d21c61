"""Keyed and operator state redistributed to a new parallelism, checked on real Flink checkpoints.

The checks parse the real bytes with the fixture job's serializers (String keys, Long counts, VoidNamespace;
Long / String / byte[] list elements; a String->Long broadcast map) instead of trusting spillway's offset
arithmetic: every key-group section and every list element must parse to exactly its extent, appear in the new
handles exactly once (union: once across all new subtasks, see operator_state.py; broadcast: one copy per new
subtask) with identical bytes, and new subtask i must hold only key groups Flink assigns to it.
"""

from __future__ import annotations

import copy
import json
import struct
from collections import Counter
from dataclasses import dataclass

import pytest
from support.fixtures import fixture_named

from spillway.flink.keygroups import key_group_range
from spillway.formats.errors import CheckpointFormatError
from spillway.formats.metadata_codec import decode_metadata, encode_metadata
from spillway.model.checkpoint import (
    ByteStreamHandle,
    ChangelogByteIncrementHandle,
    ChangelogHandle,
    IncrementalHandle,
    KeyGroupRange,
    KeyGroupsHandle,
    OperatorState,
    SubtaskState,
)
from spillway.rescale.operator_state import _split, java_hashmap_order
from spillway.rescale.state import OperatorRescale, RescaleRefused, rescale_operator_state_and_keyed
from spillway.rescale.state_files import iter_file_bytes
from spillway.storage.blobs import DelegateBlobs
from spillway.storage.load import load_checkpoint

# --------------------------------------------------------------------------------------------------
# Reading the fixture job's bytes


def varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, pos


def string_end(data: bytes, pos: int) -> int:
    """End of a StringSerializer value (varint length+1, then one varint per UTF-16 unit)."""
    n, pos = varint(data, pos)
    for _ in range(max(n - 1, 0)):
        _, pos = varint(data, pos)
    return pos


def heap_section_end(data: bytes, pos: int, kg: int) -> int:
    """A hashmap-backend checkpoint's key-group section: kg, then per state: id, count, (ns, key, long)."""
    assert struct.unpack_from(">i", data, pos)[0] == kg, f"section of key group {kg} starts elsewhere"
    pos += 4
    while pos < len(data) and struct.unpack_from(">i", data, pos)[0] != kg + 1:
        pos += 2  # state id
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        for _ in range(count):
            pos = string_end(data, pos + 1) + 8  # VoidNamespace byte, String key, Long value
    return pos


def savepoint_section_end(data: bytes, pos: int) -> int:
    """A canonical savepoint's key-group section: state id, (len key, len value)… until 0xFFFF."""
    while True:
        (state,) = struct.unpack_from(">H", data, pos)
        pos += 2
        if state == 0xFFFF:
            return pos
        while True:
            (klen,) = struct.unpack_from(">i", data, pos)
            last = data[pos + 4] & 0x80
            pos += 4 + klen
            (vlen,) = struct.unpack_from(">i", data, pos)
            pos += 4 + vlen
            if last:
                break


def element_end(name: str, data: bytes, pos: int) -> int:
    if name in ("seq", "seen"):  # Long
        return pos + 8
    if name == "seen-union":  # String
        return string_end(data, pos)
    if name == "SourceReaderState":  # byte[]
        return pos + 4 + struct.unpack_from(">i", data, pos)[0]
    if name == "rules":  # broadcast MapState<String, Long>
        (size,) = struct.unpack_from(">i", data, pos)
        pos += 4
        for _ in range(size):
            pos = string_end(data, pos) + 8
        return pos
    raise AssertionError(f"no serializer known for state {name!r}")


@dataclass
class Source:
    blobs: DelegateBlobs
    new_files: dict[str, bytes]

    def bytes_of(self, handle: object) -> bytes:
        name = getattr(handle, "relative_path", None)
        if name in self.new_files:
            return self.new_files[name]
        blob = self.blobs.get(handle)
        assert blob is not None, handle
        return blob.read_at(0, blob.size)


def key_groups(h: KeyGroupsHandle, data: bytes, whole: bool) -> tuple[bytes, dict[int, bytes]]:
    """(header, key group -> section bytes), every section parsed to its exact end. ``whole``: the handle
    owns its stream to the end (Flink's own handles, spillway's new files), so nothing may follow the last
    section; a handle cut from a larger stream is followed by the next key group's section."""
    present = [(h.key_groups.start + i, off) for i, off in enumerate(h.offsets) if off]
    header = data[: present[0][1]] if present else b""
    sections: dict[int, bytes] = {}
    for n, (kg, off) in enumerate(present):
        end = savepoint_section_end(data, off) if h.code == 7 else heap_section_end(data, off, kg)
        if n + 1 < len(present):
            expected_end = present[n + 1][1]
        elif whole:
            expected_end = len(data)
        else:
            expected_end = end
            assert end == len(data) or h.code == 7 or struct.unpack_from(">i", data, end)[0] == kg + 1
        assert end == expected_end, f"key group {kg}: parsed to {end}, next section/end of data at {expected_end}"
        sections[kg] = data[off:end]
    return header, sections


def elements(handle, data: bytes) -> dict[str, list[bytes]]:
    """state name -> element bytes in list order, each parsed to exactly its extent."""
    offsets = sorted(o for e in handle.states for o in e.offsets)
    bounds = dict(zip(offsets, [*offsets[1:], len(data)], strict=True))
    out: dict[str, list[bytes]] = {}
    for e in handle.states:
        items = out.setdefault(e.name, [])
        for o in e.offsets:
            end = element_end(e.name, data, o)
            assert end == bounds[o], f"{e.name} element at {o} parsed to {end}, extent ends at {bounds[o]}"
            items.append(data[o:end])
    return out


# --------------------------------------------------------------------------------------------------
# The checks


def rescaled(fixture: str, new_p: int) -> list[tuple[OperatorState, OperatorRescale, Source]]:
    fx = fixture_named(fixture)
    loaded = load_checkpoint(fx.checkpoint_dir)
    blobs = DelegateBlobs(loaded.resolver)
    out = []
    for op in loaded.checkpoint.operators:
        result = rescale_operator_state_and_keyed(op, new_p, blobs, features=loaded.checkpoint.features)
        files = {f.relative_path: b"".join(iter_file_bytes(f, blobs)) for f in result.files}
        for f in result.files:
            assert len(files[f.relative_path]) == f.size
        out.append((op, result, Source(blobs, files)))
    return out


def check_keyed(op: OperatorState, result: OperatorRescale, src: Source, new_p: int, kind: str) -> int:
    old_sections: dict[int, bytes] = {}
    headers = set()
    for s in op.subtasks:
        h = getattr(s, f"{kind}_keyed_state")
        if isinstance(h, KeyGroupsHandle):
            header, sections = key_groups(h, src.bytes_of(h.delegate), whole=True)
            headers.add(header)
            assert not old_sections.keys() & sections.keys()
            old_sections.update(sections)
    seen: Counter[int] = Counter()
    for sub in result.subtasks:
        h = getattr(sub, f"{kind}_keyed_state")
        if h is None:
            continue
        first, last = key_group_range(op.max_parallelism, new_p, sub.index)
        assert first <= h.key_groups.start and h.key_groups.last <= last, (sub.index, h.key_groups)
        assert len(h.offsets) == h.key_groups.count
        whole = h.delegate.__class__.__name__ == "RelativeFileHandle" and h.delegate.relative_path in src.new_files
        data = src.bytes_of(h.delegate)
        header, sections = key_groups(h, data, whole=whole)
        # Flink reads the header from byte 0 (self-delimiting): a new file starts with exactly the old header,
        # a cut handle keeps the whole old stream.
        assert header in headers if whole else any(data.startswith(old) for old in headers)
        for kg, data in sections.items():
            assert kg in range(first, last + 1)
            assert data == old_sections[kg], f"key group {kg} differs"
            seen[kg] += 1
    assert seen == Counter(old_sections.keys()), "every old key group exactly once"
    return len(seen)


def check_operator(op: OperatorState, result: OperatorRescale, src: Source, new_p: int, kind: str) -> Counter:
    old: list[dict[str, list[bytes]]] = []
    modes: dict[str, int] = {}
    for j in range(op.parallelism):
        s = op.subtask(j)
        h = getattr(s, f"{kind}_operator_state") if s else None
        old.append(elements(h, src.bytes_of(h.delegate)) if h else {})
        for e in h.states if h else []:
            modes[e.name] = e.mode
    new = []
    for sub in result.subtasks:
        h = getattr(sub, f"{kind}_operator_state")
        new.append(elements(h, src.bytes_of(h.delegate)) if h else {})
        for e in h.states if h else []:
            assert modes[e.name] == e.mode
    stats: Counter = Counter()
    for name, mode in modes.items():
        old_items = [x for j in range(op.parallelism) for x in old[j].get(name, [])]
        new_items = [x for i in range(new_p) for x in new[i].get(name, [])]
        if mode == 2:  # BROADCAST: every new subtask one copy, the one Flink picks (old i % n)
            holders = [j for j in range(op.parallelism) if name in old[j]]
            for i in range(new_p):
                assert new[i][name] == old[holders[i % len(holders)]][name]
        else:  # SPLIT_DISTRIBUTE and UNION: each element exactly once, per-old-subtask order kept
            assert Counter(new_items) == Counter(old_items), name
            unique = len(set(old_items)) == len(old_items)  # order is only observable on distinct elements
            for j in range(op.parallelism if unique else 0):
                mine = old[j].get(name, [])
                for i in range(new_p):
                    got = [x for x in new[i].get(name, []) if x in mine]
                    assert got == [x for x in mine if x in got], "relative order of one old subtask's elements"
        if mode == 0:  # sizes as Flink's split deals them: total // p each, the remainder one more
            sizes = sorted((len(new[i].get(name, [])) for i in range(new_p)), reverse=True)
            base, rem = divmod(len(old_items), new_p)
            assert sizes == [base + 1] * rem + [base] * (new_p - rem)
        stats[name] += len(new_items)
    return stats


CASES = [
    ("2.3.0-unaligned", 3),
    ("2.3.0-unaligned", 4),
    ("2.3.0-unaligned", 1),
    ("2.3.0-unaligned-p3", 2),
    ("2.3.0-unaligned-p3", 1),
    ("2.3.0-unaligned-p3", 4),
    ("2.3.0-operator-states", 3),
    ("2.3.0-operator-states", 1),
    ("2.3.0-operator-states", 4),
    ("2.3.0-savepoint", 3),
    ("2.3.0-savepoint", 1),
    ("1.20.3-unaligned", 3),
    ("1.20.3-unaligned", 1),
    ("1.15.4-unaligned", 3),
    ("1.15.4-unaligned", 1),
]


@pytest.mark.parametrize(("fixture", "new_p"), CASES)
def test_every_key_group_and_element_lands_exactly_once(fixture: str, new_p: int) -> None:
    keyed = 0
    for op, result, src in rescaled(fixture, new_p):
        assert [s.index for s in result.subtasks] == list(range(new_p))
        for s in result.subtasks:
            assert not s.input_channel_state and not s.result_subpartition_state and not s.finished
        referenced = {getattr(h.delegate, "relative_path", None) for s in result.subtasks for h in _handles(s)}
        assert {f.relative_path for f in result.files} <= referenced  # no stray files
        for kind in ("managed", "raw"):
            keyed += check_keyed(op, result, src, new_p, kind)
            check_operator(op, result, src, new_p, kind)
    assert keyed > 0  # slow's non-empty key groups (all 128 in checkpoints; the savepoint skips empty ones)


def _handles(s: SubtaskState) -> list:
    return [
        h
        for h in (s.managed_keyed_state, s.raw_keyed_state, s.managed_operator_state, s.raw_operator_state)
        if h is not None and hasattr(h, "delegate")
    ]


def test_down_scaling_merges_key_groups_into_one_file_and_up_scaling_cuts() -> None:
    by_label = {op.label(): (op, r) for op, r, _ in rescaled("2.3.0-unaligned-p3", 2)}
    slow = by_label["slow"][1]
    assert len([f for f in slow.files]) == 2  # new 0 = old 0 + part of old 1; new 1 = rest of old 1 + old 2
    assert all(s.managed_keyed_state.delegate.relative_path for s in slow.subtasks)
    up = {op.label(): r for op, r, _ in rescaled("2.3.0-unaligned", 4)}["slow"]
    assert up.files == []  # every new range inside one old handle: metadata only
    assert all(isinstance(s.managed_keyed_state.delegate, ByteStreamHandle) for s in up.subtasks)


def test_union_elements_are_stored_once_because_flink_unions_on_every_restore() -> None:
    ops = {op.label(): (op, r, src) for op, r, src in rescaled("2.3.0-operator-states", 3)}
    op, result, src = ops["ops"]
    stats = check_operator(op, result, src, 3, "managed")
    assert stats["seen-union"] == 2 and stats["seen"] == 2 and stats["rules"] == 3


def slow_id(fixture: str) -> str:
    """The keyed operator's id as Flink computed it (ids.json; releases before 2.0 store no uids)."""
    ids = json.loads((fixture_named(fixture).root / "ids.json").read_text())
    return next(n["operator_id"] for n in ids["stream_nodes"] if n["uid"] == "slow")


# Key-group ranges Flink 2.3.0 and 1.20.3 restore per new subtask of these max-parallelism-128 jobs (their logs:
# "Performing range delete for backend with target key-groups range [43, 85]" ...).
FLINK_RANGES = {4: [(0, 31), (32, 63), (64, 95), (96, 127)], 3: [(0, 42), (43, 85), (86, 127)], 2: [(0, 63), (64, 127)]}


@pytest.mark.parametrize(
    ("fixture", "new_p", "olds"),
    [
        # old subtasks whose ranges overlap each new subtask's: what StateAssignmentOperation hands it
        ("2.3.0-rocksdb-incremental", 4, [[0], [0], [1], [1]]),
        ("2.3.0-rocksdb-incremental", 3, [[0], [0, 1], [1]]),
        ("2.3.0-rocksdb-incremental", 1, [[0, 1]]),
        ("2.3.0-rocksdb-incremental-p3", 2, [[0, 1], [1, 2]]),
        ("1.20.3-rocksdb-incremental", 3, [[0], [0, 1], [1]]),
        ("1.20.3-rocksdb-incremental-p3", 2, [[0, 1], [1, 2]]),
    ],
)
def test_rocksdb_incremental_snapshots_go_whole_to_every_overlapping_subtask(
    fixture: str, new_p: int, olds: list[list[int]]
) -> None:
    ops = {op.operator_id: (op, r) for op, r, _ in rescaled(fixture, new_p)}
    op, r = ops[slow_id(fixture)]
    old = [s.managed_keyed_state for s in op.subtasks]
    assert all(isinstance(h, IncrementalHandle) for h in old)
    assert r.files == []  # shared, private and meta files are referenced where they are
    for i, (sub, wanted) in enumerate(zip(r.subtasks, olds, strict=True)):
        h = sub.managed_keyed_state
        if len(wanted) == 1:
            assert h is old[wanted[0]]
            continue
        assert isinstance(h, ChangelogHandle)
        assert h.code == 14  # ChangelogStateBackendHandleImpl V2, the form Flink 1.16+ reads
        assert h.materialized == [old[j] for j in wanted] and h.non_materialized == []
        assert (h.key_groups.start, h.key_groups.last) == (FLINK_RANGES.get(new_p) or [(0, 127)])[i]


def test_wrapped_snapshots_rescale_again_and_round_trip_through_metadata() -> None:
    """2 -> 3 -> 2: the middle checkpoint's wrapped snapshots are unwrapped and each snapshot counted once, so the
    result is the original's handles; the middle checkpoint's keyed handles encode and decode to themselves."""
    loaded = load_checkpoint(fixture_named("2.3.0-rocksdb-incremental").checkpoint_dir)
    cp = copy.deepcopy(loaded.checkpoint)
    blobs = DelegateBlobs(loaded.resolver)
    slow = next(o for o in cp.operators if o.label() == "slow")
    old = [s.managed_keyed_state for s in slow.subtasks]
    for op in cp.operators:
        new = rescale_operator_state_and_keyed(op, 3, blobs, features=cp.features).subtasks
        op.subtasks = [s for s in new if s.has_state()]
        op.parallelism = 3
    back_slow = next(o for o in decode_metadata(encode_metadata(cp)).operators if o.label() == "slow")
    assert [s.managed_keyed_state for s in back_slow.subtasks] == [s.managed_keyed_state for s in slow.subtasks]
    assert isinstance(back_slow.subtasks[1].managed_keyed_state, ChangelogHandle)
    back = rescale_operator_state_and_keyed(slow, 2, blobs, features=cp.features)
    assert [s.managed_keyed_state for s in back.subtasks] == old


@pytest.mark.parametrize("fixture", ["1.12.5-rocksdb-incremental", "1.10.3-rocksdb-incremental"])
def test_several_snapshots_for_one_subtask_are_refused_before_flink_1_16(fixture: str) -> None:
    """Their ``_metadata`` holds one keyed handle per subtask and those releases have no changelog wrapper that a
    job without the changelog backend restores; splits inside one old range still pass."""
    ops = {op.operator_id: r for op, r, _ in rescaled(fixture, 4)}
    assert [type(s.managed_keyed_state) for s in ops[slow_id(fixture)].subtasks] == [IncrementalHandle] * 4
    with pytest.raises(RescaleRefused, match=r"old subtasks #0 \[0-63\], #1 \[64-127\].*Flink 1.15 or earlier"):
        rescaled(fixture, 3)


def _operator(fixture: str, uid: str) -> OperatorState:
    ids = json.loads((fixture_named(fixture).root / "ids.json").read_text())
    op_id = next(n["operator_id"] for n in ids["stream_nodes"] if n["uid"] == uid)
    cp = load_checkpoint(fixture_named(fixture).checkpoint_dir).checkpoint
    return next(o for o in cp.operators if o.operator_id == op_id)


@pytest.mark.parametrize(
    ("fixture", "new_p", "olds"),
    [
        ("2.3.0-counted-changelog", 3, [[0], [0, 1], [1]]),
        ("2.3.0-counted-changelog-p3", 2, [[0, 1], [1, 2]]),
        ("1.20.3-counted-changelog", 1, [[0, 1]]),
        ("1.20.3-counted-changelog-p3", 2, [[0, 1], [1, 2]]),
    ],
)
def test_changelog_parts_go_whole_to_every_overlapping_subtask(fixture: str, new_p: int, olds: list[list[int]]) -> None:
    """Each new subtask: one ChangelogStateBackendHandle over its own key groups holding the materialized snapshots
    and changelog increments of every old subtask whose range overlaps, in old subtask order (Flink's assignment
    hands exactly these; its restore applies each increment's changes of the subtask's key groups only)."""
    op = _operator(fixture, "count")
    old = [s.managed_keyed_state for s in op.subtasks]
    assert all(isinstance(h, ChangelogHandle) and h.materialized and h.non_materialized for h in old)
    blobs = DelegateBlobs(load_checkpoint(fixture_named(fixture).checkpoint_dir).resolver)
    r = rescale_operator_state_and_keyed(
        op, new_p, blobs, features=load_checkpoint(fixture_named(fixture).checkpoint_dir).checkpoint.features
    )
    assert r.files == []
    for i, (sub, wanted) in enumerate(zip(r.subtasks, olds, strict=True)):
        h = sub.managed_keyed_state
        assert isinstance(h, ChangelogHandle) and h.code == 14
        assert (h.key_groups.start, h.key_groups.last) == (FLINK_RANGES.get(new_p) or [(0, 127)])[i]
        assert h.materialized == [m for j in wanted for m in old[j].materialized]
        assert h.non_materialized == [n for j in wanted for n in old[j].non_materialized]


def test_changelog_state_of_an_older_format_is_refused() -> None:
    op = _operator("2.3.0-counted-changelog", "count")
    blobs = DelegateBlobs(load_checkpoint(fixture_named("2.3.0-counted-changelog").checkpoint_dir).resolver)
    with pytest.raises(RescaleRefused, match=r"changelog state written by Flink 1\.15 or earlier"):
        rescale_operator_state_and_keyed(op, 3, blobs)  # no format given: treated as one without the wrapper


def _slow(fixture: str) -> tuple[OperatorState, DelegateBlobs]:
    loaded = load_checkpoint(fixture_named(fixture).checkpoint_dir)
    op = next(o for o in loaded.checkpoint.operators if o.label() == "slow")
    return copy.deepcopy(op), DelegateBlobs(loaded.resolver)


def test_different_headers_are_refused() -> None:
    op, blobs = _slow("2.3.0-unaligned")
    h = op.subtasks[1].managed_keyed_state
    data = bytearray(h.delegate.data)
    data[100] ^= 1  # a different serializer snapshot byte
    h.delegate = ByteStreamHandle(h.delegate.name, bytes(data))
    assert rescale_operator_state_and_keyed(op, 2, blobs).files == []  # cuts need no header
    with pytest.raises(RescaleRefused, match=r"headers .* differ"):
        rescale_operator_state_and_keyed(op, 3, blobs)


def test_changelog_state_is_refused() -> None:
    op, blobs = _slow("2.3.0-unaligned")
    op.subtasks[0].managed_keyed_state = ChangelogByteIncrementHandle(KeyGroupRange(0, 64), 0, 1, [], "id")
    with pytest.raises(RescaleRefused, match=r"changelog state .* rescale in Flink"):
        rescale_operator_state_and_keyed(op, 3, blobs)


def test_offsets_outside_the_stream_are_a_format_error() -> None:
    op, blobs = _slow("2.3.0-unaligned")
    h = op.subtasks[0].managed_keyed_state
    h.offsets[-1] = 10**12
    with pytest.raises(CheckpointFormatError, match=r"byte 1406 .* not in ascending key-group order"):
        rescale_operator_state_and_keyed(op, 1, blobs)


def test_parallelism_beyond_max_parallelism_is_refused() -> None:
    op, blobs = _slow("2.3.0-unaligned")
    with pytest.raises(RescaleRefused, match=r"outside 1\.\.128"):
        rescale_operator_state_and_keyed(op, 129, blobs)


def test_split_deals_contiguous_runs_and_carries_the_start_over() -> None:
    # Flink's RoundRobinOperatorStateRepartitioner on 5 elements (old 0: a b c, old 1: d e) over 3 subtasks:
    # 2, 2, 1 in order; the next state name starts at the subtask where the remainder ran out (2).
    assigned, start = _split([(0, [1, 2, 3]), (1, [4, 5])], 3, 0)
    assert assigned == {0: [(0, [1, 2])], 1: [(0, [3]), (1, [4])], 2: [(1, [5])]}
    assert start == 2
    assigned, start = _split([(0, [7]), (1, [8])], 3, 2)  # 2 elements from subtask 2 on: 2 gets 7, 0 gets 8
    assert assigned == {2: [(0, [7])], 0: [(1, [8])]}
    assert start == 1


def test_java_hashmap_order_follows_buckets() -> None:
    # String.hashCode: "a" = 97 -> bucket 1, "b" = 98 -> 2, "p" = 112 -> 0 (capacity 16)
    assert java_hashmap_order(["b", "a", "p"]) == ["p", "a", "b"]
