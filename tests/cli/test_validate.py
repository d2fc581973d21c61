"""validate on real fixtures (clean) and on faults injected into copies of them (found and located)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.damaged import Copy, copy_fixture, rewrite
from support.fixtures import Fixture, all_fixtures, fixture_named, fixture_params, same_operator

from spillway.cli.app import app
from spillway.formats.errors import CheckpointFormatError
from spillway.formats.metadata_codec import encode_metadata
from spillway.inspect.topology import load_plan
from spillway.inspect.validate import Report, validate
from spillway.model.checkpoint import ByteStreamHandle, EmptySegmentFileHandle, channel_handles
from spillway.storage.load import load_checkpoint

BASE = "2.3.0-unaligned"


def _plan(fx: Fixture) -> Path:
    return fx.root / "jobgraph.json"


@pytest.mark.parametrize("fx", fixture_params())
def test_every_real_fixture_is_sound(fx: Fixture) -> None:
    report = validate(load_checkpoint(fx.checkpoint_dir), load_plan(_plan(fx)))
    # Said where the checkpoint cannot tell which output of a vertex is which partition (both frame cleanly).
    open_order = [f for f in report.findings if f.rule == "topology" and "does not give the order of" in f.message]
    findings = [f for f in report.findings if f not in open_order]
    assert all(f.severity == "info" for f in open_order)
    if fx.info["scenario"].startswith(("shapes", "finished-symmetric")):
        # A job-graph plan names chain heads only: operators chained behind a fan-out (async I/O, a Sink V2
        # writer) stay unbound, which is said (a warning naming them), never guessed; the stream-graph plan of the
        # same job binds them and frames every channel without a finding. Likewise the chained twins of
        # finished-symmetric, whose uids no plan shows: which twin holds which channel state is not guessed.
        assert not report.errors, [f.to_json() for f in report.errors]
        assert all(
            f.rule == "binding-uncertain"
            or (f.rule == "topology" and "is not bound to a checkpoint operator" in f.message)
            for f in findings
        ), [f.to_json() for f in findings]
        by_stream = validate(load_checkpoint(fx.checkpoint_dir), load_plan(fx.root / "plan.json"))
        assert not by_stream.errors, [f.to_json() for f in by_stream.errors]
        if fx.info["scenario"] == "shapes-no-uid":  # (with uids, a name that is another's uid stays open on 1.x)
            assert not [f for f in by_stream.findings if f.severity != "info"], [
                f.to_json() for f in by_stream.findings
            ]
        return
    assert not findings, [f.to_json() for f in findings]


def test_framing_covers_every_channel_handle_with_a_plan() -> None:
    fx = fixture_named(BASE)
    report = validate(load_checkpoint(fx.checkpoint_dir), load_plan(_plan(fx)))
    assert report.channels_framed >= 4 and report.records > 1000 and report.handles_framed_alone == 0


# One unaligned checkpoint of every release line (1.11 … 2.3): every injected fault is found and located on each.
UNALIGNED = sorted(
    (f.name for f in all_fixtures() if f.info["scenario"] == "unaligned"),
    key=lambda n: tuple(int(x) for x in n.split("-")[0].split(".")),
)


@pytest.fixture(params=UNALIGNED)
def copy(tmp_path: Path, request: pytest.FixtureRequest) -> Copy:
    fx = fixture_named(request.param)
    root = tmp_path / fx.name
    shutil.copytree(fx.root, root)
    return Copy(root, root / fx.info["checkpoint"], root / "jobgraph.json")


def _hits(report: Report, rule: str, file: Path | None = None, offset: int | None = None) -> list:
    return [
        f
        for f in report.errors
        if f.rule == rule and (file is None or f.file == str(file)) and (offset is None or f.offset == offset)
    ]


def test_fault_truncated_channel_file(copy: Copy) -> None:
    path, _ = copy.channel_files()[0]
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    report = copy.run()
    assert _hits(report, "file-size", path, len(data) // 2)
    assert _hits(report, "chunk-chain", path)


def test_fault_truncated_inside_a_chunk(copy: Copy) -> None:
    path, handles = copy.channel_files()[0]
    off = max(o for _, h in handles for o in h.offsets)
    path.write_bytes(path.read_bytes()[: off + 10])
    report = copy.run()
    assert _hits(report, "chunk-chain", path, off)


def test_fault_chunk_length_flipped(copy: Copy) -> None:
    path, handles = copy.channel_files()[0]
    off = handles[0][1].offsets[0]
    data = bytearray(path.read_bytes())
    data[off] ^= 0x40  # length + 2**30: runs past the end
    path.write_bytes(bytes(data))
    report = copy.run()
    assert _hits(report, "chunk-chain", path, off) or _hits(report, "chunk-offset", path, off)


def test_fault_header_version_changed(copy: Copy) -> None:
    path, _ = copy.channel_files()[0]
    data = bytearray(path.read_bytes())
    data[0:4] = struct.pack(">i", 7)
    path.write_bytes(bytes(data))
    assert _hits(copy.run(), "channel-header", path, 0)


def test_fault_referenced_file_missing(copy: Copy) -> None:
    path, _ = copy.channel_files()[0]
    path.unlink()
    assert _hits(copy.run(), "file-exists", path)


_rewrite = rewrite


def _merged_entries(cp):
    """(operator, subtask, holder, entry) of channels whose chunks can be pointed at each other: the
    channels of merged handles (V6+); before V6 every plain channel handle (they carry their own
    delegate, which the tests move along with the offsets)."""
    out = []
    plain = []
    for op in cp.operators:
        for sub in op.subtasks:
            for h in sub.input_channel_state + sub.result_subpartition_state:
                for c in getattr(h, "channels", []):
                    out.append((op, sub, h, c))
                if not hasattr(h, "channels"):
                    plain.append((op, sub, h, h))
    return out or plain


def _point_at(src, dst) -> None:
    """Make entry ``dst`` claim exactly the chunks of entry ``src`` (same file, same offsets)."""
    dst.offsets = list(src.offsets)
    if hasattr(src, "delegate"):
        dst.delegate = src.delegate


def test_fault_two_handles_offsets_swapped(copy: Copy) -> None:
    def swap(cp) -> None:
        entries = sorted(_merged_entries(cp), key=lambda e: e[3].state_size)
        a, b = entries[0][3], entries[-1][3]
        a.offsets, b.offsets = b.offsets, a.offsets
        if hasattr(a, "delegate"):
            a.delegate, b.delegate = b.delegate, a.delegate

    _rewrite(copy, swap)
    report = copy.run()
    # file-backed handles: their chunks no longer add up; inline ones (older releases): the blob's length
    assert len(_hits(report, "channel-size")) + len(_hits(report, "inline-channel")) >= 2


def test_fault_one_chunk_claimed_twice(copy: Copy) -> None:
    def claim(cp) -> None:
        entries = _filed_entries(cp)
        _point_at(entries[0][3], entries[1][3])

    _rewrite(copy, claim)
    cp = copy.checkpoint()
    off = _filed_entries(cp)[0][3].offsets[0]
    report = copy.run()
    assert _hits(report, "chunk-overlap", offset=off)


def _filed_entries(cp):
    """Entries whose chunks sit in a file (older releases inline small channels in _metadata)."""

    def inline(e) -> bool:
        holder = e[3] if hasattr(e[3], "delegate") else e[2]
        return isinstance(holder.delegate, ByteStreamHandle)

    return [e for e in _merged_entries(cp) if not inline(e)]


def _input_handle(copy: Copy):
    """A channel-state file with an input-side handle holding more than a few records (None if every input
    handle of this checkpoint is inline)."""
    return next(
        ((path, o, h) for path, hs in copy.channel_files() for o, h in hs if h.side == "input" and h.state_size > 100),
        (None, None, None),
    )


def _corrupt_input(copy: Copy, change) -> tuple[str, int, object, object]:
    """Apply ``change(data: bytearray, handle) -> position`` to the bytes of an input-side handle with a few
    records: in its file, or (releases that inline small channels) inside ``_metadata``. Returns where a
    finding must point: (file as validate names it, offset, operator, handle)."""
    path, op, h = _input_handle(copy)
    if path is not None:
        data = bytearray(path.read_bytes())
        pos = change(data, h)
        path.write_bytes(bytes(data))
        return str(path), pos, op, h
    cp = copy.checkpoint()
    op, h = next(
        (o, h)
        for o in cp.operators
        for sub in o.subtasks
        for h in channel_handles(sub.input_channel_state)
        if h.state_size > 100
    )
    data = bytearray(h.delegate.data)
    pos = change(data, h)
    h.delegate.data = bytes(data)
    copy.metadata().write_bytes(encode_metadata(cp))
    return f"inline:{h.delegate.name}", pos, op, h


def test_fault_record_length_corrupted_mid_stream(copy: Copy) -> None:
    # An input-side handle starts on a record boundary: walk two records into its first chunk.
    def change(data: bytearray, h) -> int:
        # Records may span chunks (Flink 1.11 writes a 3-byte first chunk): walk the handle's logical
        # stream (its chunks' payloads in order) and map the third record's length field back to bytes.
        spans = []  # (physical start, length) of each chunk's payload
        for off in h.offsets:
            spans.append((off + 4, struct.unpack(">i", data[off : off + 4])[0]))

        def physical(logical: int) -> int:
            for start, length in spans:
                if logical < length:
                    return start + logical
                logical -= length
            raise AssertionError("past the handle's end")

        def read4(logical: int) -> bytes:
            return bytes(data[physical(logical + i)] for i in range(4))

        pos = 0
        for _ in range(2):
            pos += 4 + struct.unpack(">i", read4(pos))[0]
        while physical(pos + 3) - physical(pos) != 3:  # keep the length field inside one chunk
            pos += 4 + struct.unpack(">i", read4(pos))[0]
        at = physical(pos)
        data[at : at + 4] = struct.pack(">i", 0x7FFF0000)
        return at

    where, pos, op, h = _corrupt_input(copy, change)
    hits = [f for f in copy.run().errors if f.rule == "record-length" and f.file == where and f.offset == pos]
    assert hits and hits[0].subtask == h.subtask_index and same_operator(hits[0].operator, op.label(), copy.root)


def test_fault_record_tag_corrupted(copy: Copy) -> None:
    def change(data: bytearray, h) -> int:
        # The first record's tag is the 5th byte of the handle's stream (its chunks' payloads in order); a
        # first chunk may be shorter than that (Flink 1.11 writes a 3-byte one), so map it back to the file.
        logical, at = 4, None
        for off in h.offsets:
            length = struct.unpack(">i", data[off : off + 4])[0]
            if logical < length:
                at = off + 4 + logical
                break
            logical -= length
        assert at is not None
        data[at] = 0x2A  # tag of the first record
        return h.offsets[0] + 4  # the record (its length field) starts the handle's first chunk

    where, pos, _, _ = _corrupt_input(copy, change)
    assert [f for f in copy.run().errors if f.rule == "record-tag" and f.file == where and f.offset == pos]


def test_cli_exit_codes_and_json(copy: Copy) -> None:
    runner = CliRunner()
    ok = runner.invoke(app, ["validate", str(copy.chk), "--plan", str(copy.plan), "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["ok"] is True
    path, _ = copy.channel_files()[0]
    path.write_bytes(b"\x00\x00\x00\x05abc")
    bad = runner.invoke(app, ["validate", str(copy.chk), "--plan", str(copy.plan), "--json"])
    assert bad.exit_code == 1
    doc = json.loads(bad.output)
    assert not doc["ok"] and any(f["file"] == str(path) for f in doc["findings"])
    usage = runner.invoke(app, ["validate", str(copy.chk), "--plan", str(copy.root / "nope.json")])
    assert usage.exit_code == 2 and "Traceback" not in usage.output


_FLIP_TREE: dict[str, Path] = {}


def _flip_tree(tmp_path_factory) -> Path:
    """One copy of the fixture for all examples (each example damages one file and puts it back)."""
    if "root" not in _FLIP_TREE:
        fx = fixture_named(BASE)
        root = tmp_path_factory.mktemp("flip") / fx.name
        shutil.copytree(fx.root, root)
        _FLIP_TREE["root"] = root
    return _FLIP_TREE["root"]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(
    target=st.sampled_from(["metadata", "channel"]),
    flips=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 7)), min_size=1, max_size=8),
)
def test_random_flips_never_crash(tmp_path_factory, target: str, flips) -> None:
    fx = fixture_named(BASE)
    root = _flip_tree(tmp_path_factory)
    chk = root / fx.info["checkpoint"]
    path = chk / "_metadata"
    if target == "channel":
        path = max((p for p in chk.iterdir() if p.name != "_metadata"), key=lambda p: p.stat().st_size)
    original = path.read_bytes()
    data = bytearray(original)
    for where, bit in flips:
        data[int(where * len(data))] ^= 1 << bit
    path.write_bytes(bytes(data))
    try:
        report = validate(load_checkpoint(chk), load_plan(root / "jobgraph.json"))
    except CheckpointFormatError:
        return
    finally:
        path.write_bytes(original)
    for f in report.findings:
        assert f.rule and f.message


def test_stream_graph_plan_frames_like_the_job_graph_plan() -> None:
    fx = fixture_named("2.0.0-unaligned")  # V5+: names let the stream-graph plan bind
    by_job = validate(load_checkpoint(fx.checkpoint_dir), load_plan(fx.root / "jobgraph.json"))
    by_stream = validate(load_checkpoint(fx.checkpoint_dir), load_plan(fx.root / "plan.json"))
    assert (by_stream.channels_framed, by_stream.records) == (by_job.channels_framed, by_job.records)
    assert not by_stream.findings


def test_rest_plan_wrapper_is_accepted(tmp_path: Path) -> None:
    fx = fixture_named(BASE)
    wrapped = tmp_path / "rest.json"
    wrapped.write_text(json.dumps({"plan": json.loads((fx.root / "jobgraph.json").read_text())}))
    assert validate(load_checkpoint(fx.checkpoint_dir), load_plan(wrapped)).channels_framed >= 4


def test_without_plan_input_side_is_framed_and_the_rest_is_explained() -> None:
    fx = fixture_named(BASE)
    report = validate(load_checkpoint(fx.checkpoint_dir), None)
    assert report.handles_framed_alone > 0 and report.channels_framed == 0
    assert [f.rule for f in report.findings] == ["topology"]


# ------------------------------------------------------------------ the summary, counted from Flink's own view
SUMMARY = "1.20.3-unaligned"  # V4: plain channel handles, all in one relative channel-state file
SIDES = (("input", "input_channel_state"), ("output", "result_subpartition_state"))


def _flink_channel_handles(fx: Fixture) -> list[tuple[str, int, str, dict]]:
    """(operator name, subtask, side, handle) of every channel handle Flink's loader reported (oracle.json)."""
    names = {n["operator_id"]: n["name"] for n in json.loads((fx.root / "ids.json").read_text())["stream_nodes"]}
    doc = json.loads(fx.oracle.read_text())
    return [
        (names[op["operator_id"]], sub["index"], side, h)
        for op in doc["operators"]
        for sub in op["subtasks"]
        for side, key in SIDES
        for h in sub.get(key, [])
    ]


def _payload(chk: Path, h: dict) -> bytes:
    """A channel handle's bytes: each chunk is a 4-byte big-endian length and that many bytes."""
    blob = (chk / h["delegate"]["relative_path"]).read_bytes()
    return b"".join(blob[o + 4 : o + 4 + struct.unpack_from(">i", blob, o)[0]] for o in h["offsets"])


def _whole_elements(stream: bytes) -> int:
    """Length-prefixed StreamElements that end inside ``stream`` (a stream alone may stop mid-element)."""
    count = pos = 0
    while pos + 4 <= len(stream):
        pos += 4 + struct.unpack_from(">i", stream, pos)[0]
        if pos > len(stream):
            break
        count += 1
    return count


def _whole_records(stream: bytes) -> int:
    """Of the whole elements of ``stream``, the stream records (tags 0 and 1, docs/format/stream-elements.md)."""
    count = pos = 0
    while pos + 4 <= len(stream):
        end = pos + 4 + struct.unpack_from(">i", stream, pos)[0]
        if end > len(stream):
            break
        count += stream[pos + 4] in (0, 1)
        pos = end
    return count


def _logical_channels(fx: Fixture) -> dict[tuple, bytes]:
    """The job's two edges, tostr -> slow (keyBy) and slow -> len (rebalance): a logical channel is (edge, sending
    subtask, receiving subtask); its stream is the receiver's input state, then the sender's output state."""
    into = {"slow": "tostr->slow"}
    out_of = {"tostr": "tostr->slow", "slow": "slow->len"}
    parts: dict[tuple, list[tuple[int, bytes]]] = {}
    for name, index, side, h in _flink_channel_handles(fx):
        data = _payload(fx.checkpoint_dir, h)
        if side == "input":
            key, order = (into[name], h["input_channel_index"], index), 0
        else:
            key, order = (out_of[name], index, h["subpartition_index"]), 1
        parts.setdefault(key, []).append((order, data))
    return {key: b"".join(data for _, data in sorted(ps)) for key, ps in parts.items()}


def _summary(args: list[str]) -> dict:
    result = CliRunner().invoke(app, ["validate", *args, "--json"])
    return json.loads(result.output)["summary"]


def test_summary_counts_what_flink_wrote() -> None:
    fx = fixture_named(SUMMARY)
    handles = _flink_channel_handles(fx)
    inputs = [h for _, _, side, h in handles if side == "input"]
    payload = {id(h): len(_payload(fx.checkpoint_dir, h)) for _, _, _, h in handles}
    channels = _logical_channels(fx)
    common = {
        "files_checked": 1,  # the channel-state file; the rest of the state is inline in _metadata
        "channel_state_blobs": 1,
        "chunks": sum(len(h["offsets"]) for _, _, _, h in handles),
    }
    with_plan = _summary([str(fx.checkpoint_dir), "--plan", str(fx.root / "jobgraph.json")])
    assert with_plan == {
        "error": 0,
        "warning": 0,
        "info": 0,
        **common,
        "logical_channels_framed": len(channels),
        "handles_framed_alone": 0,
        "elements": sum(_whole_elements(stream) for stream in channels.values()),
        "records": sum(_whole_records(stream) for stream in channels.values()),
        "payload_bytes_read": sum(payload.values()),
    }
    alone = _summary([str(fx.checkpoint_dir)])
    assert alone == {
        "error": 0,
        "warning": 0,
        "info": 1,  # the output side is not framed without a plan
        **common,
        "logical_channels_framed": 0,
        "handles_framed_alone": len(inputs),
        "elements": sum(_whole_elements(_payload(fx.checkpoint_dir, h)) for h in inputs),
        "records": sum(_whole_records(_payload(fx.checkpoint_dir, h)) for h in inputs),
        "payload_bytes_read": sum(payload[id(h)] for h in inputs),
    }


def test_summary_counts_findings_by_severity(tmp_path: Path) -> None:
    c = copy_fixture(SUMMARY, tmp_path)
    nodes = json.loads((c.root / "ids.json").read_text())["stream_nodes"]
    slow_id = next(n["operator_id"] for n in nodes if n["name"] == "slow")

    def damage(cp) -> None:
        slow = next(o for o in cp.operators if o.operator_id == slow_id)
        slow.subtask(0).result_subpartition_state.pop()  # its chunk is nobody's: a warning
        for sub in slow.subtasks:
            sub.input_channel_state[0].state_size += 1  # != its chunks: an error each

    rewrite(c, damage)
    summary = _summary([str(c.chk)])  # without a plan: one note on the output side
    assert (summary["error"], summary["warning"], summary["info"]) == (2, 1, 1)


def _move_second_chunk(c: Copy, where: Callable[[int, int], int]) -> tuple[int, int, tuple]:
    """Point the second offset of the handle with the most chunks somewhere else: ``where(its offset, file size)``.
    Returns (new offset, payload bytes of the chunk it no longer claims, the handle's channel key: operator id,
    side, subtask, its index pair)."""
    blob = next(c.chk / name for name in os.listdir(c.chk) if name != "_metadata")
    data = blob.read_bytes()
    moved: list[tuple[int, int, tuple]] = []

    def damage(cp) -> None:
        op, longest = max(
            ((op, h) for op in cp.operators for s in op.subtasks for h in s.result_subpartition_state),
            key=lambda x: len(x[1].offsets),
        )
        second = longest.offsets[1]
        longest.offsets[1] = where(second, len(data))
        key = (op.operator_id, "output", longest.subtask_index, *longest.info)
        moved.append((longest.offsets[1], struct.unpack(">i", data[second : second + 4])[0], key))

    rewrite(c, damage)
    return moved[0]


# (where the offset goes, the finding's message, its offset): past the end, on the file's version header,
# negative (no position to show), inside a chunk (a complete chain has no chunk there).
BAD_OFFSETS = {
    "past-end": (lambda off, size: size + 100, "offset {off} outside the {size}-byte channel state", True),
    "header": (lambda off, size: 0, "offset {off} outside the {size}-byte channel state", True),
    "negative": (lambda off, size: -1, "offset {off} outside the {size}-byte channel state", False),
    "mid-chunk": (lambda off, size: off + 4, "offset {off} is not the start of a chunk", True),
    # Inside the file, but a chunk's 4-byte length cannot start there: the last place one can is size - 4.
    "near-end": (lambda off, size: size - 2, "offset {off}: chunk offset {off} is outside [4, {last}]", True),
}


@pytest.mark.parametrize("case", sorted(BAD_OFFSETS))
def test_a_chunk_at_a_wrong_offset_is_reported_and_the_rest_of_its_handle_still_claimed(
    case: str, tmp_path: Path
) -> None:
    move, message, located = BAD_OFFSETS[case]
    c = copy_fixture(SUMMARY, tmp_path)
    size = next(p.stat().st_size for p in c.chk.iterdir() if p.name != "_metadata")
    off, lost, key = _move_second_chunk(c, move)
    report = c.run()
    wrong = [(f.message, f.offset) for f in report.findings if f.rule == "chunk-offset"]
    assert (message.format(off=off, size=size, last=size - 4), off if located else None) in wrong
    blob = next(str(p) for p in c.chk.iterdir() if p.name != "_metadata")
    operator, _, subtask, *pair = key
    places = {(f.operator, f.subtask, f.channel, f.file) for f in report.findings if f.rule == "chunk-offset"}
    assert len(places) == 1  # V4 stores ids only: with the plan bound, the finding names Flink's operator
    ((shown, sub, channel, file),) = places
    assert same_operator(shown, operator, c.root) and (sub, channel, file) == (
        subtask,
        f"out({pair[0]},{pair[1]})",
        blob,
    )
    # The handle's bytes cannot be trusted (rescale --force leaves out exactly such channels).
    assert [f.message for f in report.damage[key] if f.rule == "chunk-offset"] == [m for m, _ in wrong]
    # Only the moved chunk (its 4-byte length and payload) is nobody's: the handle's later chunks stay claimed.
    unclaimed = [f.message for f in report.findings if f.rule == "unclaimed-chunks"]
    assert unclaimed == [f"1 chunks ({4 + lost} bytes) belong to no handle"]


def test_the_rest_of_a_handle_is_framed_past_a_chunk_that_cannot_be_read(tmp_path: Path) -> None:
    fx = fixture_named(SUMMARY)
    c = copy_fixture(SUMMARY, tmp_path)
    payload = sum(len(_payload(fx.checkpoint_dir, h)) for _, _, _, h in _flink_channel_handles(fx))
    _, lost, _ = _move_second_chunk(c, lambda off, size: size + 100)
    assert c.run().bytes_read == payload - lost


def test_a_handle_without_chunks_has_no_position_to_show(tmp_path: Path) -> None:
    c = copy_fixture(SUMMARY, tmp_path)
    emptied: list[tuple[int, str]] = []

    def damage(cp) -> None:
        h = next(h for op in cp.operators for s in op.subtasks for h in s.input_channel_state)
        h.offsets = []  # still claims its size
        emptied.append((h.state_size, h.label()))

    rewrite(c, damage)
    size, label = emptied[0]
    found = [(f.message, f.offset) for f in c.run().findings if f.rule == "channel-size" and f.channel == label]
    assert found == [(f"handle size {size} != the sum of its chunks (0)", None)]


def test_a_subtask_listed_twice_is_named(tmp_path: Path) -> None:
    c = copy_fixture("1.10.3-aligned", tmp_path)  # V2: every subtask entry carries its index
    found: dict = {}

    def damage(cp) -> None:
        op = next(o for o in cp.operators if len(o.subtasks) > 1 and not any(s.managed_keyed_state for s in o.subtasks))
        first, second = sorted(op.subtasks, key=lambda s: s.index)[:2]
        second.index = first.index
        found.update(operator=op.label(), index=first.index)

    rewrite(c, damage)
    hits = [(f.message, f.operator, f.subtask) for f in c.run().findings if f.rule == "subtask-index"]
    assert [(m, s) for m, _, s in hits] == [(f"subtask {found['index']} appears twice", found["index"])]
    assert same_operator(hits[0][1], found["operator"], c.root)  # the plan's name once bound


def test_only_errors_mark_a_channel_handle_damaged(tmp_path: Path) -> None:
    c = copy_fixture(SUMMARY, tmp_path)
    nodes = json.loads((c.root / "ids.json").read_text())["stream_nodes"]
    slow_id = next(n["operator_id"] for n in nodes if n["name"] == "slow")

    def damage(cp) -> None:
        slow = next(o for o in cp.operators if o.operator_id == slow_id)
        slow.subtask(0).input_channel_state[0].state_size += 1  # an error about this handle
        slow.subtask(1).result_subpartition_state.pop()  # its chunk is nobody's: a warning about the file

    rewrite(c, damage)
    report = c.run()
    assert {f.rule for f in report.findings} == {"channel-size", "unclaimed-chunks"}
    assert report.damage == {(slow_id, "input", 0, 0, 0): [f for f in report.findings if f.rule == "channel-size"]}


def test_an_output_handle_of_another_subtask_is_named_as_output(tmp_path: Path) -> None:
    c = copy_fixture(SUMMARY, tmp_path)
    found: list[tuple] = []

    def damage(cp) -> None:
        op, sub = next((o, s) for o in cp.operators for s in o.subtasks if s.result_subpartition_state)
        h = sub.result_subpartition_state[0]
        h.subtask_index = sub.index + 5
        found.append((op.label(), sub.index, h.label(), h.subtask_index))

    rewrite(c, damage)
    (label, index, channel, said) = found[0]
    hits = [(f.message, f.operator, f.subtask, f.channel) for f in c.run().findings if f.rule == "subtask-index"]
    assert [(m, i, ch) for m, _, i, ch in hits] == [(f"output channel handle says subtask {said}", index, channel)]
    assert same_operator(hits[0][1], label, c.root)


def test_channel_state_without_bytes_to_read_is_named_by_its_delegate(tmp_path: Path) -> None:
    """A channel handle's delegate must be readable (inline or a file); null and an empty segment are not."""
    c = copy_fixture(SUMMARY, tmp_path)
    nodes = json.loads((c.root / "ids.json").read_text())["stream_nodes"]
    slow_id = next(n["operator_id"] for n in nodes if n["name"] == "slow")

    def damage(cp) -> None:
        slow = next(o for o in cp.operators if o.operator_id == slow_id)
        slow.subtask(0).input_channel_state[0].delegate = None
        slow.subtask(1).input_channel_state[0].delegate = EmptySegmentFileHandle()

    rewrite(c, damage)
    report = c.run()
    found = {(f.message, f.operator, f.subtask, f.channel) for f in report.findings if f.rule == "chunk-offset"}
    assert found == {  # named as the plan (and Flink) names it
        ("channel state with a null delegate", "slow", 0, "in(0,0)"),
        ("channel state with a EmptySegmentFileHandle delegate", "slow", 1, "in(0,0)"),
    }
    for index in (0, 1):
        assert "chunk-offset" in [f.rule for f in report.damage[(slow_id, "input", index, 0, 0)]]


def test_duplicate_and_misnumbered_channel_handles_are_damaged(tmp_path: Path) -> None:
    c = copy_fixture(SUMMARY, tmp_path)
    keys: list[tuple] = []

    def damage(cp) -> None:
        op, sub = next((o, s) for o in cp.operators for s in o.subtasks if s.result_subpartition_state)
        h = sub.result_subpartition_state[0]
        sub.result_subpartition_state.append(dataclasses.replace(h, offsets=[], state_size=0))  # a second handle
        other = next(s for s in op.subtasks if s is not sub).result_subpartition_state[0]
        other.subtask_index += 5  # says it belongs to another subtask
        keys.append((op.operator_id, "output", h.subtask_index, *h.info))
        keys.append((op.operator_id, "output", other.subtask_index, *other.info))

    rewrite(c, damage)
    report = c.run()
    assert [f.rule for f in report.damage[keys[0]]] == ["duplicate-channel"]
    assert [f.rule for f in report.damage[keys[1]]] == ["subtask-index"]


def test_a_missing_channel_file_damages_every_handle_in_it(tmp_path: Path) -> None:
    c = copy_fixture(SUMMARY, tmp_path)
    fx = fixture_named(SUMMARY)
    ids = {n["name"]: n["operator_id"] for n in json.loads((fx.root / "ids.json").read_text())["stream_nodes"]}
    expected = set()
    for name, index, side, h in _flink_channel_handles(fx):
        pair = (
            (h["gate_index"], h["input_channel_index"])
            if side == "input"
            else (h["partition_index"], h["subpartition_index"])
        )
        expected.add((ids[name], side, index, *pair))
    next(p for p in c.chk.iterdir() if p.name != "_metadata").unlink()
    report = c.run()
    assert set(report.damage) == expected
    assert all("file-exists" in [f.rule for f in fs] for fs in report.damage.values())


def test_coordinator_state_on_a_fully_finished_operator_is_named() -> None:
    """Not from bytes (the decoder refuses it: test_validate_rules); a checkpoint changed in memory can hold it."""
    loaded = load_checkpoint(fixture_named("2.3.0-finished").checkpoint_dir)
    op = next(o for o in loaded.checkpoint.operators if o.fully_finished)
    op.coordinator_state = ByteStreamHandle("coordinator", b"enumerator state")
    found = [(f.rule, f.message, f.operator) for f in validate(loaded).findings if f.rule == "finished-state"]
    assert found == [("finished-state", "fully finished operator holds coordinator state", op.label())]


def test_every_channel_state_file_is_counted() -> None:
    fx = fixture_named("2.3.0-one-file-per-subtask")
    doc = json.loads(fx.oracle.read_text())
    delegates = {  # a channel-state file, or an inline blob (ByteStreamStateHandle) in _metadata
        h["delegate"].get("relative_path") or h["delegate"]["handle_name"]
        for op in doc["operators"]
        for sub in op["subtasks"]
        for _, key in SIDES
        for h in sub.get(key, [])
    }
    chunks = sum(  # merged handles (V6) list their channels, each with its chunk offsets
        len(ch["offsets"])
        for op in doc["operators"]
        for sub in op["subtasks"]
        for _, key in SIDES
        for h in sub.get(key, [])
        for ch in h.get("channels", [h])
    )
    assert len(delegates) > 1
    summary = _summary([str(fx.checkpoint_dir), "--plan", str(fx.root / "jobgraph.json")])
    assert (summary["channel_state_blobs"], summary["chunks"]) == (len(delegates), chunks)


def test_a_channel_state_file_too_short_for_its_version_is_named(tmp_path: Path) -> None:
    c = copy_fixture(SUMMARY, tmp_path)
    path = next(p for p in c.chk.iterdir() if p.name != "_metadata")
    path.write_bytes(path.read_bytes()[:2])  # the 4-byte serialization version is cut
    found = [(f.message, f.file, f.offset) for f in c.run().findings if f.rule == "channel-header"]
    assert len(found) == 1 and found[0][0].startswith("too short for a header: ")
    assert found[0][1:] == (str(path), 0)
