"""Every validate rule (spillway.inspect.findings.RULES) is triggered by a damaged copy of a real fixture (or a
wrong plan) and found with its severity, where it is (file and byte offset, operator, subtask, channel) and its
exact message, whose numbers come from the fixture (file sizes, handle sizes, Flink's key-group ranges).

Each case names the rule it is for; ``COMPANIONS`` lists the other rules a fault cannot avoid raising (a chunk
nobody claims any more is also "unclaimed", an overlapping key-group range also differs from Flink's). The last
test fails when a rule is added without a case here."""

from __future__ import annotations

import dataclasses
import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.damaged import Copy, copy_fixture, rewrite
from support.fixtures import fixture_named, flink_names

from spillway.formats.errors import CheckpointFormatError
from spillway.formats.metadata_codec import encode_metadata
from spillway.inspect.findings import RULES, Finding
from spillway.inspect.topology import load_plan
from spillway.inspect.validate import validate
from spillway.model.checkpoint import (
    ByteStreamHandle,
    InputChannelHandle,
    KeyGroupRange,
    RelativeFileHandle,
    ResultSubpartitionHandle,
)
from spillway.storage.load import load_checkpoint

UNALIGNED = "1.20.3-unaligned"  # V4: one plain handle per channel, all in one relative channel-state file
INLINE = "1.14.6-unaligned"  # small channels inline in _metadata (ByteStreamHandle)
KEYED = "1.10.3-aligned"  # keyed state of `slow` in KeyGroupsStateHandles, absolute files inside chk-3
INCREMENTAL = "2.3.0-rocksdb-incremental"
FINISHED = "2.3.0-finished"

Where = dict[str, Any]  # Finding fields the finding must have (file, offset, operator, subtask, channel)


# ------------------------------------------------------------------ helpers
def _channels(cp: Any, op_pred: Callable[[Any], bool] = lambda o: True) -> list[tuple[Any, Any, Any]]:
    """(operator, subtask, handle) of every plain channel handle, inputs first."""
    return [
        (op, sub, h)
        for op in cp.operators
        if op_pred(op)
        for sub in op.subtasks
        for h in [*sub.input_channel_state, *sub.result_subpartition_state]
    ]


def _channel_file(c: Copy) -> Path:
    (path, _), *_ = c.channel_files()
    return path


def _resize_delegates(cp: Any, name: str, delta: int) -> None:
    """Every channel handle's delegate names the whole file with its size: keep them exact."""
    for _, _, h in _channels(cp):
        if isinstance(h.delegate, RelativeFileHandle) and h.delegate.relative_path == name:
            h.delegate = dataclasses.replace(h.delegate, state_size=h.delegate.state_size + delta)


def _keyed(cp: Any) -> tuple[Any, list[Any]]:
    op = next(o for o in cp.operators if any(s.managed_keyed_state for s in o.subtasks))
    return op, sorted(op.subtasks, key=lambda s: s.index)


def _keyed_file(c: Copy, index: int = 0) -> Path:
    _, subs = _keyed(c.checkpoint())
    return c.chk / Path(subs[index].managed_keyed_state.delegate.file_name).name


def _input(cp: Any) -> tuple[Any, Any]:
    """The biggest input-side channel handle (it starts on a record boundary) and its operator."""
    op, _, h = max((x for x in _channels(cp) if isinstance(x[2], InputChannelHandle)), key=lambda x: x[2].state_size)
    return op, h


# ------------------------------------------------------------------ one damage per rule
def file_exists(c: Copy) -> Where:
    path = _channel_file(c)
    # Named after the first handle (in _metadata order) that needs the whole file: inputs come first.
    op = next(o for o, _, h in _channels(c.checkpoint()) if h.delegate.relative_path == path.name)
    path.unlink()
    return {"file": str(path), "message": f"missing file (referenced by {shown(op, c)} input_channel_state)"}


def file_size(c: Copy) -> Where:
    path = _keyed_file(c)
    op, _ = _keyed(c.checkpoint())
    data = path.read_bytes()  # Flink wrote it to the exact size its handles need
    path.write_bytes(data[:-10])
    message = f"file has {len(data) - 10} bytes, handles need {len(data)} ({shown(op, c)} managed_keyed_state)"
    return {"file": str(path), "offset": len(data) - 10, "message": message}


def file_size_extra(c: Copy) -> Where:
    path = _keyed_file(c)
    data = path.read_bytes()
    path.write_bytes(data + b"\0")
    return {"file": str(path), "message": f"file has {len(data) + 1} bytes, handle says {len(data)}"}


def path_escape(c: Copy) -> Where:
    escape = "../../../../etc/passwd"

    def mutate(cp: Any) -> None:
        for _, _, h in _channels(cp):
            h.delegate = RelativeFileHandle(escape, h.delegate.state_size)

    rewrite(c, mutate)
    return {"file": escape, "message": f"{escape}: relative path escapes the checkpoint directory"}


def file_not_local(c: Copy) -> Where:
    remote = "hdfs://namenode:8020/flink/chk-3/keyed"
    op, _ = _keyed(c.checkpoint())

    def mutate(cp: Any) -> None:
        h = _keyed(cp)[1][0].managed_keyed_state
        h.delegate = dataclasses.replace(h.delegate, path=remote)

    rewrite(c, mutate)
    return {"file": remote, "operator": shown(op, c), "subtask": 0, "message": f"{remote}: not a local path"}


def bad_path(c: Copy) -> Where:
    """A NUL byte in an absolute handle path: reported (shown escaped), never handed to the file system."""
    op, subs = _keyed(c.checkpoint())
    name = subs[0].managed_keyed_state.delegate.file_name
    nul = name + "\0.bak"

    def mutate(cp: Any) -> None:
        h = _keyed(cp)[1][0].managed_keyed_state
        h.delegate = dataclasses.replace(h.delegate, path=nul)

    rewrite(c, mutate)
    shown_name = name + "\\x00.bak"
    message = f"{shown_name}: bad path: contains a NUL byte"
    return {"file": shown_name, "operator": shown(op, c), "subtask": 0, "message": message}


def inline_channel(c: Copy) -> Where:
    found: Where = {}

    def mutate(cp: Any) -> None:
        op, sub, h = next(x for x in _channels(cp) if isinstance(x[2].delegate, ByteStreamHandle))
        length = len(h.delegate.data)
        h.state_size += 1
        found.update(
            operator=shown(op, c),
            subtask=sub.index,
            channel=h.label(),
            offset=h.offsets[0],  # an inline blob's positions are its own
            message=f"handle size {length + 1} != the inline blob's length ({length})",
        )

    rewrite(c, mutate)
    return found


def channel_header(c: Copy) -> Where:
    path = _channel_file(c)
    data = bytearray(path.read_bytes())
    data[0:4] = struct.pack(">i", 7)
    path.write_bytes(bytes(data))
    return {"file": str(path), "offset": 0, "message": "serialization version 7, expected 0"}


def chunk_chain(c: Copy) -> Where:
    path = _channel_file(c)
    size = path.stat().st_size
    path.write_bytes(path.read_bytes() + b"\0\0")  # two stray bytes after the last chunk
    rewrite(c, lambda cp: _resize_delegates(cp, path.name, 2))
    # A chunk starts after the 4-byte version and leaves room for its 4-byte length: [4, file size - 4].
    message = f"chunk chain breaks: chunk offset {size} is outside [4, {size + 2 - 4}]"
    return {"file": str(path), "offset": size, "message": message}


def chunk_offset(c: Copy) -> Where:
    path = _channel_file(c)
    found: Where = {}

    def mutate(cp: Any) -> None:
        op, sub, h = _channels(cp)[0]
        size = path.stat().st_size
        bad = size  # the first position past the end
        h.offsets[0] = bad
        found.update(operator=shown(op, c), subtask=sub.index, channel=h.label(), file=str(path), offset=bad)
        found["message"] = f"offset {bad} outside the {size}-byte channel state"

    rewrite(c, mutate)
    return found


def chunk_overlap(c: Copy) -> Where:
    found: Where = {}

    def mutate(cp: Any) -> None:
        outs = [x for x in _channels(cp) if isinstance(x[2], ResultSubpartitionHandle) and len(x[2].offsets) > 1]
        (_, _, a), (op, sub, b) = outs[0], outs[1]
        b.offsets, b.state_size = list(a.offsets), a.state_size
        found.update(operator=shown(op, c), subtask=sub.index, channel=b.label(), offset=a.offsets[0])
        found["message"] = f"chunk at {a.offsets[0]} also claimed by {shown(op, c)}#{a.subtask_index} {a.label()}"

    rewrite(c, mutate)
    return {**found, "file": str(_channel_file(c))}


def channel_size(c: Copy) -> Where:
    found: Where = {}

    def mutate(cp: Any) -> None:
        op, sub, h = _channels(cp)[0]
        h.state_size += 1
        found.update(operator=shown(op, c), subtask=sub.index, channel=h.label(), offset=h.offsets[0])
        found["message"] = f"handle size {h.state_size} != the sum of its chunks ({h.state_size - 1})"

    rewrite(c, mutate)
    return {**found, "file": str(_channel_file(c))}


def unclaimed_chunks(c: Copy) -> Where:
    found: Where = {}

    def mutate(cp: Any) -> None:
        # An output channel of the last vertex with channel state: nothing downstream holds its other half.
        _, sub, h = next(x for x in _channels(cp) if isinstance(x[2], ResultSubpartitionHandle))
        sub.result_subpartition_state.remove(h)
        found.update(offset=h.offsets[0])
        found["message"] = f"{len(h.offsets)} chunks ({h.state_size} bytes) belong to no handle"

    rewrite(c, mutate)
    return {**found, "file": str(_channel_file(c))}


def duplicate_channel(c: Copy) -> Where:
    found: Where = {}

    def mutate(cp: Any) -> None:
        op, sub, h = _channels(cp)[0]
        twin = dataclasses.replace(h, offsets=[], state_size=0)  # claims no chunk: only the duplicate is wrong
        (sub.input_channel_state if isinstance(h, InputChannelHandle) else sub.result_subpartition_state).append(twin)
        side = "input" if isinstance(h, InputChannelHandle) else "output"
        found.update(operator=shown(op, c), subtask=sub.index, channel=h.label())
        found["message"] = f"two {side} handles for channel {h.label()}"

    rewrite(c, mutate)
    return found


def _operator_id(c: Copy, name: str) -> str:
    """The id Flink gave the operator named ``name`` (the fixture's ids.json, recorded from the job)."""
    nodes = json.loads((c.root / "ids.json").read_text())["stream_nodes"]
    return next(n["operator_id"] for n in nodes if n["name"] == name)


def _payload(h: Any) -> int:
    """Payload bytes of a channel handle: its size less the 4-byte length of each chunk."""
    return h.state_size - 4 * len(h.offsets)


def _record_fault(c: Copy, change: Callable[[bytearray, int], int]) -> tuple[Where, int]:
    """Damage the first record of the biggest input handle (on 'slow'); also return how many payload bytes its
    logical channel holds: this input half plus the output half on 'tostr' (subtask = the input channel index,
    subpartition = the receiving subtask)."""
    cp = c.checkpoint()
    op, h = _input(cp)
    tostr = next(o for o in cp.operators if o.operator_id == _operator_id(c, "tostr"))
    out = next(
        x for x in tostr.subtask(h.input_channel_index).result_subpartition_state if x.info == (0, h.subtask_index)
    )
    path = c.chk / h.delegate.relative_path
    data = bytearray(path.read_bytes())
    pos = change(data, h.offsets[0] + 4)  # the first record of the chunk's payload
    path.write_bytes(bytes(data))
    where = {"file": str(path), "offset": pos, "operator": shown(op, c), "subtask": h.subtask_index}
    return where, _payload(h) + _payload(out)


def _in_part(c: Copy) -> str:
    op, h = _input(c.checkpoint())
    return f"(in {shown(op, c)}#{h.subtask_index} {h.label()})"


def record_length(c: Copy) -> Where:
    original: list[int] = []

    def change(data: bytearray, record: int) -> int:
        original.extend(struct.unpack_from(">i", data, record))
        data[record : record + 4] = struct.pack(">i", 0x7FFF0000)
        return record

    where, total = _record_fault(c, change)
    left = total - 4  # the channel's payload after this first length field
    # The damaged field is the channel's first (the input half comes first); the length Flink wrote there fits.
    where["message_start"] = (
        f"element 0 of the channel has a damaged length field: {0x7FFF0000} read, {original[0]} fits (the only one"
        f" whose correction lets the rest of the channel frame cleanly); record length {0x7FFF0000} is more than"
        f" the {left} bytes left in the channel {_in_part(c)}. With 32768-byte network buffers, Flink would silently"
        " swallow the rest of this channel"
    )
    return where


def record_tag(c: Copy) -> Where:
    def change(data: bytearray, record: int) -> int:
        data[record + 4] = 0x2A  # no StreamElement has tag 42
        return record

    where, _ = _record_fault(c, change)
    # Flink 1.20's StreamElementSerializer knows tags 0-6.
    where["message"] = f"unknown StreamElement tag 42 (valid: [0, 1, 2, 3, 4, 5, 6]) {_in_part(c)}"
    return where


def record_truncated(c: Copy) -> Where:
    """The file's last chunk belongs to an output handle (the last part of its logical channel): grow that chunk
    by two bytes (length field, handle size, delegate sizes) so the chain still ends at EOF but the logical
    channel ends two bytes into a record's 4-byte length prefix. (Cutting bytes off instead is found as a
    record-length fault: the framer knows the channel's total and sees the last record not fit.)"""
    path = _channel_file(c)
    found: Where = {}

    def mutate(cp: Any) -> None:
        op, _, h = max(_channels(cp), key=lambda x: max(x[2].offsets))
        assert isinstance(h, ResultSubpartitionHandle), "the file's last chunk must end a logical channel"
        found["message"] = (
            f"stream ends inside a length prefix (2 of 4 bytes) (in {shown(op, c)}#{h.subtask_index} {h.label()})"
        )
        last = max(h.offsets)
        data = bytearray(path.read_bytes())
        (length,) = struct.unpack(">i", data[last : last + 4])
        assert last + 4 + length == len(data)
        data[last : last + 4] = struct.pack(">i", length + 2)
        found.update(file=str(path), offset=len(data))
        path.write_bytes(bytes(data) + b"\0\0")
        h.state_size += 2
        _resize_delegates(cp, path.name, 2)

    rewrite(c, mutate)
    return found


def subtask_index(c: Copy) -> Where:
    found: Where = {}

    def mutate(cp: Any) -> None:
        op = next(o for o in cp.operators if o.subtasks and not any(s.managed_keyed_state for s in o.subtasks))
        sub = max(op.subtasks, key=lambda s: s.index)
        sub.index = op.parallelism
        found.update(operator=shown(op, c), subtask=op.parallelism)
        found["message"] = f"subtask index {op.parallelism} outside [0, {op.parallelism})"

    rewrite(c, mutate)
    return found


def finished_state(cp: Any) -> Where:
    """Not from real bytes: the format stores a finished subtask as a bare marker (it cannot carry state) and the
    decoder refuses coordinator state on a fully finished operator (test_finished_state_cannot_come_from_bytes).
    The rule guards checkpoints built or changed in memory (library users, repairs) before they are written."""
    op = next(o for o in cp.operators if any(s.finished for s in o.subtasks) and any(s.has_state() for s in o.subtasks))
    sub = next(s for s in op.subtasks if s.has_state())
    sub.finished = True
    return {"operator": shown(op), "subtask": sub.index, "message": "finished subtask holds state"}


def key_group_tiling(c: Copy) -> Where:
    found: Where = {}

    def mutate(cp: Any) -> None:
        op, subs = _keyed(cp)
        h = subs[1].managed_keyed_state
        h.key_groups = KeyGroupRange(h.key_groups.start - 1, h.key_groups.count + 1)  # takes one of subtask 0's
        h.offsets = [h.offsets[0], *h.offsets]
        found.update(operator=shown(op, c), subtask=1)
        first = h.key_groups.start
        found["message"] = f"managed_keyed_state key groups [{first}, {first}] also held by another subtask"

    rewrite(c, mutate)
    return found


def key_group_gap(c: Copy) -> Where:
    found: Where = {}

    def mutate(cp: Any) -> None:
        op, subs = _keyed(cp)
        kg = subs[1].managed_keyed_state.key_groups
        subs[1].managed_keyed_state = None  # nobody holds subtask 1's key groups
        found.update(operator=shown(op, c))
        found["message"] = f"managed_keyed_state: no subtask holds key groups [{kg.start}, {kg.last}]"

    rewrite(c, mutate)
    return found


def key_group_range(c: Copy) -> Where:
    found: Where = {}

    def mutate(cp: Any) -> None:
        op, subs = _keyed(cp)
        a, b = subs[0].managed_keyed_state, subs[1].managed_keyed_state
        # Move the boundary by one: still a tiling of [0, max parallelism), but not Flink's.
        a.key_groups = KeyGroupRange(a.key_groups.start, a.key_groups.count + 1)
        a.offsets = [*a.offsets, a.offsets[-1]]
        b.key_groups = KeyGroupRange(b.key_groups.start + 1, b.key_groups.count - 1)
        b.offsets = b.offsets[1:]
        found.update(operator=shown(op, c), subtask=0)
        start, last = a.key_groups.start, a.key_groups.last  # Flink's range: one more than it had
        found["message"] = f"managed_keyed_state covers [{start}, {last}], Flink assigns [{start}, {last - 1}]"

    rewrite(c, mutate)
    return found


def key_group_clipped(c: Copy) -> Where:
    found: Where = {}

    def mutate(cp: Any) -> None:
        op, subs = _keyed(cp)
        own = subs[0].managed_keyed_state.key_groups  # the range Flink gave subtask 0
        subs[0].managed_keyed_state.key_groups = KeyGroupRange(0, op.max_parallelism)  # the whole instance
        found.update(operator=shown(op, c), subtask=0)
        found["message"] = (
            f"managed_keyed_state covers [0, {op.max_parallelism - 1}]; "
            f"Flink restores only [{own.start}, {own.last}] of it"
        )

    rewrite(c, mutate)
    return found


def channel_index(c: Copy) -> Where:
    found: Where = {}

    def mutate(cp: Any) -> None:
        op, sub, h = next(x for x in _channels(cp) if isinstance(x[2], InputChannelHandle))
        h.input_channel_index = 7  # upstream has parallelism 2
        found.update(operator=shown(op, c), subtask=sub.index, channel=h.label())
        found["message"] = "input channel 7 >= upstream parallelism 2"

    rewrite(c, mutate)
    return found


def channel_holder(c: Copy) -> Where:
    found: Where = {}

    def mutate(cp: Any) -> None:
        # Input channel state on the chain's tail (tostr, chained behind the source), not its head.
        op, sub, h = next(x for x in _channels(cp) if isinstance(x[2], InputChannelHandle))
        src_op = next(o for o in cp.operators if o is not op and any(s.result_subpartition_state for s in o.subtasks))
        sub.input_channel_state.remove(h)
        src_op.subtask(sub.index).input_channel_state.append(h)
        found.update(operator=shown(src_op, c), subtask=sub.index, channel=h.label())
        found["message"] = "input channel state on an operator that heads no chain in the plan"

    rewrite(c, mutate)
    return found


def _edit_plan(c: Copy, change: Callable[[dict], None]) -> None:
    plan = json.loads(c.plan.read_text())
    change(plan)
    c.plan.write_text(json.dumps(plan))


def plan_mismatch(c: Copy) -> Where:
    op = next(o for o in c.checkpoint().operators if any(s.result_subpartition_state for s in o.subtasks))

    def change(plan: dict) -> None:
        for node in plan["nodes"]:
            if node["id"] == op.operator_id:
                node["parallelism"] = 3

    _edit_plan(c, change)
    return {"operator": shown(op, c)}


def plan_renamed(c: Copy) -> Where:
    """The no-uid job's own stream-graph plan with tostr renamed tostr2: Flink's generated id takes no name, so the
    plan still yields tostr's id (ids.json), which the checkpoint stores with the name tostr (V6)."""
    doc = json.loads((c.root / "plan.json").read_text())
    node = next(n for n in doc["nodes"] if n["type"] == "tostr")
    node["type"] = node["contents"] = "tostr2"
    c.plan.write_text(json.dumps(doc))
    return {"operator": "tostr2"}


def plan_unbound(c: Copy) -> Where:
    """A stream-graph plan (no job vertex ids) of another job: none of its operators is in the checkpoint."""
    c.plan.write_text((fixture_named("2.3.0-sql").root / "plan.json").read_text())
    return {"operator": "-"}


def binding_uncertain(c: Copy) -> Where:
    """Another job's plan: no operator of the checkpoint can be placed, so none of its channel state is checked
    against the plan — a warning naming the operator, not a guessed error."""
    op = next(o for o, _, _ in _channels(c.checkpoint()))
    c.plan.write_text((fixture_named("2.3.0-sql").root / "plan.json").read_text())
    return {"operator": op.label()}


def topology(c: Copy) -> Where:
    # Run without --plan: output-side channel state cannot be framed.
    outputs = sum(isinstance(h, ResultSubpartitionHandle) for _, _, h in _channels(c.checkpoint()))
    return {
        "message": f"{outputs} output-side channel handles were not framed: output state may start mid-record and "
        "only continues an input-side stream; pass --plan to check them"
    }


@dataclasses.dataclass(frozen=True)
class Case:
    fixture: str
    damage: Callable[[Copy], Where]
    plan: bool = True
    companions: frozenset[str] = frozenset()
    in_memory: bool = False  # damage(checkpoint) changes the decoded checkpoint, not the bytes


CASES: dict[str, Case] = {
    "file-exists": Case(UNALIGNED, file_exists),
    "file-size": Case(KEYED, file_size),
    "file-size-extra": Case(KEYED, file_size_extra),
    "path-escape": Case(UNALIGNED, path_escape),
    "file-not-local": Case(KEYED, file_not_local),
    "bad-path": Case(KEYED, bad_path),
    "inline-channel": Case(INLINE, inline_channel),
    # A refused header leaves the file's chunks unread: its channels are then framed against a total of 0 bytes.
    "channel-header": Case(UNALIGNED, channel_header, companions=frozenset({"record-length"})),
    "chunk-chain": Case(UNALIGNED, chunk_chain),
    # The handle loses a chunk: its size no longer adds up, the chunk is nobody's, its channel misframes.
    "chunk-offset": Case(
        UNALIGNED, chunk_offset, companions=frozenset({"channel-size", "unclaimed-chunks", "record-length"})
    ),
    # The handle's own chunks become nobody's; its channel now reads another channel's bytes mid-stream.
    "chunk-overlap": Case(UNALIGNED, chunk_overlap, companions=frozenset({"unclaimed-chunks", "record-length"})),
    "channel-size": Case(UNALIGNED, channel_size),
    "unclaimed-chunks": Case(UNALIGNED, unclaimed_chunks),
    "duplicate-channel": Case(UNALIGNED, duplicate_channel),
    "record-length": Case(UNALIGNED, record_length),
    "record-tag": Case(UNALIGNED, record_tag),
    "record-truncated": Case(UNALIGNED, record_truncated),
    "subtask-index": Case(KEYED, subtask_index),
    "finished-state": Case(FINISHED, finished_state, in_memory=True),
    # An overlap always also moves a range off Flink's assignment. (The other tiling fault, offsets != key groups,
    # cannot be written: the format stores one offset per key group of the range.)
    "key-group-tiling": Case(KEYED, key_group_tiling, companions=frozenset({"key-group-range"})),
    "key-group-gap": Case(KEYED, key_group_gap),
    "key-group-range": Case(KEYED, key_group_range),
    "key-group-clipped": Case(INCREMENTAL, key_group_clipped),
    # The channel loses its input half: the upstream's output half, framed alone from its start, starts mid-record.
    "channel-index": Case(UNALIGNED, channel_index, companions=frozenset({"record-length"})),
    "channel-holder": Case(UNALIGNED, channel_holder, companions=frozenset({"record-length"})),
    "plan-mismatch": Case(UNALIGNED, plan_mismatch),
    # Nothing binds: no channel state sits where the plan puts chains, and what cannot be framed is listed.
    "plan-renamed": Case("2.3.0-no-uid", plan_renamed),
    "plan-unbound": Case(UNALIGNED, plan_unbound, companions=frozenset({"binding-uncertain", "topology"})),
    "binding-uncertain": Case(UNALIGNED, binding_uncertain, companions=frozenset({"plan-unbound", "topology"})),
    "topology": Case(UNALIGNED, topology, plan=False),
}


def shown(op: Any, c: Copy | None = None) -> str:
    """How findings name ``op`` when the fixture's plan is bound: the name Flink gave its id (ids.json)."""
    names = flink_names(c.root).get(op.operator_id, frozenset()) if c is not None else frozenset()
    if op.name or op.uid or len(names) != 1:
        return str(op.label())  # stored by Flink (V5+), or not one name
    return next(iter(names))


def _matches(f: Finding, where: Where) -> bool:
    def same(k: str, v: Any) -> bool:
        if k == "message_start":
            return f.message.startswith(v)
        return f.operator == v if k == "operator" else getattr(f, k) == v

    return all(same(k, v) for k, v in where.items())


@pytest.mark.parametrize("rule", sorted(CASES))
def test_rule_is_triggered_and_located(rule: str, tmp_path: Path) -> None:
    case = CASES[rule]
    c = copy_fixture(case.fixture, tmp_path)
    assert not c.run(case.plan).errors, "the fixture is sound before the damage"
    if case.in_memory:
        loaded = load_checkpoint(c.chk)
        where = case.damage(loaded.checkpoint)
        report = validate(loaded, load_plan(c.plan) if case.plan else None)
    else:
        where = case.damage(c)
        report = c.run(case.plan)
    hits = [f for f in report.findings if f.rule == rule]
    assert [f for f in hits if _matches(f, where)], (where, [f.to_json() for f in hits])
    assert all(f.severity == RULES[rule][0] for f in hits)
    others = {f.rule for f in report.findings} - {rule}
    assert others <= case.companions, [f.to_json() for f in report.findings if f.rule != rule]


def test_finished_state_cannot_come_from_bytes(tmp_path: Path) -> None:
    """Why finished-state is triggered in memory: a finished subtask is written as a bare marker (its state is
    not written), and coordinator state on a fully finished operator is refused by the decoder."""
    c = copy_fixture(FINISHED, tmp_path)
    loaded = load_checkpoint(c.chk)
    finished_state(loaded.checkpoint)
    c.metadata().write_bytes(encode_metadata(loaded.checkpoint))
    assert not [f for f in c.run().findings if f.rule == "finished-state"], "the state did not survive the write"

    def coordinator(cp: Any) -> None:
        op = next(o for o in cp.operators if o.fully_finished)
        op.coordinator_state = ByteStreamHandle("coordinator", b"enumerator state")

    rewrite(c, coordinator)
    with pytest.raises(CheckpointFormatError, match="fully finished operator must not have coordinator state"):
        c.run()


def test_every_rule_has_a_case() -> None:
    assert set(CASES) == set(RULES)


# ------------------------------------------------------------------ faults a rule's own case does not reach
def _segments(c: Copy) -> dict[str, set[int]]:
    """Each file of file-merging segments -> the ends (start + size) its handles give, from Flink's own decode
    (oracle.json): several handles share a file, each needing its first ``end`` bytes."""
    ends: dict[str, set[int]] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "SegmentFileStateHandle":
                ends.setdefault(node["path"].rsplit("/", 1)[-1], set()).add(node["start_pos"] + node["state_size"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(json.loads((c.root / "oracle.json").read_text()))
    return ends


def test_a_shared_file_cut_between_two_handles_ends_is_too_short(tmp_path: Path) -> None:
    """Merged files that still hold what every handle but the farthest-reaching one needs: each file is as
    short as its farthest end says, in whatever order its handles come (every shared file is cut)."""
    c = copy_fixture("2.3.0-file-merging", tmp_path)
    shared = {n: sorted(e) for n, e in _segments(c).items() if len(e) > 1}
    assert len(shared) >= 2
    for name, ends in shared.items():
        (path,) = c.root.glob(f"checkpoints/*/taskowned/*/{name}")
        assert path.stat().st_size == ends[-1]
        assert ends[-1] - 1 > ends[-2]  # the cut is past every other handle's end
        path.write_bytes(path.read_bytes()[: ends[-1] - 1])
    findings = c.run(plan=False).findings
    for name, ends in shared.items():
        hits = [f for f in findings if f.rule == "file-size" and (f.file or "").endswith(name)]
        assert [f.severity for f in hits] == ["error"], (name, [f.to_json() for f in findings])
        assert str(ends[-1] - 1) in hits[0].message and str(ends[-1]) in hits[0].message, hits[0].message


def test_a_handle_naming_one_chunk_twice_overlaps_itself(tmp_path: Path) -> None:
    """One handle whose offsets list the same chunk twice, its size grown to match: the chunk is claimed twice
    (by the same handle), which Flink would replay twice."""
    c = copy_fixture(UNALIGNED, tmp_path)
    path = _channel_file(c)
    data = path.read_bytes()
    found: Where = {}

    def mutate(cp: Any) -> None:
        op, sub, h = next(x for x in _channels(cp) if isinstance(x[2], InputChannelHandle) and len(x[2].offsets) <= 8)
        first = h.offsets[0]
        length = struct.unpack_from(">i", data, first)[0]  # the chunk's length field, as Flink wrote it
        h.offsets = [first, first, *h.offsets[1:]]
        h.state_size += 4 + length
        found.update(operator=shown(op, c), subtask=sub.index, channel=h.label(), offset=first, file=str(path))

    rewrite(c, mutate)
    hits = [f for f in c.run().findings if f.rule == "chunk-overlap"]
    assert [f for f in hits if _matches(f, found)], (found, [f.to_json() for f in hits])


def test_a_watermark_of_a_records_size_is_a_record_tag_fault(tmp_path: Path) -> None:
    """The first record's tag byte set to 2 (Watermark, a tag byte and an 8-byte long in Flink's
    StreamElementSerializer): a known tag with the wrong length is reported as ``record-tag``."""
    c = copy_fixture(UNALIGNED, tmp_path)
    length: list[int] = []

    def change(data: bytearray, record: int) -> int:
        length.append(struct.unpack_from(">i", data, record)[0])
        data[record + 4] = 2
        return record

    where, _ = _record_fault(c, change)
    assert length[0] != 1 + 8, "a record of a watermark's size would not be damaged"
    where["message"] = f"watermark of {length[0]} bytes, expected {1 + 8} {_in_part(c)}"
    hits = [f for f in c.run().findings if f.rule == "record-tag"]
    assert [f for f in hits if _matches(f, where)], (where, [f.to_json() for f in c.run().findings])
