"""dump, diff and files take --plan/--uid/--uid-map and show the plan's names for operators a 1.x checkpoint
stores by id only — through the installed console script, on a production-like 1.20 job (uid != name, some
operators without uid). Expected names and ids come from Flink (the generator's ids.json), never from spillway."""

from __future__ import annotations

import json
from pathlib import Path

from support.console import run
from support.fixtures import fixture_named

PROD = "1.20.3-prod"


def _flink(name: str) -> dict[str, dict[str, str | None]]:
    """operator id -> {name, uid} as Flink built the job graph."""
    ids = json.loads((fixture_named(name).root / "ids.json").read_text())
    return {n["operator_id"]: {"name": n["name"], "uid": n["uid"]} for n in ids["stream_nodes"]}


def _plan(name: str) -> str:
    return str(fixture_named(name).root / "plan.json")


def _chk(name: str) -> str:
    return str(fixture_named(name).checkpoint_dir)


def test_the_fixture_is_a_production_job() -> None:
    flink = _flink(PROD)
    assert any(o["uid"] and o["uid"] != o["name"] for o in flink.values())
    assert any(o["uid"] is None for o in flink.values())


def test_dump_json_carries_the_plans_names_beside_flinks_stored_name() -> None:
    flink = _flink(PROD)
    code, before, _ = run(["dump", _chk(PROD), "--json"])
    assert code == 0
    assert {o["plan_name"] for o in json.loads(before)["operators"]} == {None}  # no plan: no names
    code, out, err = run(["dump", _chk(PROD), "--plan", _plan(PROD), "--json"])
    assert code == 0, err
    ops = json.loads(out)["operators"]
    assert json.loads(out)["schema"] == "spillway.dump/1"
    assert {o["operator_id"] for o in ops} == set(flink)
    for o in ops:
        assert o["name"] is None  # V4 stores no name: the stored field stays what Flink stored
        assert o["plan_name"] == flink[o["operator_id"]]["name"], o["operator_id"]


def test_dump_text_names_every_operator_and_selects_by_the_plan_name() -> None:
    flink = _flink(PROD)
    code, out, err = run(["dump", _chk(PROD), "--plan", _plan(PROD)], columns=200)
    assert code == 0, err
    rows = {line.split("│")[2].strip(): line.split("│")[1].strip() for line in out.splitlines() if line.count("│") > 3}
    assert rows == {op_id: f"{o['name']} (plan)" for op_id, o in flink.items()}
    slow = next(op_id for op_id, o in flink.items() if o["uid"] and o["uid"] != o["name"] and o["name"] == "slow-count")
    code, out, err = run(["dump", _chk(PROD), "--plan", _plan(PROD), "--operator", "slow-count", "--json"])
    assert code == 0, err
    assert [o["operator_id"] for o in json.loads(out)["operators"]] == [slow]


def test_dump_with_uids_binds_by_flinks_uid_hash(tmp_path: Path) -> None:
    flink = _flink(PROD)
    uid_map = tmp_path / "uids.json"
    uid_map.write_text(json.dumps({o["name"]: o["uid"] for o in flink.values() if o["uid"]}))
    code, out, err = run(["dump", _chk(PROD), "--plan", _plan(PROD), "--uid-map", str(uid_map), "--json"])
    assert code == 0, err
    assert {o["operator_id"]: o["plan_name"] for o in json.loads(out)["operators"]} == {
        op_id: o["name"] for op_id, o in flink.items()
    }


def test_files_names_the_operators_of_each_file() -> None:
    flink = _flink(PROD)
    code, out, err = run(["files", _chk(PROD), "--plan", _plan(PROD), "--json"])
    assert code == 0, err
    doc = json.loads(out)
    named = {o["operator_id"]: o for o in doc["checkpoints"][0]["operators"]}
    assert {i: o["plan_name"] for i, o in named.items()} == {i: o["name"] for i, o in flink.items()}
    assert {o["name"] for o in named.values()} == {None}
    code, text, err = run(["files", _chk(PROD), "--plan", _plan(PROD)], columns=250)
    assert code == 0, err
    for f in doc["files"]:
        line = next(line for line in text.splitlines() if f["shown"] in line)
        assert line.split("│")[5].strip() == ", ".join(sorted(flink[i]["name"] or "" for i in f["operators"]))
    code, bare, _ = run(["files", _chk(PROD)], columns=250)
    assert "slow-count" not in bare and "slow-count" in text


def test_diff_names_the_operators_of_the_plans_job() -> None:
    # A: the prod job; B: the same job with bounded sources added (its own ids.json). The plan is A's: the
    # operators A has (removed, or changed in B) carry A's names, which B's ids.json gives for the shared ids too.
    a, b = _flink(PROD), _flink("1.20.3-prod-finished")
    code, out, err = run(["diff", _chk(PROD), _chk("1.20.3-prod-finished"), "--plan", _plan(PROD), "--json"])
    assert code == 1, err  # different
    ops = json.loads(out)["operators"]
    assert ops["removed"] and ops["changed"]
    for o in ops["removed"]:
        assert o["name"] is None and o["plan_name"] == a[o["operator_id"]]["name"]
    for c in ops["changed"]:
        assert c["plan_name"] == c["label"] == a[c["operator_id"]]["name"] == b[c["operator_id"]]["name"]
        assert "name" not in c["changes"] and "plan_name" not in c["changes"]  # a plan's name is no difference
    code, text, err = run(["diff", _chk(PROD), _chk("1.20.3-prod-finished"), "--plan", _plan(PROD)], columns=200)
    for o in ops["removed"]:
        assert any(a[o["operator_id"]]["name"] in line and o["operator_id"] in line for line in text.splitlines())


def test_uid_without_plan_is_a_usage_error() -> None:
    for command in ("dump", "files"):
        code, _, err = run([command, _chk(PROD), "--uid", "slow-count=slow"])
        assert code == 2 and "--uid and --uid-map need --plan" in err
