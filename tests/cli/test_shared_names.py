"""Names as a person gives them: a name several plan operators carry is refused where a name is taken (--uid,
-p), with the operators listed and the form that picks one (NAME#NODE); every name spillway shows is accepted
(SQL's simplified Kind[N]). Through the installed console script, on real Flink checkpoints; expected ids come
from Flink (ids.json), never from spillway."""

from __future__ import annotations

import json
from pathlib import Path

from support.console import run
from support.fixtures import fixture_named

from spillway.inspect.reports import uid_map_template

PROD = fixture_named("1.20.3-prod")
SQL = fixture_named("1.20.3-sql")


def _flink(name: str) -> dict[str, dict[str, str | None]]:
    ids = json.loads((fixture_named(name).root / "ids.json").read_text())
    return {n["name"]: {"operator_id": n["operator_id"], "uid": n["uid"]} for n in ids["stream_nodes"]}


def _default_named(tmp_path: Path) -> Path:
    """1.20.3-prod's plan with parse (stream node 2) and tag-rules (node 6) both called ``Map``, as jobs that name
    nothing are: Flink's default name for a map."""
    doc = json.loads((PROD.root / "plan.json").read_text())
    ids = {}
    for node in doc["nodes"]:
        if node["type"] in ("parse", "tag-rules"):
            ids[node["type"]] = node["id"]
            node["type"] = node["contents"] = "Map"
    assert ids == {"parse": 2, "tag-rules": 6}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    return path


def test_a_uid_for_a_name_two_operators_carry_is_refused_with_the_form_that_picks_one(tmp_path: Path) -> None:
    plan = _default_named(tmp_path)
    code, out, err = run(["validate", str(PROD.checkpoint_dir), "--plan", str(plan), "--uid", "Map=parse-events"])
    assert code == 2, out + err
    assert "'Map' names more than one operator of the plan" in err
    assert "Map#2" in err and "Map#6" in err and "--uid 'Map#6=parse-events'" in err
    assert "Traceback" not in err


def test_the_picked_form_binds_each_operator_to_flinks_id(tmp_path: Path) -> None:
    plan = _default_named(tmp_path)
    flink = _flink("1.20.3-prod")
    parse, tag = flink["parse"], flink["tag-rules"]
    args = ["validate", str(PROD.checkpoint_dir), "--plan", str(plan), "--json"]
    code, out, err = run([*args, "--uid", f"Map#2={parse['uid']}", "--uid", f"#6={tag['uid']}"])
    assert code == 0, err
    rows = [r for r in json.loads(out)["binding"] if r["operator"] == "Map"]
    assert {r["plan_node"]: (r["method"], r["operator_id"], r["exact"]) for r in rows} == {
        "#2": ("uid-hash", parse["operator_id"], True),
        "#6": ("uid-hash", tag["operator_id"], True),
    }


def test_a_plan_node_that_is_not_there_is_refused(tmp_path: Path) -> None:
    plan = _default_named(tmp_path)
    code, _, err = run(["validate", str(PROD.checkpoint_dir), "--plan", str(plan), "--uid", "Map#99=x"])
    assert code == 2 and "no plan operator is Map#99" in err


def test_a_parallelism_for_a_shared_name_is_refused_by_rescale_and_preflight(tmp_path: Path) -> None:
    plan = _default_named(tmp_path)
    chk = str(PROD.checkpoint_dir)
    for args in (
        ["rescale", chk, "--plan", str(plan), "-p", "Map=3", "--out", str(tmp_path / "out")],
        ["preflight", chk, "--plan", str(plan), "-p", "Map=3"],
    ):
        code, out, err = run(args)
        assert code == 2, (args[0], out, err)
        assert "'Map' names more than one operator of the plan" in err and "-p 'Map#6=N'" in err
    assert not (tmp_path / "out").exists()


def test_sql_simplified_names_pick_their_vertex_in_a_job_graph_plan() -> None:
    """The job-graph plan describes the aggregate as ``[3]:GroupAggregate(groupBy=[k], …)``; Flink's UI, logs
    and the stream-graph plan call it ``GroupAggregate[3]``."""
    jobgraph = json.loads((SQL.root / "jobgraph.json").read_text())
    nodes = jobgraph.get("plan", jobgraph)["nodes"]
    (agg,) = [n for n in nodes if "[3]:GroupAggregate(" in n["description"]]
    plan = str(SQL.root / "jobgraph.json")
    code, out, err = run(["preflight", str(SQL.checkpoint_dir), "--plan", plan, "-p", "GroupAggregate[3]=3", "--json"])
    assert code != 2, err
    rows = {r["key"]: r for r in json.loads(out)["vertices"]}
    assert rows[agg["id"]]["parallelism"] == 3 and rows[agg["id"]]["checkpoint_parallelism"] == agg["parallelism"]


def test_the_uid_map_template_keys_a_shared_name_by_the_form_that_picks_each() -> None:
    rows = [
        {"operator": "Map", "plan_node": "#2", "method": "unbound"},
        {"operator": "Map", "plan_node": "#6", "method": "unbound"},
        {"operator": "count", "plan_node": "#10", "method": "unbound"},
        {"operator": "Map", "plan_node": "#7", "method": "uid-hash"},
    ]
    assert uid_map_template(rows) == {"Map#2": "", "Map#6": "", "count": ""}


def test_the_uid_form_a_reason_suggests_for_a_shared_name_is_accepted_and_binds_flinks_id() -> None:
    """1.20.3-shapes' job-graph plan leaves several default-named `Map` operators unbound; the binding table tells
    the person which `--uid` to give. Given that form with the operator's real uid (parse-events, from Flink's
    ids.json), the command accepts it and binds the operator to Flink's id."""
    shapes = fixture_named("1.20.3-shapes")
    plan = str(shapes.root / "jobgraph.json")
    checkpoints = str(shapes.root / "checkpoints")
    code, out, err = run(["validate", checkpoints, "--plan", plan, "--json"])
    assert code == 0, err
    rows = json.loads(out)["binding"]
    maps = [b for b in rows if b["operator"] == "Map"]
    assert len(maps) > 1
    suggested = {}
    for b in maps:
        if "--uid " in (b["reason"] or ""):
            form = b["reason"].split("--uid ", 1)[1].split("=UID", 1)[0].strip("'")
            assert form == f"Map{b['plan_node']}", b["reason"]  # the bare shared name would be refused
            suggested[b["plan_node"]] = form
    assert suggested
    flink = json.loads((shapes.root / "ids.json").read_text())["stream_nodes"]
    parse = next(n for n in flink if n["uid"] == "parse-events")
    form = next(f for ref, f in suggested.items() if ref.startswith(f"#{parse['vertex_id'][:8]}."))
    code, out, err = run(["validate", checkpoints, "--plan", plan, "--uid", f"{form}=parse-events", "--json"])
    assert code in (0, 1), err  # accepted: never a usage error
    picked = next(b for b in json.loads(out)["binding"] if f"{b['operator']}{b['plan_node']}" == form)
    assert picked["operator_id"] == parse["operator_id"] and picked["exact"]
