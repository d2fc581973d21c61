"""The binding is a value held by the opened checkpoint: every read-side call shows the plan's names, and none
of them changes the decoded ``_metadata`` (Flink before 2.0 stores ids only; the names are spillway's view).
Expected names come from Flink's own ids (ids.json), never from spillway."""

from __future__ import annotations

import json
import pickle

import pytest
from support.fixtures import fixture_named

import spillway
from spillway.api import AnalyzeOptions


def _flink_names(name: str) -> dict[str, str]:
    """Operator id -> name, as Flink's hasher recorded them for the job."""
    ids = json.loads((fixture_named(name).root / "ids.json").read_text())["stream_nodes"]
    return {n["operator_id"]: n["name"] for n in ids}


@pytest.mark.parametrize("name", ["1.20.3-prod", "1.15.4-prod-no-uid"])
def test_every_read_side_call_names_operators_by_the_plan_and_leaves_the_model_as_decoded(name: str) -> None:
    fx = fixture_named(name)
    cp = spillway.open(fx.checkpoint_dir, plan=fx.root / "plan.json")
    other = spillway.open(fx.checkpoint_dir, plan=fx.root / "plan.json")
    decoded = pickle.dumps(cp.model)
    flink = _flink_names(name)
    assert all(o.name is None for o in cp.model.operators)  # V3/V4: ids only, the names must come from the plan

    job = cp.job_binding
    assert job is not None and cp.job_binding is job  # once per opened checkpoint
    # every operator of these jobs is bound exactly: each is named as Flink's hasher named it
    assert dict(cp.plan_names) == {o.operator_id: flink[o.operator_id] for o in cp.model.operators}
    assert [o.label(cp.plan_names) for o in cp.model.operators] == [flink[o.operator_id] for o in cp.model.operators]
    assert all(o.label() == o.operator_id for o in cp.model.operators)  # the model itself holds no name

    analyzed = cp.analyze(AnalyzeOptions()).to_json()
    assert {o["operator_id"]: o["name"] for o in analyzed["operators"] if o["name"]} == dict(cp.plan_names)
    files = cp.files().to_json()
    assert {o["operator_id"]: o["plan_name"] for o in files["checkpoints"][0]["operators"] if o["plan_name"]} == dict(
        cp.plan_names
    )
    assert cp.diff(other).identical
    assert cp.validate().sound
    assert cp.verdict() is not None

    assert pickle.dumps(cp.model) == decoded  # nothing was written into the decoded checkpoint
    assert other.job_binding == job and other.job_binding is not job  # the same plan and bytes: an equal value
