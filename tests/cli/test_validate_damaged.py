"""validate names the damaged length field of a broken channel, not where the parse landed, and what Flink's
reader would do with it (docs/format/damaged-records.md).

Each test damages one element's length field in a copy of a real Flink 1.18.1 unaligned checkpoint. The channel
and its elements are found without spillway's framer (support/oracle_channel.py): the handles come from
Flink's own reading of the ``_metadata`` (the fixture's oracle.json), the operators from Flink's ids
(ids.json), and the elements from a walk over the chunk payloads.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from support.console import spillway
from support.damaged import Copy, copy_fixture
from support.oracle_channel import SEGMENT, Channel, Element, biggest_channel

from spillway.inspect.topology import load_plan
from spillway.inspect.validate import validate
from spillway.storage.load import load_checkpoint

FIXTURE = "1.18.1-unaligned"


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


def test_too_small_named_with_the_other_reading_of_it(copy: Copy) -> None:
    channel = biggest_channel(copy)
    k = 5
    e = channel.elements[k]
    read = e.length - 8
    damage(channel, e, read)
    message = _named(channel, k, read, record_length_findings(copy))
    assert "or the 8 bytes after it were overwritten" in message
    assert "Flink would read this element anyway" in message


def test_a_too_small_length_that_two_corrections_explain_is_not_called_exact(copy: Copy) -> None:
    """Element 4825 (19 bytes) said to be 16: the parse lands 3 bytes before the next element, reads its text
    as a length, and fails there. Correcting element 4825 to 19, or the bytes it landed on to a length of their
    own, both let the rest frame cleanly: validate says so and keeps the finding where the framing broke."""
    channel = biggest_channel(copy)
    k = 4825
    e = channel.elements[k]
    assert (e.length, _whole_field(channel, e)) == (19, True)
    damage(channel, e, 16)
    (f,) = record_length_findings(copy)
    assert (f.rule, f.offset) == ("record-length", e.file_offset + 4 + 16), f.to_json()
    assert "framing broke here, the damaged field is not known: 2 corrected length fields" in f.message
    assert f"element {k} at offset {e.file_offset}" in f.message


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
