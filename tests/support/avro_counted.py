"""The "counted-avro-*" jobs' data (AvroCounted.java): the record the job writes for each v, the expected value
of every test that decodes their records."""

from __future__ import annotations

from pathlib import Path

SCHEMA = Path(__file__).resolve().parents[1] / "fixtures" / "avro" / "event.avsc"  # AvroCounted.SCHEMA_JSON
KEYS = 32  # Counted.KEYS: the users


def written_by_the_job(v: int) -> dict[str, object]:
    """AvroCounted's record for v (AvroCounted.genericRecord / specificRecord)."""
    return {
        "user": {"id": f"user-{v % KEYS}", "tier": None if v % 3 == 0 else v % 5},
        "v": v,
        "tags": [f"t{v % 4}"] * (v % 3),
        "score": None if v % 2 == 0 else v / 4.0,
    }
