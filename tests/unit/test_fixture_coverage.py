"""The suite is only as good as its fixtures: make sure the real-Flink matrix is really there."""

from __future__ import annotations

import struct

from support.fixtures import all_fixtures


def _version(path) -> int:
    return struct.unpack(">i", path.read_bytes()[4:8])[0]


def test_every_metadata_version_flink_releases_write_is_covered() -> None:
    versions = {_version(f.metadata) for f in all_fixtures()}
    assert {2, 3, 4, 5, 6} <= versions, f"fixture versions: {sorted(versions)}"


def test_every_fixture_has_an_oracle_and_a_plan() -> None:
    fixtures = all_fixtures()
    assert len(fixtures) >= 10
    for f in fixtures:
        assert f.oracle.is_file(), f"{f.name}: no oracle.json (run tests/fixtures/oracle/regen.py)"
        assert (f.root / "plan.json").is_file(), f"{f.name}: no plan.json"
        assert f.info["release"], f.name
