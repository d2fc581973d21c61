"""The extractor check against the source and the independent output key check (spillway.rescale.source_keys),
on the paths the rescale tests do not reach: records that do not decode under the extractor, the per-channel
sample, unreadable channel state, edges that are not keyBy edges, and the exact words of each problem.

Real fixtures: 2.3.0-unaligned (tostr emits Strings "key:subtask:seq"; slow is keyBy on the prefix) and
2.3.0-counted (parse emits Tuple2<Long, Long>(v % 32, v); count is keyBy(f0); src -> parse is REBALANCE).
Expected counts come from the job's data as `analyze` reads it, not from the code under test.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from spillway.cli.app import app
from spillway.inspect.topology import load_plan
from spillway.rescale.plan import HASH, RescalePlan, RescaleRefused, build_plan
from spillway.rescale.rescale import rescale
from spillway.rescale.source_keys import check_output_keys, check_source_keys, refuse_wrong_extractors
from spillway.storage.load import load_checkpoint

FIXTURES = Path(__file__).parents[1] / "fixtures"


def _plan(fixture: str, parallelism: dict[str, int], root: Path | None = None, **kw) -> RescalePlan:  # type: ignore[no-untyped-def]
    root = root or FIXTURES / fixture
    ld = load_checkpoint(next(root.glob("checkpoints/*/chk-*")))
    ld.resolve_files()
    return build_plan(ld.checkpoint, load_plan(root / "jobgraph.json"), ld.resolver, parallelism, **kw)


def _hash_channels(fixture: str) -> dict[str, int]:
    """label -> records of every HASH logical channel, as analyze reads them."""
    root = FIXTURES / fixture
    args = ["analyze", str(root / "checkpoints"), "--plan", str(root / "jobgraph.json"), "--json"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    return {c["label"]: c["records"] for c in json.loads(res.output)["channels"] if c["ship_strategy"] == "HASH"}


def test_records_that_do_not_decode_under_the_extractor_are_all_counted_and_shown_as_they_are() -> None:
    """tostr's records are Strings of 9-11 bytes; a (long, long) tuple needs 16: not one decodes. Every
    checked record counts as misplaced, and the example shows the record as a String with the complaint."""
    plan = _plan("2.3.0-unaligned", {"slow": 3}, keys={"slow": "tuple(long,long):0"})
    (found,) = check_source_keys(plan, per_channel=7)
    channels = _hash_channels("2.3.0-unaligned")
    assert found.checked == found.mismatched == 7 * len(channels)
    assert found.example is not None and found.example.problem
    assert found.example.problem.startswith("value does not fit 'tuple(long,long):0': long needs 8 bytes")
    assert re.fullmatch(r"'\d+:\d+:\d+'", found.example.value), found.example.value
    text = found.example.describe(2)
    assert text.startswith(f"record {found.example.value} on old channel tostr#") and "does not decode: " in text


def test_the_sample_is_per_channel_and_the_refusal_counts_it() -> None:
    plan = _plan("2.3.0-counted", {"count": 3}, keys={"count": "tuple(long,long):1"})  # the wrong field
    channels = _hash_channels("2.3.0-counted")
    assert min(channels.values()) > 3
    (found,) = check_source_keys(plan, per_channel=3)
    assert found.checked == 3 * len(channels)
    (unlimited,) = check_source_keys(plan, per_channel=None)
    assert unlimited.checked == sum(channels.values())
    with pytest.raises(RescaleRefused) as err:
        refuse_wrong_extractors(plan, per_channel=1)
    message = str(err.value)
    m = re.search(r"under keys\[…\]='tuple\(long,long\):1', (-?\d+) of (-?\d+) checked in-flight records", message)
    assert m is not None, message
    assert 0 < int(m[1]) <= int(m[2]) == len(channels)
    assert message.endswith(
        ". Give the job's real key (keys={VERTEX: EXTRACTOR} or key_fns="
        "{VERTEX: module:function}; spillway analyze --decode N shows the records)"
    )


def test_an_unreadable_source_channel_is_a_refusal_naming_it(tmp_path: Path) -> None:
    root = tmp_path / "fx"
    shutil.copytree(FIXTURES / "2.3.0-counted", root)
    plan = _plan("2.3.0-counted", {"count": 3}, root=root, keys={"count": "tuple(long,long):0"})
    for path in {p.path for s in plan.sources for p in s.parts if p.path}:
        Path(path).write_bytes(Path(path).read_bytes()[:6])  # header and two bytes: every chunk is gone
    with pytest.raises(RescaleRefused, match=r"^parse#\d -> count#\d \(gate 0\): channel state not readable: "):
        check_source_keys(plan)


def test_a_keyby_edge_without_an_extractor_is_not_checked() -> None:
    """(A HASH edge with nothing in flight needs no extractor; the planner refuses one that carries records.)"""
    plan = _plan("2.3.0-counted", {"count": 3}, keys={"count": "tuple(long,long):0"})
    (ep,) = [ep for ep in plan.edges if ep.rule == HASH]
    assert [f.edge for f in check_source_keys(plan)] == [ep]
    object.__setattr__(ep, "key", None)
    assert check_source_keys(plan) == []


def test_an_extractor_given_for_a_vertex_behind_a_rebalance_edge_is_not_applied(tmp_path: Path) -> None:
    """parse's input is REBALANCE: a --key for parse says nothing about where its records sit. Neither check
    may judge those records by it (under `long` every src record would have a key group, owned or not)."""
    root = FIXTURES / "2.3.0-counted"
    ld = load_checkpoint(next(root.glob("checkpoints/*/chk-*")))
    ld.resolve_files()
    rebase = [f"{r['from']}={r['to']}" for r in ld.resolver.rebases()]
    report = rescale(
        ld, load_plan(root / "jobgraph.json"), {"parse": 3}, tmp_path / "out", keys={"parse": "long"},
        master=None, rebase=rebase,
    )  # fmt: skip
    assert (tmp_path / "out" / "_metadata").is_file()
    assert report.move is not None
    assert check_output_keys(tmp_path / "out", report.plan, report.move.files) == ([], 0)


def _counted_output(tmp_path: Path):  # type: ignore[no-untyped-def]
    root = FIXTURES / "2.3.0-counted"
    ld = load_checkpoint(next(root.glob("checkpoints/*/chk-*")))
    ld.resolve_files()
    rebase = [f"{r['from']}={r['to']}" for r in ld.resolver.rebases()]
    out = tmp_path / "out"
    report = rescale(
        ld, load_plan(root / "jobgraph.json"), {"count": 3}, out, keys={"count": "tuple(long,long):0"},
        master=None, rebase=rebase,
    )  # fmt: skip
    assert report.move is not None
    return out, report


def test_the_output_check_names_file_channel_subtask_extractor_and_owner(tmp_path: Path) -> None:
    out, report = _counted_output(tmp_path)
    problems, checked = check_output_keys(out, report.plan, report.move.files)
    assert problems == [] and checked == sum(_hash_channels("2.3.0-counted").values())
    # Judge the same output by the wrong field: every channel with records is reported, with where and why.
    for ep in report.plan.edges:
        if ep.key:
            object.__setattr__(ep, "key", "tuple(long,long):1")
    problems, _ = check_output_keys(out, report.plan, report.move.files)
    assert problems
    pattern = re.compile(
        r"(?P<file>\S+) \(gate 0, input channel (?P<up>\d+)\) of new subtask (?P<down>\d+): (?P<bad>\d+) of "
        r"(?P<n>\d+) records not on the subtask owning their key group under keys\[…\]='tuple\(long,long\):1', e\.g\. "
        r"record \(\d+, \d+\) on (?P=file) \(gate 0, input channel (?P=up)\) of new subtask (?P=down): key \d+, "
        r"key group \d+ belongs to subtask (?P<owner>\d) of 3, but the record sits on subtask (?P=down)$"
    )
    names = {f.name for f in report.move.files}
    for problem in problems:
        m = pattern.fullmatch(problem)
        assert m is not None, problem
        assert m["file"] in names and m["owner"] != m["down"] and 0 < int(m["bad"]) <= int(m["n"])


def test_an_unreadable_output_channel_is_reported_for_every_channel(tmp_path: Path) -> None:
    out, report = _counted_output(tmp_path)
    (ep,) = [ep for ep in report.plan.edges if ep.rule == HASH]
    victim = next(f for f in report.move.files if f.operator_id == ep.down_head and len(f.channels) > 1)
    (out / victim.name).write_bytes((out / victim.name).read_bytes()[:6])
    problems, _ = check_output_keys(out, report.plan, report.move.files)
    mine = [p for p in problems if p.startswith(f"{victim.name} (gate 0, input channel ")]
    on_hash = [ch for ch in victim.channels if ch.gate == 0]
    assert len(mine) == len(on_hash) > 1, problems
    assert all(f"of new subtask {victim.down}: " in p for p in mine)


def test_key_function_results_are_hashed_as_java_would() -> None:
    """A --key-fn returns the key's hashCode (int), a String key, or a boolean key; anything else is refused.
    java.lang.Boolean.hashCode is 1231 for true and 1237 for false; String.hashCode("a") is 97."""
    from spillway.rescale.source_keys import _java_hash

    assert (_java_hash(True), _java_hash(False)) == (1231, 1237)
    assert (_java_hash(-5), _java_hash("a"), _java_hash("")) == (-5, 97, 0)
    with pytest.raises(RescaleRefused, match=r"^key_fns\[…\]=\.\.\. returned float; return the key's Java hashCode"):
        _java_hash(1.5)


def test_a_failing_key_function_is_a_refusal_naming_it() -> None:
    plan = _plan("2.3.0-counted", {"count": 3}, key_fns={"count": "support.keyfns:raises"})
    with pytest.raises(RescaleRefused) as err:
        check_source_keys(plan)
    assert str(err.value) == "key_fns[…]='support.keyfns:raises' failed: ValueError: cannot key 16 bytes"


def test_a_boolean_key_function_is_judged_by_java_boolean_hashes() -> None:
    """count is keyBy(f0) with f0 = v % 32; keyed by parity instead, records sit where f0 put them, not where
    1231/1237 would: the check finds them misplaced, and the example names the boolean key."""
    plan = _plan("2.3.0-counted", {"count": 3}, key_fns={"count": "support.keyfns:parity"})
    (found,) = check_source_keys(plan, per_channel=50)
    assert 0 < found.mismatched < found.checked == 50 * len(_hash_channels("2.3.0-counted"))
    assert found.example is not None and found.example.key in ("True", "False")
    assert found.example.problem is None and found.example.key_group is not None


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("support.keyfns:nope", "key_fns[…]='support.keyfns:nope': module 'support.keyfns' has no attribute 'nope'"),
        ("support.nothing:f", "key_fns[…]='support.nothing:f': No module named 'support.nothing'"),
        (
            "support.keyfns:raises:x",
            "key_fns[…]='support.keyfns:raises:x': module 'support.keyfns' has no attribute 'raises:x'",
        ),
        ("support.keyfns:NOT_CALLABLE", "key_fns[…]='support.keyfns:NOT_CALLABLE' is not callable"),
    ],
)
def test_a_key_function_that_cannot_be_loaded_is_refused_with_the_reason(spec: str, message: str) -> None:
    plan = _plan("2.3.0-counted", {"count": 3}, key_fns={"count": spec})
    with pytest.raises(RescaleRefused) as err:
        check_source_keys(plan)
    assert str(err.value) == message


def test_a_bad_extractor_given_through_the_api_is_refused_naming_the_edge() -> None:
    plan = _plan("2.3.0-counted", {"count": 3}, keys={"count": "nonsense"})
    with pytest.raises(RescaleRefused, match=r"^edge parse -> count \(HASH\): keys\[…\]='nonsense': "):
        check_source_keys(plan)


def test_inline_channel_state_is_checked_too() -> None:
    """2.3.0-inline keeps all channel state inside _metadata (byte-stream handles): the check reads it there."""
    plan = _plan("2.3.0-inline", {"slow": 3}, key_fns={"slow": "support.keyfns:key_of"})
    assert all(p.data is not None for s in plan.sources for p in s.parts)
    (found,) = check_source_keys(plan, per_channel=None)
    assert found.mismatched == 0 and found.checked == sum(_hash_channels("2.3.0-inline").values()) > 0
