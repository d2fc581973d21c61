"""``spillway keygroup`` against Flink 2.3.0's own KeyGroupRangeAssignment (ValueOracle), plus the worked
examples of spec 07 §7.4."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from support.value_oracle import expected, value_oracle

from spillway.cli.app import app

runner = CliRunner()
SCALAR_TYPES = ("string", "long", "int", "short", "byte", "boolean", "double", "float")


def _run(key: str, kind: str, max_p: int, p: int) -> dict:
    res = runner.invoke(
        app,
        ["keygroup", "--type", kind, "--max-parallelism", str(max_p), "--parallelism", str(p), "--json", "--", key],
    )
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else value if isinstance(value, str) else repr(value)


def test_keygroup_matches_flink_for_every_oracle_key() -> None:
    oracle = value_oracle()
    routes = oracle["routes"]
    checked = 0
    for case in oracle["cases"]:
        if case["spec"] not in SCALAR_TYPES:
            continue
        for k in case["keys"]:
            key = expected(k["key"])
            if isinstance(key, str) and any(0xD800 <= ord(c) <= 0xDFFF for c in key):
                continue  # unpaired surrogates cannot travel as a command-line argument
            # every route for a few keys, a rotating one for the rest (each run is a CLI invocation)
            picks = range(len(routes)) if checked < 3 else [checked % len(routes), (checked * 7 + 3) % len(routes)]
            for i in picks:
                (max_p, p), (kg, sub) = routes[i], k["routing"][i]
                doc = _run(_text(key), case["spec"], max_p, p)
                assert (doc["hash_code"], doc["murmur_hash"]) == (k["hash"], k["murmur"]), (case, doc)
                assert (doc["key_group"], doc["subtask"]) == (kg, sub), (case, doc)
                first, last = doc["subtask_key_groups"]
                assert first <= kg <= last
            checked += 1
    assert checked > 80


# Spec 07 §7.4 (computed with Flink 2.3.0's classes when the spec was written).
@pytest.mark.parametrize(
    ("key", "kind", "hash_code", "kg128", "p2", "p3", "kg32768"),
    [
        ("k17", "string", 104401, 64, 1, 1, 3520),
        ("", "string", 0, 94, 1, 2, 31198),
        ("17", "int", 17, 81, 1, 1, 15313),
        ("17", "long", 17, 81, 1, 1, 15313),
        ("true", "boolean", 1231, 77, 1, 1, 11725),
        ("false", "boolean", 1237, 3, 0, 0, 32003),
    ],
)
def test_keygroup_spec_examples(key, kind, hash_code, kg128, p2, p3, kg32768) -> None:
    assert _run(key, kind, 128, 2)["hash_code"] == hash_code
    assert (_run(key, kind, 128, 2)["key_group"], _run(key, kind, 128, 2)["subtask"]) == (kg128, p2)
    assert _run(key, kind, 128, 3)["subtask"] == p3
    assert _run(key, kind, 32768, 1)["key_group"] == kg32768


@pytest.mark.parametrize(
    "args",
    [
        ["x", "--type", "long"],
        ["2147483648", "--type", "int"],
        ["128", "--type", "byte"],
        ["maybe", "--type", "boolean"],
        ["1e39", "--type", "float"],
        ["x", "--type", "char"],
        ["x", "--parallelism", "300", "--max-parallelism", "128"],
        ["x", "--max-parallelism", "32769", "--parallelism", "1"],
    ],
)
def test_keygroup_bad_arguments(args: list[str]) -> None:
    res = runner.invoke(app, ["keygroup", *args])
    assert res.exit_code == 2, res.output
