"""validate names the damaged length field of a broken channel, not where the parse landed, and what Flink's
reader would do with it (docs/format/damaged-records.md).

Each test damages one element's length field in a copy of a real Flink 1.18.1 unaligned checkpoint. The channel
and its elements are found without spillway's framer: the handles come from Flink's own reading of the
``_metadata`` (the fixture's oracle.json), the operators from Flink's ids (ids.json), and the elements from a
walk over the chunk payloads in this file.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.console import spillway
from support.damaged import Copy, copy_fixture

from spillway.inspect.topology import load_plan
from spillway.inspect.validate import validate
from spillway.storage.load import load_checkpoint

FIXTURE = "1.18.1-unaligned"
SEGMENT = 32 * 1024  # Flink's default network buffer (taskmanager.memory.segment-size)


@dataclass(frozen=True)
class Element:
    position: int  # of its length field in the logical channel
    length: int
    file_offset: int  # of its length field in the channel-state file


@dataclass(frozen=True)
class Channel:
    file: Path
    chunks: list[tuple[int, int, int]]  # (stream position, file offset of the payload, payload length)
    elements: list[Element]

    @property
    def end(self) -> int:
        return sum(n for _, _, n in self.chunks)

    def buffer_end(self, position: int, size: int = SEGMENT) -> int:
        """Where the network buffer holding ``position`` ends: Flink cuts each chunk into buffers of ``size``."""
        for start, _, n in self.chunks:
            if start <= position < start + n:
                return start + min(n, (position - start) // size * size + size)
        raise AssertionError(position)


def _handles(copy: Copy) -> tuple[dict, dict]:
    oracle = json.loads((copy.root / "oracle.json").read_text())
    ids = {n["name"]: n["operator_id"] for n in json.loads((copy.root / "ids.json").read_text())["stream_nodes"]}
    ops = {o["operator_id"]: o for o in oracle["operators"]}
    return ops[ids["slow"]], ops[ids["tostr"]]


def biggest_channel(copy: Copy) -> Channel:
    """The logical channel tostr#u -> slow#d with the most bytes: slow#d's input channel u, then tostr#u's
    subpartition d (record-framing.md, "The logical channel")."""
    slow, tostr = _handles(copy)
    best: tuple[int, Path, list[tuple[int, int]]] | None = None
    for sub in slow["subtasks"]:
        for h in sub["input_channel_state"]:
            outs = [
                x
                for x in tostr["subtasks"][h["input_channel_index"]]["result_subpartition_state"]
                if x["subpartition_index"] == sub["index"]
            ]
            parts = [h, *outs]
            assert len({x["delegate"]["relative_path"] for x in parts}) == 1  # one file per checkpoint here
            path = copy.chk / h["delegate"]["relative_path"]
            data = path.read_bytes()
            chunks = [(off + 4, struct.unpack_from(">i", data, off)[0]) for x in parts for off in x["offsets"]]
            total = sum(n for _, n in chunks)
            if best is None or total > best[0]:
                best = (total, path, chunks)
    assert best is not None
    _, path, payloads = best
    chunks, at = [], 0
    for offset, n in payloads:
        chunks.append((at, offset, n))
        at += n
    stream = b"".join(path.read_bytes()[offset : offset + n] for offset, n in payloads)
    elements, p = [], 0
    while p < len(stream):
        (length,) = struct.unpack_from(">i", stream, p)
        start, offset, _ = next(c for c in chunks if c[0] <= p < c[0] + c[2])
        elements.append(Element(p, length, offset + p - start))
        p += 4 + length
    assert p == len(stream), "the sound channel frames to its end"
    return Channel(path, chunks, elements)


def _whole_field(channel: Channel, e: Element) -> bool:
    """The element's 4 length bytes lie in one chunk (so one place in the file can be damaged)."""
    return any(start <= e.position and e.position + 4 <= start + n for start, _, n in channel.chunks)


def damage(channel: Channel, e: Element, length: int) -> None:
    data = bytearray(channel.file.read_bytes())
    struct.pack_into(">i", data, e.file_offset, length)
    channel.file.write_bytes(bytes(data))


def record_length_findings(copy: Copy, buffer_size: int = SEGMENT) -> list:
    report = validate(load_checkpoint(copy.chk), load_plan(copy.plan), workers=1, buffer_size=buffer_size)
    record_rules = {"record-length", "record-tag", "record-truncated"}
    return [f for f in report.findings if f.rule in record_rules]


def _named(channel: Channel, k: int, read: int, findings: list) -> str:
    """The one finding, at element ``k``'s length field, naming it: its message."""
    e = channel.elements[k]
    assert len(findings) == 1, [f.to_json() for f in findings]
    (f,) = findings
    assert (f.rule, f.file, f.offset) == ("record-length", str(channel.file), e.file_offset), f.to_json()
    head = f"element {k} of the channel has a damaged length field: {read} read, {e.length} fits"
    assert f.message.startswith(head), f.message
    return str(f.message)


@pytest.fixture
def copy(tmp_path: Path) -> Copy:
    return copy_fixture(FIXTURE, tmp_path)


def test_too_large_but_fitting_is_found_at_the_damaged_field_not_where_the_parse_landed(copy: Copy) -> None:
    channel = biggest_channel(copy)
    k = 5  # in the input part's first chunk, one buffer that holds the element and 4099 more bytes
    e = channel.elements[k]
    read = e.length + 4099
    assert e.position + 4 + read <= channel.buffer_end(e.position)
    damage(channel, e, read)
    message = _named(channel, k, read, record_length_findings(copy))
    assert "framing broke" in message and "bytes further on" in message
    # Whole in its buffer: Flink's reader does not use the length again and reads the element correctly.
    assert "Flink would read this element anyway" in message


def test_the_same_damage_with_small_buffers_drops_the_elements_it_covers(copy: Copy) -> None:
    channel = biggest_channel(copy)
    k = 5
    e = channel.elements[k]
    read = e.length + 4099
    size = 4096
    assert e.position + 4 + read > channel.buffer_end(e.position, size)
    damage(channel, e, read)
    message = _named(channel, k, read, record_length_findings(copy, size))
    covered = [x for x in channel.elements if e.position + 4 + e.length <= x.position < e.position + 4 + read]
    assert f"With {size}-byte network buffers, Flink would read this element from its first {e.length} bytes" in (
        message
    )
    assert f"silently drop the {len(covered)} element(s) in the rest of the claimed {read} bytes" in message


def test_too_large_for_the_channel_swallows_the_rest(copy: Copy) -> None:
    channel = biggest_channel(copy)
    k = len(channel.elements) // 2
    e = channel.elements[k]
    assert _whole_field(channel, e)
    read = 0x7FFF0000
    damage(channel, e, read)
    message = _named(channel, k, read, record_length_findings(copy))
    after = len(channel.elements) - k - 1
    assert f"Flink would silently swallow the rest of this channel (it waits for {read} bytes" in message
    assert f"this element, the {after} after it" in message
    assert "the job can finish successfully without them" in message


@pytest.mark.parametrize("read", [0, -1], ids=["zero", "negative"])
def test_not_positive_inside_one_buffer_is_read_anyway(copy: Copy, read: int) -> None:
    channel = biggest_channel(copy)
    k = 5
    damage(channel, channel.elements[k], read)
    message = _named(channel, k, read, record_length_findings(copy))
    assert "framing broke" not in message  # the damaged field is where the framing broke
    assert "Flink would read this element anyway" in message


def test_zero_on_an_element_that_runs_past_its_buffer_fails(copy: Copy) -> None:
    channel = biggest_channel(copy)
    k, e = next(
        (i, x)
        for i, x in enumerate(channel.elements)
        if x.position + 4 <= channel.buffer_end(x.position) < x.position + 4 + x.length
    )
    damage(channel, e, 0)
    message = _named(channel, k, 0, record_length_findings(copy))
    assert "Flink would fail reading it" in message


@pytest.mark.parametrize("name", ["1.15.4-unaligned", "1.18.1-unaligned", "2.3.0-unaligned"])
def test_sound_fixtures_have_no_record_finding(tmp_path: Path, name: str) -> None:
    assert record_length_findings(copy_fixture(name, tmp_path)) == []


def test_cli_names_the_damaged_field_and_takes_the_buffer_size(copy: Copy) -> None:
    channel = biggest_channel(copy)
    k = 5
    e = channel.elements[k]
    read = e.length + 4099
    damage(channel, e, read)
    runs = {
        size: spillway("validate", str(copy.chk), "--plan", str(copy.plan), "--json", "--buffer-size", size)
        for size in ("32768", "4096")
    }
    for run in runs.values():
        assert run.code == 1, run.output
        found = [f for f in json.loads(run.out)["findings"] if f["rule"].startswith("record-")]
        assert [(f["rule"], f["file"], f["offset"]) for f in found] == [
            ("record-length", str(channel.file), e.file_offset)
        ]
        assert found[0]["message"].startswith(f"element {k} of the channel has a damaged length field: {read} read")
    assert "read this element anyway" in runs["32768"].out
    assert "silently drop" in runs["4096"].out
    text = spillway("validate", str(copy.chk), "--plan", str(copy.plan))
    assert text.code == 1 and f"element {k} of the channel" in " ".join(text.out.split())
