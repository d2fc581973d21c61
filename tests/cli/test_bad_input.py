"""Bad input: one clear message naming byte offset and field path, exit code 1, never a traceback."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from support.byte_damage import damaged_bytes
from support.fixtures import all_fixtures

from spillway.cli.app import app
from spillway.formats.errors import CheckpointFormatError
from spillway.formats.metadata_codec import decode_metadata


def _fixture_bytes(version: int) -> bytes:
    """The smallest real fixture of that format version."""
    found = [f.metadata.read_bytes() for f in all_fixtures()]
    found = [d for d in found if struct.unpack(">i", d[4:8])[0] == version]
    if not found:
        raise LookupError(f"no V{version} fixture")
    return min(found, key=len)


def _error(data: bytes) -> CheckpointFormatError:
    with pytest.raises(CheckpointFormatError) as info:
        decode_metadata(data, "meta")
    return info.value


def test_not_a_metadata_file() -> None:
    e = _error(b"this is a README, not a checkpoint\n")
    assert (e.offset, e.field_path) == (0, "header.magic")
    assert "not a Flink _metadata file" in e.message


def test_too_short() -> None:
    e = _error(b"\x49\x60")
    assert e.offset == 0 and "at least 8" in e.message


def test_wrong_magic() -> None:
    data = bytearray(_fixture_bytes(6))
    data[0] ^= 0xFF
    e = _error(bytes(data))
    assert (e.offset, e.field_path) == (0, "header.magic")


@pytest.mark.parametrize("version", [0, 1, 8, 99, -3])
def test_unknown_version(version: int) -> None:
    data = bytearray(_fixture_bytes(6))
    data[4:8] = struct.pack(">i", version)
    e = _error(bytes(data))
    assert (e.offset, e.field_path) == (4, "header.version")
    assert str(version) in e.message


def test_negative_checkpoint_id() -> None:
    data = bytearray(_fixture_bytes(6))
    data[8:16] = struct.pack(">q", -5)
    e = _error(bytes(data))
    assert (e.offset, e.field_path) == (8, "")
    assert "invalid checkpoint id -5" in e.message


@pytest.mark.parametrize("version", [2, 3, 6])
def test_absurd_operator_count(version: int) -> None:
    data = bytearray(_fixture_bytes(version))
    # checkpoint id (8) + master-state count (4): the operator count follows the empty master list.
    assert struct.unpack(">i", data[16:20])[0] == 0
    data[20:24] = struct.pack(">i", 2**31 - 1)
    e = _error(bytes(data))
    assert (e.offset, e.field_path) == (20, "operators")
    assert "count 2147483647" in e.message


def test_negative_operator_count() -> None:
    data = bytearray(_fixture_bytes(3))
    data[20:24] = struct.pack(">i", -7)
    e = _error(bytes(data))
    assert (e.offset, e.field_path) == (20, "operators") and "negative count" in e.message


def test_string_length_beyond_end_of_file() -> None:
    data = bytearray(_fixture_bytes(6)[:300])
    data[24:26] = b"\xff\xff"  # first operator's name length: 65535 bytes, 274 left
    e = _error(bytes(data))
    assert e.field_path == "operators[0].name"
    assert e.offset == 26 and "truncated" in e.message


@pytest.mark.parametrize("version", [2, 3])
def test_trailing_bytes_after_last_operator(version: int) -> None:
    data = _fixture_bytes(version)
    e = _error(data + b"\x00\x01\x02")
    assert e.offset == len(data)
    assert "end of stream" in e.message or "trailing" in e.message


@pytest.mark.parametrize("version", [4, 6])
def test_trailing_bytes_after_properties(version: int) -> None:
    data = _fixture_bytes(version)
    e = _error(data + b"\x00\x01\x02")
    assert e.field_path == "properties" and "3 trailing bytes" in e.message


def test_every_truncation_gives_a_located_error() -> None:
    data = _fixture_bytes(6)
    paths = set()
    for cut in range(9, len(data), max(1, len(data) // 400)):
        e = _error(data[:cut])
        assert e.offset is not None and 0 <= e.offset <= cut, (cut, e)
        paths.add(e.field_path)
    # Truncation inside nested handles is reported with the full path into the tree.
    assert any(p.startswith("operators[") and ".subtasks[" in p for p in paths), sorted(paths)[:20]


def test_deep_field_path_names_the_handle() -> None:
    data = _fixture_bytes(6)
    hits = set()
    for cut in range(9, len(data)):
        try:
            decode_metadata(data[:cut], "meta")
        except CheckpointFormatError as e:
            if "input_channel_state[" in e.field_path or "managed_keyed_state[0]" in e.field_path:
                hits.add(e.field_path)
    assert any(".delegate" in p or ".offsets" in p for p in hits), sorted(hits)[:10]


def test_cli_reports_one_line_and_exit_code_1(tmp_path: Path) -> None:
    bad = tmp_path / "_metadata"
    data = bytearray(_fixture_bytes(6))
    data[20:24] = struct.pack(">i", 2**31 - 1)
    bad.write_bytes(bytes(data))
    result = CliRunner().invoke(app, ["dump", str(bad)])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert "byte 20 in operators: count 2147483647" in result.output


def test_cli_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["dump", str(tmp_path / "nope")])
    assert result.exit_code == 2
    assert "no such file" in result.output


_ALL = [f.metadata.read_bytes() for f in all_fixtures()]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(damaged_bytes(_ALL, edits=(1, 6), set_values=(0x00, 0x7F, 0x80, 0xFF)))
def test_random_mutations_decode_cleanly_or_fail_cleanly(data: bytes) -> None:
    try:
        decode_metadata(data, "mutated")
    except CheckpointFormatError as e:
        assert e.offset is None or 0 <= e.offset <= len(data)
