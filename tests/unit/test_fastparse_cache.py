"""The fast parser's compiled code is cached by source hash; a damaged or unreadable cache is compiled
around, never trusted."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.fixtures import fixture_named

from spillway.formats.fastparse import compile_fast
from spillway.formats.metadata import metadata_layout


def _parse_with_fresh_compile(data: bytes) -> object:
    return compile_fast(metadata_layout(6))(data)


def test_cached_and_damaged_cache_parse_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPILLWAY_CACHE", str(tmp_path))
    data = fixture_named("2.3.0-unaligned").metadata.read_bytes()
    # what construct's interpreted parse (the layout's one declaration) reads
    expected = metadata_layout(6).parse(data)["body"]["checkpoint_id"]
    first = _parse_with_fresh_compile(data)
    cached = list((tmp_path / "fastparse").iterdir())
    assert len(cached) == 1
    assert _parse_with_fresh_compile(data) == first
    cached[0].write_bytes(b"\x00not marshal data")
    assert _parse_with_fresh_compile(data) == first
    assert first["body"]["checkpoint_id"] == expected  # type: ignore[index]
