"""``spillway.api.dump_checkpoint``: the figures ``spillway dump`` shows, against what Flink's own loader
reports for every fixture (oracle.json), and the CLI's JSON as the API's document."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner
from support.fixtures import Fixture, all_fixtures, fixture_named, fixture_params

from spillway.api import DumpView, UsageError, dump_checkpoint
from spillway.cli.app import app

KEYED = ("managed_keyed_state", "raw_keyed_state")
OPERATOR = ("managed_operator_state", "raw_operator_state")
CHANNELS = ("input_channel_state", "result_subpartition_state")


def _keyed_size(h: dict[str, Any]) -> int:
    """A keyed handle's size as Flink reports it; the oracle gives a ChangelogStateBackendHandleImpl's as its
    parts' (getStateSize: materialized plus non-materialized)."""
    if "state_size" in h:
        return int(h["state_size"])
    return sum(_keyed_size(part) for part in h["materialized"] + h["non_materialized"])


def _flink_figures(op: dict[str, Any]) -> dict[str, int]:
    """Per operator, from Flink's loader: state bytes by kind, channels (a merged handle's each), finished."""
    figures = {"keyed_bytes": 0, "operator_bytes": 0, "channel_bytes": 0, "channels": 0, "finished_subtasks": 0}
    for sub in op["subtasks"]:
        figures["finished_subtasks"] += bool(sub["finished"])
        for kind in KEYED:
            figures["keyed_bytes"] += sum(_keyed_size(h) for h in sub[kind])
        for kind in OPERATOR:
            figures["operator_bytes"] += sum(h["state_size"] for h in sub[kind])
        for kind in CHANNELS:
            for h in sub[kind]:
                figures["channel_bytes"] += h["state_size"]
                figures["channels"] += len(h["channels"]) if "channels" in h else 1
    return figures


@pytest.mark.parametrize("fx", fixture_params())
def test_summary_figures_are_flinks(fx: Fixture) -> None:
    oracle = {o["operator_id"]: o for o in json.loads(fx.oracle.read_text())["operators"]}
    result = dump_checkpoint(fx.metadata)
    summary = result.summary()
    assert sorted(s.operator.operator_id for s in summary.operators) == sorted(oracle)
    for s in summary.operators:
        ours = {key: getattr(s, key) for key in _flink_figures(oracle[s.operator.operator_id])}
        assert ours == _flink_figures(oracle[s.operator.operator_id]), s.operator.operator_id


@pytest.mark.parametrize("name", ["2.3.0-unaligned", "1.18.1-unaligned", "1.11.4-unaligned"])
def test_json_is_the_cli_document_and_a_view_selects(name: str) -> None:
    fx = fixture_named(name)
    cli = CliRunner().invoke(app, ["dump", str(fx.metadata), "--json"])
    assert cli.exit_code == 0, cli.output
    assert dump_checkpoint(fx.metadata).to_json() == json.loads(cli.stdout)
    flink_ops = json.loads(fx.oracle.read_text())["operators"]
    last = flink_ops[-1]
    one = dump_checkpoint(fx.metadata, DumpView(operator=last["operator_id"], subtask=0)).to_json()
    assert [o["operator_id"] for o in one["operators"]] == [last["operator_id"]]
    assert [s["index"] for s in one["operators"][0]["subtasks"]] == [
        s["index"] for s in last["subtasks"] if s["index"] == 0
    ]


def test_an_unknown_operator_is_a_usage_error() -> None:
    fx = all_fixtures()[0]
    with pytest.raises(UsageError, match="no operator with id, uid or name 'no-such-operator'"):
        dump_checkpoint(fx.metadata, DumpView(operator="no-such-operator"))
