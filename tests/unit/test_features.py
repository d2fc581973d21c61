"""The format-features table (spillway.flink.features) against the real fixtures, and the one traversal
of the handle model (spillway.model.walk) on them."""

from __future__ import annotations

import dataclasses

import pytest
from support.fixtures import Fixture, fixture_named, fixture_params

from spillway.flink.features import SUPPORTED_VERSIONS, ChannelLayout, dialects, format_features
from spillway.formats.handles import KINDS
from spillway.formats.metadata_codec import decode_metadata, encode_metadata
from spillway.model.checkpoint import HANDLE_TYPES, FileHandle, is_file_backed, is_stream_leaf
from spillway.model.walk import all_stream_handles, leaf_stream_handles, subtask_handles, transform_stream_handles


def _release(text: str) -> tuple[int, int]:
    """The fixture's release string ("1.20.3") as (major, minor), read here without spillway's parser."""
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


@pytest.mark.parametrize("fx", fixture_params())
def test_the_release_that_wrote_a_fixture_writes_its_format(fx: Fixture) -> None:
    cp = decode_metadata(fx.metadata.read_bytes(), str(fx.metadata))
    f = cp.features
    assert cp.format_version == fx.info["metadata_version"]
    assert f.first_release is not None and f.last_release is not None, "no released Flink writes V7 yet"
    assert f.first_release <= _release(fx.release) <= f.last_release, f.releases


def test_flink_1_11_writes_channel_handles_without_subtask_index() -> None:
    fx = fixture_named("1.11.4-unaligned")
    data = fx.metadata.read_bytes()
    cp = decode_metadata(data)
    assert cp.format_dialect == "flink-1.11"
    assert cp.features.channel_layout is ChannelLayout.UNINDEXED and not cp.features.channel_subtask_index
    handles = [(s, h) for op in cp.operators for s in op.subtasks for h in s.input_channel_state]
    assert handles and all(h.subtask_index == s.index for s, h in handles)
    assert encode_metadata(cp) == data
    # The same checkpoint in the usual V3 dialect is 4 bytes longer per channel handle.
    n = sum(len(s.input_channel_state) + len(s.result_subpartition_state) for op in cp.operators for s in op.subtasks)
    assert len(encode_metadata(dataclasses.replace(cp, format_dialect=None))) == len(data) + 4 * n


def test_every_version_has_one_usual_dialect_tried_first() -> None:
    for version in SUPPORTED_VERSIONS:
        rows = dialects(version)
        assert rows[0].dialect is None and rows[0].version == version
        assert all(r.version == version for r in rows)
        assert format_features(version) is rows[0]
    with pytest.raises(ValueError):
        dialects(1)


def test_the_registry_covers_every_model_handle_class() -> None:
    codes = {code for code in KINDS if code != 0}
    assert codes == set(range(1, 18))
    leaf_or_container = {t.__name__ for t in HANDLE_TYPES}
    assert "InputChannelHandle" in leaf_or_container and "FileHandle" in leaf_or_container


@pytest.mark.parametrize("fx", fixture_params())
def test_walk_and_identity_transform(fx: Fixture) -> None:
    data = fx.metadata.read_bytes()
    cp = decode_metadata(data)
    sited = [h for _, h in all_stream_handles(cp)]
    leaves = leaf_stream_handles(cp, coordinator=True)
    assert [id(h) for h in sited] == [id(h) for h in leaves]
    assert all(is_stream_leaf(h) for h in leaves)
    tops = [top for op in cp.operators for s in op.subtasks for _, top in subtask_handles(s)]
    transform_stream_handles(cp, lambda h: h)
    # Nothing changed: every handle object is still the one decoded, and the bytes are the same.
    assert [id(top) for op in cp.operators for s in op.subtasks for _, top in subtask_handles(s)] == [
        id(t) for t in tops
    ]
    assert encode_metadata(cp) == data


def test_transform_rebuilds_only_what_changed() -> None:
    fx = fixture_named("2.3.0-rocksdb-incremental")
    cp = decode_metadata(fx.metadata.read_bytes())
    files = [h for h in leaf_stream_handles(cp) if is_file_backed(h) and not h.relative]
    assert files
    transform_stream_handles(cp, lambda h: h.with_file_name("moved:" + h.file_name) if h in files else h)
    after = [h for h in leaf_stream_handles(cp) if isinstance(h, FileHandle)]
    assert after and all(h.path.startswith("moved:") for h in after)
    back = decode_metadata(encode_metadata(cp))
    assert [h.file_name for h in leaf_stream_handles(back) if is_file_backed(h) and not h.relative] == [
        h.file_name for h in after
    ]


def test_one_representation_of_a_release_line() -> None:
    """Every release the tables hold is a Release: (major, minor) comparing as the tuple and printing as Flink
    numbers its lines; the format table, the chaining rules and the stream-element tags share it."""
    from spillway.flink.chaining import RELEASE_RULES, release_for_format_version
    from spillway.flink.features import NEWEST_RELEASE, Release, parse_release
    from spillway.formats.stream_elements import KINDS

    held = [NEWEST_RELEASE, *(r.first for r in RELEASE_RULES), *(r.last for r in RELEASE_RULES)]
    held += [k.since for k in KINDS]
    held += [r for v in SUPPORTED_VERSIONS for f in dialects(v) for r in (f.first_release, f.last_release) if r]
    assert all(type(r) is Release for r in held)
    assert parse_release("release-1.20.3") == Release(1, 20) == (1, 20) and str(Release(1, 20)) == "1.20"
    assert parse_release(Release(2, 0)) == Release(2, 0) and Release(1, 9) < Release(1, 10) < (2, 0)
    assert [str(release_for_format_version(v)) for v in (2, 3, 4, 5, 6)] == ["1.10", "1.15", "1.20", "2.0", "2.3"]
    assert format_features(4).releases == "Flink 1.16-1.20" and format_features(7).releases == "Flink after 2.3"
    with pytest.raises(ValueError, match="not a Flink release: 'x'"):
        parse_release("x")
