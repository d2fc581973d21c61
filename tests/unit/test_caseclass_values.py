"""caseclass(...) on real channel state: the caseclass-counted fixtures (Flink 1.20.3, parallelism 2 and 3; records
of the Scala case class scala.Tuple2[String, Long] serialized by Flink's ScalaCaseClassSerializer) decode to the
pairs the job logged, and the derived key sits on the subtask Flink's keyBy routed each record to."""

from __future__ import annotations

import gzip
import json

import pytest
from support.fixtures import fixture_named

from spillway.flink.keygroups import key_group_for_hash, operator_index
from spillway.formats.values import decode_value, json_data, parse_key_extractor
from spillway.inspect.analyze import analyze
from spillway.inspect.topology import load_plan
from spillway.storage.load import load_checkpoint

PAIR = "caseclass(user:string,seq:long)"
BY_GROUP = f"{PAIR}:user|before(':')|lower"  # GroupKey: t._1().substring(0, t._1().indexOf(':')).toLowerCase()


@pytest.mark.parametrize(("name", "parallelism"), [("1.20.3-caseclass-counted", 2), ("1.20.3-caseclass-counted-p3", 3)])
def test_in_flight_case_classes_are_the_pairs_the_job_wrote_on_flinks_subtask(name: str, parallelism: int) -> None:
    fx = fixture_named(name)
    with gzip.open(fx.root / "records.jsonl.gz", "rt", encoding="utf-8") as f:
        log = {r["seq"]: r for r in map(json.loads, f)}
    result = analyze(load_checkpoint(fx.checkpoint_dir), load_plan(fx.root / "jobgraph.json"), keep_records=10**9)
    extract = parse_key_extractor(BY_GROUP)
    checked = 0
    for ch in result.channels:
        if ch.downstream["operator"] != "group":
            continue
        assert ch.ship_strategy == "HASH"
        for rec in ch.record_list:
            if rec["tag"] != "record":
                continue
            raw = bytes(rec["value"])
            value = json_data(decode_value(PAIR, raw))
            assert isinstance(value, dict) and value == log[value["seq"]]
            key, h = extract(raw)
            assert key == value["user"].split(":")[0].lower()
            assert operator_index(128, parallelism, key_group_for_hash(h, 128)) == ch.downstream["subtask"]
            checked += 1
    assert checked > 500
