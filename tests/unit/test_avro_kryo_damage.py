"""Damaged bytes under avro(...) and kryo5/kryo2(...) specs: every failure is a ValueSpecError (one line naming the
field and offset), never another exception, a hang or a huge allocation. Bytes: real in-flight records of the
counted-avro / counted-kryo fixtures, truncated and with bytes flipped (seeded)."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from spillway.cli.app import app
from spillway.formats.values import ValueSpecError, decode_value, parse_key_extractor

FIXTURES = Path(__file__).parents[1] / "fixtures"
SPECS = {
    "2.3.0-counted-avro-generic": f"avro({FIXTURES / 'avro' / 'event.avsc'})",
    "1.20.3-counted-kryo": "kryo2(user:String, v:long, bucket:int, score:double)",
    "2.3.0-counted-kryo": "kryo5(user:String, v:long, bucket:int, score:double)",
}
KEY_FIELD = {"avro": "user.id", "kryo2": "user", "kryo5": "user"}


def raw_records(name: str) -> list[bytes]:
    fixture = FIXTURES / name
    chk = next(fixture.glob("checkpoints/*/chk-*"))
    res = CliRunner().invoke(
        app,
        [
            "analyze",
            str(chk),
            "--plan",
            str(fixture / "jobgraph.json"),
            "--json",
            "--decode",
            "50",
            "--value-type",
            "hex",
        ],
    )
    assert res.exit_code == 0, res.output
    return [
        bytes.fromhex(r["value"]["hex"])
        for c in json.loads(res.output)["channels"]
        if c["upstream"]["operator"] == "parse"
        for r in c["first_records"]
    ]


@pytest.mark.parametrize("name", SPECS)
def test_damaged_records_fail_with_one_clear_error(name: str) -> None:
    spec = SPECS[name]
    extract = parse_key_extractor(f"{spec}:{KEY_FIELD[spec.split('(')[0]]}")
    records = raw_records(name)
    assert len(records) >= 100
    rng = random.Random(32)
    started = time.monotonic()
    failures = 0
    for raw in records:
        decode_value(spec, raw)  # the undamaged record decodes
        for _ in range(20):
            damaged = bytearray(raw[: rng.randrange(len(raw) + 1)] if rng.random() < 0.3 else raw)
            for _ in range(rng.randrange(1, 4)):
                if damaged:
                    damaged[rng.randrange(len(damaged))] = rng.randrange(256)
            for call in (lambda d: decode_value(spec, d), extract):
                try:
                    call(bytes(damaged))
                except ValueSpecError as exc:
                    assert "\n" not in str(exc)
                    failures += 1
    assert failures > 1000
    assert time.monotonic() - started < 60
