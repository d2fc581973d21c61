"""A wrong --key extractor is refused before anything is written, and the written output is key-group-checked
independently of the router (issue "Never write a wrong checkpoint").

Real fixtures, in-process backend (no Spark):

* 2.3.0-counted: parse emits ``Tuple2<Long, Long>(v % 32, v)`` and count is ``keyBy(t -> t.f0)``
  (Counted.java: ToPair, PairKey). The right extractor is field 0 (``tuple(long,long):0``); field 1 is wrong.
* 2.3.0-unaligned: tostr emits Strings ``"key:subtask:seq"`` and slow is ``keyBy(KeyOf)`` on the part before the
  first ':' (Functions.KeyOf). No built-in extractor takes a prefix: ``--key string`` (the whole String) is
  wrong; ``--key-fn support.keyfns:key_of`` is right.

Expected values come from the job's design (the tuple is (v % 32, v); the key is the String's prefix), never
from spillway's key functions.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from spillway.inspect.topology import load_plan
from spillway.rescale import rescale as rescale_module
from spillway.rescale.plan import RescaleRefused
from spillway.rescale.rescale import rescale
from spillway.storage.load import load_checkpoint
from spillway.storage.safe_writer import WriteError

FIXTURES = Path(__file__).parents[1] / "fixtures"

# Counted.java: N = 200_000 values, KEYS = 32, parse emits (v % KEYS, v)
KEYS = 32
N = 200_000

EXAMPLE = re.compile(
    r"e\.g\. record (?P<value>.+?) on old channel (?P<channel>\S+ -> \S+) \(gate \d+\): key (?P<key>.+?), "
    r"key group (?P<kg>\d+) belongs to subtask (?P<owner>\d+) of (?P<p>\d+), but the record sits on subtask "
    r"(?P<sits>\d+)"
)


def _run(fixture: str, vertex: str, out: Path, **kw):  # type: ignore[no-untyped-def]
    root = FIXTURES / fixture
    ld = load_checkpoint(next(root.glob("checkpoints/*/chk-*")))
    ld.resolve_files()
    rebase = [f"{r['from']}={r['to']}" for r in ld.resolver.rebases()]
    return rescale(ld, load_plan(root / "jobgraph.json"), {vertex: 3}, out, master=None, rebase=rebase, **kw)


def _refusal(fixture: str, vertex: str, tmp_path: Path, **kw) -> tuple[str, re.Match]:  # type: ignore[no-untyped-def]
    out = tmp_path / "out"
    with pytest.raises(RescaleRefused) as err:
        _run(fixture, vertex, out, **kw)
    assert list(tmp_path.iterdir()) == [], "nothing may be written"
    message = str(err.value)
    assert "extractor is likely wrong" in message, message
    m = EXAMPLE.search(message)
    assert m is not None, message
    assert m["owner"] != m["sits"] and m["p"] == "2"  # both fixtures run at parallelism 2
    counts = re.search(r"(\d+) of (\d+) checked in-flight records", message)
    assert counts is not None, message
    mismatched, checked = int(counts[1]), int(counts[2])
    assert 0 < mismatched <= checked
    # about half the records of a 2-subtask edge land on the other subtask under an unrelated key
    assert mismatched > checked // 4, message
    return message, m


def test_counted_wrong_tuple_field_is_refused_with_an_example(tmp_path: Path) -> None:
    message, m = _refusal("2.3.0-counted", "count", tmp_path, keys={"count": "tuple(long,long):1"})
    assert "edge parse -> count (HASH)" in message and "tuple(long,long):1" in message
    # the example is a parse record (v % 32, v) and the key shown is its field 1, i.e. v
    f0, f1 = (int(x) for x in re.fullmatch(r"\((-?\d+), (-?\d+)\)", m["value"]).groups())  # type: ignore[union-attr]
    assert 0 <= f1 < N and f0 == f1 % KEYS
    assert int(m["key"]) == f1
    assert 0 <= int(m["kg"]) < 128  # Counted.java: setMaxParallelism(128)


def test_unaligned_whole_string_key_is_refused_with_an_example(tmp_path: Path) -> None:
    message, m = _refusal("2.3.0-unaligned", "slow", tmp_path, keys={"slow": "string"})
    assert "tostr -> slow (HASH)" in message and "keys[…]='string'" in message
    # a tostr record "key:subtask:seq", and the key shown is the whole String, not its prefix
    text = m["value"].strip("'")
    assert re.fullmatch(r"\d+:\d+:\d+", text), text
    assert m["key"] == m["value"]


def test_right_extractors_pass_and_every_output_record_is_checked(tmp_path: Path) -> None:
    calls: list[int] = []
    real = rescale_module.check_output_keys

    def counting(directory, plan, files):  # type: ignore[no-untyped-def]
        problems, checked = real(directory, plan, files)
        calls.append(checked)
        return problems, checked

    mp = pytest.MonkeyPatch()
    mp.setattr(rescale_module, "check_output_keys", counting)
    try:
        counted = _run("2.3.0-counted", "count", tmp_path / "c", keys={"count": "tuple(long,long):0"})
        unaligned = _run("2.3.0-unaligned", "slow", tmp_path / "u", key_fns={"slow": "support.keyfns:key_of"})
    finally:
        mp.undo()
    assert (tmp_path / "c" / "_metadata").is_file() and (tmp_path / "u" / "_metadata").is_file()
    for report in (counted, unaligned):
        assert "key_check" in report.timings and "output_key_check" in report.timings
    # every record moved on the HASH edge is checked in the output, not a sample
    for report, checked in zip((counted, unaligned), calls, strict=True):
        plan = report.plan
        on_hash = sum(r.records for r in report.move.sources if plan.edges[plan.sources[r.sid].edge].rule == "hash")
        assert checked == on_hash > 1000


def test_a_misrouted_output_fails_the_independent_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Skip the source check and route with the wrong field: the router's own self-check agrees with itself,
    the independent output check does not, and nothing is left behind."""
    monkeypatch.setattr(rescale_module, "refuse_wrong_extractors", lambda plan: None)
    real = rescale_module.check_output_keys

    def judged_by_the_job_key(directory, plan, files):  # type: ignore[no-untyped-def]
        for ep in plan.edges:  # the job's real key (Counted.java PairKey: f0), whatever --key said
            if ep.key:
                object.__setattr__(ep, "key", "tuple(long,long):0")
        return real(directory, plan, files)

    monkeypatch.setattr(rescale_module, "check_output_keys", judged_by_the_job_key)
    with pytest.raises(WriteError, match="not on the subtask owning their key group"):
        _run("2.3.0-counted", "count", tmp_path / "out", keys={"count": "tuple(long,long):1"})
    assert list(tmp_path.iterdir()) == []
