"""Production-shaped 1.x jobs (uid != name, mixed uids, chain cuts, a two-input keyed operator, event time) with
only the plan a 1.x user has — the stream-graph plan (``getExecutionPlan()`` / ``flink info``) — and no uid typed.

Expected values come from Flink: ``ids.json`` (the id Flink computed for every stream node), the job's design
(tests/fixtures/generator/README.md: which branch finished) and real restores (tests/integration/test_prod_restore.py:
Flink accepts these checkpoints for their own job)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.fixtures import Fixture, all_fixtures

from spillway.cli.app import app
from spillway.flink import operator_ids
from spillway.inspect.finished import FULLY, PARTIALLY, RUNNING, UNKNOWN, check
from spillway.inspect.topology import bind_job, load_plan, operator_binding
from spillway.inspect.validate import validate
from spillway.storage.load import load_checkpoint

PROD_1X = [f for f in all_fixtures() if f.info["scenario"].startswith("prod") and f.info["metadata_version"] < 5]
PROD_FINISHED = [pytest.param(f, id=f.name) for f in all_fixtures() if f.info["scenario"] == "prod-finished"]


def _flink(fx: Fixture) -> dict[str, str]:
    """Stream-node name -> Flink's operator id (names are unique in these jobs)."""
    return {n["name"]: n["operator_id"] for n in json.loads((fx.root / "ids.json").read_text())["stream_nodes"]}


def _holding_state(fx: Fixture) -> set[str]:
    cp = load_checkpoint(fx.checkpoint_dir).checkpoint
    return {o.operator_id for o in cp.operators if any(s.has_state() for s in o.subtasks) or o.coordinator_state}


def test_the_production_matrix_covers_every_1x_line() -> None:
    lines = {f.release.rsplit(".", 1)[0] for f in PROD_1X}
    assert {"1.11", "1.12", "1.13", "1.14", "1.15", "1.16", "1.17", "1.18", "1.19", "1.20"} <= lines
    assert {f.info["scenario"] for f in PROD_1X} >= {"prod", "prod-no-uid", "prod-finished", "prod-counted"}


@pytest.mark.parametrize("fx", [pytest.param(f, id=f.name) for f in PROD_1X])
def test_stream_graph_plan_alone_never_binds_a_wrong_id(fx: Fixture) -> None:
    flink = _flink(fx)
    binding = operator_binding(load_plan(fx.root / "plan.json"), load_checkpoint(fx.checkpoint_dir).checkpoint)
    assert binding is not None
    for b in binding.operators:
        if b.operator_id is not None:
            assert b.operator_id == flink[b.name], (b.name, b.method, b.reason)
        if b.method == "unbound":  # what would decide it is named; never a uid for an operator known to have none
            assert "--uid" in b.reason and "job-graph plan" in b.reason


@pytest.mark.parametrize("fx", [pytest.param(f, id=f.name) for f in PROD_1X])
def test_sound_production_checkpoints_validate_clean_with_the_stream_graph_plan(fx: Fixture) -> None:
    report = validate(load_checkpoint(fx.checkpoint_dir), load_plan(fx.root / "plan.json"))
    assert [f"{f.rule}: {f.message}" for f in report.errors] == []


@pytest.mark.parametrize("flavour", ["plan.json", "jobgraph.json"])
@pytest.mark.parametrize("name", ["1.16.3-prod", "1.16.3-prod-no-uid"])
def test_flink_1_16_production_jobs_bind_every_operator_by_flinks_id_with_no_uid_given(name: str, flavour: str) -> None:
    """Flink 1.16 (metadata V4, ids only): ``analyze --plan --json`` with either plan and no --uid binds every one of
    the 11 plan operators exactly, to the id Flink computed for it (ids.json), and ``validate`` finds nothing."""
    fx = next(f for f in PROD_1X if f.name == name)
    flink = _flink(fx)
    res = CliRunner().invoke(app, ["analyze", str(fx.checkpoint_dir), "--plan", str(fx.root / flavour), "--json"])
    assert res.exit_code == 0, res.output
    binding = json.loads(res.stdout)["binding"]
    assert {b["operator"]: (b["operator_id"], b["exact"]) for b in binding} == {n: (i, True) for n, i in flink.items()}
    report = validate(load_checkpoint(fx.checkpoint_dir), load_plan(fx.root / flavour))
    assert report.findings == []


def test_nine_in_ten_operators_holding_state_are_bound_exactly() -> None:
    """The issue's bar, over every 1.x production-shaped fixture: at least 90 % of the operators that hold state
    are bound exactly from the stream-graph plan alone (and, by the test above, none wrongly)."""
    held = bound = 0
    missing: list[str] = []
    for fx in PROD_1X:
        holding = _holding_state(fx)
        binding = operator_binding(load_plan(fx.root / "plan.json"), load_checkpoint(fx.checkpoint_dir).checkpoint)
        assert binding is not None
        exact = {b.operator_id for b in binding.operators if b.exact}
        held += len(holding)
        bound += len(holding & exact)
        missing += [f"{fx.name}:{h[:8]}" for h in sorted(holding - exact)]
    assert held >= 150  # the matrix is not trivially small
    assert bound / held >= 0.9, (bound, held, missing)


def _expected_class(names: list[str]) -> str:
    if any(n.startswith(("Source: bounded", "bounded")) for n in names):
        return FULLY
    if any(n.startswith(("Source: partial", "finish-on-0", "partial")) for n in names):
        return PARTIALLY
    return RUNNING


@pytest.mark.parametrize("fx", PROD_FINISHED)
def test_finished_verdict_is_flinks_or_unknown(fx: Fixture) -> None:
    """Flink restores these checkpoints into their own job (test_prod_restore): the verdict never refuses, and
    each vertex's class is the job's (bounded branch fully finished, partial branch subtask 0) or UNKNOWN."""
    topology = load_plan(fx.root / "plan.json")
    cp = load_checkpoint(fx.checkpoint_dir).checkpoint
    verdict = check(topology, cp)
    assert verdict.answer in (True, None), [v.message for v in verdict.violations]
    assert not verdict.violations
    view = bind_job(topology, cp).view  # the vertices the binding found: the job's chains
    assert view is not None
    for key, v in view.vertices.items():
        got = verdict.classification[v.label()]
        assert got in (_expected_class(v.names), UNKNOWN), (key, v.names, got)
        if got == UNKNOWN:
            assert verdict.answer is None
    # The finished branches are placed by their evidence, not left unknown.
    assert FULLY in verdict.classification.values() and PARTIALLY in verdict.classification.values()


def test_analyze_binds_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """One binding per (plan, checkpoint), shared by analysis, the verdict, the forecast and the report."""
    fx = next(f for f in PROD_1X if f.name == "1.20.3-prod")
    calls = []
    real = operator_ids.bind

    def counting(*args: object, **kwargs: object) -> operator_ids.Binding:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(operator_ids, "bind", counting)
    res = CliRunner().invoke(app, ["analyze", str(fx.checkpoint_dir), "--plan", str(fx.root / "plan.json"), "--json"])
    assert res.exit_code == 0, res.output
    assert len(calls) == 1
    doc = json.loads(res.output)
    names = {o["operator_id"]: o["name"] for o in doc["operators"]}
    flink = _flink(fx)
    assert names[flink["slow-count"]] == "slow-count"  # the plan's name, not null, on a V4 checkpoint


def test_the_uid_map_template_names_what_is_open_and_filling_it_binds_it(tmp_path: Path) -> None:
    """1.20.3-prod-counted leaves two operators open (a stateless sink and an operator with state, both with uids,
    same parallelism, adjacent): the template lists them; the uid Flink had for one (ids.json) settles both."""
    from support.console import spillway

    fx = next(f for f in PROD_1X if f.name == "1.20.3-prod-counted")
    run = spillway("validate", str(fx.checkpoint_dir), "--plan", str(fx.root / "plan.json"))
    assert run.code == 0, run.output
    start = run.out.index("{", run.out.index("a uid map to fill in"))
    template = json.loads(run.out[start : run.out.index("}", start) + 1])
    assert template == {"check-totals": "", "discard: Writer": ""}
    uids = {n["name"]: n["uid"] for n in json.loads((fx.root / "ids.json").read_text())["stream_nodes"]}
    template["check-totals"] = uids["check-totals"]
    uid_map = tmp_path / "uids.json"
    uid_map.write_text(json.dumps(template))
    run = spillway("validate", str(fx.checkpoint_dir), "--plan", str(fx.root / "plan.json"), "--uid-map", str(uid_map),
                   "--json")  # fmt: skip
    binding = {b["operator"]: b for b in json.loads(run.out)["binding"]}
    flink = _flink(fx)
    assert all(b["exact"] and b["operator_id"] == flink[name] for name, b in binding.items()), binding
