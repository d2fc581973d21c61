"""build(parse(bytes)) == bytes for every real Flink _metadata, at the layout and at the model level."""

from __future__ import annotations

import pytest
from conftest import Fixture, fixture_params

from spillway.formats.metadata import compiled_layout, metadata_layout
from spillway.formats.metadata_codec import decode_metadata, encode_metadata, read_header


@pytest.mark.parametrize("fx", fixture_params())
def test_layout_round_trip_is_byte_exact(fx: Fixture) -> None:
    data = fx.metadata.read_bytes()
    version = read_header(data, str(fx.metadata))
    parsed = metadata_layout(version).parse(data)
    assert metadata_layout(version).build(parsed) == data
    assert compiled_layout(version).parse(data) == parsed


@pytest.mark.parametrize("fx", fixture_params())
def test_model_round_trip_is_byte_exact(fx: Fixture) -> None:
    data = fx.metadata.read_bytes()
    checkpoint = decode_metadata(data, str(fx.metadata))
    assert encode_metadata(checkpoint) == data
