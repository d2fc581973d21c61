"""build(parse(bytes)) == bytes for every real Flink _metadata, at the layout and at the model level."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from support.byte_damage import damaged_bytes
from support.fixtures import Fixture, all_fixtures, fixture_params

from spillway.flink.features import format_features
from spillway.formats.metadata import metadata_layout
from spillway.formats.metadata_codec import _operator, decode_metadata, encode_metadata, fast_parser, read_header


@pytest.mark.parametrize("fx", fixture_params())
def test_layout_round_trip_is_byte_exact(fx: Fixture) -> None:
    data = fx.metadata.read_bytes()
    version = read_header(data, str(fx.metadata))
    parsed = metadata_layout(version).parse(data)
    assert metadata_layout(version).build(parsed) == data


@pytest.mark.parametrize("fx", fixture_params())
def test_model_round_trip_is_byte_exact(fx: Fixture) -> None:
    data = fx.metadata.read_bytes()
    checkpoint = decode_metadata(data, str(fx.metadata))
    assert encode_metadata(checkpoint) == data


def test_v7_reference_checkpoint_ids_round_trip() -> None:
    """No released Flink writes V7 yet; build one from a real V6 checkpoint and read it back."""
    from support.fixtures import fixture_named

    fx = fixture_named("2.3.0-unaligned")
    checkpoint = decode_metadata(fx.metadata.read_bytes())
    checkpoint.format_version = 7
    running = [s for op in checkpoint.operators for s in op.subtasks if not s.finished]
    running[0].ref_checkpoint_id = 41
    data = encode_metadata(checkpoint)
    back = decode_metadata(data)
    assert back.format_version == 7
    refs = [s.ref_checkpoint_id for op in back.operators for s in op.subtasks if not s.finished]
    assert refs[0] == 41 and all(r is None for r in refs[1:])
    assert encode_metadata(back) == data
    # V7 = V6 plus one marker byte per running subtask, plus 8 bytes for the one id.
    assert len(data) == len(fx.metadata.read_bytes()) + len(running) + 8


def _both_parsers(data: bytes, version: int, inline: bool = True) -> tuple[Any, Any]:
    """(fast parse, interpreted parse); each an exception instead when it rejects the bytes. ``inline``: which of
    the two fast parsers (handle cases inlined, for big files, or not, for small ones)."""
    results: list[Any] = []
    for parse in (fast_parser(version, inline), metadata_layout(version).parse):
        try:
            results.append(parse(data))
        except Exception as exc:
            results.append(exc)
    return results[0], results[1]


def _assert_same_decode(fast: Any, slow: Any) -> None:
    """The fast parse (operators already models) equals the interpreted one decoded the slow way."""
    fb, sb = fast["body"], slow["body"]
    features = format_features(slow["header"]["version"], sb.get("dialect"))
    assert fb["operators"] == [_operator(o, features) for o in sb["operators"]]
    assert {k: v for k, v in fb.items() if k != "operators"} == {
        k: v for k, v in sb.items() if k != "operators" and not k.startswith("_")
    }
    assert fast["header"] == {k: v for k, v in slow["header"].items() if not k.startswith("_")}


INLINE = pytest.mark.parametrize("inline", [True, False], ids=["inlined", "plain"])


@INLINE
@pytest.mark.parametrize("fx", fixture_params())
def test_fast_parser_decodes_like_the_interpreted_layout(fx: Fixture, inline: bool) -> None:
    data = fx.metadata.read_bytes()
    fast, slow = _both_parsers(data, read_header(data, str(fx.metadata)), inline)
    assert not isinstance(fast, Exception) and not isinstance(slow, Exception), (fast, slow)
    _assert_same_decode(fast, slow)


_ALL = [f.metadata.read_bytes() for f in all_fixtures()]


@INLINE
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(damaged_bytes(_ALL, keep=8))  # the header kept: both parsers must get past it
def test_fast_parser_rejects_exactly_what_the_interpreted_layout_rejects(inline: bool, data: bytes) -> None:
    version = int.from_bytes(data[4:8], "big", signed=True)
    fast, slow = _both_parsers(data, version, inline)
    assert isinstance(fast, Exception) == isinstance(slow, Exception), (fast, slow)
    if not isinstance(slow, Exception):
        _assert_same_decode(fast, slow)


def _unmerged(data: bytes) -> bytes | None:
    """A V6+ fixture with its merged channel handles written as one typed handle per channel (what Flink
    writes where it does not merge: the handle-heavy benchmark's shape); None when it has none to unmerge."""
    checkpoint = decode_metadata(data)
    if checkpoint.format_version < 6:
        return None
    changed = False
    for op in checkpoint.operators:
        for sub in op.subtasks:
            if any(h.merged for h in sub.input_channel_state + sub.result_subpartition_state):
                sub.input_channel_state = [c for h in sub.input_channel_state for c in h.unmerged()]
                sub.result_subpartition_state = [c for h in sub.result_subpartition_state for c in h.unmerged()]
                changed = True
    return encode_metadata(checkpoint) if changed else None


_UNMERGED = [u for u in map(_unmerged, _ALL) if u is not None]


@INLINE
def test_single_typed_channel_handles_decode_fast_like_the_interpreted_layout(inline: bool) -> None:
    # No fixture holds them (every V6+ fixture's Flink merged its handles); the fast parser inlines them
    # and builds them without a decoder call, the interpreted layout goes through the registered decoder.
    assert len(_UNMERGED) >= 5
    for data in _UNMERGED:
        fast, slow = _both_parsers(data, read_header(data, "unmerged"), inline)
        assert not isinstance(fast, Exception) and not isinstance(slow, Exception), (fast, slow)
        _assert_same_decode(fast, slow)
        singles = [
            h
            for o in fast["body"]["operators"]
            for s in o.subtasks
            for h in s.input_channel_state + s.result_subpartition_state
        ]
        assert singles and not any(h.merged for h in singles)
        assert encode_metadata(decode_metadata(data)) == data


@INLINE
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(damaged_bytes(_UNMERGED, keep=8))
def test_fast_parser_rejects_damaged_single_channel_handles_as_the_interpreted_layout(
    inline: bool, data: bytes
) -> None:
    version = int.from_bytes(data[4:8], "big", signed=True)
    fast, slow = _both_parsers(data, version, inline)
    assert isinstance(fast, Exception) == isinstance(slow, Exception), (fast, slow)
    if not isinstance(slow, Exception):
        _assert_same_decode(fast, slow)
